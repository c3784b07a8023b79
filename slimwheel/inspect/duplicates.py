"""Byte-identical files in a wheel: groups of members with the same content, and the bytes the extra copies waste.

Finding them costs next to nothing: the zip directory already states each member's size and CRC-32, so only members
that share both with another one (`twins`) are candidates, and only those are hashed (SHA-256) as they inflate for the
report, or as check hashes every member for RECORD (`scan.inspect_wheel`). A group is stated only when the hashes
agree: a CRC-32 match alone is not proof.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slimwheel.inspect.zipread import Member

# Smaller copies are not worth a line: empty __init__.py files, licence stubs and py.typed markers repeat in many
# wheels, by design, and save nothing when merged.
MIN_BYTES = 4096

# libfoo.so, libfoo.so.1, libfoo.so.1.2.3: the names a SONAME chain gives one library (base name, version digits).
_SO_NAME = re.compile(r"^(?P<stem>.+\.so)(?:\.\d+)*$")


@dataclass(frozen=True, kw_only=True)
class DuplicateGroup:
    """Members with the same bytes. `keep`: the one to ship (the SONAME's name in a chain); `wasted_*`: what the
    other copies take, in the wheel and once installed."""

    names: tuple[str, ...]  # sorted; `keep` among them
    keep: str
    size: int  # each copy's uncompressed bytes
    wasted_compressed: int
    wasted_uncompressed: int
    soname_chain: bool  # one library under its SONAME chain's names, shipped as full copies


def twins(members: Iterable[Member]) -> frozenset[str]:
    """The members that share their size and CRC-32 with another one: the only ones whose bytes need hashing."""
    by_key: dict[tuple[int, int], list[str]] = defaultdict(list)
    for m in members:
        if m.uncompressed >= MIN_BYTES and not m.name.endswith("/"):
            by_key[(m.uncompressed, m.crc)].append(m.name)
    return frozenset(name for names in by_key.values() if len(names) > 1 for name in names)


def _chain_keep(names: tuple[str, ...], sonames: Mapping[str, str]) -> str | None:
    """The member to keep if `names` are one library's SONAME chain (same folder, same `lib*.so` stem), else None.

    The SONAME is what the loader looks for (DT_NEEDED of every file linked to it), so that name is the one to keep;
    wheels cannot carry symlinks for the others. A chain whose SONAME is not among the copies keeps the longest name,
    as a linker-made chain's real file is."""
    folders = {posixpath.dirname(n) for n in names}
    matches = [_SO_NAME.match(posixpath.basename(n)) for n in names]
    if len(folders) != 1 or not all(matches) or len({m.group("stem") for m in matches if m}) != 1:
        return None
    for n in names:
        soname = sonames.get(n)
        if soname is not None and posixpath.basename(n) == soname:
            return n
    return max(names, key=lambda n: (len(n), n))


def duplicate_groups(
    members: Iterable[Member], sha256: Mapping[str, bytes], sonames: Mapping[str, str] | None = None
) -> tuple[DuplicateGroup, ...]:
    """Groups of byte-identical members, the most wasted compressed bytes first. `sha256`: the hashes of (at least)
    the `twins`; members without one are left out. `sonames`: member name -> the SONAME its ELF header states."""
    by_content: dict[tuple[int, bytes], list[Member]] = defaultdict(list)
    for m in members:
        digest = sha256.get(m.name)
        if digest is not None and m.uncompressed >= MIN_BYTES and not m.name.endswith("/"):
            by_content[(m.uncompressed, digest)].append(m)
    groups: list[DuplicateGroup] = []
    for (size, _), copies in by_content.items():
        if len(copies) < 2:
            continue
        names = tuple(sorted(m.name for m in copies))
        chain = _chain_keep(names, sonames or {})
        keep = chain or min(names, key=lambda n: (len(n), n))
        others = [m for m in copies if m.name != keep]
        groups.append(
            DuplicateGroup(
                names=names,
                keep=keep,
                size=size,
                wasted_compressed=sum(m.compressed for m in others),
                wasted_uncompressed=sum(m.uncompressed for m in others),
                soname_chain=chain is not None,
            )
        )
    return tuple(sorted(groups, key=lambda g: (-g.wasted_compressed, -g.wasted_uncompressed, g.names)))


def fix_text(group: DuplicateGroup) -> str:
    """What to do about one group, in a sentence (names as they are: the caller escapes them for where it shows)."""
    keep = posixpath.basename(group.keep)
    if group.soname_chain:
        return (
            f"one library's SONAME chain shipped as {len(group.names)} full copies: ship only {keep} (the name the "
            f"loader looks for; wheels cannot carry symlinks for the others)"
        )
    return f"{len(group.names)} copies of the same bytes: ship one ({keep}) and have the others' users load it"
