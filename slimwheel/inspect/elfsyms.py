"""Dynamic symbols and GNU symbol versions of one ELF file (`elffile.ElfFile`): what it defines, what it takes from
other files, and the versions it requires of them or defines (the platform floor, torch's ABI)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from slimwheel.inspect.elffile import (
    SHN_UNDEF,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_SYMTAB,
    STT_FUNC,
    ElfFile,
    Section,
)

# Elf32/64_Verneed (vn_version, vn_cnt, vn_file, vn_aux, vn_next) and Vernaux (vna_hash, vna_flags, vna_other,
# vna_name, vna_next): the same 16 bytes in both classes.
_VERNEED = {o: struct.Struct(o + "HHIII") for o in "<>"}
_VERNAUX = {o: struct.Struct(o + "IHHII") for o in "<>"}
_VERSYM = {o: struct.Struct(o + "H") for o in "<>"}
_VERDEF = {o: struct.Struct(o + "HHHHIII") for o in "<>"}
_VERDAUX = {o: struct.Struct(o + "II") for o in "<>"}
_VER_FLG_BASE = 0x1
MAX_VERSION_NEEDS = 4096  # Vernaux entries of one file (real libraries need a few dozen)


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


def defines_code(elf: ElfFile) -> bool:
    """Whether a cubin defines a function: a `.text.<name>` section (ptxas gives each kernel and device function
    one) or a defined STT_FUNC symbol in its symbol table."""
    if any(s.name.startswith(".text.") for s in elf.sections):
        return True
    sym = elf.lay.sym
    for sec in elf.sections:
        if sec.type != SHT_SYMTAB or not sec.size:
            continue
        if sec.entsize != sym.size:
            return True  # a table that is no symbol table: nothing is proven
        for i in range(sec.size // sym.size):
            fields = sym.unpack_from(elf.buf, sec.offset + i * sym.size)
            info, shndx = (fields[1], fields[3]) if elf.lay.is64 else (fields[3], fields[5])
            if info & 0xF == STT_FUNC and shndx != SHN_UNDEF:
                return True
    return False


def defines(elf: ElfFile, symbol: str) -> bool:
    """Whether a dynamic symbol table defines `symbol` (st_shndx other than SHN_UNDEF)."""
    want = symbol.encode() + b"\0"
    sym = elf.lay.sym
    for sec in elf.sections:
        if sec.type != SHT_DYNSYM:
            continue
        _symbol_table(elf, sec)
        strings = elf.linked_table(sec)
        if strings.offset + strings.size > elf.n:
            raise elf.bad(f"malformed ELF file: the string table of {sec.name} lies outside the file")
        if elf.buf.find(want, strings.offset, strings.offset + strings.size) < 0:
            continue  # no symbol's name ends where that string would: one C search, not a walk of every symbol
        for i in range(sec.size // sym.size):
            fields = sym.unpack_from(elf.buf, sec.offset + i * sym.size)
            st_name, shndx = fields[0], (fields[3] if elf.lay.is64 else fields[5])
            if shndx == SHN_UNDEF or st_name + len(want) > strings.size:
                continue
            at = strings.offset + st_name
            if elf.buf[at : at + len(want)] == want:
                return True
    return False


def version_needs(elf: ElfFile) -> tuple[VersionNeed, ...]:
    """The versions required of other libraries and the undefined dynamic symbols bound to each (GNU symbol
    versioning: `.gnu.version_r` names library and version per index, `.gnu.version` gives each dynamic symbol
    its index). Chains are followed inside their section only, at most MAX_VERSION_NEEDS entries."""
    order = "<" if elf.buf[5] == 1 else ">"
    vn, vna = _VERNEED[order], _VERNAUX[order]
    by_index: dict[int, tuple[str, str]] = {}
    count = 0
    for sec in elf.sections:
        if sec.type != SHT_GNU_VERNEED:
            continue
        strings = elf.linked_table(sec)
        at, end, seen = sec.offset, sec.offset + sec.size, set()
        while sec.size:
            if at in seen or at + vn.size > end:
                raise elf.bad(f"malformed ELF file: a {sec.name} entry lies outside its section or loops")
            seen.add(at)
            _ver, cnt, file_off, aux, nxt = vn.unpack_from(elf.buf, at)
            library = elf.string(strings, file_off, "version library name")
            a = at + aux
            for _i in range(cnt):
                count += 1
                if count > MAX_VERSION_NEEDS or a + vna.size > end or a < sec.offset:
                    raise elf.bad(
                        f"malformed ELF file: {sec.name} has more than {MAX_VERSION_NEEDS} entries "
                        "or one outside the section"
                    )
                _h, _flags, other, name_off, anext = vna.unpack_from(elf.buf, a)
                by_index[other & 0x7FFF] = (library, elf.string(strings, name_off, "version name"))
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            at += nxt
    if not by_index:
        return ()
    bound: dict[int, list[str]] = {i: [] for i in by_index}
    sym = elf.lay.sym
    versym_secs = [s for s in elf.sections if s.type == SHT_GNU_VERSYM]
    for sec in elf.sections:
        if sec.type != SHT_DYNSYM:
            continue
        _symbol_table(elf, sec)
        strings = elf.linked_table(sec)
        versym = next(iter(versym_secs), None)
        if versym is None:
            break
        vs = _VERSYM[order]
        n = min(sec.size // sym.size, versym.size // vs.size)
        for i in range(n):
            fields = sym.unpack_from(elf.buf, sec.offset + i * sym.size)
            st_name, shndx = fields[0], (fields[3] if elf.lay.is64 else fields[5])
            if shndx != SHN_UNDEF or not st_name:
                continue
            (ndx,) = vs.unpack_from(elf.buf, versym.offset + i * vs.size)
            if (ndx & 0x7FFF) in bound:
                bound[ndx & 0x7FFF].append(elf.string(strings, st_name, "symbol name"))
    return tuple(
        VersionNeed(library=lib, version=ver, symbols=tuple(sorted(set(bound[i]))))
        for i, (lib, ver) in sorted(by_index.items(), key=lambda kv: kv[1])
    )


def version_definitions(elf: ElfFile) -> tuple[VersionDef, ...]:
    """The defined dynamic symbols bound to a version this file defines (its base version, the file's own name,
    left out), in symbol-table order. Chains are followed inside their section only."""
    order = "<" if elf.buf[5] == 1 else ">"
    vd, vda = _VERDEF[order], _VERDAUX[order]
    names: dict[int, str] = {}
    for sec in elf.sections:
        if sec.type != SHT_GNU_VERDEF:
            continue
        strings = elf.linked_table(sec)
        at, end = sec.offset, sec.offset + sec.size
        seen: set[int] = set()
        while sec.size:
            if at in seen or at + vd.size > end or len(seen) >= MAX_VERSION_NEEDS:
                raise elf.bad(f"malformed ELF file: a {sec.name} entry lies outside its section or loops")
            seen.add(at)
            _ver, flags, ndx, cnt, _hash, aux, nxt = vd.unpack_from(elf.buf, at)
            if cnt and not flags & _VER_FLG_BASE:
                if at + aux + vda.size > end:
                    raise elf.bad(f"malformed ELF file: a {sec.name} name lies outside its section")
                name_off, _anext = vda.unpack_from(elf.buf, at + aux)
                names[ndx & 0x7FFF] = elf.string(strings, name_off, "version name")
            if not nxt:
                break
            at += nxt
    versym = next((s for s in elf.sections if s.type == SHT_GNU_VERSYM), None)
    if not names or versym is None:
        return ()
    sym, vs = elf.lay.sym, _VERSYM[order]
    out: list[VersionDef] = []
    for sec in elf.sections:
        if sec.type != SHT_DYNSYM:
            continue
        _symbol_table(elf, sec)
        strings = elf.linked_table(sec)
        for i in range(1, min(sec.size // sym.size, versym.size // vs.size)):
            fields = sym.unpack_from(elf.buf, sec.offset + i * sym.size)
            st_name, shndx = fields[0], (fields[3] if elf.lay.is64 else fields[5])
            if shndx == SHN_UNDEF or not st_name:
                continue
            (ndx,) = vs.unpack_from(elf.buf, versym.offset + i * vs.size)
            version = names.get(ndx & 0x7FFF)
            if version is not None:
                name = elf.string(strings, st_name, "symbol name")
                out.append(VersionDef(symbol=name, version=version, default=not ndx & 0x8000))
    return tuple(out)


def _symbol_table(elf: ElfFile, sec: Section) -> None:
    """A dynamic symbol table's entries must be of the class's symbol size: another entry size is a lie."""
    if sec.size and sec.entsize != elf.lay.sym.size:
        raise elf.bad(f"malformed ELF file: {sec.name} has entries of {sec.entsize} bytes, not {elf.lay.sym.size}")


def undefined(elf: ElfFile, keep: Callable[[str], bool]) -> frozenset[str]:
    """The names its dynamic symbol tables take from other files (SHN_UNDEF, not local) for which `keep` holds;
    strings bounded as every string of the file is (MAX_STRING_BYTES)."""
    return dynamic_names(elf, keep, defined=False)


def dynamic_names(elf: ElfFile, keep: Callable[[str], bool], *, defined: bool) -> frozenset[str]:
    """The named, non-local symbols of its dynamic symbol tables that it defines (`defined`) or takes from other
    files (SHN_UNDEF), for which `keep` holds."""
    sym = elf.lay.sym
    out: set[str] = set()
    for sec in elf.sections:
        if sec.type != SHT_DYNSYM:
            continue
        _symbol_table(elf, sec)
        strings = elf.linked_table(sec)
        for i in range(1, sec.size // sym.size):
            fields = sym.unpack_from(elf.buf, sec.offset + i * sym.size)
            st_name = fields[0]
            info, shndx = (fields[1], fields[3]) if elf.lay.is64 else (fields[3], fields[5])
            if (shndx != SHN_UNDEF) != defined or st_name == 0 or info >> 4 == 0:  # other kind, unnamed, local
                continue
            name = elf.string(strings, st_name, "dynamic symbol name")
            if keep(name):
                out.add(name)
    return frozenset(out)
