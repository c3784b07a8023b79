"""`slimwheel doctor`: can this machine run this CUDA wheel, and with which libraries?

Driver and GPUs (NVML, else the driver API), where each CUDA library the wheel needs would come from (the same search
the shipped loader does), whether the wheel's SASS/PTX serves each local GPU, and the lazy-loading mode. On a machine
without a driver it says so and still answers the library and coverage questions.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import logging
import os
import shlex
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from slimwheel import deps
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.arch import CC, Target, served_by
from slimwheel.envvars import env_bool
from slimwheel.errors import BadInputError
from slimwheel.inspect.report import ElfReport, gap_text, module_coverage
from slimwheel.runtime import driver as drv
from slimwheel.runtime import loader
from slimwheel.tools import run_tool_status

log = logging.getLogger("slimwheel.doctor")


Via = Literal["already-loaded", "wheel", "system", "missing"]


@dataclass(frozen=True, kw_only=True)
class LibraryCheck:
    component: str
    soname: str
    package: str
    found: str | None  # absolute path
    via: Via
    tried: tuple[str, ...]
    install: str = (
        ""  # what to pip install when it is missing: the wheel's own requirement (`deps.install_requirement`)
    )


@dataclass(frozen=True, kw_only=True)
class GpuCheck:
    index: int
    name: str
    cc: str
    served_by: str  # "sass sm_90", "ptx compute_90 (JIT at first load)", "none", "n/a" without a target
    ok: bool


@dataclass(frozen=True, kw_only=True)
class DoctorReport:
    target: str | None
    driver_version: str | None  # "580.65.06" (NVML)
    driver_cuda: str | None  # "13.0" (cuDriverGetVersion)
    gpus: tuple[GpuCheck, ...]
    cuda_major: int | None
    libraries: tuple[LibraryCheck, ...]
    module_loading: str
    module_loading_source: str
    driver_floor: str | None
    notes: tuple[str, ...]  # worth knowing; the wheel may still run (no driver on a build machine, no kernels)
    problems: tuple[str, ...]  # reasons the wheel cannot run here; `slimwheel doctor` exits 15 when there is one

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, kw_only=True)
class _Target:
    """What doctor reads of a wheel file or an installed distribution."""

    targets: tuple[Target, ...]
    needs: set[str]  # DT_NEEDED SONAMEs
    floor: str | None  # driver floor
    major: int | None  # CUDA major
    elfs: tuple[ElfReport, ...]
    requires: tuple[str, ...]  # Requires-Dist: what the hints tell to install
    tags: tuple[str, ...] = ()  # the wheel's tags (an installed distribution: none known)


def _targets_and_needs(target: str) -> _Target:
    """What doctor needs of a wheel file or an installed distribution."""
    from slimwheel.inspect.scan import inspect_binary, inspect_wheel

    path = Path(target)
    if path.suffix == ".whl":
        if not path.is_file():
            raise BadInputError(f"{target}: no such wheel")
        rep = inspect_wheel(path)
        return _Target(
            targets=rep.targets,
            needs={n for e in rep.elfs for n in e.needed},
            floor=rep.driver_floor,
            major=rep.cuda_major,
            elfs=rep.elfs,
            requires=tuple(rep.requires_dist),
            tags=tuple(rep.tags),
        )
    try:
        dist = md.distribution(target)
    except md.PackageNotFoundError:
        raise BadInputError(f"{target}: neither a .whl file nor an installed distribution") from None
    targets: set[Target] = set()
    needs: set[str] = set()
    elfs: list[ElfReport] = []
    for f in dist.files or ():
        p = Path(str(dist.locate_file(f)))
        if not (p.suffix == ".so" or ".so." in p.name) or not p.is_file():
            continue
        with p.open("rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        elf = inspect_binary(p)
        elfs.append(elf)
        needs |= set(elf.needed)
        targets |= {e.target for fb in elf.fatbins for e in fb.entries if e.target is not None}
    majors = {lib.cuda_major for lib in cudalibs.RUNTIME_LIBS if lib.soname in needs}
    major = majors.pop() if len(majors) == 1 else None
    return _Target(
        targets=tuple(sorted(targets, key=str)),
        needs=needs,
        floor=None,
        major=major,
        elfs=tuple(elfs),
        requires=tuple(dist.requires or ()),
    )


def _site_of(target: str | None) -> list[str]:
    if target and not target.endswith(".whl"):
        try:
            return [str(md.distribution(target).locate_file(""))]
        except md.PackageNotFoundError:
            return []
    return []


_SYSTEM_PROBE = """
import ctypes, json, sys
from slimwheel.runtime.loader import handle_path
out = {}
for soname in sys.argv[1:]:
    try:
        out[soname] = handle_path(ctypes.CDLL(soname))
    except OSError:
        out[soname] = None
