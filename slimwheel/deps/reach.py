"""Reachability: whether the dynamic loader, loading a wheel's file, finds a library in a site-packages folder. The one
rule every provider goes through (the wheel itself, a CUDA requirement, an extra, a requirement's requirement).

glibc's loader searches a name without a '/' in the needing file's DT_RUNPATH, or, when it has none, its DT_RPATH
(`ElfInfo.search_path`), in order, `$ORIGIN` being the folder the file installs in; then LD_LIBRARY_PATH, which a
wheel cannot assume, and the system's folders (ld.so.cache, /lib, /usr/lib), which hold no wheel's files. It finds a
file by its name in a folder, never by a SONAME inside it. A library already loaded under that SONAME is taken
instead: what the package loads first (slimwheel's loader, `import torch`) reaches a library no search path does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.rpath import install_dir, norm_origin, resolve_entries

# What `slimwheel repair` places in a package so the CUDA libraries are loaded, by absolute path, before its
# extensions (slimwheel.runtime.generate.LOADER_NAME; runtime is a higher layer, so its file name is repeated here and
# tests/unit/test_reach.py holds the two equal).
LOADER_FILE = "_slimwheel_loader.py"


def reached_folders(info: ElfInfo) -> tuple[tuple[str, str], ...]:
    """(entry, site-packages-relative folder) for each search path entry of the file that lands in site-packages, in
    the order the loader searches them."""
    return tuple((e.entry, e.target) for e in resolve_entries(info.search_path, info.path) if e.kind == "inside")


def reaching(info: ElfInfo, folders: Iterable[str]) -> str:
    """The first entry of the file's search path that resolves, from where the file installs, to one of `folders`
    (site-packages-relative: nvidia/cu13/lib); "" when none does."""
    wanted = set(folders)
    return next((entry for entry, target in reached_folders(info) if target in wanted), "")


def entry_to_add(info: ElfInfo, folder: str) -> str:
    """The `$ORIGIN/...` entry that makes the file's search path reach `folder` (site-packages-relative)."""
    return norm_origin("$ORIGIN/" + posixpath.relpath(folder, install_dir(info.path) or "."))


def reached_member(info: ElfInfo, needed: str, members: Iterable[str]) -> str:
    """The wheel member the loader finds for the DT_NEEDED name `needed` of the file: the first folder of its search
    path that holds a member of that file name; "" when none does. A name with a '/' is never searched for."""
    if "/" in needed:
        return ""
    where: dict[str, str] = {}
    for m in members:
        if posixpath.basename(m) == needed:
            where.setdefault(install_dir(m) or ".", m)
    return next((where[target] for _entry, target in reached_folders(info) if target in where), "")


def preloaded(info: ElfInfo, members: Iterable[str]) -> bool:
    """The package of the file ships slimwheel's loader, which loads the nvidia-* wheels' libraries by absolute path
    before the file is imported (slimwheel.runtime: `<pkg>/_slimwheel_loader.py`, or a module's hidden folder)."""
    top = info.path.split("/", 1)[0].removesuffix(".slimwheel")
    return any(
        posixpath.basename(m) == LOADER_FILE and m.split("/", 1)[0].removesuffix(".slimwheel") == top for m in members
    )
