"""The CUDA fatbin container, read by slimwheel's own code (no NVIDIA tool is needed on a user's CI machine).

Layout (little-endian; checked against `cuobjdump --list-elf/--list-ptx` on nvcc 12.x/13.0 output in the tests):

    container header (16 bytes):  u32 magic 0xBA55ED50, u16 version (1), u16 header size (16), u64 size of the entries
    entry header (>= 64 bytes):   u16 kind (1 PTX, 2 ELF/cubin, 8 LTO-IR, 0x80 Tile IR), u16 version, u32 header size,
                                  u64 stored (padded) payload size, u32 compressed size (0 when stored plain),
                                  u32 options offset, u32 version word (PTX: ISA major << 16 | minor),
                                  u32 sm (75, 90, 121),
                                  u64 unused, u64 flags, u64 unused, u64 uncompressed size (0 when stored plain)
    flags:                        0x1 64-bit, 0x10 Linux, 0x2000 LZ4-compressed (-Xfatbin=-compress-all of CUDA 12, as
                                  in faiss-gpu 1.15.1; --compress-mode=speed of 13.0), 0x8000 zstd-compressed
                                  (--compress-mode=default/size and -compress-all of 13.0), 0x100000 arch-specific
                                  (`a`), 0x200000 family-specific (`f`); all measured on nvcc 13.0 output

A section (.nv_fatbin in linked ELFs and host objects, __nv_relfatbin in -rdc objects) holds one container per
translation unit, back to back, zero-padded to 8 bytes. Sizes come from the headers; payloads are never decompressed.
Containers also live elsewhere: NVIDIA's own libraries keep theirs among other data (nvidia-cufft 12.5.0.14's
libcufft.so.12: 18,215 containers in .data and more in .ldata, no .nv_fatbin and no .nvFatBinSegment), so
`scan_fatbins` finds them in any data section by their header (`looks_like_container`), each bounded by its section.

Hostile input is refused in linear time and bounded memory: every size is checked against the container and the
section that hold it, zero padding is skipped in C (a memcmp per 1 MiB window), identical entry headers share
one `FatbinEntry`, and one file may hold at most `MAX_RECORDS` containers and entries together.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import lz4.block
import zstandard

from slimwheel.cuda.arch import CC, Kind, Target, Variant
from slimwheel.errors import BadInputError
from slimwheel.inspect.files import FATBIN_MAGIC, Buffer, release

MAGIC = 0xBA55ED50
MAGIC_BYTES = FATBIN_MAGIC
assert struct.pack("<I", MAGIC) == MAGIC_BYTES
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIIIQQQQ")  # the first 64 bytes of an entry header
assert _ENTRY.size == 64
_ENTRY_SIZE = _ENTRY.size  # read once per entry in parse_fatbin's loop

# 0x80: Tile IR bytecode (CUDA 13.1+, cuTile), which the driver compiles for the GPU at load time. Measured: cuda-tile
# 1.7.0 bytecode wrapped by CUDA 13.5's `fatbinary --image3=kind=tileir,sm=100` gives kind 0x80, an 80-byte header,
# the bytecode version (13.3) in the version word; cuobjdump 13.5 lists it as "Fatbin tile ir code"
# (3c1c548:scripts/tileir-fatbin.py, tests/data/tileir-fatbin.json). Not counted as SASS or PTX for coverage.
_KINDS = {1: "ptx", 2: "sass", 8: "lto-ir", 0x80: "tile-ir"}
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000
_COMPRESSED = FLAG_LZ4 | FLAG_ZSTD
# Containers plus entries in one file. The largest real ones are far below: faiss-gpu 1.15.1's libfaiss.so holds
# 1,092 cubins; each record costs about 150 bytes of memory, so the bound keeps a hostile file near 40 MB.
MAX_RECORDS = 1 << 18
_ZERO_WINDOW = 1 << 20
_SCAN_WINDOW = 16 << 20  # bytes searched for container headers at once
# The most a compressed payload can inflate to, by the format's own limits: an LZ4 sequence adds at most 255 bytes of
# match per input byte; a zstd RLE block makes at most 128 KiB from 4 bytes. A header that claims more (a 64-byte
# payload said to hold 2**64-1 bytes) lies, and its number would reach every table and total.
_MAX_INFLATE = {"lz4": 256, "zstd": 32768}

Compression = Literal["none", "lz4", "zstd"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FatbinEntry:
    """One cubin, PTX text or LTO-IR module inside a fatbin."""

    kind: str  # "sass", "ptx", "lto-ir", "tile-ir", or "unknown-<n>" for a kind number slimwheel does not know
    arch: str  # nvcc's spelling: 90, 90a, 100f
    target: Target | None  # for sass and ptx; None for LTO-IR (not loadable), Tile IR and unknown kinds
    compression: Compression
    stored_size: int  # bytes the payload takes in the file (compressed size, or padded size when stored plain)
    uncompressed_size: int
    ptx_isa: tuple[int, int] | None = None  # PTX entries: the ISA version, e.g. (8, 5)

    @property
    def compressed(self) -> bool:
        return self.compression != "none"


@dataclass(frozen=True, kw_only=True)
class Fatbin:
    """One fatbin container: `offset` is where it starts in the file that holds it, `size` includes its header.

    `device_link` marks the container nvcc's device-link step made (registered by a version-2 wrapper): without
    -rdc it holds no kernels, with -rdc its kernels' PTX sits in the __nv_relfatbin containers.
    """

    offset: int
    size: int
    entries: tuple[FatbinEntry, ...]
    device_link: bool = False
    section: str = ""  # the ELF section that holds it ("" for a bare .fatbin file)
    # False when every member with a target is proven to define no function (`no_kernels`): a cubin without a
    # `.text.<name>` section or function symbol, PTX without `.entry`. Such a module loads and launches nothing on
    # any GPU (nvidia-npp 13.2.0.93 ships two holding one empty sm_75 cubin each; spconv-cu126 2.3.8, 243 of 606),
    # so it is reported as "no kernels" and left out of coverage and the driver floors.
    kernels: bool = True


def _fail(where: str, offset: int, problem: str) -> BadInputError:
    return BadInputError(f"{where}: fatbin at offset {offset:#x}: {problem}")


class RecordBudget:
    """Records left for one file: shared by its sections and by the fatbins its wrappers point at."""

    def __init__(self, where: str, limit: int | None = None) -> None:
        self.limit = MAX_RECORDS if limit is None else limit
        self.where, self.left = where, self.limit

    def take(self, offset: int) -> None:
        self.left -= 1
        if self.left < 0:
            raise _fail(self.where, offset, f"more than {self.limit} fatbin containers and entries in one file")


def parse_fatbin(
    data: Buffer,
    offset: int = 0,
    *,
    where: str,
    base: int = 0,
    end: int | None = None,
    budget: RecordBudget | None = None,
    section: str = "",
) -> Fatbin:
    """The container starting at `offset` of `data`, which must end by `end` (default: the end of `data`; the end of
    its section when it lies in one).

    `base` is added to reported offsets (the section's file offset when `data` is the section alone).
    """
    end_of_data = len(data) if end is None else end
    budget = budget or RecordBudget(where)
    if offset + _HEADER.size > end_of_data:
        raise _fail(where, base + offset, f"header needs {_HEADER.size} bytes, only {end_of_data - offset} left")
    magic, _version, header_size, fat_size = _HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        raise _fail(where, base + offset, f"bad magic {magic:#010x} (expected {MAGIC:#010x})")
    if header_size < _HEADER.size:
        raise _fail(where, base + offset, f"header size {header_size} is smaller than {_HEADER.size}")
    budget.take(base + offset)
    stop = offset + header_size + fat_size
    if stop > end_of_data:
        raise _fail(
            where, base + offset, f"entries of {fat_size} bytes run past the end ({stop - end_of_data} bytes missing)"
        )
    entries: list[FatbinEntry] = []
    unpack = _ENTRY.unpack_from
    p = offset + header_size
    # The loop runs once per entry of every container (cuFFT: 16,449): the checks are the ones below, written inline.
    while p < stop:
        if p + _ENTRY_SIZE > stop:
            raise _fail(where, base + offset, f"entry header at {base + p:#x} is cut off by the container's end")
        (kind_n, _ev, ehsize, padded, csize, _opt, verword, sm, _u1, flags, _u2, usize) = unpack(data, p)
        if ehsize < _ENTRY_SIZE:
            raise _fail(where, base + offset, f"entry at {base + p:#x} has header size {ehsize} < {_ENTRY.size}")
        if p + ehsize + padded > stop:
            raise _fail(
                where,
                base + offset,
                f"entry at {base + p:#x} says {padded} payload bytes, which run past the container's end",
            )
        if flags & _COMPRESSED and csize > padded:
            raise _fail(
                where,
                base + offset,
                f"entry at {base + p:#x} says {csize} compressed bytes in a payload of {padded} bytes",
            )
        budget.left -= 1
        if budget.left < 0:
            budget.take(base + p)  # raises, with the message
        entry = _entry(kind_n, verword, sm, flags, padded, csize, usize)
        if (
            entry.compression != "none"
            and entry.uncompressed_size > _MAX_INFLATE[entry.compression] * entry.stored_size
        ):
            raise _fail(
                where,
                base + offset,
                f"entry at {base + p:#x} says its {entry.stored_size} {entry.compression} bytes inflate to "
                f"{entry.uncompressed_size}, more than {entry.compression} can make of them",
            )
        entries.append(entry)
        p += ehsize + padded
    return Fatbin(offset=base + offset, size=stop - offset, entries=tuple(entries), section=section)


_DESCRIBING = FLAG_LZ4 | FLAG_ZSTD | FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC  # the flags an entry's fields read


@functools.lru_cache(maxsize=4096)
def _entry(kind_n: int, verword: int, sm: int, flags: int, padded: int, csize: int, usize: int) -> FatbinEntry:
    # Cached: entries are immutable, and a file of many identical headers then costs one object, not one each.
    kind, arch, target, compression, isa = _described(kind_n, verword if kind_n == 1 else 0, sm, flags & _DESCRIBING)
    stored = csize if compression != "none" and csize else padded
    uncompressed = usize if compression != "none" and usize else stored
    return FatbinEntry(
        kind=kind,
        arch=arch,
        target=target,
        compression=compression,
        stored_size=stored,
        uncompressed_size=uncompressed,
        ptx_isa=isa,
    )


@functools.lru_cache(maxsize=4096)  # keyed by header fields of untrusted files: bounded, as `_entry` is
def _described(
    kind_n: int, verword: int, sm: int, flags: int
) -> tuple[str, str, Target | None, Compression, tuple[int, int] | None]:
    """Kind, arch, target, compression and PTX ISA of an entry header: a few dozen combinations per file, where the
    sizes make nearly every header distinct (cuFFT's 16,449 entries miss `_entry`'s cache 11,325 times)."""
    kind = _KINDS.get(kind_n, f"unknown-{kind_n}")
    variant = (
        Variant.ARCH
        if flags & FLAG_ARCH_SPECIFIC
        else Variant.FAMILY
        if flags & FLAG_FAMILY_SPECIFIC
        else Variant.PLAIN
    )
    compression: Compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else "none"
    target: Target | None = None
    arch = f"{sm}{variant.value}"
    if kind in ("sass", "ptx") and sm >= 10:
        target = Target(CC(sm // 10, sm % 10), Kind.SASS if kind == "sass" else Kind.PTX, variant)
        arch = target.arch
    isa = (verword >> 16, verword & 0xFFFF) if kind == "ptx" else None
    return kind, arch, target, compression, isa


# A cubin's own ELF header says which GPU it is for: e_machine EM_CUDA (190), the ABI version in e_ident[8], the SM in
# e_flags: ABI 7 in bits 0-7 (the virtual SM in bits 16-23), ABI 8 in bits 8-15. Which cubins are arch-specific
# (`sm_100a`, runs on 10.0 alone) depends on the toolkit that wrote them, measured on `-arch sm_XXa` output here:
# - ABI 7 (CUDA 12.x up to sm_90a; ptxas 12.4 and 12.9.86): 0x800 in e_flags;
# - ABI 8 of CUDA 12.8/12.9 (sm_100 and newer; ptxas 12.9.86): 0x8 in e_flags (0x600640a for sm_100a);
# - ABI 8 of CUDA 13.0 (nvcc/ptxas 13.0.88, every SM): e_flags as for plain sm_100 (0x6006402); the mark is attribute
#   9 of the `.nv.compat` section (a byte-valued record `02 09 01 00`; `02 09 00 00` otherwise), which cuobjdump 13.0
#   reads too (it lists `sm=100a` for those files). `compat_arch_specific` is that attribute, read by the ELF reader.
# Family-specific code (`sm_100f`) has no mark in any of them (the `-arch` option kept in .note.nv.tkinfo aside): it
# reads as plain SASS of its SM, as cuobjdump lists it, and runs on the same GPUs. Checked against the fatbin entry
# headers of the uncompressed cubins in the corpus wheels (lab/bench/cubin_flags.py, lab/results/cubin-flags.json)
# and against real nvcc output in tests/integration/test_inspect_fixtures.py.
EM_CUDA = 190
_CUBIN_ABI_8 = 8
_EF_ACCELERATORS_ABI_7, _EF_ACCELERATORS_ABI_8 = 0x800, 0x8
COMPAT_SECTION = ".nv.compat"
_COMPAT_ARCH_SPECIFIC = 9  # the `.nv.compat` attribute that marks arch-specific code (CUDA 13.0)


# Records of one `.nv.compat` section read at most: nvcc 13.0 writes nine, so a section of more is no compiler's and is
# refused rather than walked (a 1 GiB section of zeros, a 1 MB wheel, took a record loop of 54 s before this bound).
MAX_COMPAT_RECORDS = 256


def compat_arch_specific(data: Buffer, start: int = 0, end: int | None = None, *, where: str) -> bool:
    """Whether a cubin's `.nv.compat` section (`data[start:end]`) says arch-specific: its records are 4 bytes
    (format, attribute, a 16-bit value), format 4 followed by as many payload bytes as the value says; a record cut
    off ends the reading. More than MAX_COMPAT_RECORDS records before attribute 9 is a BadInputError naming `where`."""
    p, n = start, len(data) if end is None else end
    for _record in range(MAX_COMPAT_RECORDS):
        if p + 4 > n:
            return False
        fmt, attr, value = data[p], data[p + 1], data[p + 2] | data[p + 3] << 8
        if attr == _COMPAT_ARCH_SPECIFIC and fmt == 2:
            return value & 0xFF == 1
        p += 4 + (value if fmt == 4 else 0)
    if p + 4 > n:
        return False
    raise BadInputError(
        f"{where}: its {COMPAT_SECTION} section holds more than {MAX_COMPAT_RECORDS} attribute records "
        f"({n - start} bytes; nvcc writes about ten)"
    )


def cubin_entry(abi_version: int, e_flags: int, size: int, *, compat_arch_specific: bool = False) -> FatbinEntry:
    """The one module a standalone cubin file (an ELF for EM_CUDA, `size` bytes) is, as a fatbin entry would describe
    it: SASS for the SM its header names, stored plain; arch-specific as its toolkit marks it (see above)."""
    if abi_version >= _CUBIN_ABI_8:
        sm = (e_flags >> 8) & 0xFF
        arch_specific = bool(e_flags & _EF_ACCELERATORS_ABI_8) or compat_arch_specific
    else:
        sm, arch_specific = e_flags & 0xFF, bool(e_flags & _EF_ACCELERATORS_ABI_7)
    kind, arch, target, _c, _isa = _described(2, 0, sm, FLAG_ARCH_SPECIFIC if arch_specific else 0)
    return FatbinEntry(
        kind=kind, arch=arch, target=target, compression="none", stored_size=size, uncompressed_size=size
    )


_ZEROS = bytes(_ZERO_WINDOW)


def skip_zeros(data: Buffer, p: int, end: int) -> int:
    """The first position in [p, end) that holds a non-zero byte, or `end`: a memcmp per MiB (about 4 GB/s), at most
    1 MiB copied at once; only the window that ends the run is searched byte by byte (in C)."""
    while p < end:
        window = bytes(data[p : min(end, p + _ZERO_WINDOW)])
        if window != _ZEROS[: len(window)]:
            return p + len(window) - len(window.lstrip(b"\0"))
        release(data, p, p + len(window))
        p += len(window)
    return end


def parse_fatbins(
    data: Buffer,
    *,
    where: str,
    base: int = 0,
    start: int = 0,
    end: int | None = None,
    budget: RecordBudget | None = None,
    section: str = "",
) -> tuple[Fatbin, ...]:
    """Every container in `data[start:end]` (a fatbin section, or a whole .fatbin file): back to back, zero padding
    between them."""
    out: list[Fatbin] = []
    budget = budget or RecordBudget(where)
    n = len(data) if end is None else end
    p = start
    while p < n:
        if data[p : p + 4] != MAGIC_BYTES:
            # Padding between containers is zeros up to the next 8-byte boundary (often to the section's end).
            q = skip_zeros(data, p, n)
            if q == n:
                break
            if q == p or (q - start) % 8:
                raise _fail(where, base + q, "neither a fatbin header nor zero padding")
            p = q
            continue
        fb = parse_fatbin(data, p, where=where, base=base, end=n, budget=budget, section=section)
        out.append(fb)
        p += fb.size
    return tuple(out)


def looks_like_container(data: Buffer, at: int, end: int) -> bool:
    """Whether the bytes at `at` start a container as nvcc writes them: the magic, version 1, a 16-byte header, and
    no entries (a container slim emptied) or at least one entry header's worth. A bare magic number is also a constant
    the CUDA runtime compares with (and may sit in any table); these 16 bytes together are a container's header."""
    if at + _HEADER.size > end:
        return False
    magic, version, header_size, fat_size = _HEADER.unpack_from(data, at)
    return bool(
        magic == MAGIC and version == 1 and header_size == _HEADER.size and (fat_size == 0 or fat_size >= _ENTRY.size)
    )


def scan_fatbins(data: Buffer, *, where: str, start: int, end: int, budget: RecordBudget, section: str) -> list[Fatbin]:
    """The containers among other data in `data[start:end]` (one section): found by `looks_like_container` with one
    C-level search per container (`find` on bytes or a map), each parsed strictly and bounded by the section, the
    search going on after its end (bytes inside a container are its own, never a second container)."""
    out: list[Fatbin] = []
    p = start
    while p < end:
        # in windows, each given back once searched (`files.release`): a 300 MB section is not held whole
        stop = min(end, p + _SCAN_WINDOW)
        q = data.find(MAGIC_BYTES, p, min(end, stop + len(MAGIC_BYTES) - 1))
        if q < 0:
            release(data, p, stop)
            p = stop
            continue
        if not looks_like_container(data, q, end):
            p = q + 1
            continue
        fb = parse_fatbin(data, q, where=where, end=end, budget=budget, section=section)
        out.append(fb)
        p = q + fb.size
    return out


# A PTX module defines a kernel with the `.entry` directive (`.visible .entry _Z6kernelPf(`); `.func` alone is device
# code other modules call, never launched.
_PTX_ENTRY = re.compile(rb"\.entry\s")
_TEXT = b".text."
_PTX_VERSION = re.compile(rb"(?m)^\s*\.version\s+[0-9]")
# The most bytes one member is inflated to when proving it empty: an empty module is a few KiB (NPP's 1,888 bytes);
# a larger member is taken for code unread, so that a hostile header cannot make the reader inflate gigabytes.
MAX_PROBED = 16 << 20


def _members(data: Buffer, fb: Fatbin) -> Iterator[tuple[FatbinEntry, int, int]]:
    """(entry, payload offset, payload bytes) of each member of `fb` (already parsed strictly, so its headers hold),
    where `data` is the buffer `fb.offset` is an offset of."""
    _magic, _version, header_size, _fat_size = _HEADER.unpack_from(data, fb.offset)
    p = fb.offset + header_size
    for entry in fb.entries:
        (_k, _ev, ehsize, padded, csize, *_rest) = _ENTRY.unpack_from(data, p)
        yield entry, p + ehsize, csize if entry.compression != "none" and csize else padded
        p += ehsize + padded


_PIECE = 64 << 10  # bytes inflated at once: a cubin names its sections near its start (.shstrtab follows the header)


def _pieces(data: Buffer, entry: FatbinEntry, at: int, stored: int) -> Iterator[bytes] | None:
    """The member's payload as the driver reads it, in pieces (zstd streamed, so that a module with code is told
    from its first piece), or None when it is over MAX_PROBED bytes. A payload that does not inflate (damaged or
    hostile) raises lz4's or zstd's error while iterated."""
    if entry.uncompressed_size > MAX_PROBED:
        return None
    raw = bytes(data[at : at + stored])
    if entry.compression == "none":
        return iter((raw,))
    if entry.compression == "lz4":  # an LZ4 block, as -Xfatbin=-compress-all of CUDA 12 writes it
        return iter((bytes(lz4.block.decompress(raw, uncompressed_size=entry.uncompressed_size)),))
    return _zstd_pieces(raw, entry.uncompressed_size)


def _zstd_pieces(raw: bytes, size: int) -> Iterator[bytes]:
    with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
        got = 0
        while got <= size and (piece := reader.read(_PIECE)):
            got += len(piece)
            yield piece


def _member_has_code(
    data: Buffer, entry: FatbinEntry, at: int, stored: int, cubin_defines_code: Callable[[bytes], bool]
) -> bool:
    """Whether one member defines something to run, or cannot be proven not to (too large, or not inflating)."""
    # A cubin names its sections in its own bytes: `.text.` among them is code, found without a copy or a parse
    # (cuFFT's 18,227 modules); bytes that only look like it make a module judged, the safe side.
    if entry.kind == "sass" and entry.compression == "none" and data.find(_TEXT, at, at + stored) >= 0:
        return True
    seen = bytearray()
    try:
        pieces = _pieces(data, entry, at, stored)
        if pieces is None:
            return True
        for piece in pieces:
            start = max(0, len(seen) - len(_TEXT))
            seen += piece
            if entry.kind == "ptx" and _PTX_ENTRY.search(seen, start):
                return True
            if entry.kind == "sass" and seen.find(_TEXT, start) >= 0:
                return True
    except (lz4.block.LZ4BlockError, zstandard.ZstdError):
        return True
    if len(seen) > entry.uncompressed_size:  # more than its header says: not the module the header describes
        return True
    if entry.kind == "ptx":  # only PTX text (it opens with `.version`) is proven empty; other bytes prove nothing
        return not _PTX_VERSION.search(seen)
    return cubin_defines_code(bytes(seen))


def no_kernels(
    data: Buffer, fb: Fatbin, cubin_defines_code: Callable[[bytes], bool], only: tuple[bool, ...] | None = None
) -> bool:
    """Whether every member of `fb` with a target is proven to define nothing to run: PTX without `.entry`, a cubin
    for which `cubin_defines_code` (the ELF reader's) is False. A container with no such member is not "no kernels"
    (it is judged by what it holds, as before). Members stored plain are read first and the smallest next, so that a
    module with code is told by its first member in most cases. `only`: the members to judge (those slim keeps)."""
    keep = only or (True,) * len(fb.entries)
    members = sorted(
        ((e, at, n) for (e, at, n), k in zip(_members(data, fb), keep, strict=True) if k and e.target is not None),
        key=lambda m: (m[0].compressed, m[0].uncompressed_size),
    )
    return bool(members) and not any(_member_has_code(data, e, at, n, cubin_defines_code) for e, at, n in members)
