"""The one reader of zip members (wheels) for every command: bounded, streaming, and refusing every lie.

A zip's directory declares each member's sizes and CRC; nothing forces the data to agree. So:

- the directory is judged before any member is read: names (no absolute or `..` paths, no duplicates, no name that
  is both a file and a folder), kinds (regular files and folders only: no symlinks or devices), methods (stored or
  deflate; no encryption), and the declared sizes against `ZipLimits` (one member, all members together);
- the inflate ratio of a big member is judged on its non-zero bytes as they stream (`ratio_problem`, the one rule
  that `wheelfile.pack` also holds its output to): zero runs are what a slimmed library is made of (slim zeroes the
  code it drops, and a 1 GiB library kept for one GPU inflates far beyond 100:1), and they cost neither memory nor
  disk here (written as holes), only inflate time, which the size limits bound;
- a member is inflated up to its declared size plus one byte, never further: a stream that goes on, ends short, or
  fails its CRC is refused, naming the wheel and the member. Streamed (spooled members, extraction, hashing), memory
  holds at most a step of `STEP` bytes, whatever the header claims; read into memory, one call inflates the member
  (`max_length` bounds it by the declared size, which `in_memory_bytes` bounds);
- members are read into memory while the members open at once (worker threads) hold at most
  `ZipLimits.in_memory_bytes`; the rest are spooled to an unnamed temporary file (gone when closed, or when the
  process dies) and mapped, so a 2 GB library costs disk, not memory, and a busy disk costs typical wheels nothing.

`extract` unpacks a whole wheel with the same checks (repair); `ZipReader.open` gives one member for inspection;
`ZipReader.stream` feeds one member to any sink (a hash, for RECORD checks).
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import posixpath
import stat
import struct
import threading
import types
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

from slimwheel.errors import BadInputError, os_error
from slimwheel.inspect.files import Buffer, open_regular

_inflate: types.ModuleType
try:  # optional accelerator: same API as zlib, about twice its speed on large shared libraries
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - platforms without isal wheels
    _inflate = zlib

MiB = 1 << 20
GiB = 1 << 30
STEP = 1 * MiB  # most bytes one inflate call may produce
_READ = 256 << 10  # compressed bytes read at once: a small unconsumed tail keeps high-ratio streams linear
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_LOCAL_MAGIC = 0x04034B50
_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")

_Reader = TypeVar("_Reader", bound="ZipReader")
Method = Literal["stored", "deflate"]
_METHODS: dict[int, Method] = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}


@dataclass(frozen=True, kw_only=True)
class ZipLimits:
    """What reading one zip may cost. The defaults sit far above real wheels (faiss-gpu 1.15.1: 199 MB largest
    member, 6.5:1 highest ratio; torch: about 15k members and 2.5 GB installed) and far below what hurts a CI runner.
    Override them only through these parameters (documented in docs/security.md)."""

    member_bytes: int = 4 * GiB  # one member, inflated
    total_bytes: int = 16 * GiB  # every member, inflated
    ratio: int = 100  # inflated non-zero bytes / compressed bytes, for members bigger than ratio_floor
    ratio_floor: int = 64 * MiB  # small members (text, zero-filled tables) may compress better than `ratio`
    directory_bytes: int = 16 * MiB  # the central directory: about 350k members of 46+ bytes
    # Open members held in memory at once; the rest are spooled to disk. faiss-gpu's 199 MB library fits: spooled, it
    # cost no more CPU, but its wall time followed the shared disk (one run of 36 s for 1.1 s of CPU).
    in_memory_bytes: int = 256 * MiB


DEFAULT_LIMITS = ZipLimits()


@dataclass(frozen=True, kw_only=True)
class Member:
    name: str
    compressed: int  # bytes in the zip
    uncompressed: int  # declared inflated size
    method: Method
    crc: int
    header_offset: int
    data_offset: int  # where the member's bytes start, after its local header
    executable: bool  # any x bit in the Unix mode: unpacked 0755, else 0644


def ratio_problem(size: int, nonzero: int, compressed: int, limits: ZipLimits = DEFAULT_LIMITS) -> str | None:
    """Why a member of `size` bytes, `nonzero` of them not zero, stored in `compressed` bytes, breaks the inflate
    ratio rule, or None. The reader holds every member to it as it streams; the writer holds what it packs to it,
    so that slimwheel never writes a wheel that it refuses to read."""
    if size <= limits.ratio_floor or nonzero <= limits.ratio * max(compressed, 1):
        return None
    return (
        f"inflates {compressed} bytes to more than {nonzero} non-zero bytes, over the limit of {limits.ratio}:1 "
        f"for members over {limits.ratio_floor} bytes (zero runs do not count)"
    )


def _may_break_ratio(m: Member, limits: ZipLimits) -> bool:
    """Whether a member's declared sizes allow breaking `ratio_problem`: only those have their bytes counted."""
    return ratio_problem(m.uncompressed, m.uncompressed, m.compressed, limits) is not None