print(json.dumps(out))
"""


def system_search(sonames: list[str]) -> dict[str, str | None]:
    """Where the dynamic loader's normal search finds each SONAME. In a child process: loading a CUDA library into
    this one would make it "already loaded" for everything after."""
    if not sonames:
        return {}
    proc = run_tool_status(
        [sys.executable, "-c", _SYSTEM_PROBE, *sonames],
        what="the system library search",
        env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"},
        timeout=120,
        separate_stderr=True,
    )
    lines = [ln for ln in proc.output.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        log.warning("system library search failed: %s", proc.stderr.strip()[-500:])
        return dict.fromkeys(sonames)
    found: dict[str, str | None] = json.loads(lines[-1])
    return found


def resolve_library(
    lib: cudalibs.RuntimeLib,
    roots: list[tuple[str, str | None]],
    *,
    use_system: bool,
    system: dict[str, str | None],
) -> LibraryCheck:
    """Where the shipped loader would take this library from (the same search, the same refusals)."""
    row = {"component": lib.component, "soname": lib.soname, "folder": lib.folder, "cuda_major": lib.cuda_major}
    tried = []
    hit = loader.already_loaded(lib.soname)
    if hit is not None:
        return LibraryCheck(
            component=lib.component,
            soname=lib.soname,
            package=lib.package,
            found=hit[1],
            via="already-loaded",
            tried=(),
        )
    if not use_system:
        found, attempts = loader.find_in_wheels(row, roots)
        tried += [f"{place}: {outcome}" for place, outcome in attempts]
        if found:
            return LibraryCheck(
                component=lib.component,
                soname=lib.soname,
                package=lib.package,
                found=found,
                via="wheel",
                tried=tuple(tried),
            )
    # What a system search gives (the loader does this only with SLIMWHEEL_USE_SYSTEM_CUDA=1).
    where = system.get(lib.soname)
    if where is None:
        tried.append("system search: not found")
        return LibraryCheck(
            component=lib.component,
            soname=lib.soname,
            package=lib.package,
            found=None,
            via="missing",
            tried=tuple(tried),
        )
    tried.append(f"system search: {where} ({'used' if use_system else 'ignored unless SLIMWHEEL_USE_SYSTEM_CUDA=1'})")
    return LibraryCheck(
        component=lib.component,
        soname=lib.soname,
        package=lib.package,
        found=where if use_system else None,
        via="system" if use_system else "missing",
        tried=tuple(tried),
    )


def run_doctor(target: str | None = None, *, env: dict[str, str] | None = None) -> DoctorReport:
    env = dict(os.environ) if env is None else env
    notes: list[str] = []
    targets: tuple[Target, ...] = ()
    needs: set[str] = set()
    floor = None
    major = None
    elfs: tuple[ElfReport, ...] = ()
    read: _Target | None = None
    if target:
        read = _targets_and_needs(target)
        targets, needs, floor, major, elfs = read.targets, read.needs, read.floor, read.major, read.elfs
        if not targets:
            notes.append(f"{target}: no fatbin (no CUDA kernels) found")

    driver_version = None
    gpus: list[drv.Gpu] = []
    nvml = drv.Nvml.open()
    if nvml is not None:
        with nvml:
            driver_version = nvml.driver_version()
            gpus = nvml.gpus()
    cuda = drv.CudaDriver.open()
    driver_cuda = drv.format_cuda_version(cuda.version()) if cuda is not None else None
    if cuda is not None and not gpus:
        gpus = cuda.gpus()
    if cuda is None and nvml is None:
        notes.append("no NVIDIA driver on this machine (libcuda.so.1 and libnvidia-ml.so.1 not found): no GPU checks")
    elif not gpus:
        notes.append("the NVIDIA driver is installed but reports no GPU")

    if major is not None:
        libs = [lib for lib in cudalibs.libs_for(major) if lib.soname in needs]
    elif target:
        libs = []
        notes.append(f"{target}: needs no CUDA library of the nvidia-* wheels")
    else:
        libs = [cudalibs.lookup(c, m) for m in (13, 12) for c in ("cudart", "cublasLt", "cublas")]
    use_system = env_bool(env, loader.USE_SYSTEM_ENV, default=False)
    # The loader's own search: the distribution's site-packages first (the loader's own root), then sys.path.
    own = _site_of(target)
    roots = loader.search_roots(own[0] if own else None, sys.path)
    system = system_search([lib.soname for lib in libs])
    checks = tuple(
        replace(
            resolve_library(lib, roots, use_system=use_system, system=system),
            install=deps.install_requirement(lib, read.requires if read else (), read.tags if read else ()),
        )
        for lib in libs
    )

    problems: list[str] = []
    if read is not None:  # without a target, the libraries of both majors are a survey: one major missing is normal
        problems += [
            f"{lib.soname} not found where the loader looks: pip install {shlex.quote(lib.install)}"
            for lib in checks
            if lib.via == "missing"
        ]
    if driver_version and floor and _version_key(driver_version) < _version_key(floor):
        problems.append(f"driver {driver_version} is older than {floor}, which this wheel's code needs")
    if driver_cuda and major is not None and int(driver_cuda.split(".")[0]) < major:
        problems.append(f"the driver supports CUDA {driver_cuda}; this wheel needs CUDA {major}: update the driver")

    gpu_checks = []
    for g in gpus:
        if not target or not targets:
            label = "n/a" if not target else "n/a (no CUDA kernels in it)"
            gpu_checks.append(GpuCheck(index=g.index, name=g.name, cc=g.cc, served_by=label, ok=True))
            continue
        try:
            cc = CC.parse(g.cc)
        except BadInputError:
            gpu_checks.append(GpuCheck(index=g.index, name=g.name, cc=g.cc, served_by="none", ok=False))
            continue
        # As size-report and check judge it: a kernel runs only if its own module serves the GPU, so the wheel
        # serves it only as well as its weakest module (not as well as the best target anywhere in it).
        cov, gaps = module_coverage(elfs, (cc,))
        how = "sass" if cov.native else "ptx" if cov.ptx_only else "none"
        t = served_by(cc, targets)[1]
        text = {"sass": f"sass {t}", "ptx": f"ptx {t} (JIT at first load)", "none": "none"}[how]
        if gaps:
            text += f" ({gap_text(gaps[0])})"
        gpu_checks.append(GpuCheck(index=g.index, name=g.name, cc=g.cc, served_by=text, ok=how != "none"))
    problems += [f"GPU {g.index} {g.name} (CC {g.cc}): served by {g.served_by}" for g in gpu_checks if not g.ok]
    mode, source = drv.module_loading()
    return DoctorReport(
        target=target,
        driver_version=driver_version,
        driver_cuda=driver_cuda,
        gpus=tuple(gpu_checks),
        cuda_major=major,
        libraries=checks,
        module_loading=mode,
        module_loading_source=source,
        driver_floor=floor,
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def doctor_to_json(report: DoctorReport) -> dict[str, object]:
    data = asdict(report)
    data["ok"] = report.ok
    printed: dict[str, object] = json.loads(json.dumps({"schema": 1, **data}))  # tuples -> lists, as printed
    return printed
