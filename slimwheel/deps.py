"""Dependency rules: which CUDA major a wheel is for, what repair leaves out and requires, and the one rule that
every library a wheel needs is accounted for. `check` judges a wheel with `dependency_problems`; `repair` judges its
own output with the same function before writing it, so repair never emits a wheel that check fails.

Requirement bounds (docs/repair.md): upper bound = next SONAME major (a new SONAME major is a new ABI). Lower bound:
`floor_for` (the major's first release when it exports every symbol the wheel uses, else the version built against,
else the CUDA release for components versioned by it, else the SONAME major).

Requirements count only where pip installs them: a Requires-Dist whose marker does not hold in every environment the
wheel installs into (Linux, its machine, its Python versions) does not provide a library. One under an extra provides
it on request: a note that names the extra, not a failure (CuPy's `ctk`); `cuda-toolkit[...]` pinned to a major
stands for the library wheels its extras install.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.resources
import importlib.util
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.major import UNIQUE_SONAMES
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.external import folder_of_project, library_of_project
from slimwheel.inspect.dynamic import ElfInfo, carried_names
from slimwheel.inspect.pyimports import OptionalModule, PythonImports
from slimwheel.reqgraph import Provider, RequirementGraph
from slimwheel.rpath import describe, origin_target, resolve_entries
from slimwheel.shown import abbreviated
from slimwheel.wheelfile import parse_requirements

if TYPE_CHECKING:
    from slimwheel.torchext import PypiRelease

# Components whose nvidia-* wheel version follows the CUDA release (nvidia-cuda-runtime 13.5.x ships with CUDA 13.5).
# cuBLAS did up to CUDA 12 (nvidia-cublas-cu12 12.4.5 with CUDA 12.4), no longer on CUDA 13: cuda-toolkit 13.0.2 ships
# nvidia-cublas 13.1, 13.4.1 ships 13.7, 13.5.0 ships 13.10 (PyPI's cuda-toolkit pins, read 2026-12-01).
_FOLLOWS_CUDA_RELEASE = frozenset({"cudart", "nvrtc", "nvJitLink"})
_FOLLOWS_CUDA_RELEASE_UP_TO_12 = frozenset({"cublas", "cublasLt"})


def _follows_release(lib: cudalibs.RuntimeLib) -> bool:
    return lib.component in _FOLLOWS_CUDA_RELEASE or (
        lib.component in _FOLLOWS_CUDA_RELEASE_UP_TO_12 and lib.cuda_major <= 12
    )


# The dynamic loader is part of the C library; some libraries name it in DT_NEEDED (for __tls_get_addr) and every
# system has it, though auditwheel's whitelist does not list it.
SYSTEM_LOADERS = ("ld-linux*.so.*", "ld64.so.*", "ld-musl-*.so.1")
# The machines of Linux platform tags (manylinux_2_28_x86_64), as auditwheel's policies name them.
_ARCHES = r"(x86_64|aarch64|i686|ppc64le|s390x|armv7l|riscv64)"
# Python versions a marker is evaluated for: from the oldest slimwheel supports to a few beyond today's newest.
_PYTHONS = tuple(f"3.{m}" for m in range(8, 16))


# ------------------------------------------------------------------------------------------------------ CUDA major


def exclusions(major: int | None) -> tuple[str, ...]:
    """Versioned SONAMEs (an unversioned pattern would not match them) of every library the nvidia-* wheels provide,
    plus the driver, which must never be bundled."""
    names = [lib.soname for lib in cudalibs.libs_for(major)] if major is not None else []
    return tuple(dict.fromkeys([*names, *cudalibs.DRIVER_SONAMES]))


def needed_runtime_libs(elfs: Iterable[ElfInfo], major: int | None) -> list[cudalibs.RuntimeLib]:
    if major is None:
        return []
    needed = {s for info in elfs for s in (*info.needed, *info.loads)}
    return [lib for lib in cudalibs.libs_for(major) if lib.soname in needed]


def wrong_major(elfs: Iterable[ElfInfo], major: int) -> list[str]:
    """`file: soname (CUDA N)` for each CUDA library of another major than `major` that the wheel needs."""
    ours = {lib.soname for lib in cudalibs.libs_for(major)}
    return [
        f"{info.path}: {soname} (CUDA {UNIQUE_SONAMES[soname]})"
        for info in elfs
        for soname in info.needed
        if soname in UNIQUE_SONAMES and soname not in ours
    ]


# ------------------------------------------------------------------------------------------------ requirement bounds


@functools.lru_cache(maxsize=1)
def _baseline() -> dict[str, Any]:
    """resources/cuda-baseline.json (devtools/cuda_baseline.py): per CUDA major, its first release's component
    versions and the symbols each library exports."""
    text = importlib.resources.files("slimwheel.resources").joinpath("cuda-baseline.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)["majors"]
    return data


@dataclass(frozen=True, kw_only=True)
class Floor:
    """The lower bound of one nvidia-* requirement, and why."""

    package: str
    version: str  # major.minor: "13.0"
    why: str


def _major_minor(version: str, package: str) -> str:
    try:
        v = Version(version)
    except InvalidVersion:
        raise BadInputError(f"recorded version {version!r} of {package} is not a version") from None
    return f"{v.major}.{v.minor}"


def floor_for(
    lib: cudalibs.RuntimeLib,
    *,
    cuda: CudaVersion | None,
    versions: Mapping[str, str] | None,
    imports: Mapping[str, frozenset[str]] | None = None,
) -> Floor:
    """`_floor_for`, raised to the first release that installs the library in the folder slimwheel points RPATH and the
    loader at (`RuntimeLib.since`: nvidia-cusparselt-cu13 moved into nvidia/cu13/lib with 0.9.0)."""
    floor = _floor_for(lib, cuda=cuda, versions=versions, imports=imports)
    if lib.since is not None and Version(lib.since) > Version(floor.version):
        return Floor(
            package=lib.package,
            version=lib.since,
            why=f"{floor.why}; raised to {lib.since}, the first release that installs it in {lib.folder}",
        )
    return floor


def _floor_for(
    lib: cudalibs.RuntimeLib,
    *,
    cuda: CudaVersion | None,
    versions: Mapping[str, str] | None,
    imports: Mapping[str, frozenset[str]] | None = None,
) -> Floor:
    """The lower bound of lib's requirement. The rule (docs/repair.md, "Requirement floors"), best first:
    1. The major's first release (CUDA 13.0) exports every symbol the wheel imports from the package's libraries
       (known from GNU symbol versions, `imports`: library -> symbols): that release's component version. A wheel
       built with CUDA 13.5 that uses nothing newer installs beside torch's CUDA 13.0 pins.
    2. The version the build linked against (`versions`, recorded from the toolkit's nvidia-* wheels).
    3. The CUDA release given, for components whose wheel versions follow it (cudart, nvrtc, nvJitLink; cuBLAS up to
       CUDA 12); else the major's first release, or the SONAME major (cuRAND 10.x)."""
    soname_major = lib.version_major
    base = _baseline().get(str(lib.cuda_major), {}).get("packages", {}).get(lib.package)
    if base is not None and imports is not None:
        exported: dict[str, list[str]] = base["libraries"]
        used = {so: imports.get(so, frozenset()) for so in exported}
        newer = sorted(n for so, names in used.items() for n in names - set(exported[so]))
        if not newer and any(used.values()):
            release = _baseline()[str(lib.cuda_major)]["release"]
            return Floor(
                package=lib.package,
                version=_major_minor(base["version"], lib.package),
                why=f"every symbol it uses is in CUDA {release}'s {lib.package} {base['version']}",
            )
        if newer:
            why = (
                f"uses {', '.join(newer[:3])}{', ...' if len(newer) > 3 else ''}, newer than the major's first release"
            )
        else:
            why = "no symbol version tells which of its symbols come from this library"
    else:
        why = "no baseline to compare its symbols with"
    recorded = {canonicalize_name(k): v for k, v in (versions or {}).items()}.get(canonicalize_name(lib.package))
    if recorded:
        return Floor(
            package=lib.package,
            version=_major_minor(recorded, lib.package),
            why=f"{why}: the version it was built against, {recorded}",
        )
    if soname_major == lib.cuda_major:
        if _follows_release(lib) and cuda is not None and cuda.major == lib.cuda_major:
            return Floor(
                package=lib.package, version=f"{cuda.major}.{cuda.minor}", why=f"{why}: the CUDA release given, {cuda}"
            )
        return Floor(package=lib.package, version=f"{soname_major}.0", why=f"{why}: the major's first release")
    return Floor(
        package=lib.package, version=str(soname_major), why=f"{why}: the major of the versions that ship its SONAME"
    )


def requirement_for(
    lib: cudalibs.RuntimeLib,
    *,
    cuda: CudaVersion | None,
    versions: Mapping[str, str] | None,
    imports: Mapping[str, frozenset[str]] | None = None,
) -> str:
    """`nvidia-cublas>=13.0,<14` for one library (the floor by `floor_for`; upper bound: the next major of the
    package versions that ship its SONAME, `RuntimeLib.version_major`)."""
    floor = floor_for(lib, cuda=cuda, versions=versions, imports=imports)
    text = f"{lib.package}>={floor.version},<{lib.version_major + 1}"
    Requirement(text)  # validates
    return text


def requirements(
    libs: Iterable[cudalibs.RuntimeLib],
    *,
    cuda: CudaVersion | None,
    versions: Mapping[str, str] | None = None,
    imports: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, str]:
    """package -> requirement string, one per nvidia-* package (cublas and cublasLt share one: the higher floor)."""
    out: dict[str, str] = {}
    for lib in libs:
        req = requirement_for(lib, cuda=cuda, versions=versions, imports=imports)
        have = out.get(lib.package)
        if have is None or Version(_lower(req)) > Version(_lower(have)):
            out[lib.package] = req
    return out


def _lower(req: str) -> str:
    return next(c.version for c in Requirement(req).specifier if c.operator == ">=")


def admits_only_major(req: Requirement, major: int) -> bool:
    """Does the requirement pin a package versioned by its major (nvidia-cuda-runtime 13.0.x) to `major`?"""
    spec = req.specifier
    if not str(spec):
        return False
    probes_in = [Version(f"{major}.{m}.{p}") for m in (0, 1, 5, 9) for p in (0, 99)]
    # The requirement's own versions too: an exact pin (==13.0.96) or a narrow range admits none of the round probes.
    probes_in += [v for v in _clause_versions(spec) if v.major == major]
    probes_out = [Version(f"{major - 1}.9.99"), Version(f"{major + 1}.0.0")]
    return any(spec.contains(v, prereleases=True) for v in probes_in) and not any(
        spec.contains(v, prereleases=True) for v in probes_out
    )


def _clause_versions(spec: SpecifierSet) -> list[Version]:
    out = []
    for clause in spec:
        try:
            out.append(Version(clause.version.removesuffix(".*")))
        except InvalidVersion:
            continue
    return out


def satisfiable(specs: Sequence[SpecifierSet]) -> bool:
    """Whether some version satisfies every specifier set. Decided on probes: each version a clause names, and its
    neighbours (a bump of each release part, and the part before), which is where any non-empty intersection of
    PEP 440 clauses has a member."""
    joint = SpecifierSet(",".join(str(s) for s in specs if str(s)))
    if not str(joint):
        return True
    probes: set[Version] = set()
    for v in _clause_versions(joint):
        rel = list(v.release) + [0] * (3 - len(v.release))
        probes.add(v)
        for i in range(len(rel)):
            up = rel[: i + 1]
            up[i] += 1
            probes.add(Version(".".join(map(str, up + [0] * (len(rel) - i - 1)))))
            if rel[i] > 0:
                down = rel[:]
                down[i] -= 1
                probes.add(Version(".".join(map(str, down[: i + 1] + [99] * (len(rel) - i - 1)))))
        probes.add(Version(".".join(map(str, [*rel, 1]))))
    return any(joint.contains(p, prereleases=True) for p in probes)


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
            m = re.search(rf"_{_ARCHES}$", plat)
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


# ---------------------------------------------------------------------------------------------- manylinux allow-list


@functools.lru_cache(maxsize=1)
def _policies() -> tuple[dict[str, Any], ...]:
    """auditwheel's manylinux policies, read from its package folder: importing `auditwheel.policy` to reach the
    file (importlib.resources) runs its modules, 177 ms and 2.5 MB here for one JSON file that check, slim and
    variants read on every wheel."""
    spec = importlib.util.find_spec("auditwheel")
    folders = spec.submodule_search_locations if spec is not None else None
    path = Path(folders[0], "policy", "manylinux-policy.json") if folders else None
    if path is not None and path.is_file():
        text = path.read_text("utf-8")
    else:  # auditwheel not installed as files (a zip): through its package
        text = importlib.resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text("utf-8")
    return tuple(json.loads(text))


def known_platform(plat: str) -> bool:
    """Whether auditwheel's policies name this platform tag (`manylinux_2_28_x86_64`, an alias, `linux_x86_64`), so
    that `auditwheel repair --plat` takes it."""
    base = re.sub(rf"_{_ARCHES}$", "", plat)
    return any(base == p["name"] or base in p.get("aliases", []) for p in _policies())


@dataclass(frozen=True, kw_only=True)
class SystemPolicy:
    name: str
    whitelist: frozenset[str]
    note: str | None = None


def system_policy(platforms: Sequence[str]) -> SystemPolicy:
    """The manylinux policy for the wheel's platform tags (auditwheel's policy data). Several manylinux tags: the
    oldest (most restrictive) applies, because pip may install the wheel there; no manylinux tag: the newest."""
    policies = [p for p in _policies() if p["priority"] > 0]
    by_name: dict[str, dict[str, Any]] = {}
    for p in policies:
        by_name[p["name"]] = p
        for alias in p.get("aliases", []):
            by_name[alias] = p
    matched = []
    for plat in platforms:
        m = re.fullmatch(rf"(manylinux\w*?)_{_ARCHES}", plat)
        if m and m.group(1) in by_name:
            matched.append(by_name[m.group(1)])
    if matched:
        p = max(matched, key=lambda p: p["priority"])
        return SystemPolicy(name=p["name"], whitelist=frozenset(p["lib_whitelist"]))
    newest = min(policies, key=lambda p: p["priority"])
    return SystemPolicy(
        name=newest["name"],
        whitelist=frozenset(newest["lib_whitelist"]),
        note=f"no manylinux platform tag ({', '.join(platforms) or 'none'}): system libraries were checked "
        f"against {newest['name']}'s list",
    )


# ------------------------------------------------------------------------------------------- every library accounted


@dataclass(frozen=True, kw_only=True)
class ExtraProvision:
    """A CUDA library that only an extra of the wheel installs (CuPy's `ctk`)."""

    extra: str
    soname: str
    requirement: str  # the Requires-Dist under the extra that installs it: cuda-toolkit[cublas,...]==13.*
    files: tuple[str, ...]  # the wheel's files that need it
    # the folder the extra's wheel installs it in, when no search path of those files reaches it (onnxruntime-gpu
    # 1.31's providers have no RUNPATH: the libraries are found only once loaded, by its preload_dlls() or torch)
    unreached: str = ""


@dataclass(frozen=True, kw_only=True)
class DependencyVerdict:
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    from_extras: tuple[ExtraProvision, ...] = ()
    # Libraries that nothing provides and only optional parts of the package need (CuPy's NCCL and cuTENSOR): repair
    # leaves them unrequired, as the project does (a note says which package turns the part on).
    optional: tuple[str, ...] = ()

    @property
    def extras(self) -> tuple[str, ...]:
        """The extras that install CUDA libraries the wheel needs, in order."""
        return tuple(dict.fromkeys(p.extra for p in self.from_extras))


def _reaching(info: ElfInfo, folders: Iterable[str]) -> str:
    """The first entry of the file's search path that resolves, from where it installs, to one of `folders`
    (site-packages-relative: nvidia/cu13/lib); "" when none does."""
    wanted = set(folders)
    return next((e for e in info.search_path if e and origin_target(e, info.path) in wanted), "")


def _external_provider(info: ElfInfo, reqs: Requirements) -> tuple[str, Requirement] | None:
    """(RPATH entry, requirement) when an `$ORIGIN/...` entry of the ELF's search path points into a top-level folder
    of site-packages named like a project the wheel requires (scipy_openblas32/lib <-> scipy-openblas32; cutensor/lib <->
    cutensor-cu13: `external.folder_of_project`).

    The folder is computed from where the ELF installs (`faiss/_swigfaiss.so` + `$ORIGIN/../x/lib` -> `x/lib`); its
    first component, normalized as PEP 503 normalizes project names, must equal a required project's name. It cannot
    see projects whose import folder has another name (PyQt5-Qt5 installs PyQt5/Qt5): the wheel alone does not tell
    which folders those install, and guessing by prefix would accept torchvision's RPATH into torch/ without a torch
    requirement."""
    for entry in info.search_path:
        target = origin_target(entry, info.path) if entry else None
        if target is None or target == ".":
            continue
        top = target.split("/")[0]
        for project, rs in reqs.always.items():
            if folder_of_project(top, project):
                return entry, rs[0]
    return None


def _foreign_folders(info: ElfInfo, tops: Collection[str]) -> tuple[str, ...]:
    """The folders in site-packages outside the wheel's own top-level folders `tops` (other projects') that the
    `$ORIGIN/...` entries of the ELF's search path name."""
    targets = (origin_target(entry, info.path) if entry else None for entry in info.search_path)
    return tuple(dict.fromkeys(t for t in targets if t is not None and t != "." and t.split("/")[0] not in tops))


def _named_provider(needed: str, reqs: Requirements) -> Requirement | None:
    """The requirement whose project the library is named after (`external.library_of_project`: librmm.so and
    librmm-cu12). Torch's libraries are left to the torch rules (torchext)."""
    from slimwheel import torchext

    if torchext.is_torch_library(needed):
        return None
    named = [(project, rs[0]) for project, rs in reqs.always.items() if library_of_project(needed, project)]
    # the library wheel itself (librmm-cu12) before a wheel that requires it (rmm-cu12, which pylibraft requires)
    named.sort(key=lambda pr: not pr[0].startswith("lib") and not pr[0].startswith("nvidia-lib"))
    return named[0][1] if named else None


def _pinned(lib: cudalibs.RuntimeLib, req: Requirement) -> bool:
    """Whether `req` installs lib's wheel of lib's CUDA major only: itself pinned, or through a wheel pinned to the
    major (cuda-toolkit==13.*, or a library wheel of that major that requires lib's wheel: nvidia-cudnn-cu13)."""
    name = str(canonicalize_name(req.name))
    if name == cudalibs.TOOLKIT_PACKAGE:  # the metapackage of a major pins its components to it
        return admits_only_major(req, lib.cuda_major)
    if name != lib.package:
        return any(
            _pinned(provider, req)
            for provider in cudalibs.libs_for(lib.cuda_major)
            if provider.package == name and lib.package in cudalibs.WHEEL_REQUIRES.get(name, ())
        )
    return lib.package.endswith(f"-cu{lib.cuda_major}") or admits_only_major(req, lib.version_major)


def _extra_provider(cands: list[cudalibs.RuntimeLib], reqs: Requirements) -> tuple[str, Requirement] | None:
    for lib in cands:
        if (got := reqs.under_extra(lib.package)) is not None and _pinned(lib, got[1]):
            return got
    return None


@dataclass(frozen=True, kw_only=True)
class _AdmittedTorch:
    req: Requirement  # the wheel's torch requirement
    minors: tuple[str, ...]  # the torch minors it admits (torchext.admitted_minors)
    pinned: tuple[PypiRelease, ...]  # the admitted ones of torchext's table of nvidia-* pins


def _admitted_torch(reqs: Requirements) -> _AdmittedTorch | None:
    """The wheel's torch requirement and the torch releases it admits; None when it requires no torch."""
    from slimwheel import torchext

    req = reqs.first("torch")
    if req is None:
        return None
    minors = tuple(torchext.admitted_minors(req.specifier))
    return _AdmittedTorch(
        req=req, minors=minors, pinned=tuple(r for r in torchext.pypi_releases() if r.minor in minors)
    )


@dataclass(frozen=True, kw_only=True)
class _FromTorch:
    """What `import torch` of the admitted PyPI releases brings of one library the wheel does not."""

    req: Requirement
    providing: tuple[str, ...]  # the torch versions whose import loads it
    lacking: tuple[str, ...]  # admitted torch versions whose import does not (or that slimwheel has not read)
    how: str  # "require(s) nvidia-cublas-cu12" / "ship(s) torch/lib/libgomp.so.1, which libtorch_global_deps.so needs,"

    def enough(self, *, alternative: bool) -> bool:
        """Every admitted release must load it, except for a per-CUDA alternative, which the project loads only for
        the CUDA it finds (bitsandbytes loads libbitsandbytes_cuda128.so under a torch of CUDA 12.8): there one
        release suffices."""
        return bool(self.providing) and (alternative or not self.lacking)


def _torch_provider(
    soname: str, cands: list[cudalibs.RuntimeLib], torch: _AdmittedTorch | None, machines: Sequence[str]
) -> _FromTorch | None:
    """Which admitted PyPI torch releases load `soname` at `import torch`, when the wheel requires torch; the dynamic
    loader then takes a library of that name that is already loaded. A CUDA library (`cands`): torch's own
    requirements install one of `cands` (the table of nvidia-* pins), and torch loads it. Another library: torch's
    wheel ships it in torch/lib for each of the wheel's `machines` and a chain of DT_NEEDED from torch/_C loads it
    under that name (torchext.shipped_libs; auditwheel's renamed libgomp-a34b3233.so.1 of torch 2.4-2.6 is another
    name). Releases newer than the tables are not judged, as for CUDA libraries; older admitted ones that the table
    of torch/lib does not hold count as lacking. None when torch is not required or none of its releases loads it."""
    from slimwheel import torchext

    if torch is None:
        return None
    if cands:
        packages = {lib.package for lib in cands}
        providing = [r for r in torch.pinned if packages & set(r.pins)]
        if not providing:
            return None
        package = next(p for p in providing[0].pins if p in packages)
        return _FromTorch(
            req=torch.req,
            providing=tuple(r.version for r in providing),
            lacking=tuple(r.version for r in torch.pinned if r not in providing),
            how=f"require(s) {package}",
        )
    # torch's own libraries (libc10.so, libtorch_cuda.so) are judged the same way: torchvision 0.26's _C.so needs
    # them with no search path into torch/lib, and finds them because `import torch` loaded them first.
    table = torchext.shipped_libs()
    oldest = Version(next(iter(table)))
    yes: list[torchext.ShippedLibs] = []
    no: list[str] = []
    newer: list[str] = []  # releases newer than the table: torch's own libraries are in torch/lib in every release
    for minor in torch.minors:
        per = table.get(minor)
        if per is None:
            if Version(minor) < oldest:
                no.append(f"{minor} (torch/lib not read)")
            elif torchext.is_torch_library(soname):
                newer.append(minor)
            continue
        shipped = [per.get(m) for m in machines]
        if all(s is not None and soname in s.loaded for s in shipped):
            yes.append(per[machines[0]])
        else:
            # auditwheel's renamed copy (libgomp-a34b3233.so.1) is loaded under its own name only
            stem = soname.split(".so")[0] + "-"
            renamed = sorted({n for s in shipped if s is not None for n in s.loaded if n.startswith(stem)})
            version = next(s.version for s in per.values())
            no.append(f"{version} (loads {', '.join(renamed)})" if renamed else version)
    if not yes and not newer:
        return None
    how = (
        f"ship(s) torch/lib/{soname}, which {yes[-1].loaded[soname]} needs,"
        if yes
        else (
            f"ship(s) torch/lib/{soname} (torch's own library, in every release; slimwheel's table ends at "
            f"{max(table, key=Version)})"
        )
    )
    return _FromTorch(
        req=torch.req,
        providing=tuple(s.version for s in yes) + tuple(f"{m}.x" for m in newer),
        lacking=tuple(no),
        how=how,
    )


def _second_copy(lib: cudalibs.RuntimeLib, torch: _AdmittedTorch | None) -> str:
    """Who else brings the nvidia-* wheel's copy of a library the wheel carries, as far as torch tells: the torch
    releases the wheel admits (or PyPI's torch releases of that CUDA major) that require that wheel. torchvision 0.26
    carries cudart and nvJPEG; torch 2.11 requires nvidia-cuda-runtime, not nvidia-nvjpeg."""
    from slimwheel import torchext

    if torch is not None:
        admitted = [r.version for r in torch.pinned]
        loads = [r.version for r in torch.pinned if lib.package in r.pins]
        if loads:
            return (
                f"torch {', '.join(loads)}, which the wheel's Requires-Dist '{torch.req}' admits, requires "
                f"{lib.package} and loads its copy, so a process that imports both holds two"
            )
        if admitted:
            return (
                f"torch {', '.join(admitted)}, which the wheel's Requires-Dist '{torch.req}' admits, does not require "
                f"{lib.package}: a process holds two only where another package loads that wheel's copy"
            )
    loads = [r.version for r in torchext.pypi_releases() if lib.package in r.pins]
    if loads:
        verb = "requires" if len(loads) == 1 else "require"
        return f"a process that also loads {lib.package}'s copy holds two (PyPI's torch {', '.join(loads)} {verb} it)"
    return (
        f"a process holds two where another package loads {lib.package}'s copy (no torch release slimwheel knows "
        "requires it)"
    )


def _requirement_on(lib: cudalibs.RuntimeLib, reqs: Requirements) -> Requirement | None:
    """The wheel's unconditional requirement on the library's package, directly or through the CUDA metapackage."""
    return reqs.first(lib.package) or reqs.via.get((None, str(canonicalize_name(lib.package))))


def install_requirement(lib: cudalibs.RuntimeLib, requires: Iterable[str], tags: Iterable[str] = ()) -> str:
    """What to `pip install` for a CUDA library a wheel needs and lacks (doctor's hint): the wheel's own requirement
    that installs it (on its package, or on the CUDA metapackage with its extras), without the marker; for a wheel
    that has none, the requirement repair would add (`requirement_for`). Never a bare package name: pip would take
    the newest release, of whichever CUDA major."""
    reqs = Requirements.of(requires, Installs.from_tags(tags))
    req = _requirement_on(lib, reqs)
    if req is None:
        cond = reqs.conditional.get(str(canonicalize_name(lib.package)))
        req = cond[0] if cond else None
    if req is None and (under := reqs.under_extra(lib.package)) is not None:
        req = under[1]
    if req is None:
        return requirement_for(lib, cuda=None, versions=None)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _cuda_library_problem(
    info: ElfInfo, needed: str, cands: list[cudalibs.RuntimeLib], reqs: Requirements
) -> str | None:
    wanted = []
    for lib in cands:
        wanted.append(f"{lib.package} (CUDA {lib.cuda_major})")
        req = _requirement_on(lib, reqs)
        if req is None:
            continue
        if str(canonicalize_name(req.name)) != lib.package:  # through cuda-toolkit or a wheel that requires it
            if _pinned(lib, req):
                return None
            return (
                f"{info.path} needs {needed} (CUDA {lib.cuda_major}) through Requires-Dist '{req}', which does "
                f"not pin {req.name} to CUDA {lib.cuda_major}: pip may install another CUDA major"
            )
        # The unsuffixed CUDA 13 wheels of cuRAND, cuFFT, cuSPARSE and cuSOLVER are versioned by their SONAME major
        # (nvidia-curand 10.x), not by the CUDA release; for the others the two agree.
        version_major = lib.version_major
        if lib.package.endswith(f"-cu{lib.cuda_major}") or admits_only_major(req, version_major):
            return None
        return (
            f"{info.path} needs {needed} (CUDA {lib.cuda_major}), but Requires-Dist '{req}' does not pin "
            f"{lib.package} to {version_major}.*: pip may install another CUDA major"
        )
    cond = [r for lib in cands for r in reqs.conditional.get(str(canonicalize_name(lib.package)), [])]
    if cond:
        return (
            f"{info.path} needs {needed}: Requires-Dist '{cond[0]}' holds only under its marker, not everywhere "
            "the wheel installs (Linux, its Python versions), so pip may install the wheel without it"
        )
    return f"{info.path} needs {needed}: not in the wheel and no Requires-Dist on {' or '.join(wanted)}"


_PY_MODULE_TAG = re.compile(r"\.(cpython-|abi3\.|pypy)")
_TEMPLATE_PART = re.compile(r"%[sdu]")


def _name_matches(name: str, base: str) -> bool:
    """Whether a name a file may open ("nvshmem_bootstrap_mpi.so", "nvshmem_transport_%s.so.%d") is the file name
    `base`: itself, with a version after it (nvshmem_bootstrap_mpi.so.3), or the printf template filled in."""
    if "%" in name:
        parts = _TEMPLATE_PART.split(name)
        holes = _TEMPLATE_PART.findall(name)
        pattern = re.escape(parts[0]) + "".join(
            ("[^/]+" if h == "%s" else r"\d+") + re.escape(p) for h, p in zip(holes, parts[1:], strict=True)
        )
        return re.fullmatch(pattern + r"(\.\d+)*", base) is not None
    return base == name or base.startswith(name + ".")


def plugins(elfs: Sequence[ElfInfo]) -> dict[str, str]:
    """The wheel's plugins: file -> a file of the wheel that opens it by name (`ElfInfo.names`). A plugin is no Python
    extension module (no ABI tag; named lib*.so or versioned .so.N), and no file of the wheel needs it: it is loaded
    only when its opener asks (onnxruntime-gpu's TensorRT provider, NVSHMEM's bootstrap and transport plugins)."""
    needed = {n for info in elfs for n in info.needed}
    out: dict[str, str] = {}
    for info in elfs:
        base = info.path.rsplit("/", 1)[-1]
        if base in needed or (info.soname or "") in needed or _PY_MODULE_TAG.search(base):
            continue
        if not (base.startswith("lib") or re.search(r"\.so\.\d", base)):
            continue
        opener = next(
            (q.path for q in elfs if q.path != info.path and any(_name_matches(n, base) for n in q.names)), None
        )
        if opener is not None:
            out[info.path] = opener
    return out


def cxx_runtime_problem(info: ElfInfo) -> str | None:
    """A library that carries libstdc++ (linked statically) and exports its symbols. Python processes load
    libstdc++.so.6 too (numpy, torch, the CUDA libraries); calls that go through the dynamic symbol table then bind to
    the first copy the loader meets while the rest stay in the file's own copy, so the two copies' state mixes:
    locales, exceptions, iostreams. The faiss wheel built on the GPU machine carried such a copy (no libstdc++.so.6 in
    DT_NEEDED, libstdc++'s SystemTap notes, 5,400 dynamic symbols) and crashed in index_factory, whose std::regex
    reads the locale; linked to the shared libstdc++ there, it passed faiss's GPU tests (docs/faiss.md)."""
    if not info.exports_cxx_runtime:
        return None
    return (
        f"{info.path} carries libstdc++ linked statically and exports it (std::locale::classic is in its dynamic "
        "symbol table): in a process that also loads libstdc++.so.6, part of its C++ runtime calls go to the "
        "other copy and the two copies' state mixes. Link libstdc++ dynamically (it is on the manylinux "
        "allow-list), or hide the static copy (-Wl,--exclude-libs,ALL)"
    )


def dependency_problems(
    elfs: Sequence[ElfInfo],
    *,
    cuda_major: int | None,
    requires: Sequence[str],
    tags: Sequence[str],
    files: Iterable[str] = (),
    name: str = "",
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> DependencyVerdict:
    """Every NEEDED library of every ELF must be in the wheel, a CUDA library whose nvidia-* wheel is required (pinned
    to its major) wherever the wheel installs, found through RPATH in a required project's folder, the driver, the
    system's dynamic loader, or on the manylinux allow-list; search paths must stay inside site-packages; the
    requirements must be installable (no contradictory pair). `files`: every file of the wheel (a NEEDED name that is a
    file's name is carried by the wheel). A CUDA library only an extra installs is no problem: the verdict's
    `from_extras` and one note per extra say which extra provides what, and what happens without it. `name`: the
    project, for the notes' pip command. `imports`: the wheel's Python sources (`inspect.pyimports`, read only when
    asked): a library that nothing provides, needed by an extension module the package imports only where it survives
    the import failing, is a note (an optional part, as CuPy's NCCL and cuTENSOR bindings), not a problem. `graph`:
    what the requirements' own requirements install (`reqgraph`, read from the index only when a library is left
    unprovided by the rules above): a library one of them installs is a note that names the chain, not a problem
    (rmm-cu12 -> librmm-cu12 -> rapids-logger's librapids_logger.so)."""
    from slimwheel import torchext

    problems: list[str] = []
    notes: list[str] = []
    platforms = tuple(dict.fromkeys(t.split("-", 2)[2] for t in tags if t.count("-") >= 2))
    policy = system_policy(platforms)
    if policy.note:
        notes.append(policy.note)
    reqs = Requirements.of(requires, Installs.from_tags(tags))
    notes += [f"Requires-Dist {r!r} cannot be parsed" for r in reqs.unparsable]
    for project, rs in reqs.always.items():
        if len(rs) > 1 and not satisfiable([r.specifier for r in rs]):
            problems.append(
                f"Requires-Dist on {project} contradict each other ({'; '.join(map(str, rs))}): "
                "pip can install no version of it, so it cannot install the wheel"
            )
    files = tuple(files)
    inside = carried_names(elfs) | {f.rsplit("/", 1)[-1] for f in files}
    tops = {f.split("/", 1)[0] for f in files}  # the wheel's own top-level folders
    from_extras: dict[tuple[str, str], tuple[Requirement, list[str]]] = {}  # (extra, soname) -> (req, files)
    # soname -> (torch requirement, providing releases, package, files)
    from_torch: dict[str, tuple[_FromTorch, list[str]]] = {}  # soname -> (what torch brings, files)
    alts = alt_model.alternatives(info.path for info in elfs)
    torch = _admitted_torch(reqs)
    machines = Installs.from_tags(tags).machines
    # (soname, provider, found through which RPATH entry, or "") -> the files that need it
    transitive: dict[tuple[str, Provider, str], list[str]] = {}

    def by_graph(info: ElfInfo, soname: str) -> bool:
        """Whether a requirement's requirement installs the library (then a note says which, through what)."""
        p = graph.provider(soname) if graph is not None else None
        if p is None:
            return False
        folder = p.path.rsplit("/", 1)[0] if "/" in p.path else "."
        transitive.setdefault((soname, p, _reaching(info, [folder])), []).append(info.path)
        return True

    def unread(problem: str) -> str:
        """The problem, with the requirements whose own requirements the index could not tell."""
        if graph is None or not (missed := graph.unread):
            return problem
        return f"{problem} (what {len(missed)} requirement(s) install could not be read from the index: " + (
            f"{abbreviated(missed, 2)})"
        )

    def by_torch(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib], problem: str) -> str | None:
        """None when torch's import brings the library (a note then says so), else the problem, with the torch
        releases that would bring it where some do."""
        t = _torch_provider(soname, cands, torch, machines)
        if t is None:
            return problem
        if t.enough(alternative=info.path in alts):
            from_torch.setdefault(soname, (t, []))[1].append(info.path)
            return None
        return (
            f"{problem}; torch {', '.join(t.providing)} from PyPI {t.how} and load it at `import torch`, but "
            f"Requires-Dist '{t.req}' also admits torch {', '.join(t.lacking)}, which do(es) not"
        )

    def _torch_enough(soname: str, cands: list[cudalibs.RuntimeLib], *, alternative: bool) -> bool:
        t = _torch_provider(soname, cands, torch, machines)
        return t is not None and t.enough(alternative=alternative)

    # A torch extension in a wheel that requires no torch (torchaudio 2.11, torchao 0.18, fbgemm-gpu 1.9): torch's own
    # libraries and the CUDA libraries torch's PyPI builds install (libcudart.so.13) lack for one reason, said once
    # per set of files (`torchless`), not once per library and again by the torch rules.
    any_torch = _admitted_torch(Requirements.of(["torch"], Installs.from_tags(tags))) if torch is None else None
    torchless: dict[str, list[str]] = {}  # file -> the libraries a torch requirement would bring
    brought_by: dict[str, tuple[str, ...]] = {}  # a CUDA library of those -> the PyPI torch releases that install it

    def for_torch(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib]) -> bool:
        """Whether the library is one that a torch requirement would bring to this torch extension, the wheel
        requiring no torch: then a requirement's requirement installs it (a note), or `torchless` holds it."""
        if any_torch is None or not any(torchext.is_torch_library(n) for n in info.needed):
            return False
        if info.path in plugin_of or info.path in backends or (imports is not None and imports.optional(info.path)):
            return False  # a part the package does without: `unprovided` says what it lacks, in a note
        if not torchext.is_torch_library(soname):
            if (t := _torch_provider(soname, cands, any_torch, machines)) is None:
                return False
            brought_by[soname] = t.providing
        if not by_graph(info, soname):
            torchless.setdefault(info.path, []).append(soname)
        return True

    def judge(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib]) -> str | None:
        problem = _cuda_library_problem(info, soname, cands, reqs)
        if problem is not None and (got := _extra_provider(cands, reqs)) is not None:
            from_extras.setdefault((got[0], soname), (got[1], []))[1].append(info.path)
            return None
        if problem is not None and for_torch(info, soname, cands):
            return None
        return problem if problem is None else by_torch(info, soname, cands, problem)

    # extension module -> (why it is optional, [(library, the package that provides it, if the table knows it)])
    optional: dict[str, tuple[OptionalModule, list[tuple[str, str]]]] = {}
    failed: set[str] = set()  # libraries nothing provides that a part the package cannot do without needs
    # why -> library -> the files that need it: one problem per reason and set of files (torchaudio 2.11's three
    # modules need the same five torch libraries: one line, not fifteen)
    unaccounted: dict[str, dict[str, list[str]]] = {}
    # the unsafe search path entries, as said -> the files that have them: one line per entry and depth
    # (nvidia-nvimgcodec-cu12 0.9's 17 files share '/usr/local/cuda/lib64')
    unsafe: dict[str, list[str]] = {}
    by_name: dict[tuple[str, str], list[str]] = {}  # (library, the requirement named after it) -> files
    plugin_of = plugins(elfs)
    backends = alt_model.other_backends(info.path for info in elfs)  # bitsandbytes' ROCm and XPU builds
    backend_lacks: dict[str, list[str]] = {}  # such a build -> the libraries nothing provides
    plugin_lacks: dict[str, list[str]] = {}  # plugin -> the libraries nothing provides

    def unprovided(info: ElfInfo, needed: str, cands: list[cudalibs.RuntimeLib], problem: str) -> None:
        """A library nothing provides: a problem, or a note when the file is an optional part of the package."""
        if info.path in plugin_of and info.path not in alts:
            plugin_lacks.setdefault(info.path, []).append(needed)
            return
        if info.path in backends:
            backend_lacks.setdefault(info.path, []).append(needed)
            return
        opt = imports.optional(info.path) if imports is not None and info.path not in alts else None
        if opt is None:
            failed.add(needed)
            said = f"{info.path} needs {needed}: "
            if info.path in alts or not problem.startswith(said):
                problems.append(problem)  # an alternative's problems are joined per file below
            else:
                unaccounted.setdefault(problem[len(said) :], {}).setdefault(needed, []).append(info.path)
        else:
            optional.setdefault(info.path, (opt, []))[1].append((needed, cands[-1].package if cands else ""))

    def judge_file(info: ElfInfo) -> None:
        major = alts[info.path].major if info.path in alts else cuda_major  # an alternative has its own
        if problem := cxx_runtime_problem(info):
            problems.append(problem)
        resolved = resolve_entries(info.search_path, info.path)
        if bad := [e for e in resolved if not e.safe]:
            unsafe.setdefault(f"{'entry' if len(bad) == 1 else 'entries'}: {describe(bad)}", []).append(info.path)
        if dead := [e for e in resolved if e.kind == "python-lib"]:
            notes.append(f"{info.path}: RPATH/RUNPATH {describe(dead)}")
        for loaded in info.loads:  # opened at run time (NVRTC for embedded sources): its wheel must be required
            cands = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == loaded]
            if major is not None:
                cands = [lib for lib in cands if lib.cuda_major == major] or cands
            if cands and (problem := judge(info, loaded, cands)):
                problems.append(problem.replace(" needs ", " loads at run time ", 1))
        # A library opened by name may be optional (NCCL for several GPUs): said, not failed, when nothing installs
        # it. Names of another CUDA major are fallbacks tried in turn (onnxruntime-gpu 1.31's CUDA 13 provider names
        # libcudart.so.12 and .13), not what a file of its major loads; in a file of no known major, the names of one
        # library for several majors are such a chain (cudnn-frontend 1.32's module opens libcudart.so.13 or .12,
        # whichever it finds): one note when none of them is provided, none when one is.
        chains: dict[str, list[tuple[str, list[cudalibs.RuntimeLib], bool]]] = {}
        for opened in info.opens:
            cands = [
                lib
                for lib in cudalibs.RUNTIME_LIBS
                if lib.soname == opened and (major is None or lib.cuda_major == major)
            ]
            if cands:
                missing = (
                    opened not in inside
                    and _cuda_library_problem(info, opened, cands, reqs) is not None
                    and _extra_provider(cands, reqs) is None
                    and not _torch_enough(opened, cands, alternative=info.path in alts)
                    and not by_graph(info, opened)
                )
                chains.setdefault(opened.split(".so", 1)[0], []).append((opened, cands, missing))
        for chain in chains.values():
            if not all(missing for _o, _c, missing in chain):
                continue
            chain.sort(key=lambda link: -max(lib.cuda_major for lib in link[1]))  # the newest major first
            names = " or ".join(opened for opened, _c, _m in chain)
            every = [lib for _o, cands, _m in chain for lib in cands]
            wanted = " or ".join(f"{lib.package}, CUDA {lib.cuda_major}" for lib in every)
            # dlopen by name searches the opener's RUNPATH, LD_LIBRARY_PATH and the system's folders, and takes a
            # library of that name already loaded: installing the nvidia-* wheel helps only through one of those
            reached = _reaching(info, (lib.folder for lib in every))
            how = (
                f"installed, that wheel is found through its RPATH entry {reached}"
                if reached
                else f"no search path of {info.path} reaches "
                f"{'that wheel' + chr(39) + 's folder' if len(every) == 1 else 'those wheels' + chr(39) + ' folders'} "
                f"({', '.join(dict.fromkeys(lib.folder for lib in every))}), so installing it alone does not "
                "help: the library must already be loaded (torch loads its nvidia-* libraries at import) or sit on "
                "the loader's path (a CUDA toolkit, LD_LIBRARY_PATH)"
            )
            said = (
                "the name is in its read-only data"
                if len(chain) == 1
                else "names of several CUDA majors in its read-only data: it takes whichever it finds"
            )
            # A requirement on the library's wheel that admits any release of it (nvidia-cudnn-cu13 9.28 requires
            # plain `nvidia-cublas`, nvidia-cufft 12.5 `nvidia-nvjitlink`) installs the library today: the fault is
            # the missing pin, not a missing requirement.
            pinless = next(((lib, r) for lib in every if (r := _requirement_on(lib, reqs)) is not None), None)
            if pinless is not None:
                lib, unpinned = pinless
                through = (
                    ""
                    if canonicalize_name(unpinned.name) == lib.package
                    else f" through its requirement on {lib.package}"
                )
                notes.append(
                    f"{info.path} opens {names} at run time (dlopen; {said}); Requires-Dist '{unpinned}' installs it"
                    f"{through}, but does not pin {unpinned.name} to CUDA {lib.cuda_major}: a release of another CUDA "
                    f"major, which pip may install, has another SONAME; {how}"
                )
                continue
            notes.append(
                f"{info.path} opens {names} at run time (dlopen; {said}), and no requirement of the wheel installs "
                f"{'it' if len(chain) == 1 else 'any of them'} ({wanted}); {how}; else what needs it fails when it runs"
            )
        for needed in info.needed:
            if needed in inside or needed in policy.whitelist or needed in cudalibs.DRIVER_SONAMES:
                continue
            if any(fnmatch.fnmatchcase(needed, pat) for pat in SYSTEM_LOADERS):
                continue
            cands = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == needed]
            if major is not None:
                cands = [lib for lib in cands if lib.cuda_major == major] or cands
            if cands:
                if problem := judge(info, needed, cands):
                    # a requirement that pins the wrong major is a fault of the wheel's metadata, optional part or not
                    required = any(_requirement_on(lib, reqs) for lib in cands)
                    if required:
                        problems.append(problem)
                    elif not by_graph(info, needed):
                        unprovided(info, needed, cands, unread(problem))
                continue
            if provided := _external_provider(info, reqs):
                # An RPATH entry into a required project's folder says where the file looks, not what is there:
                # pennylane-lightning-gpu 0.45's libcustatevec.so.1 was "found" in scipy_openblas32/lib. Where the
                # index tells which requirement installs the library, that answers (and whether RPATH reaches it);
                # where it was not read (offline, or a requirement it could not tell), the folder is taken on trust.
                if by_graph(info, needed):
                    continue
                if graph is None or graph.unread:
                    notes.append(
                        f"{info.path} needs {needed}: its RPATH entry {provided[0]} reaches a folder of Requires-Dist "
                        f"{provided[1]}, taken to hold it ("
                        + ("offline: the index would tell" if graph is None else "the index did not tell its files")
                        + ")"
                    )
                    continue
            # torch's libraries go to the torch rules first: its tables say which releases load them at import
            if not torchext.is_torch_library(needed) and by_graph(info, needed):
                continue
            if for_torch(info, needed, []):
                continue
            if named := _named_provider(needed, reqs):
                by_name.setdefault((needed, str(named)), []).append(info.path)
                continue
            problem = (
                f"{info.path} needs {needed}: not in the wheel, not a CUDA runtime library from PyPI, "
                f"not in an RPATH folder of a required project, and not allowed by {policy.name}"
            )
            if graph is None and reqs.always and (foreign := _foreign_folders(info, tops)):
                # Offline, a folder of another project that a search path names may be a requirement's whose folder
                # is not named like it (tilelang 0.1.15: tvm_ffi/lib of apache-tvm-ffi, z3/lib of z3-solver): the
                # failure says what is not known, not that no requirement has it.
                problem = (
                    f"{info.path} needs {needed}: not in the wheel, not a CUDA runtime library from PyPI, not allowed "
                    f"by {policy.name}, and not in an RPATH folder named like a required project; its RPATH reaches "
                    f"{', '.join(foreign)}, other projects' folders, and offline it is not known whether a "
                    "requirement installs it there (without --offline the index tells)"
                )
            if (problem := by_torch(info, needed, [], problem)) and not (
                torchext.is_torch_library(needed) and by_graph(info, needed)
            ):
                unprovided(info, needed, [], unread(problem))

    for info in elfs:
        if (copy := cudalibs.vendored(info.path)) is not None:
            lib = next((c for c in copy.candidates if c.cuda_major == cuda_major), copy.candidates[-1])
            notes.append(
                f"{info.path} is a copy of {copy.real_name} ({lib.package}"
                + (", loaded by its library" if copy.companion else "")
                + f"): {_second_copy(lib, torch)}; `slimwheel repair` replaces it with that wheel"
            )
        before = len(problems)
        judge_file(info)
        if info.path in alts and len(problems) > before:
            # an alternative is judged on its own: its problems in one line, named as the alternative it is
            a = alts[info.path]
            n = sum(1 for x in alts.values() if x.group == a.group)
            mine = [p.removeprefix(f"{info.path}: ").removeprefix(f"{info.path} ") for p in problems[before:]]
            problems[before:] = [
                f"{info.path} (alternative for CUDA {a.cuda}, one of {n} loaded per process): " + "; ".join(mine)
            ]
    notes += _named_notes(by_name)
    notes += _backend_notes(backend_lacks, backends)
    notes += [
        f"{path} is a plugin: {plugin_of[path]} opens it by name, and no file of the wheel needs it; it needs "
        f"{', '.join(libs)}, which neither the wheel nor its requirements install, so opening it fails where the "
        "system does not provide them (whether the package works without that plugin, the wheel does not show)"
        for path, libs in plugin_lacks.items()
    ]
    problems += _unaccounted_problems(unaccounted)
    problems += _torchless_problems(torchless, brought_by)
    problems += [f"{abbreviated(paths)}: unsafe RPATH/RUNPATH {said}" for said, paths in unsafe.items()]
    by_path = {info.path: info for info in elfs}

    def unreached(soname: str, files: Iterable[str]) -> str:
        """The library's folder, when no search path of any of the files reaches it."""
        rows = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname]
        folders = {lib.folder for lib in rows}
        if any(_reaching(by_path[f], folders) for f in files):
            return ""
        mine = sorted(lib.folder for lib in rows if lib.cuda_major == cuda_major) or sorted(folders)
        return mine[0] if mine else ""

    provisions = tuple(
        ExtraProvision(
            extra=extra,
            soname=soname,
            requirement=str(req),
            files=tuple(dict.fromkeys(fs)),
            unreached=unreached(soname, fs),
        )
        for (extra, soname), (req, fs) in from_extras.items()
    )
    notes += extra_notes(provisions, name=name)
    # torch's own libraries come in sixes (libc10.so ... libtorch_cuda.so): one note for those that the same files need
    # from the same releases' torch/lib, one per library otherwise
    shipped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for soname, (t, paths) in from_torch.items():
        if t.how.startswith("ship"):
            shipped.setdefault((str(t.req), t.providing, tuple(paths)), []).append(soname)
            continue
        shown = abbreviated(paths)
        notes.append(
            f"{shown} need(s) {soname}: no requirement of the wheel installs it, but Requires-Dist '{t.req}' does: "
            f"torch {', '.join(t.providing)} from PyPI {t.how} and load it at `import torch`, and the "
            "loader uses that copy when torch is imported before these libraries are loaded"
        )
    for (req, providing, files), sonames in shipped.items():
        one = from_torch[sonames[0]][0]
        how = f"{one.how} and load it" if len(sonames) == 1 else "ship(s) them in torch/lib and load them"
        shown = abbreviated(files)
        notes.append(
            f"{shown} need(s) {', '.join(sonames)}: no requirement of the wheel installs "
            f"{'them' if len(sonames) > 1 else 'it'}, but Requires-Dist '{req}' does: torch {', '.join(providing)} "
            f"from PyPI {how} at `import torch`, and the loader uses those copies when torch is imported before "
            "these libraries are loaded"
        )
    notes += _transitive_notes(transitive, name)
    for path, (opt, libs) in optional.items():
        packages = ", ".join(dict.fromkeys(p for _, p in libs if p))
        others = [lib for lib, p in libs if not p]
        if packages and others:  # installing the CUDA wheels alone does not turn it on (sgl-kernel needs torch too)
            hint = f" (pip install {packages} brings the CUDA ones; {', '.join(others)} must come from elsewhere)"
        else:
            hint = f" (pip install {packages} turns it on)" if packages else ""
        notes.append(
            f"{path} needs {', '.join(lib for lib, _ in libs)}, which no requirement of the wheel installs; it is an "
            f"optional part: the package imports {opt.module} only where it survives the import failing "
            f"(try/except ImportError at {abbreviated(opt.guards)}), so without "
            f"{'them' if len(libs) > 1 else 'it'} that feature is off and the rest works{hint}"
        )
    only_optional = dict.fromkeys(lib for _, libs in optional.values() for lib, _ in libs if lib not in failed)
    return DependencyVerdict(
        problems=tuple(problems), notes=tuple(notes), from_extras=provisions, optional=tuple(only_optional)
    )


