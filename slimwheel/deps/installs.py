"""Where the wheel installs and which of its requirements hold there: a Requires-Dist whose marker does not hold in
every environment the wheel installs into (Linux, its machine, its Python versions) does not provide a library; one
under an extra provides it on request (CuPy's `ctk`); `cuda-toolkit[...]` pinned to a major stands for the library
wheels its extras install."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.bounds import admits_only_major
from slimwheel.wheelfile import parse_requirements

# The machines of Linux platform tags (manylinux_2_28_x86_64), as auditwheel's policies name them.
ARCH_PATTERN = r"(x86_64|aarch64|i686|ppc64le|s390x|armv7l|riscv64)"
# Python versions a marker is evaluated for: from the oldest slimwheel supports to a few beyond today's newest.
_PYTHONS = tuple(f"3.{m}" for m in range(8, 16))


# ------------------------------------------------------------------------------------------- where the wheel installs


@dataclass(frozen=True, kw_only=True)
class Installs:
    """The environments a wheel installs into, from its tags: Linux, its machines, its Python versions."""

    machines: tuple[str, ...]
    pythons: tuple[str, ...]

    @classmethod
    def from_tags(cls, tags: Iterable[str]) -> Installs:
        machines: list[str] = []
        pythons: list[str] = []
        for tag in tags:
            parts = tag.split("-")
            if len(parts) != 3:
                continue
            interp, abi, plat = parts
            m = re.search(rf"_{ARCH_PATTERN}$", plat)
            machines.append(m.group(1) if m else "x86_64")
            for one in interp.split("."):
                if mm := re.fullmatch(r"(?:cp|pp)(\d)(\d+)", one):
                    v = f"{mm.group(1)}.{mm.group(2)}"
                    if abi == "abi3" or abi == "none":
                        pythons += [p for p in _PYTHONS if Version(p) >= Version(v)]
                    else:
                        pythons.append(v)
                elif one in ("py3", "cp3"):
                    pythons += list(_PYTHONS)
        return cls(
            machines=tuple(dict.fromkeys(machines)) or ("x86_64",),
            pythons=tuple(dict.fromkeys(pythons)) or _PYTHONS,
        )

    def environments(self) -> list[dict[str, str]]:
        return [
            {
                "sys_platform": "linux",
                "platform_system": "Linux",
                "os_name": "posix",
                "platform_machine": machine,
                "python_version": py,
                "python_full_version": f"{py}.0",
                "implementation_name": "cpython",
                "platform_python_implementation": "CPython",
                "extra": "",
            }
            for machine in self.machines
            for py in self.pythons
        ]


def _holds(marker: Marker, envs: list[dict[str, str]]) -> tuple[bool, bool]:
    """(holds everywhere, holds somewhere)."""
    results = [marker.evaluate(e) for e in envs]
    return all(results), any(results)


_EXTRA_RE = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """The wheel's Requires-Dist as pip sees them where the wheel installs. A requirement on CUDA's metapackage
    (`cuda-toolkit[cublas,cudart]==13.*`) also stands for each library wheel its extras install, and one on a library
    wheel for those it requires itself (`nvidia-cudnn-cu13` brings `nvidia-cublas`: `cudalibs.WHEEL_REQUIRES`):
    `via`."""

    always: dict[str, list[Requirement]]  # project -> requirements installed in every environment
    conditional: dict[str, list[Requirement]]  # project -> requirements whose marker does not always hold
    unparsable: tuple[str, ...]
    extras: dict[str, dict[str, list[Requirement]]] = field(default_factory=dict)  # extra -> project -> requirements
    via: dict[tuple[str | None, str], Requirement] = field(default_factory=dict)  # (extra, package) -> cuda-toolkit req

    @classmethod
    def of(cls, requires: Iterable[str], installs: Installs) -> Requirements:
        reqs, bad = parse_requirements(requires)
        envs = installs.environments()
        always: dict[str, list[Requirement]] = {}
        conditional: dict[str, list[Requirement]] = {}
        extras: dict[str, dict[str, list[Requirement]]] = {}
        via: dict[tuple[str | None, str], Requirement] = {}
        for r in reqs:
            key = str(canonicalize_name(r.name))
            extra: str | None = None
            if r.marker is not None and "extra" in str(r.marker):
                m = _EXTRA_RE.search(str(r.marker))
                if m is None:
                    continue
                extra = str(canonicalize_name(m.group(1)))
                # only installed on request: judged as if requested, where the rest of its marker holds
                if not any(r.marker.evaluate({**e, "extra": extra}) for e in envs):
                    continue
                extras.setdefault(extra, {}).setdefault(key, []).append(r)
            else:
                everywhere = r.marker is None or _holds(r.marker, envs)[0]
                (always if everywhere else conditional).setdefault(key, []).append(r)
                if not everywhere:
                    continue
            if key == cudalibs.TOOLKIT_PACKAGE:
                for major in cudalibs.TOOLKIT_EXTRAS:
                    if admits_only_major(r, major):
                        for package in cudalibs.toolkit_packages(major, frozenset(r.extras)):
                            via.setdefault((extra, package), r)
            for package in cudalibs.WHEEL_REQUIRES.get(key, ()):
                via.setdefault((extra, package), r)
        return cls(always=always, conditional=conditional, unparsable=tuple(bad), extras=extras, via=via)

    def first(self, project: str) -> Requirement | None:
        got = self.always.get(str(canonicalize_name(project)))
        return got[0] if got else None

    def under_extra(self, project: str) -> tuple[str, Requirement] | None:
        """(extra, requirement) of the first extra that installs the project, itself or through cuda-toolkit."""
        key = str(canonicalize_name(project))
        for extra, projects in sorted(self.extras.items()):
            if key in projects:
                return extra, projects[key][0]
            if (r := self.via.get((extra, key))) is not None:
                return extra, r
        return None
