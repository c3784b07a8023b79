"""The dynamic-linking facts of an ELF file (SONAME, NEEDED, RPATH, RUNPATH, exported symbols) as dependency rules
need them, from a file on disk (repair's unpacked wheel) or from an `ElfReport` of `inspect.elf` (a wheel read in
memory): one record type, so the rules in `slimwheel.deps` judge both the same way.

Files are read by `inspect.elf` (one ELF reader, over a mapping: a 2 GB library costs no memory), the symbol tables
and their GNU versions (`imports_by_library`, for requirement floors) included.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slimwheel.fsutil import files_under
from slimwheel.rpath import split_search_path

if TYPE_CHECKING:
    from slimwheel.inspect.elf import ElfReport


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
    # CUDA libraries it opens with dlopen by name (ElfReport.opens): maybe optional, so they are noted, not required.
    opens: tuple[str, ...] = ()
    # Other shared-object names it may open by name (ElfReport.names): deps finds the wheel's plugins with them.
    names: tuple[str, ...] = ()
    # It carries libstdc++ (linked statically) and exports it: see deps.cxx_runtime_problem.
    exports_cxx_runtime: bool = False
    # It defines PyInit_<its name>: an extension module (ElfReport.python_module).
    python_module: bool = False

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
            opens=elf.opens,
            names=elf.names,
            exports_cxx_runtime=elf.exports_cxx_runtime,
            python_module=elf.python_module,
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


def exported_symbols(path: Path) -> frozenset[str]:
    """The names an ELF file defines in its dynamic symbol table (what a library offers)."""
    from slimwheel.inspect.elf import file_dynamic_names

    return file_dynamic_names(path, str(path), defined=True)


def imports_by_library(path: Path) -> dict[str, frozenset[str]]:
    """The undefined dynamic symbols of an ELF file by the library its symbol version names (GNU symbol versioning:
    a symbol of libcublas.so.13 is bound to version `libcublas.so.13` in `.gnu.version_r`). Symbols without a
    version are under the key "" (the linker records none when the library it linked had no version nodes). Read by
    `inspect.elf` (its version needs and its dynamic symbol table)."""
    from slimwheel.inspect.elf import file_dynamic_names, read_elf_file

    report = read_elf_file(path, str(path), fatbins=False)
    if report is None:
        return {}
    versioned: dict[str, set[str]] = {}
    for need in report.version_needs:
        versioned.setdefault(need.library, set()).update(need.symbols)
    out = {lib: frozenset(names) for lib, names in versioned.items()}
    rest = file_dynamic_names(path, str(path), defined=False) - set().union(*versioned.values())
    if rest:
        out[""] = frozenset(rest)
    return out


def scan_elfs(root: Path) -> dict[str, ElfInfo]:
    """Every ELF file under root (an unpacked wheel), by its posix path relative to root."""
    out: dict[str, ElfInfo] = {}
    for rel, entry in files_under(root, links=False):
        info = read_dynamic(Path(entry.path), rel)
        if info is not None:
            out[rel] = info
    return out
