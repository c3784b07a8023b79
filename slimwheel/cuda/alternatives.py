"""Per-CUDA alternative libraries: the one model that size-report, check and repair use.

Some wheels carry one build of a library per CUDA version and load one of them per process, chosen by the CUDA
version they find (bitsandbytes 0.50.2: `libbitsandbytes_cuda118.so` ... `_cuda132.so`, picked by torch's CUDA).
Such files are alternatives: each is judged on its own (its CUDA major, coverage, driver floor and libraries), never
as if all were loaded together, and a wheel whose alternatives span CUDA majors is not a mixed-major wheel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CUDA_TOKEN = re.compile(r"^(?P<pre>.*?)(?P<tok>cuda|cu)(?P<ver>1\d{1,2})(?P<post>(?:[._-][^/]*)?)$")


@dataclass(frozen=True, kw_only=True)
class AlternativeFile:
    group: str  # the name with the CUDA version left out: bitsandbytes/libbitsandbytes_cuda*.so
    file: str
    cuda: str  # as the name says it: "11.8", "12", "13.2"

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])


def groups(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """group -> files: files in one folder whose names differ only by a CUDA version token (`_cuda118`, `_cuda121`,
    `cu12`), two or more versions."""
    found: dict[str, dict[str, str]] = {}
    for name in names:
        folder, _, base = name.rpartition("/")
        m = _CUDA_TOKEN.match(base)
        if m is None:
            continue
        key = f"{folder}/{m['pre']}{m['tok']}*{m['post']}" if folder else f"{m['pre']}{m['tok']}*{m['post']}"
        found.setdefault(key, {})[m["ver"]] = name
    return {k: tuple(v.values()) for k, v in sorted(found.items()) if len(v) > 1}


def version_of(file: str) -> str:
    """The CUDA version a file's name carries: `_cuda118` -> 11.8, `cu12` -> 12."""
    m = _CUDA_TOKEN.match(file.rpartition("/")[2])
    if m is None:
        raise ValueError(f"{file}: no CUDA version in the name")
    v = m["ver"]
    return v if len(v) == 2 else f"{v[:2]}.{v[2:]}"


def alternatives(names: Iterable[str]) -> dict[str, AlternativeFile]:
    """file -> its AlternativeFile, for every file that is one of a group's alternatives."""
    return {
        f: AlternativeFile(group=g, file=f, cuda=version_of(f)) for g, files in groups(names).items() for f in files
    }


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
