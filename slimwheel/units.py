"""Byte sizes: parse "60MiB" / "100MB" / "12345", and format with an explicit unit.

MB = 10**6 bytes, MiB = 2**20 bytes (pydistcheck's convention, stated in every report).
"""

from __future__ import annotations

import re
from decimal import Decimal

from slimwheel.errors import BadInputError

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
# ASCII digits only: `\d` and int() also take Arabic-Indic or fullwidth digits (U+0666 U+0660 "MiB" read as 60MiB),
# which no one means as a size and which read differently in a review than in the parser. The number is bounded in
# length too, so that 5,000 digits are a message, not int()'s digit limit or float's infinity escaping as a crash.
_SIZE_RE = re.compile(r"\s*([0-9]{1,20}(?:\.[0-9]{1,9})?)\s*([a-zA-Z]{0,3})\s*", re.ASCII)
# The largest size a file can have (off_t is signed 64 bits): a budget above it means nothing.
MAX_SIZE = 2**63 - 1


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes from "60MiB", "100 MB", "1.5GiB", "4096". Bare K/M/G are binary (pydistcheck's rule). Text only: a
    number in pyproject.toml reaches here as its text (config), and everything below the edge takes the bytes."""
    m = _SIZE_RE.fullmatch(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise BadInputError(
            f"{what}: cannot read {text!r} as a size",
            hint="write e.g. 60MiB (2**20 bytes each), 100MB (10**6 bytes each) or a byte count, in ASCII digits",
        )
    size = int(Decimal(m.group(1)) * _UNITS[m.group(2).lower()])  # Decimal: 1.1MB is 1100000 bytes, not 1099999
    if size > MAX_SIZE:
        raise BadInputError(f"{what}: {text!r} is larger than any file can be (2**63 - 1 bytes)")
    return size


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def mb(n: int) -> str:
    return f"{n / 10**6:.2f} MB"


def human(n: int) -> str:
    """Short binary-unit form for tables: 512 B, 3.4 KiB, 12.30 MiB, 1.20 GiB."""
    if n < 1024:
        return f"{n} B"
    if n < 2**20:
        return f"{n / 1024:.1f} KiB"
    if n < 2**30:
        return f"{n / 2**20:.2f} MiB"
    return f"{n / 2**30:.2f} GiB"
