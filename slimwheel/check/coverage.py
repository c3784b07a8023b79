"""GPU coverage: every required compute capability served by SASS or PTX, judged per module (`inspect.report`), with
the parts a package does without (plugins, optional extension modules) left out when the rest carries device code."""

from __future__ import annotations

import dataclasses
import fnmatch

from slimwheel import deps
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.cuda.arch import (
    CC,
    KNOWN_CCS,
    CCRequest,
    Coverage,
    RequireArch,
    counted,
    generation,
)
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError, ExitCode
from slimwheel.inspect.devicecode import future_coverage, future_line, has_device_code, no_device_code_line
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.elf import ElfReport
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.report import WheelReport, coverage_detail, gap_text, nvrtc_targets
from slimwheel.shown import abbreviated


def required_ccs(spec: RequireArch, report: WheelReport) -> tuple[tuple[CC, ...], tuple[CC, ...]]:
    """(required, left out) for `--require-arch`: nothing for "" or "none"; a CC set ("7.5-12.0", "8.0+", "9.0");
    "toolkit": every CC the
    wheel's CUDA major can target (the newest release of that major slimwheel knows), or "auto": those of them from
    the oldest CC the wheel has code for up: whatever the wheel chose to start at, it must not lose newer GPUs (a wheel
    with no device code, or whose CUDA major cannot be told, requires nothing). Integrated GPUs (Jetson, Thor, GB10)
    are aarch64 systems, so they are left out for x86_64 wheels."""
    if isinstance(spec, CCRequest):
        ccs = spec.resolve()
    elif spec in ("", "none"):
        return (), ()
    else:  # "toolkit" or "auto"
        if report.cuda_major is None:
            if spec == "auto":
                return (), ()
            raise BadInputError(
                f"{report.path}: --require-arch toolkit: cannot tell the wheel's CUDA major",
                hint="give the compute capabilities instead, e.g. --require-arch 7.5-12.0",
            )
        # Numbers nvcc accepts that no product we know of has (10.1, renamed 11.0) are left out.
        ccs = tuple(
            cc for cc in supported_archs(CudaVersion(report.cuda_major, 99)) if counted(cc, exclude_integrated=False)
        )
        if spec == "auto":
            # Code the wheel has: its fatbins' targets, and the CCs its embedded NVRTC sources compile for.
            have = [t.cc for t in report.targets] + [
                t.cc for e in report.elfs for r in e.nvrtc for t in nvrtc_targets(r)
            ]
            if not have:
                return (), ()
            oldest = min(have)
            ccs = tuple(cc for cc in ccs if cc >= oldest)
    if not report.is_x86_64:
        return ccs, ()
    # The one counting rule (cuda.arch.counted) the plan's wanted set and coverage line use too.
    keep = tuple(cc for cc in ccs if generation(cc) is None or counted(cc, exclude_integrated=True))
    return keep, tuple(cc for cc in ccs if cc not in keep)


