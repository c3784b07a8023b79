"""The one ELF reader of slimwheel: headers, sections, the dynamic section, dynamic symbols and fatbins.

It reads straight from a buffer (bytes in memory, or an mmap of a file or of a spooled zip member) with `struct`, so
that hostile files cost linear time and bounded memory: every table must lie inside the file, every string ends
within its string table and `MAX_STRING` bytes (`MAX_SEARCH_PATH` for RPATH and RUNPATH), counts are bounded
(`MAX_DYNAMIC_STRINGS`, `MAX_WRAPPERS`, the fatbin reader's `MAX_RECORDS`), and no step revisits earlier work
(wrappers are resolved through sorted tables).
pyelftools, which re-reads a string per use and a segment table per address, is used only for its names of
machine numbers. Both ELF classes and byte orders are read.

SONAME, NEEDED, RPATH and RUNPATH are read as the system loader reads them: from the PT_DYNAMIC segment, through the
PT_LOAD segments that map its addresses (`ElfFile.dynamic`). The rest (device code, symbols, versions) is found through
section headers, which the loader never reads; so a file with a dynamic segment must have a section view that says
the same, or it is refused: zeroed section headers hid NEEDED, RPATH and device code while the loader loaded the
planted library (issue 41, S2).

Repair reads the same way: `read_elf_file(path, name, fatbins=False)` for an unpacked file's dynamic facts, an
extension module's PyInit_<module> among them (`ElfReport.python_module`).

The parts: `elffile` (header, segments, sections, strings, the dynamic array in both views), `elfsyms` (dynamic
symbols and symbol versions); here, the report of a file and where its device code lies.
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

from slimwheel.cuda.libs import RUNTIME_LIBS
from slimwheel.errors import BadInputError
from slimwheel.inspect.elffile import (
    MAX_DYNAMIC_STRINGS,
    MAX_SEARCH_PATH,
    MAX_STRING,
    MAX_STRING_BYTES,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_NOBITS,
    SHT_NULL,
    SHT_PROGBITS,
    SHT_STRTAB,
    ElfFile,
    ElfKind,
    Section,
    machine_name,
)
from slimwheel.inspect.elfsyms import (
    MAX_VERSION_NEEDS,
    VersionDef,
    VersionNeed,
    defines,
    defines_code,
    dynamic_names,
    undefined,
    version_definitions,
    version_needs,
)
from slimwheel.inspect.fatbin import (
    COMPAT_SECTION,
    MAGIC_BYTES,
    Fatbin,
    FatbinEntry,
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

__all__ = [
    "CXX_RUNTIME_MARKER",
    "FATBIN_SECTIONS",
    "MAX_DYNAMIC_STRINGS",
    "MAX_NAMES",
    "MAX_SEARCH_PATH",
    "MAX_STRING",
    "MAX_STRING_BYTES",
    "MAX_VERSION_NEEDS",
    "MAX_WRAPPERS",
    "WRAPPER_MAGIC",
    "ElfKind",
    "ElfReport",
    "Section",
    "VersionDef",
    "VersionNeed",
    "embedded_sources",
    "file_dynamic_names",
    "file_version_definitions",
    "is_elf",
    "machine_name",
    "read_elf",
    "read_elf_file",
    "undefined_symbols",
]


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
    # It defines PyInit_<its file name up to the first dot>: an extension module Python imports, whether its name
    # carries an ABI tag or not (triton 3.9's _C/libtriton.so), not a library the package opens with ctypes.
    python_module: bool = False

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
    def code_entries(self) -> tuple[FatbinEntry, ...]:
        """The entries of its modules that define kernels (`Fatbin.kernels`): what runs on a GPU, and so what sets
        coverage's targets and the driver floors; a module with no kernels sets none."""
        return tuple(e for fb in self.fatbins if fb.kernels for e in fb.entries)

    @property
    def kernelless_fatbins(self) -> tuple[Fatbin, ...]:
        """Containers with loadable members none of which defines a function (`Fatbin.kernels`): "no kernels"."""
        return tuple(fb for fb in self.fatbins if not fb.kernels)


# std::locale::classic(), defined by libstdc++ only (libc++ mangles it under std::__1): a file that defines it in its
# dynamic symbol table carries libstdc++ itself and exports it.
CXX_RUNTIME_MARKER = "_ZNSt6locale7classicEv"


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def cubin_defines_code(payload: bytes) -> bool:
    """Whether a fatbin member's cubin defines a function (`elfsyms.defines_code`); a payload that is no readable ELF
    file proves nothing, so it counts as code."""
    try:
        return defines_code(ElfFile(payload, "cubin"))
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
    elf = ElfFile(data, name)
    if elf.kind == "cubin":
        return _cubin(elf, fatbins=fatbins)
    sections: dict[str, int] = {}
    found: list[Fatbin] = []
    wrappers: list[tuple[int, int]] = []  # (file offset the fatbin address maps to, version)
    modules = 0
    budget = RecordBudget(name)
    embedded: list[EmbeddedSources] = []
    for sec in elf.sections:
        if sec.type in (SHT_NULL, SHT_NOBITS):
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
    exports_cxx = not (soname or "").startswith("libstdc++.so") and defines(elf, CXX_RUNTIME_MARKER)
    stem = name.rsplit("/", 1)[-1].split(".", 1)[0]
    python_module = elf.kind == "shared" and stem.isidentifier() and defines(elf, "PyInit_" + stem)
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
        version_needs=version_needs(elf),
        opens=opens,
        names=names,
        python_module=python_module,
    )


