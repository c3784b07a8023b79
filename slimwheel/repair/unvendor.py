"""Copies of CUDA libraries a wheel carries (`cuda.libs.vendored`): found by name, proven by content, removed, and the
files that needed them pointed at the nvidia-* wheels' SONAMEs.

A name proves nothing (issue 41, S3: a file named `libcudart-<hash>.so.12` that is not cudart was deleted, and the
repaired wheel failed at import with "undefined symbol"). A copy is removed only when its content shows it is the
library that replaces it: it defines symbols of that library, and every symbol the wheel's other files take from it
is one the replacement exports. A symbol is the library's when the major's first release exports it
(`cuda.libs.first_release_exports`) or when the copy defines it under the library's own GNU version node
(`Vendored.own_version_node`: NVIDIA versions every symbol of its libraries, and auditwheel leaves the nodes as
they are). Otherwise repair refuses the wheel, naming the file (exit 3).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo, exported_symbols, imports_by_library
from slimwheel.inspect.elf import file_version_definitions
from slimwheel.repair.source import RepairInput
from slimwheel.tools import replace_needed

log = logging.getLogger("slimwheel.repair")


@dataclass(frozen=True, kw_only=True)
class Unvendored:
    """A copy of a CUDA library the input wheel carried (auditwheel's `libcudart-5a077122.so.12.0.107`)."""

    file: str
    soname: str  # the name the wheel's files needed it by
    replaced_by: str | None  # the SONAME they need now (libcudart.so.12); None: dropped (libnvrtc-builtins)
    package: str  # the nvidia-* wheel that provides it
    compressed: int  # bytes in the input wheel
    installed: int
    release: str | None = None  # the package release its file name carries (12.0.107): the requirement's floor


def find_copies(root: Path, src: RepairInput) -> tuple[Unvendored, ...]:
    """The input's copies of CUDA libraries (unpacked under root), each with the SONAME that replaces it (of the
    wheel's CUDA major where the name fits two: libcurand.so.10), each proven by its content (module docstring)."""
    found = {p: v for p, info in src.elfs.items() if (v := cudalibs.vendored(p, info.soname)) is not None}
    if not found:
        return ()
    majors = {v.candidates[0].cuda_major for v in found.values() if len(v.candidates) == 1 and not v.companion}
    out = []
    for path, v in sorted(found.items()):
        lib = next((c for c in v.candidates if c.cuda_major in majors), v.candidates[-1])
        soname = src.elfs[path].soname or path.rsplit("/", 1)[-1]
        if why := _not_the_library(root, path, soname, v, lib, src.elfs, set(found)):
            raise BadInputError(
                f"{path}: named as a copy of {lib.soname} ({lib.package}), but {why}; repair leaves no wheel "
                "that would fail at import",
                hint="if it is a library of the project's own, give it a name of its own",
            )
        out.append(
            Unvendored(
                file=path,
                soname=soname,
                replaced_by=None if v.companion else lib.soname,
                package=lib.package,
                compressed=src.sizes[path][0],
                installed=src.sizes[path][1],
                release=None if v.companion else v.version,
            )
        )
    return tuple(out)


def _not_the_library(
    root: Path,
    path: str,
    soname: str,
    v: cudalibs.Vendored,
    lib: cudalibs.RuntimeLib,
    elfs: Mapping[str, ElfInfo],
    copies: set[str],
) -> str | None:
    """Why the copy at `path` is not the library `lib` by its content, or None when it is (module docstring)."""
    exports = exported_symbols(root / path)
    own = {d.symbol for d in file_version_definitions(root / path, path) if v.own_version_node(d.version)}
    known = first if not v.companion and (first := cudalibs.first_release_exports(lib)) is not None else frozenset()

    def foreign(names: set[str]) -> list[str]:
        return sorted(n for n in names if n not in own and n not in known)

    if not any(n in own or n in known for n in exports):
        return f"it defines none of that library's symbols (no symbol under its version node {lib.soname})"
    names = {soname, path.rsplit("/", 1)[-1]}
    for dep, info in sorted(elfs.items()):
        if dep in copies or not names & set(info.needed):
            continue
        by_library = imports_by_library(root / dep)
        # the version needs name the copy as NEEDED does, or still as the library (a link left them as they were)
        bound = names if lib.soname in info.needed else names | {lib.soname}
        versioned = set().union(*(by_library.get(n, frozenset()) for n in bound))
        if missing := sorted(versioned - exports):
            return f"{dep} takes {_some(missing)} from it, which it does not define"
        # unversioned imports it defines are the ones the loader binds to it (nothing the dependant needs earlier
        # defines them, or it would not have been linked against this file for them)
        if taken := foreign(versioned | (set(by_library.get("", frozenset())) & exports)):
            return f"{dep} takes {_some(taken)} from it, which {lib.package} does not export"
    return None


def _some(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def remove_copies(root: Path, src: RepairInput, copies: Sequence[Unvendored], wheel: Path) -> list[str]:
    """Remove the copies; every other ELF file that needs one (by its SONAME or by its file name) needs the nvidia-*
    wheels' SONAME instead. torchvision 0.26.0's image.so needs libnvjpeg.36e11081.so.13, the file whose SONAME is
    still libnvjpeg.so.13. Returns the files patched."""
    # an unrenamed copy is needed by the name that replaces it (libcudart.so.12): that NEEDED stays as it is
    changes = {
        name: u.replaced_by for u in copies for name in (u.soname, u.file.rsplit("/", 1)[-1]) if name != u.replaced_by
    }
    gone = {u.file for u in copies}
    patched: list[str] = []
    for path, info in src.elfs.items():
        if path in gone:
            continue
        mine = {old: new for old, new in changes.items() if old in info.needed}
        if mine:
            # a NEEDED the file already has under its new name is dropped rather than listed twice
            mine = {o: (None if n in info.needed else n) for o, n in mine.items()}
            replace_needed(root / path, mine, name=path)
            patched.append(path)
    for u in copies:
        (root / u.file).unlink()
        log.info(
            "%s: removed %s (%d bytes installed), now needed as %s from %s",
            wheel.name,
            u.file,
            u.installed,
            u.replaced_by or "nothing (its library loads it)",
            u.package,
        )
    return patched


def copies_versions(copies: Sequence[Unvendored]) -> dict[str, str]:
    """package -> the release the copies were (libcudart.so.12.0.107: nvidia-cuda-runtime-cu12 12.0.107): what the
    wheel was built and tested against, the requirement's floor."""
    out: dict[str, str] = {}
    for u in copies:
        if u.release:
            out.setdefault(u.package, u.release)
    return out
