"""What device code a wheel has, in the words its report and verdict use: modules with no kernels (issue 37 item 1),
no device code at all (item 2), and how GPUs newer than its newest SASS are served (issue 40 item 4)."""

from __future__ import annotations

from dataclasses import dataclass

from slimwheel.cuda.arch import CC, Kind, Variant
from slimwheel.inspect.nvrtc import compiler_requirement, runtime_compiler
from slimwheel.inspect.report import WheelReport


@dataclass(frozen=True, kw_only=True)
class FutureCoverage:
    """How the wheel runs on a GPU newer than its newest SASS (no cubin crosses a major, so only PTX, which the
    driver JIT-compiles for any newer GPU, or kernels compiled at run time serve one)."""

    newest: CC | None  # the newest compute capability its SASS is for
    how: str  # "ptx" (every module has PTX), "runtime" (kernels compiled at run time), "none", or "n/a" (no code)
    without: tuple[str, ...] = ()  # files with modules that carry neither PTX nor embedded sources
    modules: int = 0  # how many such modules
    total: int = 0  # modules with kernels


def future_coverage(report: WheelReport) -> FutureCoverage:
    """`FutureCoverage` of a wheel: each module with kernels needs plain PTX (any arch: it is older than the future
    GPU), or the file its kernel sources for NVRTC; a wheel with no device code that loads a runtime compiler builds
    its kernels for whatever GPU it meets."""
    sass = [t.cc for t in report.targets if t.kind is Kind.SASS]
    newest = max(sass) if sass else None
    if not has_device_code(report):
        runtime = no_device_code_line(report) != "no device code"
        return FutureCoverage(newest=newest, how="runtime" if runtime else "n/a")
    files: dict[str, None] = {}
    modules = total = 0
    for e in report.elfs:
        for fb in e.judged_fatbins:
            total += 1
            if not e.nvrtc and not any(
                en.target is not None and en.target.kind is Kind.PTX and en.target.variant is Variant.PLAIN
                for en in fb.entries
            ):
                modules += 1
                files[e.name] = None
    if modules:
        return FutureCoverage(newest=newest, how="none", without=tuple(files), modules=modules, total=total)
    how = "runtime" if any(e.nvrtc for e in report.elfs) and not any(e.judged_fatbins for e in report.elfs) else "ptx"
    return FutureCoverage(newest=newest, how=how, total=total)


def future_line(report: WheelReport) -> str | None:
    """The report's line on GPUs newer than the wheel's newest SASS; None for a wheel with no code to judge."""
    f = future_coverage(report)
    if f.how == "n/a":
        return None
    newer = f"GPUs newer than {f.newest}" if f.newest else "GPUs newer than any it names"
    if f.how == "ptx":
        return f"{newer}: served through PTX JIT (every CUDA module carries PTX) or runtime compilation"
    if f.how == "runtime":
        return f"{newer}: served by runtime compilation (kernels built for the GPU at hand)"
    return (
        f"{newer}: not served: {f.modules} of {f.total} CUDA modules carry SASS only, no PTX and no kernel sources "
        f"(in {', '.join(f.without[:3])}{', ...' if len(f.without) > 3 else ''})"
    )


def has_device_code(report: WheelReport) -> bool:
    """Whether any file carries a CUDA module with a kernel or embedded kernel sources."""
    return any(e.judged_fatbins or e.nvrtc for e in report.elfs)


def no_device_code_line(report: WheelReport) -> str | None:
    """What a wheel with no device code is, None for one with some: it builds its kernels at run time where a file
    links or opens NVRTC/nvJitLink (or a requirement brings them), else it has none."""
    if has_device_code(report):
        return None
    via = next(
        (f"{e.name} loads {lib}" for e in report.elfs if (lib := runtime_compiler((*e.needed, *e.opens)))), None
    ) or (f"it requires {req}" if (req := compiler_requirement(report.requires_dist)) else None)
    if via:
        return f"no device code: kernels, if any, are built at run time ({via})"
    return "no device code"


def kernelless_line(report: WheelReport) -> str | None:
    """The report's line on modules with no kernels, None when it has none."""
    if not report.kernelless:
        return None
    n = sum(k for _f, k in report.kernelless)
    total = sum(len(e.fatbins) for e in report.elfs)
    files = ", ".join(f"{f}: {k}" for f, k in report.kernelless[:3]) + ("; ..." if len(report.kernelless) > 3 else "")
    return (
        f"no kernels: {n} of {total} CUDA modules define no function (cubins without code, PTX without .entry; {files})"
        ": they launch nothing on any GPU, so coverage and the driver floors leave them out"
    )