def _unjudged_coverage(report: WheelReport) -> str:
    """Why `--require-arch auto` judged no GPU of a wheel with device code (flashinfer-cubin 0.6.13: cubins that its
    package loads through the driver, no CUDA runtime, no requirement), and which GPUs its code runs on."""
    cov = Coverage.of(report.targets, tuple(cc for cc in KNOWN_CCS if counted(cc, exclude_integrated=report.is_x86_64)))
    runs = ", ".join(map(str, cov.native)) or "none"
    jit = f"; through PTX JIT only: {', '.join(map(str, cov.ptx_only))}" if cov.ptx_only else ""
    return (
        "GPU coverage not judged: --require-arch auto requires what the wheel's CUDA major supports, and nothing in "
        "the wheel tells its major (no CUDA runtime library, nvidia-* requirement or PTX); its code runs natively on "
        f"{runs}{jit}; give the GPUs to judge, e.g. --require-arch 8.0-12.0"
    )


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    report, imports = analysis.report, analysis.imports
    failures: list[Failure] = []
    notes: list[str] = []
    if policy.left_out:
        notes.append(
            "left out of the required set, as integrated aarch64 GPUs never run an x86_64 wheel: "
            + ", ".join(map(str, policy.left_out))
        )
    if not policy.require and report.targets and report.cuda_major is None and policy.require_spec == "auto":
        notes.append(_unjudged_coverage(report))
    if (none := no_device_code_line(report)) is not None and (policy.require or report.cuda_major is not None):
        # A wheel that compiles its kernels at run time (cuda-cccl, cumm) or has none (allocation hooks) runs on
        # whatever GPU its runtime compiler targets: no SASS or PTX to judge.
        if policy.require and policy.strict_device_code:
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"required compute capabilities {policy.require_spec}: {none} (--strict-device-code)",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        elif policy.require:
            notes.append(
                f"{none}: --require-arch {policy.require_spec} passes with nothing to judge "
                "(--strict-device-code fails it)"
            )
        else:
            notes.append(none)
        return Findings(failures=tuple(failures), notes=tuple(notes))
    future = future_coverage(report)
    if (line := future_line(report)) is not None:
        if policy.require_future and future.how == "none":
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"--require-arch {policy.require_spec} asks for GPUs not yet made; {line}: add PTX of "
                    "the oldest architecture they should run from (e.g. CUDA_ARCHITECTURES ...;75-virtual), or "
                    "compile kernels at run time",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        else:
            notes.append(line)
    intended = _intended(report, policy.intent)
    if intended:
        failures_i, notes_i = _intent_findings(report, intended)
        failures.extend(failures_i)
        notes.extend(notes_i)
        # the other files are judged against --require-arch: a wheel whose code is all in intended files has none
        report = dataclasses.replace(report, elfs=tuple(e for e in report.elfs if e.name not in intended))
    if policy.require and (has_device_code(report) or not intended):
        # Judged for the required CCs themselves (they may lie outside the report's table, e.g. 8.8).
        detail = coverage_detail(report.elfs, policy.require)
        if detail.coverage.none:
            judged, side_notes = _judged_without_side_parts(report, policy.require, imports)
            if side_notes:
                detail = coverage_detail(judged, policy.require)
                notes.extend(side_notes)
        cov = detail.coverage
        gaps = {g.cc: g for g in detail.gaps}
        missing = list(cov.none)
        if missing:
            names = ", ".join(
                f"{cc}"
                + (f" ({g.name})" if (g := generation(cc)) else "")
                + (f" [{gap_text(gaps[cc])}]" if cc in gaps else "")
                for cc in missing
            )
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"required compute capabilities with neither SASS nor PTX: {names}",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        else:
            # All of a CC's modules through PTX, or only some of them beside SASS (cuFFT ships most of its kernels
            # as PTX only, its others as SASS): said apart, with how many modules.
            only = [str(cc) for cc in cov.ptx_only if cc not in gaps]
            counts: dict[tuple[int, int], list[str]] = {}
            for cc in cov.ptx_only:
                if cc in gaps:
                    counts.setdefault((gaps[cc].fatbins, gaps[cc].total), []).append(str(cc))
            part = [f"{', '.join(c)}: {n} of {total}" for (n, total), c in counts.items()]
            said = ([f"{', '.join(only)} only through PTX JIT"] if only else []) + (
                [f"some modules only through PTX JIT, the others SASS: {'; '.join(part)} modules"] if part else []
            )
            # CCs served only through PTX, by a few modules while most carry code for other GPUs only: said with the
            # count, as such a library most likely refuses those GPUs (cuSPARSELt 0.8.1: "does not support pre-SM80")
            few = [(cc, n) for cc, n in detail.judged if str(cc) in only and detail.total and n * 2 < detail.total]
            by_count: dict[int, list[str]] = {}
            for cc, n in few:
                by_count.setdefault(n, []).append(str(cc))
            said += [
                f"{', '.join(c)}: only {n} of {detail.total} modules carry code for "
                f"{'them' if len(c) > 1 else 'it'}, the others for other GPUs only"
                for n, c in by_count.items()
            ]
            notes.append(
                f"all {len(policy.require)} required compute capabilities are served"
                + (f" ({'; '.join(said)})" if said else "")
            )
        for ex in detail.excused:
            notes.append(
                f"{ex.cc}: {abbreviated(ex.elfs)} carr{'ies' if len(ex.elfs) == 1 else 'y'} code for other GPUs only "
                f"({'; '.join(' '.join(t) for t in ex.targets[:3])}{'; ...' if len(ex.targets) > 3 else ''}), while "
                "other files serve this one: parts for those GPUs in a wheel that picks its kernels by GPU (it has "
                "arch- or family-specific SASS), not judged for this GPU"
                if ex.whole
                else f"{ex.cc}: {ex.fatbins} modules of {', '.join(ex.elfs)} carry no code for it beside modules that "
                "run it natively: per-generation kernels of a library that picks them by GPU (it has arch- or "
                "family-specific SASS), not judged for this GPU"
            )
    return Findings(failures=tuple(failures), notes=tuple(notes))