def _cubin(elf: ElfFile, *, fatbins: bool) -> ElfReport:
    """A standalone cubin (flashinfer-cubin 0.6.13 ships 15,970 of them, 1.8 GiB installed, which its package loads
    with cuModuleLoad): one CUDA module, the whole file, for the GPU its header names (`fatbin.cubin_entry`). Seen as
    a fatbin of one entry (section "") so that sizes, coverage and slim treat it as the device code it is; it has no
    dynamic section, and nothing in it is scanned for containers."""
    sections: dict[str, int] = {}
    arch_specific = False
    for sec in elf.sections:
        if sec.type not in (SHT_NULL, SHT_NOBITS):
            sections[sec.name] = sections.get(sec.name, 0) + sec.size
            if sec.name == COMPAT_SECTION:
                arch_specific = compat_arch_specific(elf.buf, sec.offset, sec.offset + sec.size, where=elf.name)
    entry = cubin_entry(elf.abi_version, elf.flags, elf.n, compat_arch_specific=arch_specific)
    module = Fatbin(offset=0, size=elf.n, entries=(entry,), kernels=entry.target is None or defines_code(elf))
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
    data: Buffer, elf: ElfFile, needed: list[str], soname: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(CUDA libraries of the table, other shared-object names) the file names as whole C strings in .rodata and does
    not need, when it imports dlopen: what it may open at run time. dlopen is looked up only when a name is found."""
    found: set[str] = set()
    for sec in elf.sections:
        # An SHT_NULL header's offset is no file position (a huge one overflowed the search below): skipped too.
        if sec.name != ".rodata" or sec.type in (SHT_NULL, SHT_NOBITS):
            continue
        lo, hi = sec.offset, sec.offset + sec.size
        for m in _SO_AT.finditer(data, lo, hi):
            floor = max(lo, m.start() - 128)
            start = data.rfind(b"\x00", floor, m.start())
            end = data.find(b"\x00", m.start(), hi)
            if start < 0 and floor == lo:
                start = lo - 1  # no NUL before it in the section: the string is the section's first
            if start < 0 or end < 0:
                continue
            word = bytes(data[start + 1 : end])
            if _SO_NAME.fullmatch(word):
                found.add(word.decode())
                if len(found) > 4 * MAX_NAMES:
                    break
    found.difference_update(needed)
    found.discard(soname or "")
    if not found or not undefined(elf, lambda n: n == "dlopen"):
        return (), ()
    cuda = tuple(sorted(found & _CUDA_SONAMES))
    return cuda, tuple(sorted(found - _CUDA_SONAMES)[:MAX_NAMES])


def _scanned(sec: Section) -> bool:
    """Sections searched for containers among other data: allocated (loaded with the library, where the CUDA runtime
    can register them from), holding file bytes, not code."""
    return sec.type == SHT_PROGBITS and bool(sec.flags & SHF_ALLOC) and not sec.flags & SHF_EXECINSTR


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
_STRUCTURE = frozenset({SHT_STRTAB, SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM})


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
        if not (structure or sec.name in FATBIN_SECTIONS) or sec.type in (SHT_NULL, SHT_NOBITS) or not sec.size:
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
    spans = sorted((s.offset, s.offset + s.size, s.name) for s in sections if s.type not in (SHT_NULL, SHT_NOBITS))
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


def undefined_symbols(data: Buffer, name: str, keep: Callable[[str], bool]) -> frozenset[str]:
    """The dynamic symbols ELF `data` imports whose names `keep` accepts (slimwheel.torchext: torch's)."""
    return undefined(ElfFile(data, name), keep)


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
        return dynamic_names(ElfFile(buf, name), lambda _n: True, defined=defined)


def file_version_definitions(path: Path, name: str) -> tuple[VersionDef, ...]:
    """`version_definitions` of the file at `path`, mapped rather than read; () when it is not ELF."""
    with mapped_file(path, name) as buf:
        if buf[:4] != ELF_MAGIC:
            return ()
        return version_definitions(ElfFile(buf, name))


def embedded_sources(data: bytes | memoryview, name: str) -> tuple[EmbeddedSources, ...]:
    """The records of an ELF file's `slimwheel_nvrtc` section; () for an ELF without one (or not an ELF). Read by
    this module, the one ELF reader (it fills `ElfReport.nvrtc`)."""
    if bytes(memoryview(data)[:4]) != ELF_MAGIC:
        return ()
    return read_elf(data if isinstance(data, bytes) else bytes(data), name, fatbins=False).nvrtc
