"""PyTorch extensions: what they take from torch, which torch releases they serve, and what they must require.

An extension built with `torch.utils.cpp_extension` or CMake's `find_package(Torch)` needs torch's own libraries
(libc10.so, libtorch.so, ..., `TORCH_SONAMES`). They are never bundled: repair leaves them to torch's wheel (through
the external-library machinery of `slimwheel.external`, RPATH `$ORIGIN/.../torch/lib`), and in a process where
`import torch` ran the dynamic loader reuses the copies already loaded by SONAME.

Which torch releases an extension serves follows from the symbols it imports from those libraries:
- any C++ symbol of c10, at, torch or caffe2 (the classic API): libtorch's C++ ABI changes with every minor release,
  so the wheel serves exactly the minor it was built against (`torch==2.11.*`);
- only C functions of the stable ABI's shim (torch/csrc/stable, the AOTI C shim): every release from the newest
  release among the ones that introduced them (resources/torch-abi.json, read from the headers' version gates), and
  not before the first PyPI release built with the extension's CUDA major (PyPI's torch 2.10 is CUDA 12.8, 2.11 is
  CUDA 13.0; a CUDA 13 extension beside a CUDA 12 torch would load a second CUDA runtime).

The nvidia-* requirements of such a wheel must admit the versions torch pins (resources/torch-abi.json, from each
release's METADATA), so that pip never has two cuBLAS versions to reconcile. Decided here; `repair`, `check` and
`build` call it.
"""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from slimwheel.errors import BadInputError
from slimwheel.external import ExternalLib, external_lib

if TYPE_CHECKING:
    from slimwheel.cuda.arch import Target
    from slimwheel.inspect.elf import ElfReport
    from slimwheel.inspect.files import Buffer

TORCH_FOLDER = "torch/lib"  # where torch's wheel installs its libraries, relative to site-packages
# C++ names in torch's namespaces (mangled: _ZN3c10..., _ZNK2at6Tensor..., vtables and typeinfo _ZTVN3c10...).
_CXX_TORCH = re.compile(r"^_Z(?:T[VIS])?N[rVK]*(?:3c10|2at|5torch|6caffe2)[0-9ISCDL]")
# Torch's libraries of other releases than the table's (libtorch_cuda_cu.so of 1.x): same family of names.
_TORCH_LIB = re.compile(r"^lib(?:c10|torch|caffe2_nvrtc|shm)\w*\.so$")
# Minor releases probed when reading what a requirement admits (torch 1.0 .. 3.9).
_PROBES = tuple((major, minor) for major in (1, 2, 3) for minor in range(0, 41 if major == 2 else 14))


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    """resources/torch-abi.json (devtools/torch_abi.py)."""
    text = importlib.resources.files("slimwheel.resources").joinpath("torch-abi.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def torch_sonames() -> tuple[str, ...]:
    return tuple(_data()["libraries"])


def is_torch_library(soname: str) -> bool:
    return soname in torch_sonames() or bool(_TORCH_LIB.match(soname))


def _stable_table() -> dict[str, str]:
    table: dict[str, str] = _data()["stable_symbols"]
    return table


def is_torch_symbol(name: str) -> bool:
    """A symbol an extension takes from torch: a C++ name in its namespaces, or a C function of the stable shim."""
    return bool(_CXX_TORCH.match(name)) or name in _stable_table() or name.startswith(("aoti_torch_", "torch_"))


@dataclass(frozen=True, kw_only=True)
class PypiRelease:
    """A torch minor release as PyPI serves it by default: its CUDA version and its nvidia-* pins."""

    minor: str  # 2.11
    version: str  # 2.11.0, the release the pins were read from
    cuda: str  # 13.0
    pins: dict[str, str]

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])


def pypi_releases() -> tuple[PypiRelease, ...]:
    return tuple(
        PypiRelease(minor=k, version=v["version"], cuda=v["cuda"], pins=dict(v["pins"]))
        for k, v in sorted(_data()["pypi_releases"].items(), key=lambda kv: Version(kv[0]))
    )


@dataclass(frozen=True, kw_only=True)
class ShippedLibs:
    """What one PyPI torch release ships in torch/lib for one machine (resources/torch-lib.json,
    devtools/torch_libs.py), and which of those `import torch` loads: a chain of DT_NEEDED from torch/_C or
    libtorch_global_deps.so (which torch/__init__.py opens) names it, under that name."""

    version: str  # 2.11.0
    machine: str  # x86_64
    files: tuple[str, ...]  # file names in torch/lib: libgomp.so.1, or auditwheel's libgomp-a34b3233.so.1
    loaded: Mapping[str, str]  # name -> the library whose DT_NEEDED names it