def intent_within(intent: tuple[tuple[str, CCRequest], ...], ccs: tuple[CC, ...]) -> tuple[tuple[str, CCRequest], ...]:
    """gpu-intent for a wheel made for `ccs` only (`slim`'s and `variants`' request): each file's intended GPUs that
    the wheel is made for. A file meant for 8.0+ in a wheel slimmed to 7.5-9.0 must serve 8.0 and 9.0, not 12.0: the
    intent says which GPUs a file is for, the request which GPUs this wheel is for. An intent that shares no GPU with
    the request keeps its glob with no items: its files are judged for nothing (`_intent_findings` says so), never
    against the request they are not meant for."""
    asked = set(ccs)
    out = []
    for glob, req in intent:
        kept = sorted(asked.intersection(req.resolve()))
        narrowed = CCRequest.of(kept) if kept else CCRequest(text="", items=())
        out.append((glob, dataclasses.replace(narrowed, text=f"{req.text}, of the GPUs this wheel is made for")))
    return tuple(out)


def _intended(report: WheelReport, intent: tuple[tuple[str, CCRequest], ...]) -> dict[str, tuple[str, CCRequest]]:
    """file -> (glob, request) of the gpu-intent entry that decides it (the first glob its path matches)."""
    out: dict[str, tuple[str, CCRequest]] = {}
    for e in report.elfs:
        hit = next(((glob, req) for glob, req in intent if fnmatch.fnmatchcase(e.name, glob)), None)
        if hit is not None:
            out[e.name] = hit
    return out


def _intent_findings(
    report: WheelReport, intended: dict[str, tuple[str, CCRequest]]
) -> tuple[list[Failure], list[str]]:
    """Files with a gpu-intent, judged for the GPUs they are meant for (issue 37 item 7): the same coverage rule,
    the same exit code; the verdict names the intent that replaced --require-arch for them."""
    failures: list[Failure] = []
    notes: list[str] = []
    groups: dict[tuple[str, str], list[ElfReport]] = {}
    requests: dict[tuple[str, str], CCRequest] = {}
    for e in report.elfs:
        if e.name in intended:
            glob, req = intended[e.name]
            groups.setdefault((glob, req.text), []).append(e)
            requests[(glob, req.text)] = req
    for (glob, text), elfs in groups.items():
        files = abbreviated(tuple(e.name for e in elfs))
        said = f"{files} (gpu-intent {glob!r} = {text!r}, instead of --require-arch)"
        part = dataclasses.replace(report, elfs=tuple(elfs))
        if not has_device_code(part):
            notes.append(f"{said}: no device code to judge")
            continue
        if not requests[(glob, text)].items:  # narrowed to a request it shares no GPU with (`within`)
            notes.append(f"{said}: meant for none of the GPUs asked for, not judged")
            continue
        ccs = tuple(
            cc
            for cc in requests[(glob, text)].resolve()
            if generation(cc) is None or counted(cc, exclude_integrated=report.is_x86_64)
        )
        missing = coverage_detail(part.elfs, ccs).coverage.none
        if missing:
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"{said}: neither SASS nor PTX for {', '.join(map(str, missing))}",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        elif requests[(glob, text)].open_ended and future_coverage(part).how == "none":
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"{said}: asks for GPUs not yet made; {future_line(part)}",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        else:
            notes.append(f"{said}: all {len(ccs)} intended compute capabilities are served")
    return failures, notes


def _judged_without_side_parts(
    report: WheelReport, require: tuple[CC, ...], imports: PythonImports | None
) -> tuple[tuple[ElfReport, ...], list[str]]:
    """The files coverage judges when some required GPU is missing, and a note per side part left out. A side part is a
    plugin (`deps.plugins`: opened by name, needed by no file: transformer-engine 2.20's libnccl_ep.so for its
    expert-parallel API) or an optional extension module (`PythonImports.optional`: sgl-kernel's flashmla_ops); on a
    GPU it has no code for, that feature fails and the rest runs. They are left out only when the other files carry
    device code themselves: onnxruntime-gpu's CUDA provider is a plugin too, and the only file with its kernels."""
    infos = [ElfInfo.from_report(e) for e in report.elfs]
    plugin_of = deps.plugins(infos)
    side: dict[str, str] = {}
    for e in report.elfs:
        if not (e.judged_fatbins or e.nvrtc):
            continue
        if e.name in plugin_of:
            side[e.name] = f"a plugin {plugin_of[e.name]} opens by name"
        elif imports is not None and (opt := imports.optional(e.name)) is not None:
            side[e.name] = f"an optional part, imported under a guard at {abbreviated(opt.guards, 2)}"
    core = tuple(e for e in report.elfs if e.name not in side)
    if not side or not any(e.judged_fatbins or e.nvrtc for e in core):
        return report.elfs, []
    notes = []
    for e in report.elfs:
        if e.name in side and (gone := coverage_detail((e,), require).coverage.none):
            notes.append(
                f"{e.name} ({side[e.name]}) has neither SASS nor PTX for {', '.join(map(str, gone))}: on those GPUs "
                "that feature fails when used and the rest runs; coverage is judged without it"
            )
    return core, notes