def _sparse(fh: BinaryIO, holes: bool) -> Callable[[bytes], object]:
    """A sink writing to `fh`, all-zero chunks as holes when `holes` (finish with `fh.truncate()`)."""
    if not holes:
        return fh.write

    def write(block: bytes) -> None:
        if block.count(0) == len(block):
            fh.seek(len(block), os.SEEK_CUR)
        else:
            fh.write(block)

    return write


def check_member_name(archive: Path, name: str) -> None:
    """Refuse names that would land outside the folder a wheel is unpacked into (zip slip)."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise BadInputError(f"{archive}: member {name!r} has an absolute path")
    if ".." in posixpath.normpath(norm).split("/") or ".." in norm.split("/"):
        raise BadInputError(f"{archive}: member {name!r} escapes the wheel's folder (../)")
    if not norm.strip("/") or "\0" in norm:
        raise BadInputError(f"{archive}: member {name!r} has an empty or NUL-holding name")


def _directory_size(fd: int, size: int) -> int | None:
    """The central directory's size from the end records (zip64 too), or None when there is none to find:
    known before zipfile reads the whole directory into memory."""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    tail = os.pread(fd, tail_len, size - tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        return None
    cd_size = int(_EOCD.unpack_from(tail, at)[5])
    loc = at - _ZIP64_LOCATOR.size
    if loc >= 0 and tail[loc : loc + 4] == b"PK\x06\x07":
        _sig, _disk, eocd64, _disks = _ZIP64_LOCATOR.unpack_from(tail, loc)
        head = os.pread(fd, _ZIP64_EOCD.size, eocd64) if 0 <= eocd64 < size else b""
        if len(head) == _ZIP64_EOCD.size and head[:4] == b"PK\x06\x06":
            cd_size = max(cd_size, int(_ZIP64_EOCD.unpack(head)[8]))
    return cd_size


def _kind_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a member is not a plain file or folder, from its Unix mode (zips made on Unix carry one)."""
    if info.create_system != 3:
        return None
    fmt = stat.S_IFMT(info.external_attr >> 16)
    if fmt in (0, stat.S_IFREG, stat.S_IFDIR):
        return None
    return "is a symbolic link" if fmt == stat.S_IFLNK else f"is a special file (mode {fmt:#o})"


