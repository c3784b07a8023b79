"""The one ELF reader of slimwheel: headers, sections, the dynamic section, dynamic symbols and fatbins.

It reads straight from a buffer (bytes in memory, or an mmap of a file or of a spooled zip member) with `struct`, so
that hostile files cost linear time and bounded memory: every table must lie inside the file, every string ends
within its string table and `MAX_STRING` bytes (`MAX_SEARCH_PATH` for RPATH and RUNPATH), counts are bounded
(`MAX_DYNAMIC_STRINGS`, `MAX_WRAPPERS`, the fatbin reader's `MAX_RECORDS`), and no step revisits earlier work
(wrappers are resolved through sorted tables).
pyelftools, which re-reads a string per use and a segment table per address, is used only for its names of
machine numbers. Both ELF classes and byte orders are read.

SONAME, NEEDED, RPATH and RUNPATH are read as the system loader reads them: from the PT_DYNAMIC segment, through the
PT_LOAD segments that map its addresses (`_Elf.dynamic`). The rest (device code, symbols, versions) is found through
section headers, which the loader never reads; so a file with a dynamic segment must have a section view that says
the same, or it is refused: zeroed section headers hid NEEDED, RPATH and device code while the loader loaded the
planted library (issue 41, S2).

Repair reads the same way: `read_elf_file(path, name, fatbins=False)` for an unpacked file's dynamic facts,
`file_defines_symbol` for an extension module's PyInit_<module>.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from slimwheel.cuda.libs import RUNTIME_LIBS
from slimwheel.errors import BadInputError
from slimwheel.inspect.fatbin import (
    COMPAT_SECTION,
    EM_CUDA,
    MAGIC_BYTES,
    Fatbin,
    RecordBudget,
    compat_arch_specific,
    cubin_entry,
    no_kernels,
    parse_fatbin,
    parse_fatbins,
    scan_fatbins,
)
from slimwheel.inspect.files import ELF_MAGIC, Buffer, mapped_file, release
from slimwheel.inspect.nvrtc import SECTION as NVRTC_SECTION
from slimwheel.inspect.nvrtc import EmbeddedSources, parse_section

# Sections made of fatbin containers only: linked ELFs and host objects (.nv_fatbin), -rdc objects (__nv_relfatbin).
# Read strictly: every byte is a container or padding. Containers elsewhere (NVIDIA's libraries keep theirs in .data,
# .ldata or .rodata) are found by their header in every other allocated, non-executable data section (`_scanned`).
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# The host-side wrapper the CUDA runtime registers per module: u32 magic, u32 version, u64 fatbin address, u64 unused.
_WRAPPER = struct.Struct("<IIQQ")
WRAPPER_MAGIC = 0x466243B1
# Bounds far above real files (libcublasLt.so.13 of CUDA 13 registers 2,638 modules and needs six libraries) that keep
# a hostile file's cost small.
MAX_WRAPPERS = 1 << 18
MAX_STRING = 4096  # one SONAME, library name or section name (PATH_MAX)
# One RPATH or RUNPATH: a list of folders, which the loader does not bound (tensorflow 2.20's
# libtensorflow_framework.so.2 has a RUNPATH of 21,581 bytes: $ORIGIN/../nvidia/... for every CUDA library wheel).
MAX_SEARCH_PATH = 1 << 20
MAX_DYNAMIC_STRINGS = 4096  # DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH tags of one file
MAX_STRING_BYTES = 64 << 20  # every string read from one file: overlapping names cannot multiply a table's size

# "cubin": a standalone device-code file (EM_CUDA), loaded by its package with cuModuleLoad; one CUDA module.
ElfKind = Literal["shared", "executable", "relocatable", "core", "fatbin", "cubin", "other"]
_KIND: dict[int, ElfKind] = {1: "relocatable", 2: "executable", 3: "shared", 4: "core"}
# pyelftools' names of the machines wheels are built for, known without importing it (its enums module costs
# size-report more start-up than reading a small wheel); any other number is named by pyelftools.
_COMMON_MACHINES = {
    3: "EM_386",
    20: "EM_PPC",
    21: "EM_PPC64",
    22: "EM_S390",
    40: "EM_ARM",
    62: "EM_X86_64",
    183: "EM_AARCH64",
    190: "EM_CUDA",
    243: "EM_RISCV",
}


@functools.lru_cache(maxsize=64)
def machine_name(number: int) -> str:
    """pyelftools' name of an ELF machine number (EM_X86_64), or the number itself when it has none."""
    if number in _COMMON_MACHINES:
        return _COMMON_MACHINES[number]
    from elftools.elf.enums import ENUM_E_MACHINE

    names = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
    return str(names.get(number, number))


_SHT_NULL, _SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_DYNAMIC, _SHT_NOBITS, _SHT_DYNSYM = 0, 1, 2, 3, 6, 8, 11
_STT_FUNC = 2
_SHF_ALLOC, _SHF_EXECINSTR = 0x2, 0x4
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED, _SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# Elf32/64_Verneed (vn_version, vn_cnt, vn_file, vn_aux, vn_next) and Vernaux (vna_hash, vna_flags, vna_other,
# vna_name, vna_next): the same 16 bytes in both classes.
_VERNEED = {o: struct.Struct(o + "HHIII") for o in "<>"}
_VERNAUX = {o: struct.Struct(o + "IHHII") for o in "<>"}
_VERSYM = {o: struct.Struct(o + "H") for o in "<>"}
_VERDEF = {o: struct.Struct(o + "HHHHIII") for o in "<>"}
_VERDAUX = {o: struct.Struct(o + "II") for o in "<>"}
_VER_FLG_BASE = 0x1
MAX_VERSION_NEEDS = 4096  # Vernaux entries of one file (real libraries need a few dozen)
_SHN_UNDEF, _SHN_XINDEX = 0, 0xFFFF
_PT_LOAD, _PT_DYNAMIC = 1, 2
_PAGE = 4096  # the smallest page a loader maps with
_DT_NULL, _DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 14, 15, 29
_DT_STRTAB, _DT_SYMTAB = 5, 6
_DT_VERSYM, _DT_VERDEF, _DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
# The tables the loader finds through the dynamic segment, and the section type that holds each for this reader: the
# two views must name the same bytes (`_Elf.loader_dynamic`).
_TABLE_SECTION = {
    _DT_STRTAB: _SHT_STRTAB,
    _DT_SYMTAB: _SHT_DYNSYM,
    _DT_VERSYM: _SHT_GNU_VERSYM,
    _DT_VERDEF: _SHT_GNU_VERDEF,
    _DT_VERNEED: _SHT_GNU_VERNEED,
}


