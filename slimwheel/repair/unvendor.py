"""Copies of CUDA libraries a wheel carries (`cuda.libs.vendored`): found by name, proven by content, removed, and the
files that needed them pointed at the nvidia-* wheels' SONAMEs.

A name proves nothing (issue 41, S3: a file named `libcudart-<hash>.so.12` that is not cudart was deleted, and the
repaired wheel failed at import with "undefined symbol"). A copy is removed only when its content shows it is the
library that replaces it: it defines symbols of that library, and every symbol the wheel's other files take from it
is one the replacement exports. A symbol is the library's when the major's first release exports it
(`cuda.libs.first_release_exports`) or when the copy defines it under the library's own GNU version node
(`Vendored.own_version_node`: NVIDIA versions every symbol of its libraries, and auditwheel leaves the nodes as
they are), or, for a library NVIDIA builds with no symbol versions (cuFile), when the C symbol carries the library's
name (`Vendored.named_after`). Otherwise repair refuses the wheel, naming the file (exit 3).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel import deps
from slimwheel.cuda import libs as cudalibs
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.dynamic import ElfInfo, exported_symbols, imports_by_library
from slimwheel.inspect.elf import file_version_definitions
from slimwheel.repair.source import RepairInput, after_patch
from slimwheel.reqgraph import Lookup, RequirementGraph
from slimwheel.tools import replace_needed

log = logging.getLogger("slimwheel.repair")

# The lookup of requirements' wheels for where the wheel installs (`pypindex.IndexLookup` for the command; a fake one
# in tests): what their wheels ship is compared with the input's copies.
IndexFor = Callable[[deps.Installs], Lookup]


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
    definitions = file_version_definitions(root / path, path)
    own = {d.symbol for d in definitions if v.own_version_node(d.version)}
    known = first if not v.companion and (first := cudalibs.first_release_exports(lib)) is not None else frozenset()
    if not definitions and not known:
        # NVIDIA builds some libraries with no symbol versions at all (cuFile 1.15.1: 543 exports, no version
        # node); the C entry points such a library exports carry its name (cuFileDriverOpen), a project's own do not
        own = {n for n in exports if v.named_after(n)}

    def foreign(names: set[str]) -> list[str]:
        return sorted(n for n in names if n not in own and n not in known)

    if not any(n in own or n in known for n in exports):
        return f"it defines none of that library's symbols (no symbol under its version node {lib.soname}" + (
            ", none named after it)" if not definitions else ")"
        )
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


@dataclass(frozen=True, kw_only=True)
class SharedCopy:
    """A copy the input shares with a requirement's wheel (the same auditwheel copy, by its content-hashed name)."""

    file: str  # the input's copy
    project: str  # the requirement's project that ships it too
    version: str
    path: str  # where that project installs it, relative to site-packages
    how: str  # "requires cumm-cu126>=0.7.11"

    def __str__(self) -> str:
        return f"{self.file} is also {self.path} of {self.project} {self.version} (the wheel {self.how})"


def shared_copies(
    copies: Sequence[Unvendored], graph: RequirementGraph
) -> tuple[tuple[SharedCopy, ...], tuple[str, ...]]:
    """The copies a requirement (or a requirement's requirement: `graph`) ships too, and the requirements that could
    not be read (whose copies are unknown). Unvendoring a shared copy splits it: the process then maps the
    requirement's copy and the nvidia-* wheel's, two CUDA runtimes where there was one."""
    out = []
    for u in copies:
        if (p := graph.shared_copy(u.file)) is not None:
            out.append(SharedCopy(file=u.file, project=p.project, version=p.version, path=p.path, how=p.how()))
    return tuple(out), graph.unread


def without_copies(
    src: RepairInput, root: Path, wheel: Path, *, unvendor: bool, graph: RequirementGraph | None, split_shared: bool
) -> tuple[RepairInput, tuple[Unvendored, ...], tuple[SharedCopy, ...], tuple[str, ...]]:
    """The input with its copies of CUDA libraries removed (`unvendor`), the copies, those a requirement shares, and
    the requirements whose copies are unknown. `graph`: what the requirements install (None: offline)."""
    copies = find_copies(root, src)
    if not copies:
        return src, (), (), ()
    if not unvendor:
        raise CheckFailed(
            f"{wheel.name} carries copies of CUDA libraries ({', '.join(u.file for u in copies)}); a process that "
            "also loads the nvidia-* wheels' (torch does) would hold two CUDA runtimes; repair without "
            "--keep-vendored replaces them with the nvidia-* wheels",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    if graph is None:
        shared: tuple[SharedCopy, ...] = ()
        unknown: tuple[str, ...] = ("the requirements' wheels were not read (offline)",) if src.requires else ()
    else:
        shared, unknown = shared_copies(copies, graph)
    if shared and not split_shared:
        raise CheckFailed(
            f"{wheel.name}: unvendoring would split a copy the process shares with a requirement: "
            + "; ".join(map(str, shared))
            + "; the process would then map that copy and the nvidia-* wheel's, two CUDA runtimes where there is one. "
            "Repair the requirement's wheel as well, or pass --split-shared-copies to unvendor this one anyway",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    for why in unknown:
        log.warning("%s: copies the requirements ship are unknown: %s", wheel.name, why)
    patched = remove_copies(root, src, copies, wheel)
    return after_patch(root, src, [u.file for u in copies], patched), copies, shared, unknown