@functools.lru_cache(maxsize=1)
def shipped_libs() -> dict[str, dict[str, ShippedLibs]]:
    """minor -> machine -> ShippedLibs, oldest minor first."""
    text = importlib.resources.files("slimwheel.resources").joinpath("torch-lib.json").read_text("utf-8")
    releases: dict[str, Any] = json.loads(text)["releases"]
    return {
        minor: {
            machine: ShippedLibs(
                version=r["version"], machine=machine, files=tuple(m["files"]), loaded=dict(m["loaded"])
            )
            for machine, m in r["machines"].items()
        }
        for minor, r in sorted(releases.items(), key=lambda kv: Version(kv[0]))
    }


def _minor(v: Version) -> str:
    return f"{v.major}.{v.minor}"


@dataclass(frozen=True, kw_only=True)
class TorchUse:
    """What a wheel's ELF files take from torch."""

    files: tuple[str, ...]  # ELF files that need torch's libraries
    needed: tuple[str, ...]  # torch's SONAMEs they need
    unstable: tuple[str, ...]  # C++ symbols of torch's namespaces (classic API)
    stable: tuple[str, ...]  # C functions of the stable ABI's shim
    floor: str | None  # stable only: the oldest release that has every one of them (major.minor); None: not known

    @property
    def abi(self) -> Literal["stable", "unstable"]:
        return "unstable" if self.unstable else "stable"

    @property
    def unknown(self) -> tuple[str, ...]:
        """Shim-like C names the table does not hold (newer than the torch the table was read from)."""
        return tuple(s for s in self.stable if s not in _stable_table())

    def summary(self) -> str:
        if self.unstable:
            return (
                f"classic C++ API: {len(self.unstable)} C++ symbols of torch (e.g. {self.unstable[0]}), "
                f"{len(self.stable)} of the stable C shim"
            )
        floor = f", every one in torch >= {self.floor}" if self.floor else ""
        return f"stable ABI only: {len(self.stable)} C functions of the shim{floor}"


def torch_use(needed: Mapping[str, Sequence[str]], imports: Mapping[str, Iterable[str]]) -> TorchUse | None:
    """`needed`: ELF path -> DT_NEEDED; `imports`: ELF path -> the torch symbols it imports (`is_torch_symbol`).
    None when no file needs a torch library."""
    files = tuple(p for p, names in needed.items() if any(is_torch_library(n) for n in names))
    if not files:
        return None
    libs = tuple(dict.fromkeys(n for p in files for n in needed[p] if is_torch_library(n)))
    syms = sorted({s for p in files for s in imports.get(p, ())})
    unstable = tuple(s for s in syms if _CXX_TORCH.match(s))
    stable = tuple(s for s in syms if not _CXX_TORCH.match(s))
    table = _stable_table()
    known = [table[s] for s in stable if s in table]
    floor = None
    if stable and len(known) == len(stable):
        floor = max(known, key=Version)
    return TorchUse(files=files, needed=libs, unstable=unstable, stable=stable, floor=floor)


# ------------------------------------------------------------------------------------------ the torch requirement


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """The torch a wheel was built against: its version and the CUDA version it was built with."""

    version: Version
    cuda: str | None  # "13.0"; None for a CPU build

    @property
    def cuda_major(self) -> int | None:
        return int(self.cuda.split(".")[0]) if self.cuda else None


def installed_torch(site: Path | None = None) -> TorchBuild | None:
    """The torch of the running Python (or of a site-packages folder), read from torch/version.py without importing
    torch (an import loads its CUDA libraries, which a build machine need not have)."""
    if site is not None:
        version_py = site / "torch" / "version.py"
    else:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return None
        version_py = Path(spec.origin).with_name("version.py")
    try:
        text = version_py.read_text(encoding="utf-8")
    except OSError:
        return None
    return parse_version_py(text, where=str(version_py))


