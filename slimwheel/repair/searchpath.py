"""RPATH planning around auditwheel. Before it: the entries through which auditwheel would bundle a file from a folder
nobody named (`/tmp/x`) are dropped from the copy it reads (`drop_before_auditwheel`). After it: each file's search
path with unsafe entries dropped and the nvidia/... and external folders it needs put back."""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.reach import entry_to_add
from slimwheel.errors import CheckFailed, ExitCode
from slimwheel.external import ExternalLib
from slimwheel.inspect.dynamic import ElfInfo, read_dynamic
from slimwheel.rpath import SearchEntry, install_dir, norm_origin, resolve_entry, unsafe_entries, with_folders
from slimwheel.tools import LibrariesNotFound, set_rpath

log = logging.getLogger("slimwheel.repair")


def wanted_rpath(
    info: ElfInfo,
    original: ElfInfo | None,
    libs: Sequence[cudalibs.RuntimeLib],
    externals: Sequence[ExternalLib] = (),
    carried: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, ...] | None:
    """The search path an ELF needs after auditwheel: its own safe entries (`rpath.unsafe_entries` are dropped), plus
    the nvidia/... folders of the CUDA libraries it needs (auditwheel drops entries that point outside the wheel),
    then the folders of the external libraries it needs (externals with their folder resolved). None when nothing
    changes.

    `carried` (file name -> the wheel's paths of that name): where the search path changes, the folder of each library
    the file needs from the wheel itself is put in as well. A file without DT_RPATH or DT_RUNPATH that finds its
    siblings through the DT_RPATH of the extension that loads it (auditwheel's layout) loses that inheritance once it
    has a DT_RUNPATH of its own, so it must name them (faiss-gpu-cu12's libfaiss and its libopenblas)."""
    bad = {u.entry for u in unsafe_entries(info.search_path, info.path)}
    safe = [e for e in info.search_path if e not in bad]
    folders = [lib.folder for lib in libs if lib.soname in info.needed]
    folders += [e.folder for e in externals if e.folder is not None and any(e.matches(n) for n in info.needed)]
    if not folders:
        return tuple(norm_origin(e) for e in safe) if bad else None
    folders += _carried_folders(info, carried or {})
    # the input's entries into the nvidia-* wheels' folders, which auditwheel drops (the one rule: `rpath.resolve_entry`)
    keep = [
        e
        for e in (original.search_path if original else ())
        if (r := resolve_entry(e, info.path)).kind == "inside" and r.target.startswith("nvidia/")
    ]
    entries = with_folders(safe, info.path, folders, keep)
    return entries if entries is not None or not bad else tuple(norm_origin(e) for e in safe)


def _carried_folders(info: ElfInfo, carried: Mapping[str, Sequence[str]]) -> list[str]:
    """The wheel folders of the libraries `info` needs from the wheel: a copy beside it wins, else the one copy of
    that name; several copies elsewhere are left to `slimwheel check`, which names the ambiguity."""
    here = install_dir(info.path)
    out: list[str] = []
    for name in info.needed:
        paths = [p for p in carried.get(name, ()) if p != info.path]
        dirs = {install_dir(p) for p in paths}
        if here in dirs:
            out.append(here)
        elif len(dirs) == 1:
            out.append(dirs.pop())
    return out


def fix_search_paths(
    work: Path,
    elfs: Mapping[str, ElfInfo],
    before: Mapping[str, ElfInfo],
    needed: Sequence[cudalibs.RuntimeLib],
    external: Sequence[ExternalLib],
    per_file: Mapping[str, Sequence[cudalibs.RuntimeLib]] | None = None,
) -> tuple[list[str], list[str], dict[str, ElfInfo]]:
    """Set each file's `wanted_rpath` (`per_file`: the CUDA libraries of the file's own major, for the input's files;
    files auditwheel added get `needed`); returns (files changed, `file: entry` dropped as unsafe, the ELF facts
    after: the changed files read again, as patchelf wrote them)."""
    fixed: list[str] = []
    dropped: list[str] = []
    carried: dict[str, list[str]] = {}
    for path in elfs:
        carried.setdefault(posixpath.basename(path), []).append(path)
    for path, info in elfs.items():
        for u in unsafe_entries(info.search_path, path):
            log.warning("%s: dropped RPATH/RUNPATH entry %r: %s", path, u.entry, u.why)
            dropped.append(f"{path}: {u.entry!r}")
        libs = per_file[path] if per_file is not None and path in per_file else needed
        entries = wanted_rpath(info, before.get(path), libs, external, carried)
        if entries is not None:
            set_rpath(work / path, entries, use_rpath_tag=bool(info.rpath) and not info.runpath, name=path)
            fixed.append(path)
    after = dict(elfs)
    for path in fixed:
        now = read_dynamic(work / path, path)
        assert now is not None  # it was ELF before patchelf set its search path
        after[path] = now
    return fixed, dropped, after


