"""Checks on a wheel report: size budget, required GPU coverage, and that every needed library is accounted for.

Pure functions over a `WheelReport`; the CLI turns verdicts into output and an exit code (`raise_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from slimwheel import deps, distcheck, floor, torchext
from slimwheel.config import DEFAULT_BUDGET
from slimwheel.cuda.arch import (
    CC,
    KNOWN_CCS,
    CCRequest,
    Coverage,
    RequireArch,
    counted,
    generation,
    parse_require_arch,
)
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.elf import ElfReport
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.report import WheelReport, coverage_detail, gap_text, nvrtc_targets
from slimwheel.reqgraph import RequirementGraph
from slimwheel.shown import abbreviated
from slimwheel.units import mb, mib, parse_size

FailureKind = Literal["budget", "coverage", "dependencies", "record", "platform"] | distcheck.FindingKind

if TYPE_CHECKING:
    from slimwheel.wheelfile import RecordProblem


@dataclass(frozen=True, kw_only=True)
class CheckPolicy:
    budget_bytes: int = field(default_factory=lambda: parse_size(DEFAULT_BUDGET, what="budget"))
    require: tuple[CC, ...] = ()
    require_spec: str = ""  # as the user wrote it ("7.5-12.0", "toolkit"), for messages
    left_out: tuple[CC, ...] = ()  # integrated aarch64 GPUs dropped from the request for an x86_64 wheel
    dependencies: bool = True
    installed_budget_bytes: int | None = None  # distcheck: the installed size allowed (None: not checked)
    debug_symbols: bool = False  # distcheck: unstripped ELF files fail
    manylinux: floor.Policy | None = None  # the platform floor every ELF file must stay within (None: not checked)
    # Read the package index for what the requirements' own requirements install, when a library is otherwise
    # unprovided (`reqgraph`). Off for library callers and tests; `slimwheel check` turns it on unless --offline.
    read_index: bool = False


@dataclass(frozen=True, kw_only=True)
class Failure:
    kind: FailureKind
    message: str
    exit_code: ExitCode


@dataclass(frozen=True, kw_only=True)
class Verdict:
    wheel: str
    ok: bool
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = field(default=())


def required_ccs(spec: str | RequireArch, report: WheelReport) -> tuple[tuple[CC, ...], tuple[CC, ...]]:
    """(required, left out) for `--require-arch`: nothing for "" or "none"; a CC set ("7.5-12.0", "8.0+", "9.0");
    "toolkit": every CC the
    wheel's CUDA major can target (the newest release of that major slimwheel knows), or "auto": those of them from
    the oldest CC the wheel has code for up: whatever the wheel chose to start at, it must not lose newer GPUs (a wheel
    with no device code, or whose CUDA major cannot be told, requires nothing). Integrated GPUs (Jetson, Thor, GB10)
    are aarch64 systems, so they are left out for x86_64 wheels."""
    spec = parse_require_arch(spec)
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


def make_policy(
    report: WheelReport,
    *,
    budget: str | int = DEFAULT_BUDGET,
    require_arch: str | RequireArch = "",
    dependencies: bool = True,
    installed_budget: str | int | None = None,
    debug_symbols: bool = False,
    manylinux: str = "",
    read_index: bool = False,
) -> CheckPolicy:
    require, left_out = required_ccs(require_arch, report)
    return CheckPolicy(
        budget_bytes=parse_size(budget, what="budget"),
        require=require,
        require_spec=str(require_arch),
        left_out=left_out,
        dependencies=dependencies,
        installed_budget_bytes=parse_size(installed_budget, what="installed-budget") if installed_budget else None,
        debug_symbols=debug_symbols,
        manylinux=floor.parse_target(manylinux) if manylinux.strip() else None,
        read_index=read_index,
    )


def floor_failures(report: WheelReport, target: floor.Policy) -> tuple[list[Failure], str]:
    """Failures for each symbol version over `target` (one per file and version, naming its symbols), and a note
    with the floor the wheel has (auditwheel's policies, symbol versions alone)."""
    found = floor.offenders(report.elfs, target)
    have = floor.wheel_floor(report.elfs)
    note = f"platform floor {have.name if have else 'above every manylinux policy'} (symbol versions), " + (
        f"target {target.name}" if found else f"within {target.name}"
    )
    return [
        Failure(kind="platform", message=o.message(target.name), exit_code=ExitCode.ABOVE_PLATFORM_FLOOR) for o in found
    ], note


def requirement_graph(report: WheelReport) -> RequirementGraph:
    """What the wheel's requirements install, and theirs, read from the index on first use (`reqgraph`)."""
    from slimwheel.pypindex import IndexLookup  # urllib and html.parser only when the index is to be read

    installs = deps.Installs.from_tags(report.tags)
    lookup = IndexLookup(machines=installs.machines, pythons=installs.pythons)
    return RequirementGraph(report.requires_dist, installs.environments(), lookup)


def check_wheel_file(
    report: WheelReport,
    policy: CheckPolicy,
    *,
    file: Path | None = None,
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> Verdict:
    """`check_wheel` with what the wheel file holds besides its report, as `slimwheel check` judges a wheel: its
    RECORD's problems, its use of torch's libraries, its Python sources (read only when the rules ask). `file`: where
    the wheel is now (slim and variants judge their outputs under temporary names), default `report.path`.
    `imports`: those sources when the caller has them already (variants: the input's, which slimming leaves as they
    are, read once for all its wheels: 1.6 s for cupy-cuda13x's). `graph`: `requirement_graph` of the wheel when the
    caller has one (variants: the input's, whose requirements and tags its wheels keep, walked once), else made here
    when the policy reads the index. A loose binary (not a .whl) has none of those."""
    from slimwheel.wheelfile import archive_record_problems

    if not report.path.name.endswith(".whl"):
        return check_wheel(report, policy)
    path = file or report.path
    if not (policy.read_index and policy.dependencies and report.requires_dist):
        graph = None
    elif graph is None:
        graph = requirement_graph(report)
    return check_wheel(
        report,
        policy,
        record_problems=archive_record_problems(path),
        torch=torchext.audit_wheel(path, {e.name: e.needed for e in report.elfs}),
        imports=imports if imports is not None else PythonImports.from_wheel(path),
        graph=graph,
    )


def check_wheel(
    report: WheelReport,
    policy: CheckPolicy,
    *,
    record_problems: Sequence[RecordProblem] = (),
    torch: torchext.TorchUse | None = None,
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> Verdict:
    """The verdict on one wheel. `record_problems`: `wheelfile.archive_record_problems` of it; `torch`:
    `torchext.audit_wheel` of it (I/O the caller does); `imports`: its Python sources (`PythonImports.from_wheel`,
    read only when a library nothing provides makes the dependency rules ask); `graph`: what the requirements'
    requirements install (`reqgraph`, read on first use)."""
    failures: list[Failure] = [
        Failure(kind="record", message=str(p), exit_code=ExitCode.BAD_RECORD) for p in record_problems
    ]
    notes: list[str] = []
    if report.size > policy.budget_bytes:
        failures.append(
            Failure(
                kind="budget",
                message=f"{mib(report.size)} ({mb(report.size)}, {report.size} bytes) is over the budget of "
                f"{mib(policy.budget_bytes)} ({mb(policy.budget_bytes)}, {policy.budget_bytes} bytes) by "
                f"{report.size - policy.budget_bytes} bytes",
                exit_code=ExitCode.OVER_BUDGET,
            )
        )
    else:
        notes.append(f"size {mib(report.size)} of a {mib(policy.budget_bytes)} budget")
    if policy.left_out:
        notes.append(
            "left out of the required set, as integrated aarch64 GPUs never run an x86_64 wheel: "
            + ", ".join(map(str, policy.left_out))
        )
    if not policy.require and report.targets and report.cuda_major is None and policy.require_spec == "auto":
        notes.append(_unjudged_coverage(report))
    if policy.require:
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
    failures.extend(
        Failure(kind=f.kind, message=f.message, exit_code=f.exit_code)
        for f in distcheck.findings(report, installed_budget=policy.installed_budget_bytes, debug=policy.debug_symbols)
    )
    if policy.manylinux is not None:
        got, note = floor_failures(report, policy.manylinux)
        failures.extend(got)
        notes.append(note)
    if policy.dependencies:
        dv = deps.dependency_problems(
            [ElfInfo.from_report(e) for e in report.elfs],
            cuda_major=report.cuda_major,
            requires=report.requires_dist,
            tags=report.tags,
            files=[f.name for f in report.files],
            name=report.name,
            imports=imports,
            graph=graph,
        )
        notes.extend(dv.notes)
        failures.extend(
            Failure(kind="dependencies", message=p, exit_code=ExitCode.INCONSISTENT_DEPENDENCIES) for p in dv.problems
        )
        if torch is not None:
            tv = torchext.judge(torch, report.requires_dist, cuda_major=report.cuda_major)
            notes.extend(tv.notes)
            failures.extend(
                Failure(kind="dependencies", message=p, exit_code=ExitCode.INCONSISTENT_DEPENDENCIES)
                for p in tv.problems
            )
    return Verdict(wheel=str(report.path), ok=not failures, failures=tuple(failures), notes=tuple(notes))


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


def exit_code_for(verdicts: list[Verdict] | tuple[Verdict, ...]) -> ExitCode:
    codes = {f.exit_code for v in verdicts for f in v.failures}
    if not codes:
        return ExitCode.OK
    if len(codes) == 1:
        return codes.pop()
    return ExitCode.CHECK_FAILED


def raise_for(verdicts: list[Verdict] | tuple[Verdict, ...]) -> None:
    """CheckFailed with 10 (budget), 11 (coverage), 12 (dependencies), 14 (RECORD), 18 (platform floor), or 13 when
    several kinds failed."""
    code = exit_code_for(verdicts)
    if code is ExitCode.OK:
        return
    failed = [v for v in verdicts if not v.ok]
    kinds = sorted({f.kind for v in failed for f in v.failures})
    raise CheckFailed(f"{len(failed)} of {len(verdicts)} wheel(s) failed: {', '.join(kinds)}", code)


def verdict_to_json(v: Verdict) -> dict[str, Any]:
    return {
        "wheel": v.wheel,
        "ok": v.ok,
        "failures": [{"kind": f.kind, "message": f.message, "exit_code": int(f.exit_code)} for f in v.failures],
        "notes": list(v.notes),
    }