def _named_notes(by_name: Mapping[tuple[str, str], Sequence[str]]) -> list[str]:
    """One note per library named after a requirement ((library, requirement) -> the files that need it)."""
    out = []
    for (needed, named), paths in by_name.items():
        one = len(paths) == 1
        out.append(
            f"{abbreviated(paths)} {'needs' if one else 'need'} {needed}, which no search path of "
            f"{'it' if one else 'them'} finds: Requires-Dist '{named}' is named after it; such library wheels "
            "(RAPIDS': librmm-cu12 installs librmm/lib64/librmm.so) load it when imported, and the loader uses that "
            "copy if they are imported before these files load, which the wheel's own files do not show"
        )
    return out


def _backend_notes(lacks: Mapping[str, Sequence[str]], backends: Mapping[str, str]) -> list[str]:
    """One note per set of libraries that builds for another GPU platform need and nothing provides."""
    by_libs: dict[tuple[str, ...], list[str]] = {}
    for path, libs in lacks.items():
        by_libs.setdefault(tuple(libs), []).append(path)
    return [
        f"{abbreviated(paths)} ({', '.join(dict.fromkeys(backends[p] for p in paths))}: "
        f"{'a build' if len(paths) == 1 else 'builds'} for another GPU platform beside the per-CUDA ones, one "
        "loaded per process where the package runs on that platform) "
        f"{'needs' if len(paths) == 1 else 'need'} {', '.join(libs)}, which come with that platform's own stack "
        "(its drivers and runtime, or its build of torch), not with the wheel's requirements"
        for libs, paths in by_libs.items()
    ]


