"""Which CUDA major a wheel is for: the one rule that repair, the wheel report and check use.

Best evidence first: a NEEDED SONAME that exists for one major only (libcudart.so.13), a `nvidia-*-cuNN`
requirement, kernel sources embedded for a CUDA major's NVRTC, the project's own name (`-cu12`, `-cu126`,
`-cuda12x`), the PTX ISA's release, a library of one major that the wheel ships itself.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.versions import CudaVersion

_COUNTS = Counter(lib.soname for lib in cudalibs.RUNTIME_LIBS)
# SONAME -> its CUDA major, for the SONAMEs one major alone has (libcurand.so.10 is in 12 and 13 alike).
UNIQUE_SONAMES = {lib.soname: lib.cuda_major for lib in cudalibs.RUNTIME_LIBS if _COUNTS[lib.soname] == 1}


@dataclass(frozen=True, kw_only=True)
class MajorEvidence:
    major: int | None
    why: str
    mixed: tuple[str, ...] = ()  # `file: soname (CUDA N)` when the wheel needs libraries of several majors
    ambiguous: tuple[str, ...] = ()  # SONAMEs several majors share (libcurand.so.10), when nothing else decides


_CU_SUFFIXED = re.compile(r"\s*nvidia[-_.][A-Za-z0-9._-]*[-_.]cu\d+\b", re.IGNORECASE)
# A project name that says its CUDA major: nvidia-cufile-cu12, spconv-cu126, cupy-cuda12x, nvidia-dali-cuda130,
# jax-cuda13-plugin; the two digits after cu/cuda are the major (CUDA 10 to 19), then at most one more digit or an x
_NAMED_MAJOR = re.compile(r"[-_.]cu(?:da)?(1\d)[\dx]?(?=[-_.]|$)", re.IGNORECASE)


def named_major(name: str) -> int | None:
    """The CUDA major a project's name states (`_NAMED_MAJOR`), or None."""
    found = {int(m.group(1)) for m in _NAMED_MAJOR.finditer(name)}
    return found.pop() if len(found) == 1 else None


def cuda_major(
    needed: Iterable[tuple[str, Sequence[str]]],
    requires: Sequence[str] = (),
    ptx_release: CudaVersion | None = None,
    embedded: Sequence[int] = (),
    carried: Collection[str] = (),
    ships: Iterable[tuple[str, str | None]] = (),
    name: str = "",
) -> MajorEvidence:
    """`needed`: (file, its DT_NEEDED names) per ELF file; `embedded`: the CUDA majors of embedded NVRTC sources;
    `carried`: the names the wheel's own files answer to (`inspect.dynamic.carried_names`). A shared SONAME the
    wheel carries is no ambiguity: nvidia-cudnn-cu13's libraries need each other's libcudnn_graph.so.9, which the
    wheel brings, not CUDA 12 or 13. `name`: the project's name, which may state its major: above the PTX ISA, which
    says only which toolkit wrote the PTX (nvidia-cufile-cu12 1.14.1.1 carries PTX ISA 7.1, CUDA 11.1's)."""
    majors: dict[int, list[str]] = {}
    ambiguous: set[str] = set()
    for path, names in needed:
        for soname in names:
            if soname in UNIQUE_SONAMES:
                majors.setdefault(UNIQUE_SONAMES[soname], []).append(f"{path}: {soname}")
            elif soname in _COUNTS and soname not in carried:
                ambiguous.add(soname)
    mixed = tuple(f"{w} (CUDA {m})" for m, ws in sorted(majors.items()) for w in ws) if len(majors) > 1 else ()
    if majors:
        m = min(majors, key=lambda k: -len(majors[k]))
        return MajorEvidence(major=m, why=majors[m][0].replace(": ", " needs ", 1), mixed=mixed)
    # Only lines that name an nvidia-*-cuNN project are parsed: packaging's requirement parser costs size-report more
    # start-up than reading a small wheel, so it is imported when one is there.
    for text in (t for t in requires if _CU_SUFFIXED.match(t)):
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            r = Requirement(text)
        except InvalidRequirement:
            continue
        if r.name.lower().startswith("nvidia-") and (major := named_major(r.name)) is not None:
            return MajorEvidence(major=major, why=f"Requires-Dist {r}")
    if embedded:
        return MajorEvidence(major=embedded[0], why=f"kernel sources embedded for the NVRTC of CUDA {embedded[0]}")
    if (named := named_major(name)) is not None:
        return MajorEvidence(major=named, why=f"the project's name, {name}")
    if ptx_release is not None:
        return MajorEvidence(major=ptx_release.major, why=f"PTX ISA of CUDA {ptx_release}")
    # Last: a library of one major that the wheel is (`ships`: (file, its SONAME)): NVIDIA's own wheels need no CUDA
    # library and may have no PTX (nvidia-cuda-cupti-cu12 12.8's libcupti.so.12, nvidia-cuda-runtime-cu12's libcudart)
    own = sorted((UNIQUE_SONAMES[so], path, so) for path, so in ships if so in UNIQUE_SONAMES)
    if own and len({m for m, _p, _s in own}) == 1:
        m, path, so = own[0]
        return MajorEvidence(major=m, why=f"{path} is {so}, CUDA {m}'s")
    return MajorEvidence(
        major=None, why="no CUDA runtime library, nvidia-* requirement or PTX found", ambiguous=tuple(sorted(ambiguous))
    )