def parse_version_py(text: str, *, where: str) -> TorchBuild:
    v = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    c = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([0-9.]+)['\"]|None)", text, re.M)
    if v is None:
        raise BadInputError(f"{where}: no __version__ line; not torch's version.py")
    try:
        version = Version(v.group(1))
    except InvalidVersion:
        raise BadInputError(f"{where}: __version__ {v.group(1)!r} is not a version") from None
    return TorchBuild(version=version, cuda=c.group(1) if c and c.group(1) else None)


def pinned_build(requires: Iterable[str], *, cuda_major: int | None) -> TorchBuild | None:
    """The torch a wheel pins itself to, as built: an unconditional Requires-Dist on exactly one torch release
    (torchvision 0.26.0: `torch==2.11.0`) whose PyPI build has the wheel's CUDA major (that build's CUDA version).
    None otherwise: a range, a marker, a release slimwheel's table does not know, or another CUDA major (a build
    from PyTorch's own index, cu126, pins the same version)."""
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch" or req.marker is not None or len(req.specifier) != 1:
            continue
        (clause,) = req.specifier
        if clause.operator not in ("==", "===") or "*" in clause.version:
            continue
        try:
            version = Version(clause.version)
        except InvalidVersion:
            continue
        rel = {r.minor: r for r in pypi_releases()}.get(_minor(version))
        if rel is not None and version.local is None and rel.cuda_major == cuda_major:
            return TorchBuild(version=version, cuda=rel.cuda)
    return None


def parse_torch_option(text: str) -> TorchBuild:
    """`--torch 2.11.0+cu130`: the version, and the CUDA version its local part names (cu130 -> 13.0; cpu -> None);
    without a local part, the CUDA version of PyPI's build of that minor."""
    try:
        v = Version(text.strip())
    except InvalidVersion:
        raise BadInputError(f"--torch {text!r}: not a version (e.g. 2.11.0+cu130)") from None
    if v.local is not None:
        m = re.fullmatch(r"cu(\d+)(\d)", v.local)
        if v.local == "cpu":
            return TorchBuild(version=v, cuda=None)
        if m is None:
            raise BadInputError(f"--torch {text}: local part {v.local!r} names no CUDA build (cu130, cu128, cpu)")
        return TorchBuild(version=v, cuda=f"{m.group(1)}.{m.group(2)}")
    rel = {r.minor: r for r in pypi_releases()}.get(_minor(v))
    if rel is None:
        raise BadInputError(
            f"--torch {text}: slimwheel does not know PyPI's build of torch {_minor(v)}",
            hint="name the CUDA build: e.g. 2.12.0+cu130",
        )
    return TorchBuild(version=v, cuda=rel.cuda)


def first_release_for(cuda_major: int) -> PypiRelease | None:
    """The oldest PyPI torch release whose default build is for this CUDA major."""
    return next((r for r in pypi_releases() if r.cuda_major == cuda_major), None)


def requirement(use: TorchUse, built: TorchBuild, *, cuda_major: int | None) -> str:
    """`torch==2.11.*` for the classic C++ API; `torch>=FLOOR` for the stable ABI, FLOOR the newest of: the release
    that introduced its newest shim function (the version built against when one is unknown), and the first PyPI
    release built with the extension's CUDA major."""
    release = Version(built.version.base_version)
    if use.abi == "unstable":
        return f"torch=={release.major}.{release.minor}.*"
    floors = [Version(use.floor) if use.floor else Version(_minor(release))]
    if cuda_major is not None and (first := first_release_for(cuda_major)) is not None:
        floors.append(Version(first.minor))
    return f"torch>={_minor(max(floors))}"


def externals(use: TorchUse, req: str) -> tuple[ExternalLib, ...]:
    """Each torch library the wheel needs, left to torch's wheel: excluded, required, found in torch/lib."""
    return tuple(external_lib(n, req, TORCH_FOLDER, where="torch") for n in use.needed)


def cuda_mismatch(built: TorchBuild, toolkit_major: int, *, where: str) -> str | None:
    """Why a toolkit of this CUDA major must not build against this torch, or None."""
    if built.cuda_major is None:
        return (
            f"{where}: torch {built.version} is a CPU build (torch.version.cuda is None), but the extension is "
            f"built with CUDA {toolkit_major}; install a CUDA build of torch"
        )
    if built.cuda_major != toolkit_major:
        return (
            f"{where}: the toolkit is CUDA {toolkit_major}, but torch {built.version} was built with CUDA "
            f"{built.cuda}; one process would load two CUDA runtimes"
        )
    return None


def admitted_minors(spec: SpecifierSet) -> list[str]:
    """The torch minor releases (1.0 .. 3.13) a specifier admits some version of."""
    out = []
    for major, minor in _PROBES:
        if any(spec.contains(Version(f"{major}.{minor}.{p}"), prereleases=True) for p in (0, 1, 99)):
            out.append(f"{major}.{minor}")
    return out


def table_minors() -> tuple[str, ...]:
    """The torch minors slimwheel's tables were read from (torch-lib.json, torch-abi.json), oldest first."""
    return tuple(sorted({*shipped_libs(), *(r.minor for r in pypi_releases())}, key=Version))


def minors_text(minors: Sequence[str]) -> str:
    """Admitted minors as a note names them: none newer than slimwheel's tables (the probes run to 3.13, torch does
    not), "and later releases" for those; a long run abbreviated: "2.0 ... 2.11 (12 minors)"."""
    newest = Version(table_minors()[-1])
    known = [m for m in minors if Version(m) <= newest]
    shown = releases_text(known, unit="minors") if known else f"releases after {newest}"
    return shown + (" and later releases" if known and len(known) < len(minors) else "")


def release_label(minor: str, version: str, spec: SpecifierSet) -> str:
    """How a note names a minor of slimwheel's tables: the release the table was read from where the requirement
    admits it, else the minor alone (`torch==2.4.0` admits 2.4, not 2.4.1, the release torch-lib.json read)."""
    return version if spec.contains(Version(version), prereleases=True) else minor


def releases_text(labels: Sequence[str], *, unit: str = "releases") -> str:
    """Torch releases in a note: up to three named, a longer run as its ends and a count ("2.4.1 ... 2.11.0 (8
    releases)"), so that a note stays one short line; labels that name no release ("releases after 2.11") follow."""
    named = [x for x in labels if x[:1].isdigit()]
    rest = [x for x in labels if not x[:1].isdigit()]
    head = ", ".join(named) if len(named) <= 3 else f"{named[0]} ... {named[-1]} ({len(named)} {unit})"
    return ", ".join(x for x in (head, *rest) if x)


@dataclass(frozen=True, kw_only=True)
class TorchVerdict:
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    serves: tuple[str, ...]  # the torch minors the requirement admits (empty: none stated)


def judge(use: TorchUse, requires: Sequence[str], *, cuda_major: int | None) -> TorchVerdict:
    """The torch requirement present and consistent with what the wheel imports; the CUDA major of every PyPI torch
    it admits equal to the wheel's; torch's nvidia-* pins inside the wheel's own nvidia-* requirements."""
    problems: list[str] = []
    notes = [f"torch: {use.summary()}; needs {', '.join(use.needed)}"]
    reqs = [r for r in _parse(requires) if canonicalize_name(r.name) == "torch" and not _extra_only(r)]
    if not reqs:
        # no torch requirement: the dependency rules say so, once, with the CUDA libraries torch would have brought
        # (deps.dependency_problems), or name the requirement's requirement that installs torch
        return TorchVerdict(problems=(), notes=tuple(notes), serves=())
    spec = SpecifierSet(",".join(str(r.specifier) for r in reqs if str(r.specifier)))
    minors = admitted_minors(spec)
    shown = f"'{', '.join(str(r) for r in reqs)}'"
    if use.abi == "unstable":
        if len(minors) != 1:
            span = minors_text(minors) if minors else "no release"
            problems.append(
                f"it uses torch's C++ ABI, which changes with every minor release (e.g. {use.unstable[0]}), "
                f"but Requires-Dist {shown} admits torch {span}: pin one minor (torch==X.Y.*)"
            )
    else:
        if use.floor and minors and Version(minors[0]) < Version(use.floor):
            problems.append(
                f"it uses stable-ABI functions first in torch {use.floor} "
                f"({', '.join(s for s in use.stable if _stable_table().get(s) == use.floor)[:200]}), "
                f"but Requires-Dist {shown} admits torch {minors[0]}"
            )
        if use.unknown:
            notes.append(
                f"torch: shim functions newer than slimwheel's table (torch {_data()['torch']}): "
                f"{', '.join(use.unknown[:5])}"
            )
    known = {r.minor: r for r in pypi_releases()}
    for minor in minors:
        rel = known.get(minor)
        if rel is None:
            continue
        if cuda_major is not None and rel.cuda_major != cuda_major:
            # with its own nvidia-*-cuXX requirements the wheel brings its runtime: two in one process; without,
            # its CUDA files find none beside that torch (xformers 0.0.35's _C.so under torch 2.11)
            own = any(str(canonicalize_name(r.name)).endswith(f"-cu{cuda_major}") for r in _parse(requires))
            then = (
                "one process loads two CUDA runtimes"
                if own
                else f"beside it, no CUDA {cuda_major} libraries are installed, so its files that need them fail to "
                f"load (or, where a CUDA {cuda_major} toolkit provides them, one process loads two CUDA runtimes)"
            )
            problems.append(
                f"it is built with CUDA {cuda_major}, but Requires-Dist {shown} admits torch {minor}, "
                f"whose PyPI build is CUDA {rel.cuda}: {then}"
            )
            continue
        problems += _pin_conflicts(rel, requires)
    if len(minors) == 1:
        notes.append(f"torch: serves {minors[0]} only")
    elif minors and use.abi == "unstable":
        # a classic-ABI build loads only under the minor it was built against, whatever the requirement admits
        notes.append(f"torch: serves the one minor it was built against, of {minors_text(minors)} admitted")
    elif minors:
        notes.append(f"torch: serves {minors_text(minors)}")
    return TorchVerdict(problems=tuple(problems), notes=tuple(notes), serves=tuple(minors))


def _pin_conflicts(rel: PypiRelease, requires: Sequence[str]) -> list[str]:
    out = []
    for r in _parse(requires):
        name = str(canonicalize_name(r.name))
        pin = rel.pins.get(name)
        if pin is not None and not r.specifier.contains(Version(pin), prereleases=True):
            out.append(
                f"Requires-Dist '{r}' excludes {name} {pin}, which torch {rel.version} pins: pip cannot "
                "install both, and the process would hold torch's copy anyway"
            )
    return out


def _parse(requires: Sequence[str]) -> list[Requirement]:
    from slimwheel.wheelfile import parse_requirements

    return parse_requirements(requires)[0]


def _extra_only(r: Requirement) -> bool:
    return r.marker is not None and "extra" in str(r.marker)


def use_to_json(use: TorchUse, verdict: TorchVerdict | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "abi": use.abi,
        "files": list(use.files),
        "needed": list(use.needed),
        "stable_floor": use.floor,
        "unstable_symbols": len(use.unstable),
        "stable_symbols": len(use.stable),
        "unstable_examples": list(use.unstable[:5]),
        "stable_list": list(use.stable[:50]),
    }
    if verdict is not None:
        out["serves"] = list(verdict.serves)
        out["problems"] = list(verdict.problems)
    return out


def _own(needed: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each ELF member's DT_NEEDED without the libraries the wheel carries itself: those are no use of torch (torch's
    own wheel carries libc10.so and the rest in torch/lib)."""
    carried = {name.rsplit("/", 1)[-1] for name in needed}
    return {name: [n for n in names if n not in carried] for name, names in needed.items()}


def member_symbols(name: str, data: Buffer, elf: ElfReport) -> frozenset[str] | None:
    """The torch symbols ELF member `name` imports, from its bytes, when it needs a torch library; else None. What
    check takes from each member as it inflates for the report (`analysis.analyze`), so that none is read twice.
    Members whose torch library the wheel carries are read too; `audit_wheel` leaves them out."""
    if not any(is_torch_library(n) for n in elf.needed):
        return None
    from slimwheel.inspect.elf import undefined_symbols  # loaded by the scan, which calls this

    return undefined_symbols(data, name, is_torch_symbol)


def audit_wheel(
    path: Path, needed: Mapping[str, Sequence[str]], symbols: Mapping[str, frozenset[str]] | None = None
) -> TorchUse | None:
    """`torch_use` of a wheel on disk. `needed`: each ELF member's DT_NEEDED; `symbols`: the torch symbols of the
    members that need a torch library, taken while the wheel was read for its report (`member_symbols`); without them,
    those members are read here, through the bounded zip reader."""
    needed = _own(needed)
    if not any(is_torch_library(n) for names in needed.values() for n in names):
        return None
    if symbols is None:
        from slimwheel.inspect.elf import undefined_symbols
        from slimwheel.inspect.wheel import WheelArchive

        read: dict[str, frozenset[str]] = {}
        with WheelArchive(Path(path)) as archive:
            for m in archive.members:
                if m.name in needed and any(is_torch_library(n) for n in needed[m.name]):
                    with archive.open(m) as data:
                        read[m.name] = undefined_symbols(data, m.name, is_torch_symbol)
        symbols = read
    return torch_use(needed, symbols)


# ------------------------------------------------------------------------------------------------------ building


Backend = Literal["scikit-build-core", "setuptools", "other"]


@dataclass(frozen=True, kw_only=True)
class TorchProject:
    """A project that builds a torch extension, and how."""

    backend: Backend
    why: str  # what said it is one


def torch_project(project_dir: Path) -> TorchProject | None:
    """Whether the project builds against torch: CMake's find_package(Torch), setuptools with
    torch.utils.cpp_extension, or torch in build-system.requires."""
    import tomllib

    try:
        pyproject = tomllib.loads((project_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInputError(f"{project_dir / 'pyproject.toml'}: cannot read: {e}") from None
    system = pyproject.get("build-system", {}) if isinstance(pyproject.get("build-system"), dict) else {}
    backend_name = str(system.get("build-backend", "setuptools.build_meta:__legacy__"))
    backend: Backend = (
        "scikit-build-core"
        if backend_name.startswith("scikit_build_core")
        else "setuptools"
        if backend_name.startswith("setuptools")
        else "other"
    )
    why = None
    if any(Requirement(r).name == "torch" for r in system.get("requires", []) if isinstance(r, str) and _parses(r)):
        why = "torch is in build-system.requires"
    for name, pattern in (
        ("CMakeLists.txt", r"find_package\s*\(\s*Torch\b"),
        ("setup.py", r"torch\.utils\.cpp_extension"),
    ):
        try:
            text = (project_dir / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if re.search(pattern, text):
            why = (
                why
                or f"{name} uses {'find_package(Torch)' if name.startswith('CMake') else 'torch.utils.cpp_extension'}"
            )
    return TorchProject(backend=backend, why=why) if why else None


def _parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def arch_list(targets: Iterable[Target]) -> tuple[str, tuple[str, ...]]:
    """(TORCH_CUDA_ARCH_LIST, extra nvcc flags) for the plan's targets: `9.0`, `10.0a`, `12.0+PTX` where PTX of a CC
    rides with its SASS; PTX of a CC without SASS (which the list cannot say) as a -gencode flag."""
    from slimwheel.cuda.arch import Kind, Variant

    ts = list(targets)
    ptx = {t.cc for t in ts if t.kind is Kind.PTX and t.variant is Variant.PLAIN}
    entries, extra, placed = [], [], set()
    for t in ts:
        if t.kind is Kind.SASS:
            with_ptx = t.variant is Variant.PLAIN and t.cc in ptx
            entries.append(f"{t.cc}{t.variant.value}" + ("+PTX" if with_ptx else ""))
            if with_ptx:
                placed.add(t.cc)
    for t in ts:
        if t.kind is Kind.PTX and t.cc not in placed:
            extra.append(f"-gencode=arch=compute_{t.arch},code=compute_{t.arch}")
    return ";".join(entries), tuple(extra)


SETUPTOOLS_CFG = "slimwheel-setuptools.cfg"


def setuptools_config(build_dir: Path) -> str:
    """The extra configuration (distutils' DIST_EXTRA_CONFIG) that keeps setuptools' files in `build_dir`."""
    return f"[build]\nbuild_base = {build_dir / 'setuptools'}\n\n[egg_info]\negg_base = {build_dir}\n"


def build_env(
    project: TorchProject,
    targets: Iterable[Target],
    *,
    compression_flag: str,
    cuda_root: Path,
    build_dir: Path | None = None,
) -> dict[str, str]:
    """The environment that brings the plan to torch's build code. CMake (find_package(Torch)): torch's CMake package
    ignores CMAKE_CUDA_ARCHITECTURES and adds -gencode flags for TORCH_CUDA_ARCH_LIST (or for GPUs it detects, or a
    default list with sm_50, which CUDA 13 refuses), so the list must be the plan's; the rest comes through the
    SLIMWHEEL_* defines as for any project. setuptools (CUDAExtension): TORCH_CUDA_ARCH_LIST, nvcc's own
    NVCC_APPEND_FLAGS for compression and PTX-only targets, and CUDA_HOME, where torch looks for nvcc; with a
    `build_dir`, setuptools builds there (DIST_EXTRA_CONFIG, `setuptools_config`) instead of the project's build/,
    whose objects and libraries of an earlier build it would reuse or pack into the wheel."""
    archs, extra = arch_list(targets)
    env = {"TORCH_CUDA_ARCH_LIST": archs}
    if project.backend != "scikit-build-core":
        env["NVCC_APPEND_FLAGS"] = " ".join([*([compression_flag] if compression_flag else []), *extra])
        env["CUDA_HOME"] = str(cuda_root)
        if build_dir is not None:
            env["DIST_EXTRA_CONFIG"] = str(build_dir / SETUPTOOLS_CFG)
    return env  # CMake: PTX-only targets reach the compiler through SLIMWHEEL_* (CUDA_ARCHITECTURES)