def _torchless_problems(torchless: Mapping[str, Sequence[str]], brought_by: Mapping[str, Sequence[str]]) -> list[str]:
    """The one problem of the torch extensions of a wheel that requires no torch (file -> the libraries a torch
    requirement would bring; library -> the PyPI torch releases that install it): one reason, so one line, with every
    such file and the libraries of them all."""
    from slimwheel import torchext

    if not torchless:
        return []
    libs = list(dict.fromkeys(lib for needed in torchless.values() for lib in needed))
    own = [lib for lib in libs if torchext.is_torch_library(lib)]
    by_releases: dict[tuple[str, ...], list[str]] = {}
    for lib in libs:
        if lib not in own:
            by_releases.setdefault(tuple(brought_by.get(lib, ())), []).append(lib)
    parts = [f"torch's libraries ({', '.join(own)})"] if own else []
    parts += [
        f"{', '.join(brought)}, which PyPI's torch {abbreviated(releases, 4)} install{'s' if len(releases) == 1 else ''}"
        for releases, brought in by_releases.items()
    ]
    return [
        f"{abbreviated(torchless)} {'needs' if len(torchless) == 1 else 'need'} {' and '.join(parts)}, but the wheel "
        "has no Requires-Dist on torch: pip may install it without torch, or beside a torch it cannot load"
    ]