class ZipReader:
    """An open zip (a wheel) whose directory passed every check. Use as a context manager; `open`, `read` and `head`
    may be called from several threads."""

    def __init__(self, path: Path, limits: ZipLimits = DEFAULT_LIMITS) -> None:
        self.path = Path(path)
        self.limits = limits
        self._fd = open_regular(self.path, folder="a folder, not a wheel")
        try:
            self.size = os.fstat(self._fd).st_size
            self.members, self.folders = self._directory()
        except BaseException:
            os.close(self._fd)
            raise
        self._lock = threading.Lock()
        self._held = 0  # bytes of open members held in memory

    def __enter__(self: _Reader) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self._fd)

    def _bad(self, name: str, problem: str) -> BadInputError:
        return BadInputError(f"{self.path}: member {name!r} {problem}")

    def _past_claim(self, m: Member) -> BadInputError:
        return self._bad(
            m.name, f"inflates past its declared {m.uncompressed} bytes (a lying zip header); refusing to read on"
        )

    def _bad_deflate(self, m: Member, e: Exception) -> BadInputError:
        return BadInputError(f"{self.path}: {m.name}: corrupt member: bad deflate data ({e})")

    def _finished(self, m: Member, produced: int, crc: int, *, cut_off: bool) -> None:
        """The checks at a member's end, the same whether it was streamed or read in one call: the deflate stream
        ended, the declared size was met, the CRC agrees."""
        if cut_off:
            raise BadInputError(f"{self.path}: {m.name}: corrupt member: the deflate stream is cut off")
        if produced != m.uncompressed:
            raise self._bad(m.name, f"inflates to {produced} bytes, not its declared {m.uncompressed} (corrupt)")
        if crc & 0xFFFFFFFF != m.crc:
            raise BadInputError(f"{self.path}: {m.name}: corrupt member (CRC does not match the zip directory)")

    def _directory(self) -> tuple[tuple[Member, ...], frozenset[str]]:
        cd_size = _directory_size(self._fd, self.size)
        if cd_size is not None and cd_size > self.limits.directory_bytes:
            raise BadInputError(
                f"{self.path}: zip directory of {cd_size} bytes is over the limit of {self.limits.directory_bytes}"
            )
        try:
            with open(self._fd, "rb", closefd=False) as fh, zipfile.ZipFile(fh) as zf:
                infos = zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, NotImplementedError) as e:
            raise BadInputError(f"{self.path}: not a zip file ({e})") from None
        members: list[Member] = []
        files: set[str] = set()
        folders: set[str] = set()
        total = 0
        lim = self.limits
        for info in infos:
            name = info.filename
            check_member_name(self.path, name)
            key = posixpath.normpath(name.replace("\\", "/")).strip("/")
            problem = _kind_problem(info)
            if problem is not None:
                raise self._bad(name, f"{problem}; a wheel holds regular files only")
            if info.is_dir():
                if key in files:
                    raise self._bad(name, "is both a file and a folder")
                folders.add(key)
                continue
            if key in files:
                raise self._bad(name, "appears twice in the zip directory (which copy is installed is undefined)")
            if key in folders:
                raise self._bad(name, "is both a file and a folder")
            files.add(key)
            parent = posixpath.dirname(key)
            while parent and parent not in folders:
                if parent in files:
                    raise self._bad(parent, "is both a file and a folder")
                folders.add(parent)
                parent = posixpath.dirname(parent)
            if info.flag_bits & 0x1:
                raise self._bad(name, "is encrypted")
            method = _METHODS.get(info.compress_type)
            if method is None:
                raise self._bad(
                    name, f"uses zip compression method {info.compress_type}; wheels use deflate (8) or stored (0)"
                )
            size, packed = info.file_size, info.compress_size
            if method == "stored" and size != packed:
                raise self._bad(name, f"is stored, yet declares {size} bytes in {packed}")
            if size > lim.member_bytes:
                raise self._bad(name, f"declares {size} bytes, over the per-member limit of {lim.member_bytes}")
            total += size
            if total > lim.total_bytes:
                raise BadInputError(
                    f"{self.path}: members declare more than {lim.total_bytes} bytes in all (the limit)"
                )
            members.append(
                Member(
                    name=name,
                    compressed=packed,
                    uncompressed=size,
                    method=method,
                    crc=info.CRC,
                    header_offset=info.header_offset,
                    data_offset=self._data_offset(name, info.header_offset, packed),
                    executable=bool((info.external_attr >> 16) & 0o111),
                )
            )
        clash = files & folders
        if clash:
            raise self._bad(min(clash), "is both a file and a folder")
        # Members sharing bytes let a small zip declare many times its size (overlapping-file bombs).
        spans = sorted((m.header_offset, m.data_offset + m.compressed, m.name) for m in members)
        for (_a, end, first), (start, _b, second) in itertools.pairwise(spans):
            if start < end:
                raise self._bad(second, f"overlaps member {first!r} in the zip: the same bytes cannot be two files")
        return tuple(members), frozenset(folders)

    def _data_offset(self, name: str, header_offset: int, compressed: int) -> int:
        if not 0 <= header_offset < self.size:
            # zipfile shifts offsets by where the directory claims to start: a lie can put them before the file.
            raise self._bad(name, f"has its local header at {header_offset}, outside the file's {self.size} bytes")
        head = os.pread(self._fd, _LOCAL.size, header_offset)
        if len(head) < _LOCAL.size or _LOCAL.unpack(head)[0] != _LOCAL_MAGIC:
            raise self._bad(name, "has no local file header (truncated or corrupt zip)")
        fields = _LOCAL.unpack(head)
        flags, name_len, extra_len = fields[2], fields[9], fields[10]
        raw = os.pread(self._fd, name_len, header_offset + _LOCAL.size)
        local = raw.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        if local != name:
            raise self._bad(name, f"is named {local!r} in its local header: the zip's two directories disagree")
        start: int = header_offset + _LOCAL.size + name_len + extra_len
        if start + compressed > self.size:
            raise self._bad(name, "is cut off: its data runs past the end of the file (truncated zip)")
        return start

    def _chunks(self, m: Member) -> Iterator[bytes]:
        """The compressed bytes of `m`, `_READ` at a time."""
        pos, left = m.data_offset, m.compressed
        while left:
            chunk = os.pread(self._fd, min(_READ, left), pos)
            if not chunk:
                raise self._bad(m.name, "is cut off (truncated zip)")
            pos += len(chunk)
            left -= len(chunk)
            yield chunk

    def stream(self, m: Member, sink: Callable[[bytes], object]) -> None:
        """Feed the member's inflated bytes to `sink`, at most STEP at once (hash them, write them: RECORD checks and
        extraction use this); refuse every disagreement with the directory, and never pass on a byte past the
        declared size."""
        produced = 0
        crc = 0
        nonzero = 0
        count = _may_break_ratio(m, self.limits)

        def emit(out: bytes) -> None:
            nonlocal produced, crc, nonzero
            produced += len(out)
            if produced > m.uncompressed:
                raise self._past_claim(m)
            if count:
                nonzero += len(out) - out.count(0)
                problem = ratio_problem(m.uncompressed, nonzero, m.compressed, self.limits)
                if problem is not None:
                    raise self._bad(m.name, problem)
            crc = _inflate.crc32(out, crc)
            sink(out)

        cut_off = False
        if m.method == "stored":
            for chunk in self._chunks(m):
                emit(chunk)
        else:
            d = _inflate.decompressobj(-15)
            try:
                for chunk in self._chunks(m):
                    data = chunk
                    while not d.eof:
                        # At most one byte past the declared size: the lie is seen without inflating on.
                        limit = min(STEP, m.uncompressed - produced + 1)
                        out = d.decompress(data, limit)
                        emit(out)
                        if not out and len(d.unconsumed_tail) == len(data):
                            raise self._bad(m.name, "holds deflate data that makes no progress (corrupt)")
                        data = d.unconsumed_tail
                        if not data and len(out) < limit:
                            break  # the input is used up and nothing is held back: read on
                    if d.eof:
                        break
                while not d.eof:  # output the inflater may still hold after the last input
                    out = d.decompress(b"", min(STEP, m.uncompressed - produced + 1))
                    if not out:
                        break
                    emit(out)
            except (zlib.error, _inflate.error) as e:
                raise self._bad_deflate(m, e) from None
            cut_off = not d.eof
        self._finished(m, produced, crc, cut_off=cut_off)

    @contextlib.contextmanager
    def _compressed(self, m: Member) -> Iterator[memoryview]:
        """The member's compressed bytes where they lie in the file, mapped: no copy (a 165 MB member read with
        pread cost 0.1 s of copying and page faults before inflating began). Valid inside the with-block only; the
        map is the member's alone and goes with the block, so its pages leave the process's memory with it."""
        start = m.data_offset - m.data_offset % mmap.ALLOCATIONGRANULARITY
        if m.compressed <= _READ:
            # A small member is one read: mapping and unmapping it cost three times as much (cuda-cccl's 2,500
            # headers: 35 us each, 90 ms, mapped)
            yield memoryview(b"".join(self._chunks(m)))
            return
        try:
            mm = mmap.mmap(self._fd, m.data_offset + m.compressed - start, access=mmap.ACCESS_READ, offset=start)
        except (OSError, ValueError):  # a file system that cannot map files: read the bytes instead
            yield memoryview(b"".join(self._chunks(m)))
            return
        with mm, memoryview(mm) as whole, whole[m.data_offset - start :] as raw:
            yield raw

    def _in_memory(self, m: Member) -> bytes:
        """The member inflated by one call into one object of its declared size, with the checks `stream` makes.

        One call, not `stream`'s steps, because of the threads around it: a step returns to Python (and takes the
        GIL back) every few hundred kB, and each return made the main thread, importing and parsing beside the
        workers, wait for the GIL (measured on nvidia-curand's 133 MB library: the main thread's METADATA read and
        imports took 110 ms beside the stepped inflate, 30 ms beside one call; lab/bench/timeline.py). The output
        stays bounded by the declared size plus one byte (`max_length`), which `in_memory_bytes` bounds; the
        compressed bytes are read where they lie in the file (`_compressed`).
        """
        if m.uncompressed > self.limits.in_memory_bytes:
            raise self._bad(
                m.name, f"declares {m.uncompressed} bytes, over the {self.limits.in_memory_bytes} read into memory"
            )
        d = _inflate.decompressobj(-15)
        with self._compressed(m) as raw:
            if m.method == "stored":
                out = bytes(raw)
            else:
                try:
                    out = d.decompress(raw, m.uncompressed + 1)  # one byte past the declared size shows a lie
                except (zlib.error, _inflate.error) as e:
                    raise self._bad_deflate(m, e) from None
        if len(out) > m.uncompressed:
            raise self._past_claim(m)
        if _may_break_ratio(m, self.limits):  # judged before the end's checks, as a stream judges it
            problem = ratio_problem(m.uncompressed, len(out) - out.count(0), m.compressed, self.limits)
            if problem is not None:
                raise self._bad(m.name, problem)
        self._finished(m, len(out), _inflate.crc32(out), cut_off=m.method == "deflate" and not d.eof)
        return out

    def read(self, m: Member) -> bytes:
        """A small member's bytes (metadata), checked; members over `in_memory_bytes` are refused here."""
        return self._in_memory(m)

    @contextlib.contextmanager
    def open(self, m: Member) -> Iterator[Buffer]:
        """The member's checked bytes for inspection (valid inside the with-block only): in memory while the open
        members fit `in_memory_bytes` together, else spooled to an unnamed temporary file and mapped read-only."""
        with self._lock:
            in_memory = self._held + m.uncompressed <= self.limits.in_memory_bytes
            if in_memory:
                self._held += m.uncompressed
        if in_memory:
            try:
                yield self._in_memory(m)
            finally:
                with self._lock:
                    self._held -= m.uncompressed
            return
        import tempfile  # only big members are spooled: small wheels never pay for importing it

        with tempfile.TemporaryFile(prefix="slimwheel-member-") as spool:
            self.stream(m, _sparse(spool, _may_break_ratio(m, self.limits)))
            spool.truncate()
            spool.flush()
            with mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                yield mm

    def head(self, m: Member, n: int) -> bytes:
        """The first `n` bytes of a member, inflating only what they need (unchecked: the sniff of a file's kind)."""
        raw = os.pread(self._fd, min(m.compressed, 4096), m.data_offset)
        if m.method == "stored":
            return raw[:n]
        try:
            return zlib.decompressobj(-15).decompress(raw, n)
        except zlib.error as e:
            raise BadInputError(f"{self.path}: {m.name}: corrupt deflate data ({e})") from None

    def extract(self, m: Member, target: Path, *, tee: Callable[[bytes], object] | None = None) -> None:
        """Write the member to `target`, a new file (never through an existing file or link); `tee` gets each block
        as well (a hash taken while the member inflates)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        mode = 0o755 if m.executable else 0o644
        fd = os.open(target, flags, mode)
        with open(fd, "wb") as out:
            holes = _may_break_ratio(m, self.limits)
            write = _sparse(out, holes)
            if tee is None:
                self.stream(m, write)
            else:

                def both(block: bytes) -> None:
                    tee(block)
                    write(block)

                self.stream(m, both)
            if holes:  # a trailing hole has no bytes written yet; other files end where their last write did
                out.truncate()
            os.fchmod(fd, mode)  # the mode the zip gives, whatever the umask took at creation


def extract(
    wheel: Path,
    dest: Path,
    limits: ZipLimits = DEFAULT_LIMITS,
    *,
    tee: Callable[[Member], Callable[[bytes], object]] | None = None,
    reader: ZipReader | None = None,
) -> list[str]:
    """Unpack a wheel into `dest` (made if missing; it should be empty) after the directory's checks, streaming each
    member; files get mode 0755 when the zip marks them executable, else 0644. Returns the file names, zip order.
    `tee(member)`: a sink that also gets that member's bytes as they inflate. `reader`: the wheel already open (its
    directory read and judged once for everything the caller asks of it; `limits` is then the reader's). On a
    refusal, what was written so far stays in `dest` for the caller's temporary folder to remove."""
    dest = Path(dest)
    with contextlib.nullcontext(reader) if reader is not None else ZipReader(wheel, limits) as z:
        names = []
        for folder in sorted(z.folders):
            (dest / folder).mkdir(parents=True, exist_ok=True)
        dest.mkdir(parents=True, exist_ok=True)
        for m in z.members:
            target = dest / m.name
            try:
                z.extract(m, target, tee=None if tee is None else tee(m))
            except OSError as e:  # a full disk is NoSpaceError, not the wheel's fault
                raise os_error(e, f"{wheel}: member {m.name!r}", f"cannot be written to {target}") from None
            names.append(m.name)
    return names
