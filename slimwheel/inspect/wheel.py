"""Reading a wheel (a zip) safely and fast: the directory, the metadata, and one member's bytes at a time.

Members are inflated straight from the file (one read, one inflate, one CRC, no temporary files), with ISA-L's
inflate where it is installed (about twice zlib's speed on large shared libraries), in worker threads.
"""

from __future__ import annotations

import mmap
import os
import posixpath
import struct
import types
import zipfile
import zlib
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from slimwheel.errors import BadInputError

_inflate: types.ModuleType
try:  # optional accelerator: same API as zlib
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - platforms without isal wheels
    _inflate = zlib

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_LOCAL_MAGIC = 0x04034B50


@dataclass(frozen=True, kw_only=True)
class Member:
    name: str
    compressed: int  # bytes in the zip
    uncompressed: int
    method: int  # zip compression method: 0 stored, 8 deflate
    crc: int
    header_offset: int


@dataclass(frozen=True, kw_only=True)
class WheelMeta:
    name: str
    version: str
    tags: tuple[str, ...]  # from the WHEEL file's Tag lines (cp310-abi3-manylinux_2_28_x86_64)
    requires_dist: tuple[str, ...]
    dist_info: str


def check_member_name(archive: Path, name: str) -> None:
    """Refuse names that would land outside the folder a wheel is unpacked into (zip slip)."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise BadInputError(f"{archive}: member {name!r} has an absolute path")
    if ".." in posixpath.normpath(norm).split("/") or ".." in norm.split("/"):
        raise BadInputError(f"{archive}: member {name!r} escapes the wheel's folder (../)")


class WheelArchive:
    """An open wheel. Use as a context manager; `read` may be called from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except FileNotFoundError:
            raise BadInputError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise BadInputError(f"{self.path}: is a folder, not a wheel") from None
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as e:
            raise BadInputError(f"{self.path}: not a zip file ({e})") from None
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size
        # Inflate reads straight from the mapped file: no copy of the compressed bytes.
        self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) if self.size else None
        members = []
        for info in self._zip.infolist():
            check_member_name(self.path, info.filename)
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise BadInputError(f"{self.path}: member {info.filename} is encrypted")
            members.append(
                Member(
                    name=info.filename,
                    compressed=info.compress_size,
                    uncompressed=info.file_size,
                    method=info.compress_type,
                    crc=info.CRC,
                    header_offset=info.header_offset,
                )
            )
        self.members = tuple(members)

    def __enter__(self) -> WheelArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        if self._map is not None:
            self._map.close()
        os.close(self._fd)

    def _data_offset(self, m: Member) -> int:
        head = os.pread(self._fd, _LOCAL.size, m.header_offset)
        if len(head) < _LOCAL.size or _LOCAL.unpack(head)[0] != _LOCAL_MAGIC:
            raise BadInputError(f"{self.path}: {m.name}: local file header missing (truncated or corrupt zip)")
        name_len, extra_len = _LOCAL.unpack(head)[9:11]
        return int(m.header_offset + _LOCAL.size + name_len + extra_len)

    def read(self, m: Member) -> bytes:
        """The member's bytes, CRC-checked."""
        if m.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            try:
                return self._zip.read(m.name)  # bzip2/lzma: rare in wheels, zipfile handles them
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, zlib.error) as e:
                raise BadInputError(f"{self.path}: {m.name}: cannot be read ({e})") from None
        start = self._data_offset(m)
        if self._map is None or start + m.compressed > self.size:
            raise BadInputError(f"{self.path}: {m.name}: data cut off (truncated zip)")
        with memoryview(self._map) as whole:
            raw = whole[start : start + m.compressed]
            try:
                if m.method == zipfile.ZIP_STORED:
                    data = bytes(raw)
                else:
                    data = _inflate.decompress(raw, -15, m.uncompressed or 16384)
            except (zlib.error, _inflate.error) as e:
                raise BadInputError(f"{self.path}: {m.name}: corrupt deflate data ({e})") from None
            finally:
                raw.release()
        if len(data) != m.uncompressed or (_inflate.crc32(data) & 0xFFFFFFFF) != m.crc:
            raise BadInputError(f"{self.path}: {m.name}: corrupt member (size or CRC does not match the directory)")
        return data

    def head(self, m: Member, n: int) -> bytes:
        """The first `n` bytes of a member, inflating only what they need."""
        if m.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return self.read(m)[:n]
        start = self._data_offset(m)
        raw = os.pread(self._fd, min(m.compressed, 4096), start)
        if m.method == zipfile.ZIP_STORED:
            return raw[:n]
        try:
            return zlib.decompressobj(-15).decompress(raw, n)
        except zlib.error as e:
            raise BadInputError(f"{self.path}: {m.name}: corrupt deflate data ({e})") from None

    def metadata(self) -> WheelMeta:
        """Name, version, tags and Requires-Dist from the .dist-info folder; a zip without one is not a wheel."""
        by_name = {m.name: m for m in self.members}
        infos = sorted({n.split("/", 1)[0] for n in by_name if n.split("/", 1)[0].endswith(".dist-info")})
        dist_info = next((d for d in infos if f"{d}/WHEEL" in by_name and f"{d}/METADATA" in by_name), None)
        if dist_info is None:
            raise BadInputError(
                f"{self.path}: not a wheel: no top-level *.dist-info folder with WHEEL and METADATA files"
            )
        parser = HeaderParser()
        try:
            wheel = parser.parsestr(self.read(by_name[f"{dist_info}/WHEEL"]).decode("utf-8"))
            meta = parser.parsestr(self.read(by_name[f"{dist_info}/METADATA"]).decode("utf-8"))
        except UnicodeDecodeError:
            raise BadInputError(f"{self.path}: {dist_info}: WHEEL or METADATA is not UTF-8 text") from None
        if not meta.get("Name") or not meta.get("Version"):
            raise BadInputError(f"{self.path}: {dist_info}/METADATA: Name or Version missing")
        return WheelMeta(
            name=str(meta["Name"]),
            version=str(meta["Version"]),
            tags=tuple(str(t) for t in wheel.get_all("Tag") or ()),
            requires_dist=tuple(str(r) for r in meta.get_all("Requires-Dist") or ()),
            dist_info=dist_info,
        )