@dataclass(frozen=True, kw_only=True)
class DroppedReach:
    """A NEEDED library that a dropped search path entry found on this machine: if auditwheel then finds it nowhere
    else, the wheel needs a file from a folder nobody named (issue 41 S1)."""

    file: str  # the wheel member that needs it
    needed: str  # its DT_NEEDED name
    path: str  # the file on this machine the dropped entry led to

    def line(self) -> str:
        return f"{self.file} needs {self.needed}, found only at {self.path}"


def _named(entry: SearchEntry, named: Sequence[Path]) -> bool:
    """An absolute entry at or under a folder the user named (or `build` made): auditwheel may bundle from it."""
    if entry.kind != "absolute":
        return False
    real = os.path.realpath(entry.entry)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in (os.path.realpath(d) for d in named))


def drop_before_auditwheel(
    root: Path, elfs: Mapping[str, ElfInfo], named: Sequence[Path]
) -> tuple[list[str], list[DroppedReach]]:
    """Drop, from the unpacked copy under `root` that auditwheel will read, every unsafe entry (`rpath.resolve_entry`)
    through which it would look for libraries in a folder nobody named: an absolute path outside the `named` folders
    (`/tmp/x`: auditwheel would copy `/tmp/x/libevil.so` into the released wheel), a relative or empty entry, an
    `$ORIGIN` entry that leaves site-packages. Entries into root-owned system locations stay: auditwheel searches
    those (ld.so.conf's folders) in any case, and bundling what they hold is its purpose. Folders on
    LD_LIBRARY_PATH are the user's own setting, which auditwheel reads itself.

    Returns (`file: entry` for each entry dropped, each NEEDED library an absolute dropped entry finds on this
    machine), so that a library found only that way is named when auditwheel cannot find it otherwise."""
    dropped: list[str] = []
    reach: list[DroppedReach] = []
    for path, info in elfs.items():
        gone = [u for u in unsafe_entries(info.search_path, path) if u.kind != "system" and not _named(u, named)]
        if not gone:
            continue
        for u in gone:
            log.warning("%s: dropped RPATH/RUNPATH entry %r before auditwheel: %s", path, u.entry, u.why)
            dropped.append(f"{path}: {u.entry!r}")
            if u.kind == "absolute":
                reach += [
                    DroppedReach(file=path, needed=n, path=os.path.join(u.entry, n))
                    for n in info.needed
                    if "/" not in n and os.path.isfile(os.path.join(u.entry, n))
                ]
        bad = {u.entry for u in gone}
        keep = [e for e in info.search_path if e not in bad]
        set_rpath(root / path, keep, use_rpath_tag=bool(info.rpath) and not info.runpath, name=path)
    return dropped, list(dict.fromkeys(reach))


def not_found(
    e: LibrariesNotFound,
    reach: Sequence[DroppedReach],
    wheel: Path,
    *,
    names: Sequence[str],
    elfs: Mapping[str, ElfInfo],
) -> CheckFailed:
    """auditwheel found no copy of a library anywhere but through an entry repair dropped (issue 41 S1): name the
    file, the NEEDED name and the path, which the user must name if it belongs in the wheel. A library the wheel
    itself carries, where no search path of the needing file reaches (hidet 0.6.1's libhidet_runtime.so, reached only
    by a build-machine entry repair dropped): said so, with the entry to add, not as a library nobody provides."""
    only = [r for r in reach if r.needed in e.missing]
    if not only:
        return _carried_unreached(e, wheel, names, elfs) or e
    return CheckFailed(
        f"{wheel.name}: "
        + "; ".join(r.line() for r in only)
        + ", through a search path entry into a folder outside the wheel that nobody named; repair does not copy "
        "such a file into the wheel, and none was written. If it belongs in the wheel, name its folder "
        "(--library-dir FOLDER, or LD_LIBRARY_PATH)",
        ExitCode.INCONSISTENT_DEPENDENCIES,
    )


def _carried_unreached(
    e: LibrariesNotFound, wheel: Path, names: Sequence[str], elfs: Mapping[str, ElfInfo]
) -> CheckFailed | None:
    """The failure for missing libraries that are all files of the wheel (by SONAME or file name), naming each
    needing file, the member nearest it, and the `$ORIGIN` entry that reaches it; None when some missing library is
    not carried."""
    carriers: dict[str, list[str]] = {}
    for n in names:
        info = elfs.get(n)
        for name in {posixpath.basename(n), info.soname if info is not None else None}:
            if name in e.missing:
                carriers.setdefault(name, []).append(n)
    if set(carriers) != set(e.missing):
        return None
    lines = []
    for name, members in carriers.items():
        for path, info in elfs.items():
            if name not in info.needed or path in members:
                continue
            here = install_dir(path) or "."
            carrier = next((m for m in members if (install_dir(m) or ".") == here), members[0])
            folder = install_dir(carrier) or "."
            lines.append(
                f"{path} needs {name}, which the wheel carries as {carrier}, but no entry of its search path reaches "
                f"{folder}: add {entry_to_add(info, folder)} to its RUNPATH"
            )
    return CheckFailed(
        f"{wheel.name}: "
        + "; ".join(lines)
        + " (auditwheel looks for each library where the loader would, so it can neither check nor keep what only the "
        "package's own code loads first); none was written",
        ExitCode.INCONSISTENT_DEPENDENCIES,
    )
