"""Reachability: whether the dynamic loader, loading a wheel's file, finds a library in a site-packages folder. The one
rule every provider goes through (the wheel itself, a CUDA requirement, an extra, a requirement's requirement).

glibc's loader searches a name without a '/' in the needing file's DT_RUNPATH, or, when it has none, its DT_RPATH
(`ElfInfo.search_path`) and then the DT_RPATH of the objects that loaded it, up the chain (`inherited`: an extension
whose DT_RPATH names `$ORIGIN/../pkg.libs` finds the grafted libraries' own dependencies, faiss-gpu 1.15.1), in
order, `$ORIGIN` being the folder of the object whose entry it is; then LD_LIBRARY_PATH, which a
wheel cannot assume, and the system's folders (ld.so.cache, /lib, /usr/lib), which hold no wheel's files. It finds a
file by its name in a folder, never by a SONAME inside it. A library already loaded under that SONAME is taken
instead: what the package loads first (slimwheel's loader, `import torch`) reaches a library no search path does.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence

from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.pyimports import extension_module
from slimwheel.rpath import install_dir, norm_origin, resolve_entries

# What `slimwheel repair` places in a package so the CUDA libraries are loaded, by absolute path, before its
# extensions (slimwheel.runtime.generate.LOADER_NAME; runtime is a higher layer, so its file name is repeated here and
# tests/unit/test_reach.py holds the two equal).
LOADER_FILE = "_slimwheel_loader.py"

_ABI_TAG = re.compile(r"\.(cpython-|abi3\.|pypy)")


def imported_module(info: ElfInfo) -> bool:
    """Whether the file is an extension module Python imports: a Python ABI tag in its name, or PyInit_<name>
    defined (triton 3.9's _C/libtriton.so)."""
    return abi_tagged(posixpath.basename(info.path)) or info.python_module


def abi_tagged(name: str) -> bool:
    """Whether a file name carries a Python ABI tag (x.cpython-312-x86_64-linux-gnu.so, x.abi3.so): an extension
    module for sure. A plain x.so in a package folder may be one too (triton's _C/libtriton.so) or a library the
    package opens with ctypes (dgl's libdgl.so)."""
    return _ABI_TAG.search(name) is not None


Reached = tuple[tuple[str, str], ...]  # (entry, the site-packages folder it lands in), in search order


def _inside(info: ElfInfo, entries: Iterable[str]) -> Reached:
    return tuple((e.entry, e.target) for e in resolve_entries(entries, info.path) if e.kind == "inside")


def inherited_rpaths(elfs: Sequence[ElfInfo]) -> dict[str, Reached]:
    """For each file without DT_RUNPATH: the DT_RPATH folders of the files of the wheel that may load it (those that
    need it by file name or SONAME, and theirs, up the chain), searched after its own. Which of several loaders loads
    it first the wheel does not tell: any of them counts."""
    needing: dict[str, list[ElfInfo]] = {}
    for e in elfs:
        for n in e.needed:
            needing.setdefault(n, []).append(e)
    out: dict[str, Reached] = {}
    for e in elfs:
        if e.runpath:
            continue  # its own DT_RUNPATH only: no object's DT_RPATH is searched for its libraries
        seen, todo, got = {e.path}, [e], list[tuple[str, str]]()
        while todo:
            cur = todo.pop()
            for name in {posixpath.basename(cur.path), cur.soname or ""} - {""}:
                for loader in needing.get(name, ()):
                    if loader.path in seen:
                        continue
                    seen.add(loader.path)
                    todo.append(loader)
                    if not loader.runpath:  # an object with DT_RUNPATH lends no DT_RPATH
                        got += _inside(loader, loader.rpath)
        if got:
            out[e.path] = tuple(dict.fromkeys(got))
    return out


def reached_folders(info: ElfInfo, inherited: Mapping[str, Reached] | None = None) -> Reached:
    """(entry, site-packages-relative folder) for each search path entry of the file (and those it inherits) that
    lands in site-packages, in the order the loader searches them."""
    own = _inside(info, info.search_path)
    return own + (inherited or {}).get(info.path, ()) if not info.runpath else own


def reaching(info: ElfInfo, folders: Iterable[str], inherited: Mapping[str, Reached] | None = None) -> str:
    """The first entry of the file's search path that resolves, from where the file installs, to one of `folders`
    (site-packages-relative: nvidia/cu13/lib); "" when none does."""
    wanted = set(folders)
    return next((entry for entry, target in reached_folders(info, inherited) if target in wanted), "")


def entry_to_add(info: ElfInfo, folder: str) -> str:
    """The `$ORIGIN/...` entry that makes the file's search path reach `folder` (site-packages-relative)."""
    return norm_origin("$ORIGIN/" + posixpath.relpath(folder, install_dir(info.path) or "."))


def reached_member(
    info: ElfInfo, needed: str, members: Iterable[str], inherited: Mapping[str, Reached] | None = None
) -> str:
    """The wheel member the loader finds for the DT_NEEDED name `needed` of the file: the first folder of its search
    path that holds a member of that file name; "" when none does. A name with a '/' is never searched for."""
    if "/" in needed:
        return ""
    where: dict[str, str] = {}
    for m in members:
        if posixpath.basename(m) == needed:
            where.setdefault(install_dir(m) or ".", m)
    return next((where[target] for _entry, target in reached_folders(info, inherited) if target in where), "")


def preloaded(info: ElfInfo, members: Iterable[str]) -> str:
    """slimwheel's loader in the file's package (`<pkg>/_slimwheel_loader.py`, or a module's hidden folder), which
    loads the nvidia-* wheels' libraries by absolute path before the file is imported; "" when it ships none."""
    top = info.path.split("/", 1)[0].removesuffix(".slimwheel")
    return next(
        (
            m
            for m in members
            if posixpath.basename(m) == LOADER_FILE and m.split("/", 1)[0].removesuffix(".slimwheel") == top
        ),
        "",
    )


def import_closure(
    module: ElfInfo,
    by_path: Mapping[str, ElfInfo],
    members: Mapping[str, Sequence[str]],
    inherited: Mapping[str, Reached] | None = None,
) -> tuple[str, ...]:
    """The wheel's files the loader loads with extension module `module` when Python imports it: its DT_NEEDED
    entries the search paths reach (`reached_member`), and theirs, in load order (breadth first), the module first.
    `by_path`: the wheel's ELF files by path; `members`: every file of the wheel by file name."""
    order, seen = [module.path], {module.path}
    for path in order:
        info = by_path.get(path)
        if info is None:
            continue
        for needed in info.needed:
            member = reached_member(info, needed, members.get(needed, ()), inherited)
            if member and member not in seen:
                seen.add(member)
                order.append(member)
    return tuple(order)


class ImportLoads:
    """Which of the wheel's own libraries importing each of its extension modules loads (`import_closure`):
    library name (file name and SONAME) -> the first module whose import loads it. Walked on the first question
    (a file whose library no search path of its reaches), once per wheel."""

    def __init__(
        self, elfs: Sequence[ElfInfo], members: Mapping[str, tuple[str, ...]], inherited: dict[str, Reached]
    ) -> None:
        self.elfs, self.members, self.inherited = elfs, members, inherited
        self.needed = frozenset(n for info in elfs for n in info.needed)
        self._by_name: dict[str, str] | None = None

    def by_name(self) -> dict[str, str]:
        if self._by_name is None:
            by_path = {info.path: info for info in self.elfs}
            out: dict[str, str] = {}
            for info in self.elfs:
                # A module: a Python ABI tag in its name, or PyInit_<name> defined; a plain x.so in a package
                # folder that defines none is a library the package opens with ctypes (dgl's libdgl.so)
                if extension_module(info.path) is None or not imported_module(info):
                    continue
                # Python opens the module by path: a later DT_NEEDED finds it by its SONAME only; the libraries
                # it loads were found by the names they are needed as, which a later one also finds
                closure = import_closure(info, by_path, self.members, self.inherited)
                for i, loaded in enumerate(closure):
                    soname = by_path[loaded].soname if loaded in by_path else None
                    for name in (soname, posixpath.basename(loaded) if i else None):
                        if name:
                            out.setdefault(name, info.path)
            self._by_name = out
        return self._by_name
