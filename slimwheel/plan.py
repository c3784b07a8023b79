"""The build plan: which GPU targets to compile, how to compress them, what to link, and the driver that implies.

`make_plan` is pure: it reads a Config and what the toolkit can do (a Toolkit, or the release table in
cuda/versions.py when no toolkit is installed) and returns a BuildPlan; `cmake_defines` turns a plan into the CMake
variables (SLIMWHEEL_* cache variables that SlimWheel.cmake turns into compiler and linker flags, plus the toolkit's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from slimwheel.config import Compression, Config, LinkMode
from slimwheel.cuda.arch import CC, ArchPlan, Kind, Target, explicit_plan, plan
from slimwheel.cuda.libs import RuntimeLib, load_order, lookup
from slimwheel.cuda.versions import (
    MAJOR_DRIVER,
    SIZE_COMPRESSION_DRIVER_CUDA12,
    CudaVersion,
    driver_for_release,
    driver_key,
    supported_archs,
)
from slimwheel.errors import BadInputError
from slimwheel.toolkit.model import Toolkit

# --compress-mode exists from CUDA 12.8 on; before it, fatbinary's -compress-all is the only switch.
COMPRESS_MODE_SINCE = CudaVersion(12, 8)
# The compression a plan settles on: a configured mode with "auto" decided, or `legacy` (-Xfatbin=-compress-all, the
# only switch before CUDA 12.8).
PlannedCompression = Literal["none", "default", "size", "speed", "balance", "legacy"]

COMPRESSION_FLAGS: dict[PlannedCompression, str] = {
    "none": "--compress-mode=none",
    "default": "--compress-mode=default",
    "size": "--compress-mode=size",
    "speed": "--compress-mode=speed",
    "balance": "--compress-mode=balance",
    "legacy": "-Xfatbin=-compress-all",
}

# slimwheel's CMake package (SlimWheel.cmake and its config file), handed to builds as slimwheel_DIR.
CMAKE_PACKAGE_DIR = Path(__file__).resolve().parent / "cmake"

SYSTEM_DIRS = frozenset(
    {
        "/usr/include",
        "/usr/local/include",
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib/aarch64-linux-gnu",
    }
)


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    """What `slimwheel build` will do, and why; everything a report needs to explain the wheel."""

    cuda: CudaVersion
    arch: ArchPlan
    compression: PlannedCompression
    driver_floor: str  # the oldest Linux driver that runs every target of this plan
    link: LinkMode
    libraries: tuple[RuntimeLib, ...]  # dynamic: the nvidia-* runtime libraries linked, in load order
    plan_defines: dict[str, str]  # the SLIMWHEEL_* variables of the plan itself; `cmake_defines` adds the toolkit's
    include_dirs: tuple[str, ...] = ()  # the toolkit's own folders, system folders left out (see _plan)
    lib_dirs: tuple[str, ...] = ()
    components: tuple[str, ...] = ()  # the CUDA components asked for (cfg.libraries), for static pruning
    driver_why: tuple[str, ...] = ()  # one line per constraint that sets the floor
    toolkit_source: str = "toolkit"  # "toolkit" (asked nvcc) or "table" (no toolkit: cuda/versions.py)
    notes: tuple[str, ...] = field(default=())

    @property
    def compression_flag(self) -> str:
        if self.compression == "none" and self.cuda < COMPRESS_MODE_SINCE:
            return ""  # no --compress-mode before 12.8: no flag at all, as SlimWheel.cmake does
        return COMPRESSION_FLAGS[self.compression]


def choose_compression(requested: Compression, version: CudaVersion) -> tuple[PlannedCompression, str | None]:
    """(mode, note): "auto" is `size` on CUDA >= 12.8 (PyTorch's choice on 13.0) and the legacy switch before."""
    new = version >= COMPRESS_MODE_SINCE
    if requested == "auto":
        return ("size", None) if new else ("legacy", None)
    if requested == "none":
        return requested, None
    if not new:
        if requested == "default":
            return "legacy", f"CUDA {version} has no --compress-mode; -Xfatbin=-compress-all is its default compression"
        raise BadInputError(
            f"compression = {requested!r} needs CUDA 12.8 or newer (nvcc --compress-mode); this is CUDA {version}",
            hint='use compression = "auto" or "default" (-Xfatbin=-compress-all)',
        )
    return requested, None


def driver_floor(
    version: CudaVersion, targets: tuple[Target, ...], compression: PlannedCompression
) -> tuple[str, tuple[str, ...]]:
    """The oldest driver that loads every target: the major's first driver for SASS (minor version compatibility),
    the release's own driver for PTX JIT, and the compressed-fatbin driver for size/balance modes on CUDA 12."""
    reasons: list[tuple[str, str]] = []
    major = MAJOR_DRIVER.get(version.major)
    if major:
        reasons.append((major, f"CUDA {version.major} binaries need driver >= {major}"))
    if any(t.kind is Kind.PTX for t in targets):
        rel = driver_for_release(version)
        if rel:
            reasons.append((rel, f"PTX from CUDA {version} is JIT-compiled only by driver >= {rel}"))
        else:
            notes_unknown = f"PTX from CUDA {version} needs that release's driver, newer than slimwheel's table"
            reasons.append((MAJOR_DRIVER.get(version.major, "0"), notes_unknown))
    if version.major == 12 and compression in ("size", "balance"):
        reasons.append(
            (
                SIZE_COMPRESSION_DRIVER_CUDA12,
                f"{compression} fatbin compression needs driver >= {SIZE_COMPRESSION_DRIVER_CUDA12} on CUDA 12",
            )
        )
    if version.major >= 13 and compression not in ("none", "legacy"):
        reasons.append((MAJOR_DRIVER[13], f"--compress-mode={compression} fatbins need driver >= 580 on CUDA 13"))
    if not reasons:
        return "unknown", ()
    floor = max((r[0] for r in reasons), key=driver_key)
    return floor, tuple(why for d, why in reasons if d == floor)


def arch_plan(cfg: Config, supported: tuple[CC, ...]) -> ArchPlan:
    """The targets: cfg.targets verbatim, else the fewest SASS for cfg.archs (+ extra-sass, ptx)."""
    try:
        typed = cfg.parsed
        if typed.targets:
            return explicit_plan(typed.targets, supported=supported, exclude_integrated=cfg.exclude_integrated)
        return plan(
            typed.archs.resolve(supported),
            supported=supported,
            extra_sass=typed.extra_sass,
            ptx=typed.ptx,
            exclude_integrated=cfg.exclude_integrated,
        )
    except BadInputError as e:
        setting = "targets" if cfg.targets else f"archs = {cfg.archs!r}"
        if cfg.extra_sass:
            setting += f", extra-sass = {list(cfg.extra_sass)!r}"
        if cfg.ptx not in ("newest", "none", "") and not cfg.targets:
            setting += f", ptx = {cfg.ptx!r}"
        raise BadInputError(f"{setting}: {e.message}", hint=e.hint) from None


def runtime_libraries(cfg: Config, major: int) -> tuple[RuntimeLib, ...]:
    """Dynamic mode: the nvidia-* libraries of cfg.libraries and what they load first, in load order."""
    if cfg.link != "dynamic":
        return ()
    try:
        return tuple(load_order([lookup(c, major) for c in cfg.libraries]))
    except BadInputError as e:
        raise BadInputError(f"libraries = {list(cfg.libraries)!r}: {e.message}", hint=e.hint) from None


def _plan(cfg: Config, version: CudaVersion, supported: tuple[CC, ...], toolkit: Toolkit | None) -> BuildPlan:
    arch = arch_plan(cfg, supported)
    compression, note = choose_compression(cfg.compression, version)
    floor, why = driver_floor(version, arch.targets, compression)
    notes = [note] if note else []
    notes += [f"{cc}: skipped, {reason}" for cc, reason in arch.skipped]
    if cfg.link == "static" and version.major == 13:
        notes.append("static linking needs static cuBLAS and nvprune, which no PyPI wheel ships (CUDA 11.8 has them)")
    defines = {
        "SLIMWHEEL_CUDA_ARCHITECTURES": arch.cmake_architectures,
        "SLIMWHEEL_COMPRESSION": compression,
        "SLIMWHEEL_LINK": cfg.link,
        "SLIMWHEEL_CUDA_MAJOR": str(version.major),
    }
    # The compiler's own folders are left out: naming /usr/include with -I/-isystem breaks libstdc++'s #include_next,
    # and they are searched anyway (Debian's CUDA 11.8 lives there).
    inc = tuple(str(d) for d in toolkit.include_dirs if str(d) not in SYSTEM_DIRS) if toolkit else ()
    lib = tuple(str(d) for d in toolkit.lib_dirs if str(d) not in SYSTEM_DIRS) if toolkit else ()
    return BuildPlan(
        cuda=version,
        arch=arch,
        compression=compression,
        driver_floor=floor,
        driver_why=why,
        link=cfg.link,
        libraries=runtime_libraries(cfg, version.major),
        components=tuple(cfg.libraries),
        plan_defines=defines,
        include_dirs=inc,
        lib_dirs=lib,
        toolkit_source="toolkit" if toolkit is not None else "table",
        notes=tuple(notes),
    )


def make_plan(cfg: Config, toolkit: Toolkit) -> BuildPlan:
    """The plan for this toolkit: its release and the targets its nvcc lists."""
    return _plan(cfg, toolkit.version, tuple(toolkit.supported) or supported_archs(toolkit.version), toolkit)


def make_plan_for_release(cfg: Config, version: CudaVersion) -> BuildPlan:
    """The plan when no toolkit is installed: targets from the release table in cuda/versions.py."""
    return _plan(cfg, version, supported_archs(version), None)


def plan_to_json(p: BuildPlan) -> dict[str, Any]:
    cov = p.arch.coverage  # the plan's own line: the CCs it counts (cuda.arch.counted), as check and build do
    return {
        "schema": 1,
        "cuda": str(p.cuda),
        "archs_from": "nvcc --list-gpu-arch" if p.toolkit_source == "toolkit" else "slimwheel's release table",
        "targets": [str(t) for t in p.arch.targets],
        "sass": [t.arch for t in p.arch.sass],
        "ptx": [t.arch for t in p.arch.ptx],
        "cmake_architectures": p.arch.cmake_architectures,
        "nvcc_flags": list(p.arch.nvcc_gencode),
        "wanted": [str(c) for c in p.arch.wanted],
        "steps": [{"target": str(s.target), "serves": [str(c) for c in s.serves], "why": s.why} for s in p.arch.steps],
        "skipped": [{"cc": str(c), "why": why} for c, why in p.arch.skipped],
        "coverage": {
            "native": [str(c) for c in cov.native],
            "ptx_only": [str(c) for c in cov.ptx_only],
            "none": [str(c) for c in cov.none],
        },
        "compression": p.compression,
        "compression_flag": p.compression_flag,
        "driver_floor": p.driver_floor,
        "driver_why": list(p.driver_why),
        "link": p.link,
        "libraries": [
            {"component": lib.component, "soname": lib.soname, "package": lib.package} for lib in p.libraries
        ],
        "cmake_defines": cmake_defines(p, package_dir=None),
        "notes": list(p.notes),
    }


def cmake_defines(
    p: BuildPlan,
    toolkit: Toolkit | None = None,
    *,
    static_libdir: Path | None = None,
    cuda_root: str | None = None,
    package_dir: str | None = str(CMAKE_PACKAGE_DIR),
    launcher: str | None = None,
) -> dict[str, str]:
    """The one list of CMake variables a build of this plan gets (`slimwheel build`, `slimwheel container`, the
    scripts, `plan --format cmake`): the plan's SLIMWHEEL_* variables, the toolkit's include and library folders
    (`cuda_root`: a toolkit at that path on another machine, a container's /usr/local/cuda), its nvcc and root,
    the static libraries' folder, and slimwheel's CMake package (so `find_package(slimwheel)` works in an isolated
    build where slimwheel is not installed; another path where slimwheel lives elsewhere, None for none).
    `launcher`: the compiler cache (compilercache) every C, C++ and CUDA compile of the project runs through. A
    cache variable of the project, not CMake's environment variable: the environment would also reach CMake's
    try_compile checks, whose scratch folders get a new name each configure, so a cache miss each build."""
    defines = dict(p.plan_defines)
    inc: tuple[str, ...] = p.include_dirs
    lib: tuple[str, ...] = p.lib_dirs
    if cuda_root is not None:
        inc, lib = (f"{cuda_root}/include",), (f"{cuda_root}/lib64",)
        defines["CMAKE_CUDA_COMPILER"] = f"{cuda_root}/bin/nvcc"
    if inc:
        defines["SLIMWHEEL_CUDA_INCLUDEDIRS"] = ";".join(inc)
    if lib:
        defines["SLIMWHEEL_CUDA_LIBDIRS"] = ";".join(lib)
    if static_libdir is not None:
        defines["SLIMWHEEL_STATIC_LIBDIR"] = str(static_libdir)
    if toolkit is not None:
        defines["CMAKE_CUDA_COMPILER"] = str(toolkit.nvcc)
        defines["CUDAToolkit_ROOT"] = str(toolkit.root)
        if toolkit.host_compiler is not None:
            defines["CMAKE_CUDA_HOST_COMPILER"] = str(toolkit.host_compiler)
    if package_dir is not None:
        defines["slimwheel_DIR"] = package_dir
    if launcher is not None:
        for lang in ("C", "CXX", "CUDA"):
            defines[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = launcher
    return defines


def cmake_cache_script(defines: dict[str, str]) -> str:
    """An initial-cache script for `cmake -C`: the same variables `slimwheel build` passes."""
    lines = ["# Written by `slimwheel plan --format cmake`; use with: cmake -C this-file ..."]
    for k, v in defines.items():
        lines.append(f'set({k} "{v}" CACHE STRING "set by slimwheel plan")')
    return "\n".join(lines) + "\n"