def _unaccounted_problems(unaccounted: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    """One problem per reason and set of needing files (reason -> library -> files), naming its libraries."""
    out = []
    for why, libs in unaccounted.items():
        by_files: dict[tuple[str, ...], list[str]] = {}
        for lib, paths in libs.items():
            by_files.setdefault(tuple(paths), []).append(lib)
        for files, sonames in by_files.items():
            out.append(f"{abbreviated(files)} {'needs' if len(files) == 1 else 'need'} {', '.join(sonames)}: {why}")
    return out


def _transitive_notes(transitive: Mapping[tuple[str, Provider, str], Sequence[str]], name: str) -> list[str]:
    """One note per provider and set of needing files ((library, provider, RPATH entry that reaches it or "") ->
    files): nvidia-cublas-cu12's libcublas.so.12 and libcublasLt.so.12 share one."""
    grouped: dict[tuple[tuple[str, ...], str, str, tuple[str, ...], str], list[Provider]] = {}
    for (_soname, p, entry), needing in transitive.items():
        grouped.setdefault((tuple(needing), p.project, p.version, p.chain, entry), []).append(p)
    out = []
    for (files, project, version, _chain, entry), ps in grouped.items():
        found = (
            f"found through its RPATH entry {entry}"
            if entry
            else "the loader finds that copy when it is loaded before these files (RAPIDS' and NVIDIA's library "
            "wheels load theirs when imported), which the wheel's own files do not show"
        )
        who = "a requirement of the wheel" if len(ps[0].chain) == 1 else "a requirement's requirement"
        out.append(
            f"{abbreviated(files)} need(s) {', '.join(p.soname for p in ps)}, which {who} installs: "
            f"{name or 'the wheel'} {ps[0].how()}, and {project} {version} (the version the index offers now) "
            f"installs {', '.join(p.path for p in ps)}; {found}"
        )
    return out


def extra_notes(provisions: Sequence[ExtraProvision], *, name: str = "") -> list[str]:
    """One note per extra: which CUDA libraries it installs, for which files, and what happens without it."""
    out = []
    for extra in dict.fromkeys(p.extra for p in provisions):
        ps = [p for p in provisions if p.extra == extra]
        reqs = ", ".join(dict.fromkeys(p.requirement for p in ps))
        files = sorted({f for p in ps for f in p.files})
        shown = abbreviated(files)
        # a library the required wheel requires itself (onnxruntime-gpu's cuBLAS through nvidia-cudnn-cu13)
        through = sorted(
            {
                f"{provider} requires {lib.package}"
                for p in ps
                for provider in [str(canonicalize_name(Requirement(p.requirement).name))]
                for lib in cudalibs.RUNTIME_LIBS
                if lib.soname == p.soname and lib.package in cudalibs.WHEEL_REQUIRES.get(provider, ())
            }
        )
        reqs += f" ({'; '.join(through)})" if through else ""
        out.append(
            f"CUDA libraries come with the extra '{extra}' (pip install '{name or 'the wheel'}[{extra}]'): "
            f"{', '.join(p.soname for p in ps)}, from Requires-Dist {reqs}; without the extra, {len(files)} file(s) "
            f"({shown}) load only where those libraries come from elsewhere (a CUDA toolkit, conda, or the nvidia-* "
            "wheels installed on their own, where the loader or the package's own loading code finds them), else "
            "loading those files fails"
            + (
                f"; with it, no search path of those files reaches {', '.join(sorted({p.unreached for p in ps}))}, "
                "so the libraries are found only once loaded (by the package's own preloading, or torch's import)"
                if all(p.unreached for p in ps)
                else ""
            )
        )
    return out
