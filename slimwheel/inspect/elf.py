"""ELF facts a wheel report needs, read with pyelftools from bytes already in memory.

Only headers are parsed by pyelftools (section headers, the dynamic section); big sections such as .nv_fatbin are
walked through a memoryview, never copied.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, replace

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from slimwheel.errors import BadInputError
from slimwheel.inspect.fatbin import MAGIC_BYTES, Fatbin, parse_fatbin, parse_fatbins

ELF_MAGIC = b"\x7fELF"
# Sections that hold fatbin containers: linked ELFs and host objects (.nv_fatbin), -rdc objects (__nv_relfatbin).
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# The host-side wrapper the CUDA runtime registers per module: u32 magic, u32 version, u64 fatbin address, u64 unused.
_WRAPPER = struct.Struct("<IIQQ")
WRAPPER_MAGIC = 0x466243B1
_DYN_STRINGS = {"DT_NEEDED": "needed", "DT_SONAME": "soname", "DT_RPATH": "rpath", "DT_RUNPATH": "runpath"}


@dataclass(frozen=True, kw_only=True)
class ElfReport:
    """One ELF file (shared library, extension module, executable or object) or a bare .fatbin file."""

    name: str
    size: int
    kind: str  # "shared" | "executable" | "relocatable" | "fatbin"
    machine: str
    sections: dict[str, int]  # name -> bytes in the file (NOBITS sections such as .bss are left out)
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    fatbins: tuple[Fatbin, ...]
    modules: int = 0  # .nvFatBinSegment wrappers: CUDA modules the runtime registers

    @property
    def fatbin_bytes(self) -> int:
        return sum(fb.size for fb in self.fatbins)


_KIND = {"ET_DYN": "shared", "ET_EXEC": "executable", "ET_REL": "relocatable"}


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(data: bytes | memoryview, name: str) -> ElfReport:
    """Parse ELF `data` (the whole file). Any malformation is a BadInputError naming `name`."""
    mv = memoryview(data)
    if bytes(mv[:4]) == MAGIC_BYTES:
        return ElfReport(
            name=name,
            size=len(mv),
            kind="fatbin",
            machine="",
            sections={},
            soname=None,
            needed=(),
            rpath=None,
            runpath=None,
            fatbins=parse_fatbins(mv, where=name),
        )
    if bytes(mv[:4]) != ELF_MAGIC:
        raise BadInputError(f"{name}: not an ELF file (starts with {bytes(mv[:4])!r})")
    try:
        return _read_elf(data if isinstance(data, bytes) else mv, mv, name)
    except BadInputError:
        raise
    except (
        ELFError,
        ConstructError,
        struct.error,
        ValueError,
        KeyError,
        IndexError,
        UnicodeDecodeError,
        AttributeError,
        TypeError,
        AssertionError,
        OverflowError,
    ) as e:
        # pyelftools signals malformed input with many exception types; all mean the same to a user.
        raise BadInputError(f"{name}: malformed or truncated ELF file ({type(e).__name__}: {e})") from None


def _read_elf(buf: bytes | memoryview, mv: memoryview, name: str) -> ElfReport:
    n = len(mv)
    # BytesIO shares a bytes object's buffer (no copy of a 200 MB library); a memoryview would be copied once.
    elf = ELFFile(io.BytesIO(buf))
    kind = _KIND.get(elf["e_type"], str(elf["e_type"]))
    if elf["e_shoff"] + elf["e_shnum"] * elf["e_shentsize"] > n:
        raise BadInputError(f"{name}: truncated ELF file: section headers end past the file's {n} bytes")
    sections: dict[str, int] = {}
    fatbins: list[Fatbin] = []
    covered: list[tuple[int, int]] = []
    soname = rpath = runpath = None
    needed: list[str] = []
    wrappers: list[tuple[int, int]] = []  # (version, address)
    for sec in elf.iter_sections():
        if sec["sh_type"] == "SHT_NOBITS" or sec["sh_type"] == "SHT_NULL":
            continue
        off, size = sec["sh_offset"], sec["sh_size"]
        if off + size > n:
            raise BadInputError(
                f"{name}: truncated ELF file: section {sec.name or '?'} ({size} bytes at {off:#x}) "
                f"ends past the file's {n} bytes"
            )
        sections[sec.name] = sections.get(sec.name, 0) + size
        if sec.name in FATBIN_SECTIONS:
            fatbins.extend(parse_fatbins(mv[off : off + size], where=f"{name} [{sec.name}]", base=off))
            covered.append((off, off + size))
        elif sec.name == ".nvFatBinSegment":
            for i in range(size // _WRAPPER.size):
                magic, version, addr, _u = _WRAPPER.unpack_from(mv, off + i * _WRAPPER.size)
                if magic == WRAPPER_MAGIC:
                    wrappers.append((version, addr))
        elif isinstance(sec, DynamicSection):
            for tag in sec.iter_tags():
                t = tag.entry.d_tag
                if t not in _DYN_STRINGS:
                    continue
                value = getattr(tag, _DYN_STRINGS[t])  # pyelftools resolves the string and sets it by tag name
                if t == "DT_NEEDED":
                    needed.append(value)
                elif t == "DT_SONAME":
                    soname = value
                elif t == "DT_RPATH":
                    rpath = value
                else:
                    runpath = value
    # A wrapper may point at a fatbin outside the usual sections (e.g. one embedded in .rodata by hand);
    # in relocatable objects the address is 0 and filled by a relocation, so there is nothing to follow.
    linked: set[int] = set()
    for version, addr in wrappers:
        at = _file_offset(elf, addr) if addr else None
        if at is None:
            continue
        if version == 2:
            linked.add(at)
        if any(a <= at < b for a, b in covered):
            continue
        if bytes(mv[at : at + 4]) == MAGIC_BYTES:
            fb = parse_fatbin(mv, at, where=f"{name} [fatbin at {addr:#x}]")
            fatbins.append(fb)
            covered.append((at, at + fb.size))
    if linked:
        fatbins = [replace(fb, device_link=True) if fb.offset in linked else fb for fb in fatbins]
    return ElfReport(
        name=name,
        size=n,
        kind=kind,
        machine=elf["e_machine"],
        sections=sections,
        soname=soname,
        needed=tuple(needed),
        rpath=rpath,
        runpath=runpath,
        fatbins=tuple(fatbins),
        modules=len(wrappers),
    )


def _file_offset(elf: ELFFile, vaddr: int) -> int | None:
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= vaddr < seg["p_vaddr"] + seg["p_filesz"]:
            return vaddr - seg["p_vaddr"] + seg["p_offset"]
    return None
