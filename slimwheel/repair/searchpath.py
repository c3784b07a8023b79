"""RPATH planning after auditwheel: each file's search path with unsafe entries dropped and the nvidia/... and
external folders it needs put back."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.external import ExternalLib
from slimwheel.inspect.dynamic import ElfInfo, read_dynamic
from slimwheel.rpath import install_dir, norm_origin, resolve_entry, unsafe_entries, with_folders
from slimwheel.tools import set_rpath

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