@dataclass(frozen=True)
class _Layout:
    """Struct formats of one ELF class and byte order."""

    header: struct.Struct  # e_type .. e_shstrndx, after the 16 ident bytes
    section: struct.Struct  # name, type, offset, size, link, entsize (reordered by _section)
    segment: struct.Struct
    dyn: struct.Struct
    sym: struct.Struct
    is64: bool


def _layout(is64: bool, order: str) -> _Layout:
    if is64:
        return _Layout(
            struct.Struct(order + "HHIQQQIHHHHHH"),
            struct.Struct(order + "IIQQQQIIQQ"),
            struct.Struct(order + "IIQQQQQQ"),
            struct.Struct(order + "qQ"),
            struct.Struct(order + "IBBHQQ"),
            True,
        )
    return _Layout(
        struct.Struct(order + "HHIIIIIHHHHHH"),
        struct.Struct(order + "IIIIIIIIII"),
        struct.Struct(order + "IIIIIIII"),
        struct.Struct(order + "iI"),
        struct.Struct(order + "IIIBBH"),
        False,
    )


_LAYOUTS = {(c, d): _layout(c == 2, "<" if d == 1 else ">") for c in (1, 2) for d in (1, 2)}


@dataclass(frozen=True, kw_only=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int
    flags: int = 0


@dataclass(frozen=True, kw_only=True)
class ElfReport:
    """One ELF file (shared library, extension module, executable or object) or a bare .fatbin file."""

    name: str
    size: int
    kind: ElfKind
    machine: str
    sections: dict[str, int]  # name -> bytes in the file (NOBITS sections such as .bss are left out)
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    fatbins: tuple[Fatbin, ...]
    modules: int = 0  # .nvFatBinSegment wrappers: CUDA modules the runtime registers
    nvrtc: tuple[EmbeddedSources, ...] = ()  # kernel sources embedded for runtime compilation (inspect.nvrtc)
    # A C++ runtime linked in statically whose symbols the file exports (CXX_RUNTIME_MARKER in its dynamic symbol
    # table): the dynamic loader may bind some of its calls to another copy in the process (deps.cxx_runtime_problem).
    exports_cxx_runtime: bool = False
    # The symbol versions it requires of other libraries (GLIBC_2.29, GLIBCXX_3.4.30): the platform floor.
    version_needs: tuple[VersionNeed, ...] = ()
    # CUDA libraries it opens with dlopen rather than through DT_NEEDED: SONAMEs of the table (cuda.libs) that stand
    # as strings of their own in its .rodata, in a file that imports dlopen (ctranslate2 4.8's libctranslate2 opens
    # libcublas.so.12 so). What it cannot see: a name built at run time (xgboost 3.2's libxgboost opens libnccl.so.2
    # from pieces: no such string in it).
    opens: tuple[str, ...] = ()
    # Every shared-object name other than the CUDA ones (and its NEEDED) that stands as a whole C string in .rodata of
    # a file that imports dlopen, printf templates included: what it may open by name. onnxruntime-gpu's pybind module
    # names libonnxruntime_providers_tensorrt.so; NVSHMEM's host library names nvshmem_bootstrap_mpi.so and
    # nvshmem_transport_%s.so.%d. deps matches them against the wheel's own files to find its plugins.
    names: tuple[str, ...] = ()

    @property
    def fatbin_bytes(self) -> int:
        return sum(fb.size for fb in self.fatbins)

    @functools.cached_property  # asked per module by coverage and the tables: cuFFT's 18,227 fatbins, sifted once
    def judged_fatbins(self) -> tuple[Fatbin, ...]:
        """The fatbins that are CUDA modules of their own, the ones coverage judges and every table counts: with
        loadable code, and not a device-link container (no kernels, or kernels whose PTX is in __nv_relfatbin)
        unless the file has nothing else."""
        code = [fb for fb in self.fatbins if fb.kernels and any(e.target is not None for e in fb.entries)]
        return tuple([fb for fb in code if not fb.device_link] or code)

    @property
    def kernelless_fatbins(self) -> tuple[Fatbin, ...]:
        """Containers with loadable members none of which defines a function (`Fatbin.kernels`): "no kernels"."""
        return tuple(fb for fb in self.fatbins if not fb.kernels)


@dataclass(frozen=True, kw_only=True)
class VersionNeed:
    """A GNU symbol version an ELF file requires of a library (`.gnu.version_r`), with the undefined dynamic
    symbols bound to it (`.gnu.version`): `GLIBC_2.29` of libm.so.6 for exp, log, pow."""

    library: str  # vn_file, e.g. libm.so.6
    version: str  # vna_name, e.g. GLIBC_2.29
    symbols: tuple[str, ...]  # sorted; empty when the file only names the version (a weak requirement)


@dataclass(frozen=True, kw_only=True)
class VersionDef:
    """A dynamic symbol a library defines under a GNU symbol version (`.gnu.version_d` names the versions,
    `.gnu.version` binds each defined symbol to one): `pow` at GLIBC_2.29 (the default a new link binds to, `pow@@`)
    and at GLIBC_2.2.5 (hidden, `pow@`, kept for old binaries and reachable with `.symver`)."""

    symbol: str
    version: str
    default: bool


# std::locale::classic(), defined by libstdc++ only (libc++ mangles it under std::__1): a file that defines it in its
# dynamic symbol table carries libstdc++ itself and exports it.
CXX_RUNTIME_MARKER = "_ZNSt6locale7classicEv"


# (SONAME, NEEDED, DT_RPATH strings, DT_RUNPATH strings) of one file, in the order of its dynamic array.
_Dynamic = tuple[str | None, list[str], list[str], list[str]]


def _effective(facts: _Dynamic) -> tuple[str | None, tuple[str, ...], str | None, str | None]:
    """What the loader acts on: every NEEDED in order, and the last SONAME, RPATH and RUNPATH."""
    soname, needed, rpath, runpath = facts
    return soname, tuple(needed), rpath[-1] if rpath else None, runpath[-1] if runpath else None


def _listed(value: str | tuple[str, ...] | None) -> str:
    if value is None or value == ():
        return "none"
    return ", ".join(value) if isinstance(value, tuple) else value


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


class _Elf:
    """The parsed header, section and segment tables of an ELF file held in `buf`; methods read the rest."""

    def __init__(self, buf: Buffer, name: str) -> None:
        self.buf, self.name, self.n = buf, name, len(buf)
        self.string_bytes = 0
        if buf[:4] != ELF_MAGIC:
            raise BadInputError(f"{name}: not an ELF file (starts with {bytes(buf[:4])!r})")
        if self.n < 16:
            raise self._bad(f"truncated ELF file: {self.n} bytes, fewer than the 16 of its identification")
        layout = _LAYOUTS.get((buf[4], buf[5]))
        if layout is None:
            raise self._bad(f"unknown ELF class {buf[4]} or byte order {buf[5]}")
        self.lay = layout
        if self.n < 16 + layout.header.size:
            raise self._bad(f"truncated ELF file: the header needs {16 + layout.header.size} bytes, only {self.n}")
        (
            e_type,
            e_machine,
            _v,
            _entry,
            phoff,
            shoff,
            e_flags,
            _ehsize,
            phentsize,
            phnum,
            shentsize,
            shnum,
            shstrndx,
        ) = layout.header.unpack_from(buf, 16)
        self.kind: ElfKind = "cubin" if e_machine == EM_CUDA else _KIND.get(e_type, "other")
        self.flags, self.abi_version = e_flags, buf[8]
        self.machine = machine_name(e_machine)
        self.loads, self.dynamic_segments = self._segments(phoff, phentsize, phnum)
        self.sections = self._sections(shoff, shentsize, shnum, shstrndx)

    def _bad(self, problem: str) -> BadInputError:
        return BadInputError(f"{self.name}: {problem}")

    def _table(self, what: str, off: int, entsize: int, count: int, need: int) -> None:
        if count and entsize < need:
            raise self._bad(f"malformed ELF file: {what} entries of {entsize} bytes (at least {need} needed)")
        if off + entsize * count > self.n:
            raise self._bad(f"truncated ELF file: {what} end past the file's {self.n} bytes")

    def _segments(
        self, phoff: int, phentsize: int, phnum: int
    ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
        """PT_LOAD segments as (vaddr, filesz, offset), sorted by address for bisection, and the (address, offset)
        of the PT_DYNAMIC segments (the loader reads the dynamic array at the address)."""
        seg = self.lay.segment
        self._table("program headers", phoff, phentsize, phnum, seg.size)
        loads, dynamic = [], []
        for i in range(phnum):
            fields = seg.unpack_from(self.buf, phoff + i * phentsize)
            if self.lay.is64:
                p_type, _f, p_offset, p_vaddr, _pa, p_filesz, _m, _a = fields
            else:
                p_type, p_offset, p_vaddr, _pa, p_filesz, _m, _f, _a = fields
            if p_type == _PT_LOAD and p_filesz:
                loads.append((p_vaddr, p_filesz, p_offset))
            elif p_type == _PT_DYNAMIC:
                dynamic.append((p_vaddr, p_offset))
        loads.sort()
        return loads, dynamic

    def _raw_section(self, shoff: int, shentsize: int, i: int) -> Section:
        fields = self.lay.section.unpack_from(self.buf, shoff + i * shentsize)
        name, typ, flags, _addr, off, size, link, _info, _align, entsize = fields
        return Section(name=str(name), type=typ, offset=off, size=size, link=link, entsize=entsize, flags=flags)

    def _sections(self, shoff: int, shentsize: int, shnum: int, shstrndx: int) -> list[Section]:
        if shoff == 0:
            return []
        self._table("section headers", shoff, shentsize, 1, self.lay.section.size)
        first = self._raw_section(shoff, shentsize, 0)
        # ELF's extended numbering: with 0xff00 or more sections, the counts live in section 0's header.
        if shnum == 0:
            shnum = first.size
        if shstrndx == _SHN_XINDEX:
            shstrndx = first.link
        self._table("section headers", shoff, shentsize, shnum, self.lay.section.size)
        raw = [self._raw_section(shoff, shentsize, i) for i in range(shnum)]
        names = raw[shstrndx] if 0 < shstrndx < shnum else None
        cache: dict[str, str] = {}  # sections sharing a name offset cost one string
        out = []
        for i, s in enumerate(raw):
            name = ""
            if names is not None:
                name = cache.get(s.name) or cache.setdefault(s.name, self._string(names, int(s.name), "section name"))
            if s.type not in (_SHT_NULL, _SHT_NOBITS) and s.offset + s.size > self.n:
                raise self._bad(
                    f"truncated ELF file: section {name or i} ({s.size} bytes at {s.offset:#x}) "
                    f"ends past the file's {self.n} bytes"
                )
            out.append(replace(s, name=name))
        return out

    def _string(self, table: Section, at: int, what: str, limit: int = MAX_STRING) -> str:
        """A NUL-terminated string at `at` of a string table, which must end inside the table and `limit` bytes."""
        if table.type == _SHT_NOBITS or table.offset + table.size > self.n:
            raise self._bad(f"malformed ELF file: the string table of a {what} lies outside the file")
        if at >= table.size:
            raise self._bad(f"malformed ELF file: a {what} starts at {at}, past its string table's {table.size} bytes")
        start = table.offset + at
        stop = table.offset + min(table.size, at + limit)
        end = self.buf.find(b"\0", start, stop)
        if end < 0:
            raise self._bad(f"malformed ELF file: a {what} does not end inside its string table or {limit} bytes")
        self.string_bytes += end - start
        if self.string_bytes > MAX_STRING_BYTES:
            raise self._bad(f"malformed ELF file: its strings add up to more than {MAX_STRING_BYTES} bytes")
        return bytes(self.buf[start:end]).decode("utf-8", errors="replace")

    def _linked_table(self, sec: Section) -> Section:
        if not 0 < sec.link < len(self.sections):
            raise self._bad(f"malformed ELF file: section {sec.name} links to no string table (index {sec.link})")
        return self.sections[sec.link]

    def dynamic(self) -> _Dynamic:
        """(SONAME, NEEDED, every DT_RPATH string, every DT_RUNPATH string) as the system loader reads them, from the
        PT_DYNAMIC segment (`loader_dynamic`). The section view must say the same: the loader never reads section
        headers, so a file whose sections hide a NEEDED or RPATH entry (or that has none) would be judged on a lie
        and is refused. A file without a dynamic segment (an object file, a static program) is read from its
        sections: the loader reads no dependencies of it."""
        loader = self.loader_dynamic()
        sections = self._section_dynamic()
        if loader is None:
            return sections
        facts = zip(("SONAME", "NEEDED", "RPATH", "RUNPATH"), _effective(sections), _effective(loader), strict=True)
        for what, seen, truth in facts:
            if seen != truth:
                raise self._bad(
                    f"its section headers disagree with its dynamic segment, which the system loader reads: "
                    f"{what} {_listed(seen)} in the sections, {_listed(truth)} in the segment"
                )
        return loader

    def loader_dynamic(self) -> _Dynamic | None:
        """The dynamic facts as glibc's loader reads them, None without a PT_DYNAMIC segment: the dynamic array at the
        segment's address up to DT_NULL, its strings at DT_STRTAB, both through the PT_LOAD segments that map them.
        The file must have a section view of the same tables (the reader finds device code, symbols and versions
        through sections): section headers, names, and for DT_STRTAB, DT_SYMTAB and the version tables a section of
        the matching type over the very bytes the address maps to."""
        if not self.dynamic_segments:
            return None
        if len(self.dynamic_segments) > 1:
            raise self._bad(f"malformed ELF file: {len(self.dynamic_segments)} PT_DYNAMIC segments (one at most)")
        if not self.sections or not any(s.name for s in self.sections):
            what = "no section headers" if not self.sections else "no section names"
            raise self._bad(
                f"it has a dynamic segment, which the system loader reads, and {what}: its dependencies, search paths "
                "and device code cannot be checked against what the loader sees"
            )
        for (a, a_size, _o), (b, _s, _p) in itertools.pairwise(self.loads):
            if b < a + a_size:
                raise self._bad(f"malformed ELF file: PT_LOAD segments at {a:#x} and {b:#x} overlap")
        for vaddr, _s, offset in self.loads:
            # glibc refuses a PT_LOAD whose address and offset differ within a page: it cannot map it
            if (vaddr - offset) % _PAGE:
                raise self._bad(
                    f"malformed ELF file: a PT_LOAD segment's address {vaddr:#x} and offset {offset:#x} "
                    "differ within a page"
                )
        vaddr, offset = self.dynamic_segments[0]
        at, end = self._mapped(vaddr, "the dynamic array")
        if at != offset:  # tools that read the segment by its offset would see another array than the loader
            raise self._bad(
                f"malformed ELF file: PT_DYNAMIC's address {vaddr:#x} maps to offset {at:#x}, not its own {offset:#x}"
            )
        dyn = self.lay.dyn
        entries: dict[int, int] = {}  # the last value of each tag, as the loader keeps it
        strings: list[tuple[int, int]] = []  # (tag, string offset) of NEEDED, SONAME, RPATH and RUNPATH, in order
        while True:
            if at + dyn.size > end:
                raise self._bad("malformed ELF file: the dynamic array runs past its segment's bytes without DT_NULL")
            tag, val = dyn.unpack_from(self.buf, at)
            at += dyn.size
            if tag == _DT_NULL:
                break
            entries[tag] = val
            if tag in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
                strings.append((tag, val))
                if len(strings) > MAX_DYNAMIC_STRINGS:
                    raise self._bad(
                        f"malformed ELF file: more than {MAX_DYNAMIC_STRINGS} DT_NEEDED/SONAME/RPATH/RUNPATH entries"
                    )
        for tag, sh_type in _TABLE_SECTION.items():
            if tag in entries:
                off, _end = self._mapped(entries[tag], f"dynamic tag {tag:#x}'s table")
                if not any(s.type == sh_type and s.offset == off for s in self.sections):
                    raise self._bad(
                        f"its section headers disagree with its dynamic segment, which the system loader reads: "
                        f"no section of type {sh_type:#x} holds the table dynamic tag {tag:#x} points at ({off:#x})"
                    )
        if strings and _DT_STRTAB not in entries:
            raise self._bad("malformed ELF file: its dynamic array names libraries but has no DT_STRTAB")
        soname: str | None = None
        needed: list[str] = []
        rpath: list[str] = []
        runpath: list[str] = []
        cache: dict[int, str] = {}
        for tag, val in strings:
            text = cache.get(val)
            if text is None:
                search = tag in (_DT_RPATH, _DT_RUNPATH)
                text = cache[val] = self._mapped_string(
                    entries[_DT_STRTAB] + val, MAX_SEARCH_PATH if search else MAX_STRING
                )
            if tag == _DT_NEEDED:
                needed.append(text)
            elif tag == _DT_SONAME:
                soname = text
            elif tag == _DT_RPATH:
                rpath.append(text)
            else:
                runpath.append(text)
        return soname, needed, rpath, runpath

    def _mapped(self, vaddr: int, what: str) -> tuple[int, int]:
        """(file offset, end of that segment's file bytes) of the PT_LOAD that maps address `vaddr`."""
        i = bisect.bisect_right(self.loads, (vaddr, float("inf"), 0)) - 1
        if i >= 0:
            start, size, offset = self.loads[i]
            if vaddr < start + size and offset + size <= self.n:
                return vaddr - start + offset, offset + size
        raise self._bad(f"malformed ELF file: {what} (address {vaddr:#x}) lies in no PT_LOAD segment's file bytes")

    def _mapped_string(self, vaddr: int, limit: int) -> str:
        """A NUL-terminated string at address `vaddr`, which must end inside its segment's file bytes and `limit`."""
        start, end = self._mapped(vaddr, "a dynamic string")
        stop = self.buf.find(b"\0", start, min(end, start + limit))
        if stop < 0:
            raise self._bad(f"malformed ELF file: a dynamic string does not end inside its segment or {limit} bytes")
        self.string_bytes += stop - start
        if self.string_bytes > MAX_STRING_BYTES:
            raise self._bad(f"malformed ELF file: its strings add up to more than {MAX_STRING_BYTES} bytes")
        return bytes(self.buf[start:stop]).decode("utf-8", errors="replace")

    def _section_dynamic(self) -> _Dynamic:
        """`dynamic` as the section headers tell it, from each SHT_DYNAMIC section."""
        soname: str | None = None
        needed: list[str] = []
        rpath: list[str] = []
        runpath: list[str] = []
        tags = 0
        dyn = self.lay.dyn
        for sec in self.sections:
            if sec.type != _SHT_DYNAMIC:
                continue
            strings = self._linked_table(sec)
            cache: dict[int, str] = {}  # many tags naming one string cost one string
            for i in range(sec.size // dyn.size):
                tag, val = dyn.unpack_from(self.buf, sec.offset + i * dyn.size)
                if tag == _DT_NULL:
                    break
                if tag not in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
                    continue
                tags += 1
                if tags > MAX_DYNAMIC_STRINGS:
                    raise self._bad(
                        f"malformed ELF file: more than {MAX_DYNAMIC_STRINGS} DT_NEEDED/SONAME/RPATH/RUNPATH entries"
                    )
                text = cache.get(val)
                if text is None:
                    search = tag in (_DT_RPATH, _DT_RUNPATH)
                    text = cache[val] = self._string(
                        strings,
                        val,
                        "search path" if search else "dynamic string",
                        MAX_SEARCH_PATH if search else MAX_STRING,
                    )
                if tag == _DT_NEEDED:
                    needed.append(text)
                elif tag == _DT_SONAME:
                    soname = text
                elif tag == _DT_RPATH:
                    rpath.append(text)
                else:
                    runpath.append(text)
        return soname, needed, rpath, runpath

    def defines_code(self) -> bool:
        """Whether a cubin defines a function: a `.text.<name>` section (ptxas gives each kernel and device function
        one) or a defined STT_FUNC symbol in its symbol table."""
        if any(s.name.startswith(".text.") for s in self.sections):
            return True
        sym = self.lay.sym
        for sec in self.sections:
            if sec.type != _SHT_SYMTAB or not sec.size:
                continue
            if sec.entsize != sym.size:
                return True  # a table that is no symbol table: nothing is proven
            for i in range(sec.size // sym.size):
                fields = sym.unpack_from(self.buf, sec.offset + i * sym.size)
                info, shndx = (fields[1], fields[3]) if self.lay.is64 else (fields[3], fields[5])
                if info & 0xF == _STT_FUNC and shndx != _SHN_UNDEF:
                    return True
        return False

    def defines(self, symbol: str) -> bool:
        """Whether a dynamic symbol table defines `symbol` (st_shndx other than SHN_UNDEF)."""
        want = symbol.encode() + b"\0"
        sym = self.lay.sym
        for sec in self.sections:
            if sec.type != _SHT_DYNSYM:
                continue
            self._symbol_table(sec)
            strings = self._linked_table(sec)
            if strings.offset + strings.size > self.n:
                raise self._bad(f"malformed ELF file: the string table of {sec.name} lies outside the file")
            for i in range(sec.size // sym.size):
                fields = sym.unpack_from(self.buf, sec.offset + i * sym.size)
                st_name, shndx = fields[0], (fields[3] if self.lay.is64 else fields[5])
                if shndx == _SHN_UNDEF or st_name + len(want) > strings.size:
                    continue
                at = strings.offset + st_name
                if self.buf[at : at + len(want)] == want:
                    return True
        return False

    def version_needs(self) -> tuple[VersionNeed, ...]:
        """The versions required of other libraries and the undefined dynamic symbols bound to each (GNU symbol
        versioning: `.gnu.version_r` names library and version per index, `.gnu.version` gives each dynamic symbol
        its index). Chains are followed inside their section only, at most MAX_VERSION_NEEDS entries."""
        order = "<" if self.buf[5] == 1 else ">"
        vn, vna = _VERNEED[order], _VERNAUX[order]
        by_index: dict[int, tuple[str, str]] = {}
        count = 0
        for sec in self.sections:
            if sec.type != _SHT_GNU_VERNEED:
                continue
            strings = self._linked_table(sec)
            at, end, seen = sec.offset, sec.offset + sec.size, set()
            while sec.size:
                if at in seen or at + vn.size > end:
                    raise self._bad(f"malformed ELF file: a {sec.name} entry lies outside its section or loops")
                seen.add(at)
                _ver, cnt, file_off, aux, nxt = vn.unpack_from(self.buf, at)
                library = self._string(strings, file_off, "version library name")
                a = at + aux
                for _i in range(cnt):
                    count += 1
                    if count > MAX_VERSION_NEEDS or a + vna.size > end or a < sec.offset:
                        raise self._bad(
                            f"malformed ELF file: {sec.name} has more than {MAX_VERSION_NEEDS} entries "
                            "or one outside the section"
                        )
                    _h, _flags, other, name_off, anext = vna.unpack_from(self.buf, a)
                    by_index[other & 0x7FFF] = (library, self._string(strings, name_off, "version name"))
                    if not anext:
                        break
                    a += anext
                if not nxt:
                    break
                at += nxt
        if not by_index:
            return ()
        bound: dict[int, list[str]] = {i: [] for i in by_index}
        sym = self.lay.sym
        versym_secs = [s for s in self.sections if s.type == _SHT_GNU_VERSYM]
        for sec in self.sections:
            if sec.type != _SHT_DYNSYM:
                continue
            self._symbol_table(sec)
            strings = self._linked_table(sec)
            versym = next(iter(versym_secs), None)
            if versym is None:
                break
            vs = _VERSYM[order]
            n = min(sec.size // sym.size, versym.size // vs.size)
            for i in range(n):
                fields = sym.unpack_from(self.buf, sec.offset + i * sym.size)
                st_name, shndx = fields[0], (fields[3] if self.lay.is64 else fields[5])
                if shndx != _SHN_UNDEF or not st_name:
                    continue
                (ndx,) = vs.unpack_from(self.buf, versym.offset + i * vs.size)
                if (ndx & 0x7FFF) in bound:
                    bound[ndx & 0x7FFF].append(self._string(strings, st_name, "symbol name"))
        return tuple(
            VersionNeed(library=lib, version=ver, symbols=tuple(sorted(set(bound[i]))))
            for i, (lib, ver) in sorted(by_index.items(), key=lambda kv: kv[1])
        )

    def version_definitions(self) -> tuple[VersionDef, ...]:
        """The defined dynamic symbols bound to a version this file defines (its base version, the file's own name,
        left out), in symbol-table order. Chains are followed inside their section only."""
        order = "<" if self.buf[5] == 1 else ">"
        vd, vda = _VERDEF[order], _VERDAUX[order]
        names: dict[int, str] = {}
        for sec in self.sections:
            if sec.type != _SHT_GNU_VERDEF:
                continue
            strings = self._linked_table(sec)
            at, end = sec.offset, sec.offset + sec.size
            seen: set[int] = set()
            while sec.size:
                if at in seen or at + vd.size > end or len(seen) >= MAX_VERSION_NEEDS:
                    raise self._bad(f"malformed ELF file: a {sec.name} entry lies outside its section or loops")
                seen.add(at)
                _ver, flags, ndx, cnt, _hash, aux, nxt = vd.unpack_from(self.buf, at)
                if cnt and not flags & _VER_FLG_BASE:
                    if at + aux + vda.size > end:
                        raise self._bad(f"malformed ELF file: a {sec.name} name lies outside its section")
                    name_off, _anext = vda.unpack_from(self.buf, at + aux)
                    names[ndx & 0x7FFF] = self._string(strings, name_off, "version name")
                if not nxt:
                    break
                at += nxt
        versym = next((s for s in self.sections if s.type == _SHT_GNU_VERSYM), None)
        if not names or versym is None:
            return ()
        sym, vs = self.lay.sym, _VERSYM[order]
        out: list[VersionDef] = []
        for sec in self.sections:
            if sec.type != _SHT_DYNSYM:
                continue
            self._symbol_table(sec)
            strings = self._linked_table(sec)
            for i in range(1, min(sec.size // sym.size, versym.size // vs.size)):
                fields = sym.unpack_from(self.buf, sec.offset + i * sym.size)
                st_name, shndx = fields[0], (fields[3] if self.lay.is64 else fields[5])
                if shndx == _SHN_UNDEF or not st_name:
                    continue
                (ndx,) = vs.unpack_from(self.buf, versym.offset + i * vs.size)
                version = names.get(ndx & 0x7FFF)
                if version is not None:
                    name = self._string(strings, st_name, "symbol name")
                    out.append(VersionDef(symbol=name, version=version, default=not ndx & 0x8000))
        return tuple(out)

    def _symbol_table(self, sec: Section) -> None:
        """A dynamic symbol table's entries must be of the class's symbol size: another entry size is a lie."""
        if sec.size and sec.entsize != self.lay.sym.size:
            raise self._bad(
                f"malformed ELF file: {sec.name} has entries of {sec.entsize} bytes, not {self.lay.sym.size}"
            )

    def undefined(self, keep: Callable[[str], bool]) -> frozenset[str]:
        """The names its dynamic symbol tables take from other files (SHN_UNDEF, not local) for which `keep` holds;
        strings bounded as every string of the file is (MAX_STRING_BYTES)."""
        return self.dynamic_names(keep, defined=False)

    def dynamic_names(self, keep: Callable[[str], bool], *, defined: bool) -> frozenset[str]:
        """The named, non-local symbols of its dynamic symbol tables that it defines (`defined`) or takes from other
        files (SHN_UNDEF), for which `keep` holds."""
        sym = self.lay.sym
        out: set[str] = set()
        for sec in self.sections:
            if sec.type != _SHT_DYNSYM:
                continue
            self._symbol_table(sec)
            strings = self._linked_table(sec)
            for i in range(1, sec.size // sym.size):
                fields = sym.unpack_from(self.buf, sec.offset + i * sym.size)
                st_name = fields[0]
                info, shndx = (fields[1], fields[3]) if self.lay.is64 else (fields[3], fields[5])
                if (shndx != _SHN_UNDEF) != defined or st_name == 0 or info >> 4 == 0:  # other kind, unnamed, local
                    continue
                name = self._string(strings, st_name, "dynamic symbol name")
                if keep(name):
                    out.add(name)
        return frozenset(out)

    def file_offset(self, vaddr: int) -> int | None:
        """The file offset a PT_LOAD segment maps address `vaddr` from, None when none does."""
        i = bisect.bisect_right(self.loads, (vaddr, float("inf"), 0)) - 1
        if i >= 0:
            start, size, offset = self.loads[i]
            if vaddr < start + size:
                return vaddr - start + offset
        return None


def cubin_defines_code(payload: bytes) -> bool:
    """Whether a fatbin member's cubin defines a function (`_Elf.defines_code`); a payload that is no readable ELF
    file proves nothing, so it counts as code."""
    try:
        return _Elf(payload, "cubin").defines_code()
    except BadInputError:
        return True


def kernels_kept(path: Path, name: str, fb: Fatbin, keep: tuple[bool, ...]) -> bool:
    """Whether the members of `fb` (a container of the file at `path`) that `keep` marks define a kernel: what the
    container will hold once slim has dropped the others."""
    with mapped_file(path, name) as data:
        return not no_kernels(data, fb, cubin_defines_code, keep)


def _kernels_marked(data: Buffer, found: list[Fatbin]) -> list[Fatbin]:
    return [replace(fb, kernels=False) if no_kernels(data, fb, cubin_defines_code) else fb for fb in found]


def read_elf(data: Buffer, name: str, *, fatbins: bool = True) -> ElfReport:
    """Parse ELF (or bare fatbin) `data`, the whole file. Any malformation is a BadInputError naming `name`.

    Without `fatbins`, fatbin sections and wrappers are not read (`fatbins` is empty, `modules` 0): the dynamic
    facts alone, for repair. DT_RPATH and DT_RUNPATH are the last such tag's string, as glibc's loader takes them.
    """
    if data[:4] == MAGIC_BYTES:
        return ElfReport(
            name=name,
            size=len(data),
            kind="fatbin",
            machine="",
            sections={},
            soname=None,
            needed=(),
            rpath=None,
            runpath=None,
            fatbins=tuple(_kernels_marked(data, list(parse_fatbins(data, where=name)))) if fatbins else (),
        )
    elf = _Elf(data, name)
    if elf.kind == "cubin":
        return _cubin(elf, fatbins=fatbins)
    sections: dict[str, int] = {}
    found: list[Fatbin] = []
    wrappers: list[tuple[int, int]] = []  # (file offset the fatbin address maps to, version)
    modules = 0
    budget = RecordBudget(name)
    embedded: list[EmbeddedSources] = []
    for sec in elf.sections:
        if sec.type in (_SHT_NULL, _SHT_NOBITS):
            continue
        sections[sec.name] = sections.get(sec.name, 0) + sec.size
        if sec.name == NVRTC_SECTION:  # read with or without fatbins: repair requires NVRTC for these
            embedded.extend(parse_section(memoryview(data)[sec.offset : sec.offset + sec.size], where=name))
        if not fatbins:
            continue
        where = f"{name} [{sec.name}]"
        if sec.name in FATBIN_SECTIONS:
            found.extend(
                parse_fatbins(
                    data, where=where, start=sec.offset, end=sec.offset + sec.size, budget=budget, section=sec.name
                )
            )
        elif sec.name == ".nvFatBinSegment":
            for i in range(sec.size // _WRAPPER.size):
                magic, version, addr, _u = _WRAPPER.unpack_from(data, sec.offset + i * _WRAPPER.size)
                if magic != WRAPPER_MAGIC:
                    continue
                modules += 1
                if modules > MAX_WRAPPERS:
                    raise BadInputError(f"{name}: more than {MAX_WRAPPERS} CUDA module wrappers in .nvFatBinSegment")
                # In relocatable objects the address is 0 and filled by a relocation: nothing to follow.
                at = elf.file_offset(addr) if addr else None
                if at is not None:
                    wrappers.append((at, version))
        elif _scanned(sec):
            found.extend(
                scan_fatbins(
                    data, where=where, start=sec.offset, end=sec.offset + sec.size, budget=budget, section=sec.name
                )
            )
        if sec.name in FATBIN_SECTIONS or _scanned(sec):
            release(data, sec.offset, sec.offset + sec.size)  # a mapped file's pages, read: not held to the end
    soname, needed, rpath, runpath = elf.dynamic()
    opens, names = _opened_libraries(data, elf, needed, soname)
    # libstdc++.so.6 itself (the one a process shares) defines it too; only another library carrying a copy counts.
    exports_cxx = not (soname or "").startswith("libstdc++.so") and elf.defines(CXX_RUNTIME_MARKER)
    found.sort(key=lambda fb: fb.offset)
    found.extend(_wrapped_fatbins(data, name, wrappers, found, elf.sections, budget))
    found.sort(key=lambda fb: fb.offset)
    _refuse_overlaps(name, found)
    _refuse_strict_over_others(name, elf.sections, found)
    linked = {at for at, version in wrappers if version == 2}
    if linked:
        found = [replace(fb, device_link=True) if fb.offset in linked else fb for fb in found]
    found = _kernels_marked(data, found)
    return ElfReport(
        name=name,
        size=elf.n,
        kind=elf.kind,
        machine=elf.machine,
        sections=sections,
        soname=soname,
        needed=tuple(needed),
        rpath=rpath[-1] if rpath else None,
        runpath=runpath[-1] if runpath else None,
        fatbins=tuple(found),
        modules=modules,
        nvrtc=tuple(embedded),
        exports_cxx_runtime=exports_cxx,
        version_needs=elf.version_needs(),
        opens=opens,
        names=names,
    )


def _cubin(elf: _Elf, *, fatbins: bool) -> ElfReport:
    """A standalone cubin (flashinfer-cubin 0.6.13 ships 15,970 of them, 1.8 GiB installed, which its package loads
    with cuModuleLoad): one CUDA module, the whole file, for the GPU its header names (`fatbin.cubin_entry`). Seen as
    a fatbin of one entry (section "") so that sizes, coverage and slim treat it as the device code it is; it has no
    dynamic section, and nothing in it is scanned for containers."""
    sections: dict[str, int] = {}
    arch_specific = False
    for sec in elf.sections:
        if sec.type not in (_SHT_NULL, _SHT_NOBITS):
            sections[sec.name] = sections.get(sec.name, 0) + sec.size
            if sec.name == COMPAT_SECTION:
                arch_specific = compat_arch_specific(elf.buf, sec.offset, sec.offset + sec.size, where=elf.name)
    entry = cubin_entry(elf.abi_version, elf.flags, elf.n, compat_arch_specific=arch_specific)
    module = Fatbin(offset=0, size=elf.n, entries=(entry,), kernels=entry.target is None or elf.defines_code())
    return ElfReport(
        name=elf.name,
        size=elf.n,
        kind="cubin",
        machine=elf.machine,
        sections=sections,
        soname=None,
        needed=(),
        rpath=None,
        runpath=None,
        fatbins=(module,) if fatbins else (),
    )


# A shared-object name as a whole C string: "libcublas.so.12", "nvshmem_bootstrap_mpi.so", a printf template
# "nvshmem_transport_%s.so.%d". Found from each ".so" (a literal the regular-expression engine searches fast: 26 ms
# over NVSHMEM's whole 47 MiB library) back to the string's start; a per-name search of the CUDA table took 0.6 s on
# cuDNN's 23 MiB .rodata.
_SO_AT = re.compile(rb"\.so(?=[\x00.])")
_SO_NAME = re.compile(rb"[A-Za-z0-9_+%-][A-Za-z0-9_.+%-]{0,127}?\.so(?:\.(?:\d+|%d|%u))*")
_CUDA_SONAMES = frozenset(lib.soname for lib in RUNTIME_LIBS)
MAX_NAMES = 256  # names kept per file


def _opened_libraries(
    data: Buffer, elf: _Elf, needed: list[str], soname: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(CUDA libraries of the table, other shared-object names) the file names as whole C strings in .rodata and does
    not need, when it imports dlopen: what it may open at run time. dlopen is looked up only when a name is found."""
    found: set[str] = set()
    for sec in elf.sections:
        # An SHT_NULL header's offset is no file position (a huge one overflowed the search below): skipped too.
        if sec.name != ".rodata" or sec.type in (_SHT_NULL, _SHT_NOBITS):
            continue
        lo, hi = sec.offset, sec.offset + sec.size
        for m in _SO_AT.finditer(data, lo, hi):
            start = data.rfind(b"\x00", max(lo, m.start() - 128), m.start())
            end = data.find(b"\x00", m.start(), hi)
            if start < 0 or end < 0:
                continue
            word = bytes(data[start + 1 : end])
            if _SO_NAME.fullmatch(word):
                found.add(word.decode())
                if len(found) > 4 * MAX_NAMES:
                    break
    found.difference_update(needed)
    found.discard(soname or "")
    if not found or not elf.undefined(lambda n: n == "dlopen"):
        return (), ()
    cuda = tuple(sorted(found & _CUDA_SONAMES))
    return cuda, tuple(sorted(found - _CUDA_SONAMES)[:MAX_NAMES])


def _scanned(sec: Section) -> bool:
    """Sections searched for containers among other data: allocated (loaded with the library, where the CUDA runtime
    can register them from), holding file bytes, not code."""
    return sec.type == _SHT_PROGBITS and bool(sec.flags & _SHF_ALLOC) and not sec.flags & _SHF_EXECINSTR


def _refuse_overlaps(name: str, found: list[Fatbin]) -> None:
    """No byte may belong to two containers (`found` sorted by offset): sections over the same bytes, or a container
    inside another's entries, would count code twice and let an edit of one corrupt the other."""
    for a, b in itertools.pairwise(found):
        if b.offset < a.offset + a.size:
            how = "is the same container as" if b.offset == a.offset else "starts inside"
            raise BadInputError(
                f"{name}: fatbin at {b.offset:#x} [{b.section or 'file'}] {how} the fatbin at {a.offset:#x} "
                f"[{a.section or 'file'}] ({a.size} bytes): no byte may belong to two CUDA modules"
            )


# Sections the reader parses as the file's structure: string tables, the dynamic section, symbols, symbol versions.
_STRUCTURE = frozenset({_SHT_STRTAB, _SHT_DYNAMIC, _SHT_DYNSYM, _SHT_GNU_VERDEF, _SHT_GNU_VERNEED, _SHT_GNU_VERSYM})


def _refuse_strict_over_others(name: str, sections: list[Section], found: list[Fatbin]) -> None:
    """A fatbin section is read strictly (containers back to back, zeros between): one that lies over bytes of a
    container another section holds reads only while those bytes happen to be zeros, and an edit of that container
    (slim) would turn it into a section no reader accepts. The same holds for a section the reader parses as
    structure (.dynstr, .dynamic, symbol versions) lying in a container's bytes: hypothesis moved .dynstr into one,
    its strings read, and slim's edit of the container left a string without its end. No linker writes either, so
    both are refused. `found` is sorted by offset."""
    starts = [fb.offset for fb in found]
    for sec in sections:
        structure = sec.type in _STRUCTURE  # never holds a container: any overlap counts, whatever the names say
        if not (structure or sec.name in FATBIN_SECTIONS) or sec.type in (_SHT_NULL, _SHT_NOBITS) or not sec.size:
            continue
        lo, hi = sec.offset, sec.offset + sec.size
        i = max(0, bisect.bisect_right(starts, lo) - 1)
        for fb in found[i:]:
            if fb.offset >= hi:
                break
            if fb.offset + fb.size > lo and (structure or fb.section != sec.name):
                raise BadInputError(
                    f"{name}: section {sec.name} ({lo:#x}-{hi:#x}) lies over the fatbin at {fb.offset:#x} "
                    f"[{fb.section or 'file'}] ({fb.size} bytes): no byte may belong to two CUDA modules"
                )


def _wrapped_fatbins(
    data: Buffer,
    name: str,
    wrappers: list[tuple[int, int]],
    found: list[Fatbin],
    sections: list[Section],
    budget: RecordBudget,
) -> list[Fatbin]:
    """Fatbins that wrappers point at and no section read gave (e.g. one in a section that is not searched), each
    bounded by the section that holds it. A wrapper pointing inside a container found before is refused: the
    runtime would register bytes of one module as another. `found` is sorted by offset.

    Linear in wrappers and containers: wrappers are visited by file offset, containers and sections are bisected.
    """
    starts = [fb.offset for fb in found]
    spans = sorted((s.offset, s.offset + s.size, s.name) for s in sections if s.type not in (_SHT_NULL, _SHT_NOBITS))
    sec_starts = [a for a, _b, _n in spans]
    out: list[Fatbin] = []
    reach, reach_at = -1, -1  # the furthest end of the containers given by wrappers so far, and where that one starts
    for at in sorted({at for at, _v in wrappers}):
        i = bisect.bisect_right(starts, at) - 1
        if i >= 0 and at == starts[i]:
            continue  # the wrapper registers a container a section read found
        inside = (found[i].offset, found[i].size) if i >= 0 and at < found[i].offset + found[i].size else None
        if inside is None and at < reach:
            inside = (reach_at, reach - reach_at)
        if data[at : at + 4] != MAGIC_BYTES:
            continue
        if inside is not None:
            raise BadInputError(
                f"{name}: a CUDA module wrapper points at a fatbin at {at:#x}, inside the fatbin at {inside[0]:#x} "
                f"({inside[1]} bytes): no byte may belong to two CUDA modules"
            )
        j = bisect.bisect_right(sec_starts, at) - 1
        end = spans[j][1] if j >= 0 and at < spans[j][1] else len(data)
        section = spans[j][2] if j >= 0 and at < spans[j][1] else ""
        fb = parse_fatbin(data, at, where=f"{name} [fatbin at {at:#x}]", end=end, budget=budget, section=section)
        out.append(fb)
        reach, reach_at = at + fb.size, at
    return out


def defines_symbol(data: Buffer, symbol: str, name: str) -> bool:
    """Whether ELF `data` defines `symbol` in its dynamic symbol table (an extension module defines PyInit_<module>)."""
    return _Elf(data, name).defines(symbol)


def undefined_symbols(data: Buffer, name: str, keep: Callable[[str], bool]) -> frozenset[str]:
    """The dynamic symbols ELF `data` imports whose names `keep` accepts (slimwheel.torchext: torch's)."""
    return _Elf(data, name).undefined(keep)


def read_elf_file(path: Path, name: str, *, fatbins: bool = True) -> ElfReport | None:
    """`read_elf` of a regular file on disk, mapped (a 2 GB library costs no memory), or None when it does not start
    with the ELF magic (repair's scan of an unpacked wheel). `name` is its path in the wheel, for messages."""
    with mapped_file(path, name) as buf:
        if buf[:4] != ELF_MAGIC:
            return None
        return read_elf(buf, name, fatbins=fatbins)


def file_dynamic_names(path: Path, name: str, *, defined: bool) -> frozenset[str]:
    """The dynamic symbols a file on disk defines (`defined`) or imports; () for a file that is not ELF."""
    with mapped_file(path, name) as buf:
        if buf[:4] != ELF_MAGIC:
            return frozenset()
        return _Elf(buf, name).dynamic_names(lambda _n: True, defined=defined)


def file_version_definitions(path: Path, name: str) -> tuple[VersionDef, ...]:
    """`version_definitions` of the file at `path`, mapped rather than read; () when it is not ELF."""
    with mapped_file(path, name) as buf:
        if buf[:4] != ELF_MAGIC:
            return ()
        return _Elf(buf, name).version_definitions()


def file_defines_symbol(path: Path, symbol: str, name: str) -> bool:
    with mapped_file(path, name) as buf:
        return defines_symbol(buf, symbol, name)


def embedded_sources(data: bytes | memoryview, name: str) -> tuple[EmbeddedSources, ...]:
    """The records of an ELF file's `slimwheel_nvrtc` section; () for an ELF without one (or not an ELF). Read by
    this module, the one ELF reader (it fills `ElfReport.nvrtc`)."""
    if bytes(memoryview(data)[:4]) != ELF_MAGIC:
        return ()
    return read_elf(data if isinstance(data, bytes) else bytes(data), name, fatbins=False).nvrtc
