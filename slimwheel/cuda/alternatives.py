"""Per-CUDA alternative libraries: the one model that size-report, check and repair use.

Some wheels carry one build of a library per CUDA version and load one of them per process, chosen by the CUDA
version they find (bitsandbytes 0.50.2: `libbitsandbytes_cuda118.so` ... `_cuda132.so`, picked by torch's CUDA).
Others carry one folder per CUDA major and import one of them (cuda-cccl 1.2.1: `cuda/compute/cu12/...` and
`cuda/compute/cu13/...`): the files of sibling folders whose names differ only by a CUDA token are alternatives too,
each file beside its namesake in the other folders.
Such files are alternatives: each is judged on its own (its CUDA major, coverage, driver floor and libraries), never
as if all were loaded together, and a wheel whose alternatives span CUDA majors is not a mixed-major wheel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CUDA_TOKEN = re.compile(r"^(?P<pre>.*?)(?P<tok>cuda|cu)(?P<ver>1\d{1,2})(?P<post>(?:[._-][^/]*)?)$")
# a whole folder name: cu12, cu13, cuda12, cuda_12, cuda-13, cu126; a folder of alternatives only when a sibling
# folder names another version (a lone `cu13/lib` is just where a wheel keeps its files)
_FOLDER_TOKEN = re.compile(r"^(?P<tok>cuda[_-]?|cu)(?P<ver>1\d{1,2})$")


@dataclass(frozen=True, kw_only=True)
class AlternativeFile:
    group: str  # the name with the CUDA version left out: bitsandbytes/libbitsandbytes_cuda*.so
    file: str
    cuda: str  # as the name says it: "11.8", "12", "13.2"

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])


def _by_name(name: str) -> tuple[str, str] | None:
    """(group, version) of a file whose base name carries the CUDA token."""
    folder, _, base = name.rpartition("/")
    m = _CUDA_TOKEN.match(base)
    if m is None:
        return None
    key = f"{m['pre']}{m['tok']}*{m['post']}"
    return (f"{folder}/{key}" if folder else key), m["ver"]


def _by_folder(name: str) -> tuple[str, str, str] | None:
    """(folder group, group, version) of a file under a folder named by a CUDA token, the deepest such folder:
    `cuda/compute/cu12/_bindings.so` -> (`cuda/compute/cu*`, `cuda/compute/cu*/_bindings.so`, "12")."""
    parts = name.split("/")
    for i in range(len(parts) - 2, -1, -1):
        m = _FOLDER_TOKEN.match(parts[i])
        if m is not None:
            folder = "/".join([*parts[:i], f"{m['tok']}*"])
            return folder, "/".join([folder, *parts[i + 1 :]]), m["ver"]
    return None


def _tokens(names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """file -> (group, version) for each file that is one of per-CUDA alternatives: by base name when its folder
    holds the same name for another version, else by folder when a sibling folder names another version (a file
    that only one of the folders has is still that folder's: the folders are what the wheel chooses between)."""
    names = list(names)
    by_name = {n: t for n in names if (t := _by_name(n)) is not None}
    name_versions: dict[str, set[str]] = {}
    for group, ver in by_name.values():
        name_versions.setdefault(group, set()).add(ver)
    out = {n: t for n, t in by_name.items() if len(name_versions[t[0]]) > 1}
    by_folder = {n: ft for n in names if n not in out and (ft := _by_folder(n)) is not None}
    folder_versions: dict[str, set[str]] = {}
    for folder, _, ver in by_folder.values():
        folder_versions.setdefault(folder, set()).add(ver)
    out.update({n: (g, v) for n, (f, g, v) in by_folder.items() if len(folder_versions[f]) > 1})
    return out


def groups(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """group -> files: files in one folder whose names differ only by a CUDA version token (`_cuda118`, `_cuda121`,
    `cu12`), two or more versions; and files of one name in sibling folders that differ only by a CUDA token
    (`cu12/`, `cu13/`), keyed by the path with the folder's version left out (`cuda/compute/cu*/_bindings.so`)."""
    found: dict[str, dict[str, str]] = {}
    for name, (group, ver) in _tokens(names).items():
        found.setdefault(group, {})[ver] = name
    return {k: tuple(v[ver] for ver in sorted(v, key=_ver_key)) for k, v in sorted(found.items())}


def _ver_key(ver: str) -> tuple[int, int]:
    return (int(ver[:2]), int(ver[2:] or -1))


def _shown(ver: str) -> str:
    return ver if len(ver) == 2 else f"{ver[:2]}.{ver[2:]}"


def version_of(file: str) -> str:
    """The CUDA version a file's name or folder carries: `_cuda118` -> 11.8, `cu12` -> 12, `cu13/x.so` -> 13."""
    by_name, by_folder = _by_name(file), _by_folder(file)
    if by_name is not None:
        return _shown(by_name[1])
    if by_folder is not None:
        return _shown(by_folder[2])
    raise ValueError(f"{file}: no CUDA version in the name")


def alternatives(names: Iterable[str]) -> dict[str, AlternativeFile]:
    """file -> its AlternativeFile, for every file that is one of a group's alternatives."""
    return {f: AlternativeFile(group=g, file=f, cuda=_shown(v)) for f, (g, v) in sorted(_tokens(names).items())}


# Builds of the same library for another GPU platform beside per-CUDA alternatives: bitsandbytes 0.50.2 carries
# libbitsandbytes_rocm64.so ... _rocm72.so and _xpu2025.so beside its _cuda118.so ... _cuda132.so, and loads the one
# that matches torch's backend (torch.version.hip, torch.xpu).
_BACKEND_TOKEN = re.compile(r"^(?P<pre>.*?)(?P<tok>rocm|hip|xpu)(?P<ver>\d*)(?P<post>(?:[._-][^/]*)?)$")
_BACKEND_NAMES = {"rocm": "ROCm", "hip": "ROCm", "xpu": "Intel XPU"}


def other_backends(names: Iterable[str]) -> dict[str, str]:
    """file -> the platform it is built for ("ROCm 6.4", "Intel XPU 2025"), for files in a folder of per-CUDA
    alternatives whose names differ from theirs by a ROCm or XPU token in the same place."""
    names = list(names)
    cuda_groups = set(groups(names))
    out: dict[str, str] = {}
    for name in names:
        folder, _, base = name.rpartition("/")
        m = _BACKEND_TOKEN.match(base)
        if m is None:
            continue
        for tok in ("cuda", "cu"):
            key = f"{m['pre']}{tok}*{m['post']}"
            if (f"{folder}/{key}" if folder else key) in cuda_groups:
                ver = m["ver"]
                shown = f"{ver[0]}.{ver[1:]}" if m["tok"] != "xpu" and len(ver) >= 2 else ver
                out[name] = f"{_BACKEND_NAMES[m['tok']]} {shown}".strip()
                break
    return out
