"""The dynamic-linking facts of an ELF file (SONAME, NEEDED, RPATH, RUNPATH, exported symbols) as dependency rules
need them, from a file on disk (repair's unpacked wheel) or from an `ElfReport` of `inspect.elf` (a wheel read in
memory): one record type, so the rules in `slimwheel.deps` judge both the same way.

Files are read by `inspect.elf` (one ELF reader, over a mapping: a 2 GB library costs no memory). The symbol tables
with their GNU versions (`imports_by_library`, for requirement floors) are read with pyelftools, which seeks.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from slimwheel.errors import BadInputError
from slimwheel.rpath import split_search_path

if TYPE_CHECKING:
    from slimwheel.inspect.elf import ElfReport

# pyelftools signals malformed input with many exception types; all mean the same to a user.
_MALFORMED = (
    ELFError,
    ConstructError,
    ValueError,
    KeyError,
    IndexError,
    UnicodeDecodeError,
    AttributeError,
    TypeError,
    AssertionError,
    OverflowError,
)


@dataclass(frozen=True, kw_only=True)
class ElfInfo:
    """The dynamic section facts of one ELF file in a wheel. Search paths keep empty entries: the loader reads an
    empty entry as the current directory, and `slimwheel.rpath.unsafe_entries` must see it."""

    path: str  # posix path inside the wheel
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # Libraries it opens at run time rather than through DT_NEEDED: the NVRTC of embedded kernel sources
    # (inspect.nvrtc). Required and preloaded like needed ones, never searched for by the dynamic loader.
    loads: tuple[str, ...] = ()
    # It carries libstdc++ (linked statically) and exports it: see deps.cxx_runtime_problem.
    exports_cxx_runtime: bool = False

    @property
    def search_path(self) -> tuple[str, ...]:
        """The loader ignores DT_RPATH when DT_RUNPATH exists."""
        return self.runpath or self.rpath

    @classmethod
    def from_report(cls, elf: ElfReport) -> ElfInfo:
        return cls(
            path=elf.name,
            soname=elf.soname,
            needed=elf.needed,
            rpath=split_search_path(elf.rpath),
            runpath=split_search_path(elf.runpath),
            loads=tuple(dict.fromkeys(r.nvrtc_soname for r in elf.nvrtc)),
            exports_cxx_runtime=elf.exports_cxx_runtime,
        )


def carried_names(elfs: Iterable[ElfInfo]) -> set[str]:
    """The names a DT_NEEDED entry can find inside the wheel itself: every ELF's SONAME and file name."""
    out: set[str] = set()
    for i in elfs:
        out.add(posixpath.basename(i.path))
        if i.soname:
            out.add(i.soname)
    return out


def read_dynamic(path: Path, name: str) -> ElfInfo | None:
    """The facts of the ELF file at `path` (`name`: its path in the wheel, for messages and the record), or None for
    a file that is not ELF; read by `inspect.elf` (mapped, bounded, lies refused), fatbins skipped."""
    from slimwheel.inspect.elf import read_elf_file

    report = read_elf_file(path, name, fatbins=False)
    return None if report is None else ElfInfo.from_report(report)


def exports_symbol(path: Path, symbol: str, *, name: str | None = None) -> bool:
    """Whether an ELF file defines `symbol` in its dynamic symbol table (an extension module defines
    PyInit_<module>)."""
    from slimwheel.inspect.elf import file_defines_symbol

    return file_defines_symbol(path, symbol, name or str(path))


def _symbols(path: Path, *, defined: bool) -> frozenset[str]:
    try:
        with path.open("rb") as f:
            dynsym = ELFFile(f).get_section_by_name(".dynsym")
            if not isinstance(dynsym, SymbolTableSection):
                return frozenset()
            return frozenset(
                s.name
                for s in dynsym.iter_symbols()
                if s.name and (s["st_shndx"] != "SHN_UNDEF") == defined and s["st_info"]["bind"] != "STB_LOCAL"
            )
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from None
    except _MALFORMED as e:
        raise BadInputError(f"{path}: cannot read ELF symbols ({type(e).__name__}: {e})") from None


def exported_symbols(path: Path) -> frozenset[str]:
    """The names an ELF file defines in its dynamic symbol table (what a library offers)."""
    return _symbols(path, defined=True)


def imports_by_library(path: Path) -> dict[str, frozenset[str]]:
    """The undefined dynamic symbols of an ELF file by the library its symbol version names (GNU symbol versioning:
    a symbol of libcublas.so.13 is bound to version `libcublas.so.13` in `.gnu.version_r`). Symbols without a
    version are under the key "" (the linker records none when the library it linked had no version nodes)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            dynsym = elf.get_section_by_name(".dynsym")
            if not isinstance(dynsym, SymbolTableSection):
                return {}
            file_of: dict[int, str] = {}
            for sec in elf.iter_sections():
                if isinstance(sec, GNUVerNeedSection):
                    for verneed, auxes in sec.iter_versions():
                        for aux in auxes:
                            file_of[int(aux["vna_other"])] = str(verneed.name)
            versym = next((sec for sec in elf.iter_sections() if isinstance(sec, GNUVerSymSection)), None)
            out: dict[str, set[str]] = {}
            for i, sym in enumerate(dynsym.iter_symbols()):
                if not sym.name or sym["st_shndx"] != "SHN_UNDEF":
                    continue
                ndx = versym.get_symbol(i)["ndx"] if versym is not None else 0
                key = file_of.get(ndx, "") if isinstance(ndx, int) else ""
                out.setdefault(key, set()).add(sym.name)
            return {k: frozenset(v) for k, v in out.items()}
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from None
    except _MALFORMED as e:
        raise BadInputError(f"{path}: cannot read ELF symbol versions ({type(e).__name__}: {e})") from None


def scan_elfs(root: Path) -> dict[str, ElfInfo]:
    """Every ELF file under root (an unpacked wheel), by its posix path relative to root."""
    out: dict[str, ElfInfo] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            rel = p.relative_to(root).as_posix()
            info = read_dynamic(p, rel)
            if info is not None:
                out[rel] = info
    return out
