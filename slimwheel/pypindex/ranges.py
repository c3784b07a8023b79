"""A wheel on the index read without downloading it: a seekable file over HTTP range requests for `zipfile`, and
the facts (library install paths, Requires-Dist) read through it within the limits."""

from __future__ import annotations

import io
import lzma
import re
import struct
import zipfile
import zlib

from packaging.utils import parse_wheel_filename

from slimwheel.inspect.wheel import requires_dist
from slimwheel.pypindex.client import DEFAULT_LIMITS, Client, IndexLimits, KiB, cut
from slimwheel.reqgraph import LookupFailed, WheelFacts, Why, install_path, is_library

TAIL_BYTES = 256 * 1024  # asked first: the central directory and METADATA of most wheels


class RangeReader(io.RawIOBase):
    """A read-only seekable file over HTTP range requests, for `zipfile`; the last `TAIL_BYTES` come with the first
    request and are served from memory. At most `limit` bytes (default the limits' `wheel_bytes`) are fetched in all;
    `fetched` says how many were. devtools/torch_libs.py reads torch's wheels with it too, with a bound of its own
    (and, without a `client`, a client of its own: each request then has its deadline, the reader none)."""

    def __init__(self, url: str, *, limit: int | None = None, client: Client | None = None) -> None:
        if client is None:
            client = Client(IndexLimits(run_s=float("inf"), run_bytes=limit or DEFAULT_LIMITS.wheel_bytes))
        self.url, self.pos, self.fetched, self.client = url, 0, 0, client
        self.limit = client.limits.wheel_bytes if limit is None else limit
        with client.get(url, {"Range": f"bytes=-{TAIL_BYTES}"}) as r:
            status, content_range = r.status, r.headers.get("Content-Range", "")
            body = bytes(r.body(self.limit))
        if status == 206:
            m = re.fullmatch(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})", content_range.strip())
            if m is None:
                raise LookupFailed(f"{cut(url)}: a range answer without a usable Content-Range", why=Why.BAD_ANSWER)
            first, last, self.size = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if last - first + 1 != len(body) or last != self.size - 1:
                raise LookupFailed(
                    f"{cut(url)}: a range answer whose Content-Range {cut(content_range)} does not match its "
                    f"{len(body)} bytes",
                    why=Why.BAD_ANSWER,
                )
            self.tail_at = first
        elif status == 200:  # the server ignores ranges: the whole file came (within the limit)
            self.size, self.tail_at = len(body), 0
        else:
            raise LookupFailed(f"{cut(url)}: HTTP {status}", why=Why.BAD_ANSWER)
        self.tail = body
        self.fetched = len(body)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        if self.pos < 0:
            raise ValueError("negative seek position")
        return self.pos

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        if self.pos >= self.tail_at:
            data = self.tail[self.pos - self.tail_at : self.pos - self.tail_at + n]
        else:
            n = min(n, self.tail_at - self.pos)
            if self.fetched + n > self.limit:
                raise LookupFailed(f"{cut(self.url)}: more than {self.limit} bytes would be read", why=Why.TOO_LARGE)
            with self.client.get(self.url, {"Range": f"bytes={self.pos}-{self.pos + n - 1}"}) as r:
                status = r.status
                data = bytes(r.body(n))
            if status != 206 or len(data) != n:
                raise LookupFailed(f"{cut(self.url)}: HTTP {status} to a range request", why=Why.BAD_ANSWER)
            self.fetched += n
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _directory_bytes(reader: RangeReader) -> int | None:
    """The central directory's size from the end records (zip64 too), or None when they are not there: known
    before `zipfile` reads the whole directory into memory (a ZipInfo of about 500 bytes per name)."""
    end = reader.tail[-(_EOCD.size + 0xFFFF) :]
    at = end.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(end):
        return None
    size = int(_EOCD.unpack_from(end, at)[5])
    loc = at - _ZIP64_LOCATOR.size
    if loc >= 0 and end[loc : loc + 4] == b"PK\x06\x07":
        offset = int(_ZIP64_LOCATOR.unpack_from(end, loc)[2])
        if reader.tail_at <= offset <= reader.size - _ZIP64_EOCD.size:
            head = reader.tail[offset - reader.tail_at : offset - reader.tail_at + _ZIP64_EOCD.size]
            if head[:4] == b"PK\x06\x06":
                size = max(size, int(_ZIP64_EOCD.unpack(head)[8]))
    return size


_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)  # what pip installs


def wheel_facts(reader: RangeReader, filename: str, limits: IndexLimits = DEFAULT_LIMITS) -> WheelFacts:
    """The facts of the wheel `reader` reads: its shared libraries' install paths and its Requires-Dist."""
    name, version, _build, _tags = parse_wheel_filename(filename)
    size = _directory_bytes(reader)
    if size is not None and size > limits.directory_bytes:
        raise LookupFailed(
            f"{cut(filename)}: zip directory of {size} bytes, over the limit of {limits.directory_bytes}",
            why=Why.TOO_LARGE,
        )
    try:
        with zipfile.ZipFile(io.BufferedReader(reader, buffer_size=64 * KiB)) as zf:
            files = tuple(p for n in zf.namelist() if (p := install_path(n)) is not None and is_library(p))
            meta = [i for i in zf.infolist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename)]
            if len(meta) != 1:
                raise LookupFailed(f"{cut(filename)}: {len(meta)} dist-info METADATA files", why=Why.BAD_ANSWER)
            info = meta[0]
            if info.file_size > limits.metadata_bytes:
                raise LookupFailed(f"{cut(filename)}: METADATA of {info.file_size} bytes", why=Why.TOO_LARGE)
            if info.flag_bits & 0x1 or info.compress_type not in _METHODS:
                raise LookupFailed(
                    f"{cut(filename)}: METADATA encrypted or compressed by zip method {info.compress_type}",
                    why=Why.BAD_ANSWER,
                )
            with zf.open(info) as fh:
                text = fh.read(limits.metadata_bytes + 1).decode("utf-8", "replace")
    # zipfile's and the decompressors' own errors: a bad directory or header (BadZipFile, struct.error, ValueError,
    # EOFError), a "version needed to extract" above zipfile's (NotImplementedError), bad compressed data
    # (zlib.error, lzma.LZMAError; bz2 raises OSError), a CRC that does not match
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        struct.error,
        ValueError,
        EOFError,
        NotImplementedError,
        zlib.error,
        lzma.LZMAError,
        OSError,
    ) as exc:
        raise LookupFailed(f"{cut(filename)}: not a readable wheel ({cut(str(exc))})", why=Why.BAD_ANSWER) from None
    return WheelFacts(
        project=str(name), version=str(version), filename=filename, files=files, requires=requires_dist(text)
    )
