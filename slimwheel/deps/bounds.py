"""The CUDA major's libraries and the bounds of the requirements repair writes (docs/repair.md): upper bound = next
SONAME major; lower bound: `floor_for` (the major's first release when it exports every symbol the wheel uses, else
the version built against, else the CUDA release for components versioned by it, else the SONAME major)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.major import UNIQUE_SONAMES
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo

# Components whose nvidia-* wheel version follows the CUDA release (nvidia-cuda-runtime 13.5.x ships with CUDA 13.5).
# cuBLAS did up to CUDA 12 (nvidia-cublas-cu12 12.4.5 with CUDA 12.4), no longer on CUDA 13: cuda-toolkit 13.0.2 ships
# nvidia-cublas 13.1, 13.4.1 ships 13.7, 13.5.0 ships 13.10 (PyPI's cuda-toolkit pins, read 2026-12-01).
_FOLLOWS_CUDA_RELEASE = frozenset({"cudart", "nvrtc", "nvJitLink"})
_FOLLOWS_CUDA_RELEASE_UP_TO_12 = frozenset({"cublas", "cublasLt"})


def _follows_release(lib: cudalibs.RuntimeLib) -> bool:
    return lib.component in _FOLLOWS_CUDA_RELEASE or (
        lib.component in _FOLLOWS_CUDA_RELEASE_UP_TO_12 and lib.cuda_major <= 12
    )


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
    base = cudalibs.baseline().get(str(lib.cuda_major), {}).get("packages", {}).get(lib.package)
    if base is not None and imports is not None:
        exported: dict[str, list[str]] = base["libraries"]
        used = {so: imports.get(so, frozenset()) for so in exported}
        newer = sorted(n for so, names in used.items() for n in names - set(exported[so]))
        if not newer and any(used.values()):
            release = cudalibs.baseline()[str(lib.cuda_major)]["release"]
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
    text = f"{lib.package}>={floor.version},<{upper_bound(lib)}"
    Requirement(text)  # validates
    return text


def upper_bound(lib: cudalibs.RuntimeLib) -> str:
    """The first package version that does not ship lib: the release that dropped it, else the next major."""
    return lib.until or str(lib.version_major + 1)


def admits_past(req: Requirement, lib: cudalibs.RuntimeLib) -> bool:
    """Does the requirement admit a release that no longer installs lib (`RuntimeLib.until`)? pip takes the newest."""
    if lib.until is None:
        return False
    until = Version(lib.until)
    probes = [
        until,
        Version(f"{until.major}.{until.minor}.99"),
        Version(f"{until.major}.99"),
        Version(f"{until.major + 1}.0"),
    ]
    return any(req.specifier.contains(v, prereleases=True) for v in probes)


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
        if (have := out.get(lib.package)) is not None:
            # two libraries of one wheel: the higher floor and the lower upper bound (nvidia-nvtx-cu12's two)
            lower = max(_bound(have, ">="), _bound(req, ">="), key=Version)
            upper = min(_bound(have, "<"), _bound(req, "<"), key=Version)
            req = f"{lib.package}>={lower},<{upper}"
        out[lib.package] = req
    return out


def _bound(req: str, operator: str) -> str:
    return next(c.version for c in Requirement(req).specifier if c.operator == operator)


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
