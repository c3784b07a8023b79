"""The tables of one ELF file, read for `inspect.elf` (the one ELF reader): the header, the program and section
headers, strings, and the dynamic array as the system loader reads it (`ElfFile.dynamic`), which the section view
must agree with. Every table must lie inside the file and every string end within its table and a bound."""

from __future__ import annotations

import bisect
import functools
import itertools
import struct
from dataclasses import dataclass, replace
from typing import Literal

from slimwheel.errors import BadInputError
from slimwheel.inspect.fatbin import EM_CUDA
from slimwheel.inspect.files import ELF_MAGIC, Buffer

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


SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_DYNAMIC, SHT_NOBITS, SHT_DYNSYM = 0, 1, 2, 3, 6, 8, 11
STT_FUNC = 2
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF


SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF
_PT_LOAD, _PT_DYNAMIC = 1, 2
_PAGE = 4096  # the smallest page a loader maps with
_DT_NULL, _DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 14, 15, 29
_DT_STRTAB, _DT_SYMTAB = 5, 6
_DT_VERSYM, _DT_VERDEF, _DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
# The tables the loader finds through the dynamic segment, and the section type that holds each for this reader: the
# two views must name the same bytes (`ElfFile.loader_dynamic`).
_TABLE_SECTION = {
    _DT_STRTAB: SHT_STRTAB,
    _DT_SYMTAB: SHT_DYNSYM,
    _DT_VERSYM: SHT_GNU_VERSYM,
    _DT_VERDEF: SHT_GNU_VERDEF,
    _DT_VERNEED: SHT_GNU_VERNEED,
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


class ElfFile:
    """The parsed header, section and segment tables of an ELF file held in `buf`; methods read the rest."""

    def __init__(self, buf: Buffer, name: str) -> None:
        self.buf, self.name, self.n = buf, name, len(buf)
        self.string_bytes = 0
        if buf[:4] != ELF_MAGIC:
            raise BadInputError(f"{name}: not an ELF file (starts with {bytes(buf[:4])!r})")
        if self.n < 16:
            raise self.bad(f"truncated ELF file: {self.n} bytes, fewer than the 16 of its identification")
        layout = _LAYOUTS.get((buf[4], buf[5]))
        if layout is None:
            raise self.bad(f"unknown ELF class {buf[4]} or byte order {buf[5]}")
        self.lay = layout
        if self.n < 16 + layout.header.size:
            raise self.bad(f"truncated ELF file: the header needs {16 + layout.header.size} bytes, only {self.n}")
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

    def bad(self, problem: str) -> BadInputError:
        return BadInputError(f"{self.name}: {problem}")

    def _table(self, what: str, off: int, entsize: int, count: int, need: int) -> None:
        if count and entsize < need:
            raise self.bad(f"malformed ELF file: {what} entries of {entsize} bytes (at least {need} needed)")
        if off + entsize * count > self.n:
            raise self.bad(f"truncated ELF file: {what} end past the file's {self.n} bytes")

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
        if shstrndx == SHN_XINDEX:
            shstrndx = first.link
        self._table("section headers", shoff, shentsize, shnum, self.lay.section.size)
        raw = [self._raw_section(shoff, shentsize, i) for i in range(shnum)]
        names = raw[shstrndx] if 0 < shstrndx < shnum else None
        cache: dict[str, str] = {}  # sections sharing a name offset cost one string
        out = []
        for i, s in enumerate(raw):
            name = ""
            if names is not None:
                name = cache.get(s.name) or cache.setdefault(s.name, self.string(names, int(s.name), "section name"))
            if s.type not in (SHT_NULL, SHT_NOBITS) and s.offset + s.size > self.n:
                raise self.bad(
                    f"truncated ELF file: section {name or i} ({s.size} bytes at {s.offset:#x}) "
                    f"ends past the file's {self.n} bytes"
                )
            out.append(replace(s, name=name))
        return out

    def string(self, table: Section, at: int, what: str, limit: int = MAX_STRING) -> str:
        """A NUL-terminated string at `at` of a string table, which must end inside the table and `limit` bytes."""
        if table.type == SHT_NOBITS or table.offset + table.size > self.n:
            raise self.bad(f"malformed ELF file: the string table of a {what} lies outside the file")
        if at >= table.size:
            raise self.bad(f"malformed ELF file: a {what} starts at {at}, past its string table's {table.size} bytes")
        start = table.offset + at
        stop = table.offset + min(table.size, at + limit)
        end = self.buf.find(b"\0", start, stop)
        if end < 0:
            raise self.bad(f"malformed ELF file: a {what} does not end inside its string table or {limit} bytes")
        self.string_bytes += end - start
        if self.string_bytes > MAX_STRING_BYTES:
            raise self.bad(f"malformed ELF file: its strings add up to more than {MAX_STRING_BYTES} bytes")
        return bytes(self.buf[start:end]).decode("utf-8", errors="replace")

    def linked_table(self, sec: Section) -> Section:
        if not 0 < sec.link < len(self.sections):
            raise self.bad(f"malformed ELF file: section {sec.name} links to no string table (index {sec.link})")
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
                raise self.bad(
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
            raise self.bad(f"malformed ELF file: {len(self.dynamic_segments)} PT_DYNAMIC segments (one at most)")
        if not self.sections or not any(s.name for s in self.sections):
            what = "no section headers" if not self.sections else "no section names"
            raise self.bad(
                f"it has a dynamic segment, which the system loader reads, and {what}: its dependencies, search paths "
                "and device code cannot be checked against what the loader sees"
            )
        for (a, a_size, _o), (b, _s, _p) in itertools.pairwise(self.loads):
            if b < a + a_size:
                raise self.bad(f"malformed ELF file: PT_LOAD segments at {a:#x} and {b:#x} overlap")
        for vaddr, _s, offset in self.loads:
            # glibc refuses a PT_LOAD whose address and offset differ within a page: it cannot map it
            if (vaddr - offset) % _PAGE:
                raise self.bad(
                    f"malformed ELF file: a PT_LOAD segment's address {vaddr:#x} and offset {offset:#x} "
                    "differ within a page"
                )
        vaddr, offset = self.dynamic_segments[0]
        at, end = self._mapped(vaddr, "the dynamic array")
        if at != offset:  # tools that read the segment by its offset would see another array than the loader
            raise self.bad(
                f"malformed ELF file: PT_DYNAMIC's address {vaddr:#x} maps to offset {at:#x}, not its own {offset:#x}"
            )
        dyn = self.lay.dyn
        entries: dict[int, int] = {}  # the last value of each tag, as the loader keeps it
        strings: list[tuple[int, int]] = []  # (tag, string offset) of NEEDED, SONAME, RPATH and RUNPATH, in order
        while True:
            if at + dyn.size > end:
                raise self.bad("malformed ELF file: the dynamic array runs past its segment's bytes without DT_NULL")
            tag, val = dyn.unpack_from(self.buf, at)
            at += dyn.size
            if tag == _DT_NULL:
                break
            entries[tag] = val
            if tag in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
                strings.append((tag, val))
                if len(strings) > MAX_DYNAMIC_STRINGS:
                    raise self.bad(
                        f"malformed ELF file: more than {MAX_DYNAMIC_STRINGS} DT_NEEDED/SONAME/RPATH/RUNPATH entries"
                    )
        for tag, sh_type in _TABLE_SECTION.items():
            if tag in entries:
                off, _end = self._mapped(entries[tag], f"dynamic tag {tag:#x}'s table")
                if not any(s.type == sh_type and s.offset == off for s in self.sections):
                    raise self.bad(
                        f"its section headers disagree with its dynamic segment, which the system loader reads: "
                        f"no section of type {sh_type:#x} holds the table dynamic tag {tag:#x} points at ({off:#x})"
                    )
        if strings and _DT_STRTAB not in entries:
            raise self.bad("malformed ELF file: its dynamic array names libraries but has no DT_STRTAB")
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
        raise self.bad(f"malformed ELF file: {what} (address {vaddr:#x}) lies in no PT_LOAD segment's file bytes")

    def _mapped_string(self, vaddr: int, limit: int) -> str:
        """A NUL-terminated string at address `vaddr`, which must end inside its segment's file bytes and `limit`."""
        start, end = self._mapped(vaddr, "a dynamic string")
        stop = self.buf.find(b"\0", start, min(end, start + limit))
        if stop < 0:
            raise self.bad(f"malformed ELF file: a dynamic string does not end inside its segment or {limit} bytes")
        self.string_bytes += stop - start
        if self.string_bytes > MAX_STRING_BYTES:
            raise self.bad(f"malformed ELF file: its strings add up to more than {MAX_STRING_BYTES} bytes")
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
            if sec.type != SHT_DYNAMIC:
                continue
            strings = self.linked_table(sec)
            cache: dict[int, str] = {}  # many tags naming one string cost one string
            for i in range(sec.size // dyn.size):
                tag, val = dyn.unpack_from(self.buf, sec.offset + i * dyn.size)
                if tag == _DT_NULL:
                    break
                if tag not in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH):
                    continue
                tags += 1
                if tags > MAX_DYNAMIC_STRINGS:
                    raise self.bad(
                        f"malformed ELF file: more than {MAX_DYNAMIC_STRINGS} DT_NEEDED/SONAME/RPATH/RUNPATH entries"
                    )
                text = cache.get(val)
                if text is None:
                    search = tag in (_DT_RPATH, _DT_RUNPATH)
                    text = cache[val] = self.string(
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

    def file_offset(self, vaddr: int) -> int | None:
        """The file offset a PT_LOAD segment maps address `vaddr` from, None when none does."""
        i = bisect.bisect_right(self.loads, (vaddr, float("inf"), 0)) - 1
        if i >= 0:
            start, size, offset = self.loads[i]
            if vaddr < start + size:
                return vaddr - start + offset
        return None
