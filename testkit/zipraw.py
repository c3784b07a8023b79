"""Zip files written byte by byte, so that their headers can lie: declared sizes and CRCs that the data does not
match, names the two directories disagree on, symlinks, duplicates. Also deflate streams of billions of zero bytes
built in a few milliseconds (a full-flushed block repeated), for bombs of any size.

raw_zip(path, [RawMember.deflated("a.txt", b"hi"), RawMember(name="b", payload=..., crc=0, declared=16)])
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_ZERO_BLOCK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class RawMember:
    name: str
    payload: bytes  # the bytes stored in the zip (deflated, or the data itself when stored)
    crc: int
    declared: int  # uncompressed size written in both headers
    method: int = 8
    mode: int = 0o100644  # Unix mode (S_IFLNK | 0o777 makes a symlink)
    local_name: str | None = None  # a different name in the local header

    @classmethod
    def deflated(cls, name: str, data: bytes, *, mode: int = 0o100644, local_name: str | None = None) -> RawMember:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        payload = c.compress(data) + c.flush()
        crc = zlib.crc32(data)
        return cls(name=name, payload=payload, crc=crc, declared=len(data), mode=mode, local_name=local_name)

    @classmethod
    def stored(cls, name: str, data: bytes) -> RawMember:
        return cls(name=name, payload=data, crc=zlib.crc32(data), declared=len(data), method=0)


def zeros_stream(prefix: bytes, zeros: int, suffix: bytes, *, with_crc: bool = True) -> tuple[bytes, int, int]:
    """(raw deflate stream, CRC-32, size) of prefix + `zeros` zero bytes + suffix. `zeros` is rounded down to MiB.
    Without `with_crc` the CRC is 0 (for members whose headers lie anyway: no need to run it over gigabytes).

    After a full flush a deflate stream refers to nothing before it, so one compressed MiB of zeros can be repeated.
    """
    blocks = zeros // _ZERO_BLOCK
    head = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = head.compress(prefix) + head.flush(zlib.Z_FULL_FLUSH)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = z.compress(bytes(_ZERO_BLOCK)) + z.flush(zlib.Z_FULL_FLUSH)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)
    end = tail.compress(suffix) + tail.flush()
    crc = zlib.crc32(prefix)
    zero = bytes(_ZERO_BLOCK)
    for _ in range(blocks if with_crc else 0):
        crc = zlib.crc32(zero, crc)
    crc = zlib.crc32(suffix, crc)
    return stream + block * blocks + end, crc, len(prefix) + blocks * _ZERO_BLOCK + len(suffix)


def wheel_members(name: str = "demo", version: str = "1.0") -> list[RawMember]:
    """The two metadata files a wheel needs to be read as one."""
    dist = f"{name}-{version}.dist-info"
    return [
        RawMember.deflated(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()),
        RawMember.deflated(f"{dist}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n"),
    ]


def local_entry(m: RawMember) -> bytes:
    """The member's local header, name and data, as they stand in the zip."""
    local = (m.local_name if m.local_name is not None else m.name).encode()
    head = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0x800, m.method, 0, 0x21, m.crc, len(m.payload), m.declared, len(local), 0
    )
    return head + local + m.payload


def raw_zip(path: Path, members: Iterable[RawMember], aliases: Iterable[tuple[RawMember, int]] = ()) -> Path:
    """Write the members as a zip (no zip64: sizes below 4 GiB) and return `path`. `aliases` are directory entries
    only, each pointing at a local header already in the zip (at that offset)."""
    body = bytearray()
    central = bytearray()
    count = 0
    entries = [(m, None) for m in members] + list(aliases)
    for m, at in entries:
        name = m.name.encode()
        if at is None:
            offset = len(body)
            body += local_entry(m)
        else:
            offset = at
        central += struct.pack(
            "<IBBHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            3,  # made on Unix: the external attributes carry a mode
            20,
            0x800,
            m.method,
            0,
            0x21,
            m.crc,
            len(m.payload),
            m.declared,
            len(name),
            0,
            0,
            0,
            0,
            m.mode << 16,
            offset,
        )
        central += name
        count += 1
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), len(body), 0)
    path.write_bytes(bytes(body + central + eocd))
    return path
