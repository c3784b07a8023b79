"""The one verdict: a wheel's analysis (`slimwheel.analysis`) judged against a policy, check by check.

Each check is a module of this package with one function, `findings(analysis, policy)`: `record`, `budget`,
`duplicates` (byte-identical files), `coverage`, `dist` (installed size, debug symbols), `platform` (the manylinux
floor), `dependencies` (`slimwheel.deps`) and `torch`. `judge` runs them in that order; every command that gives a verdict (check, build, repair, slim, variants,
and the container's audit, which runs check) calls it, so the same wheel gets the same verdict from each. A new check
is a module and one line in `CHECKS`. The CLI turns verdicts into output and an exit code (`raise_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slimwheel import floor
from slimwheel.analysis import WheelAnalysis, analyze, requirement_graph
from slimwheel.check import budget, coverage, dependencies, dist, duplicates, platform, record, torch
from slimwheel.check.coverage import intent_within, required_ccs
from slimwheel.check.platform import floor_failures
from slimwheel.check.policy import CheckPolicy, Failure, FailureKind, Findings, Verdict
from slimwheel.config import DEFAULT_BUDGET_BYTES, DEFAULT_DEBUG_SYMBOLS, Config, Unknown
from slimwheel.configtables import intent_table
from slimwheel.cuda.arch import CC, CCRequest, RequireArch
from slimwheel.envvars import env_bool
from slimwheel.errors import CheckFailed, ExitCode
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.report import WheelReport
from slimwheel.reqgraph import RequirementGraph

if TYPE_CHECKING:
    from slimwheel import torchext
    from slimwheel.wheelfile import RecordProblem

__all__ = [
    "CHECKS",
    "NO_SETTINGS",
    "CheckPolicy",
    "Failure",
    "FailureKind",
    "Findings",
    "PolicySettings",
    "Verdict",
    "analyze",
    "check_wheel",
    "check_wheel_file",
    "exit_code_for",
    "floor_failures",
    "judge",
    "make_policy",
    "may_read_index",
    "policy_for",
    "raise_for",
    "required_ccs",
    "requirement_graph",
    "verdict_to_json",
]

Check = Callable[[WheelAnalysis, CheckPolicy], Findings]
# In this order: the verdict's failures and notes come out check by check.
CHECKS: tuple[Check, ...] = (
    record.findings,
    budget.findings,
    duplicates.findings,
    coverage.findings,
    dist.findings,
    platform.findings,
    dependencies.findings,
    torch.findings,
)


def may_read_index(env: Mapping[str, str], *, offline: bool | None = None) -> bool:
    """Whether a verdict may read the package index: not with --offline (`offline`), nor with SLIMWHEEL_OFFLINE set
    true in `env`. Every command that judges asks this one rule (check, slim, variants, build)."""
    return not (offline or env_bool(env, "SLIMWHEEL_OFFLINE", default=False))


def judge(analysis: WheelAnalysis, policy: CheckPolicy) -> Verdict:
    """THE verdict on one wheel: every check of `CHECKS` over its analysis."""
    failures: list[Failure] = []
    notes: list[str] = []
    for check in CHECKS:
        found = check(analysis, policy)
        failures.extend(found.failures)
        notes.extend(found.notes)
    return Verdict(wheel=str(analysis.report.path), ok=not failures, failures=tuple(failures), notes=tuple(notes))


def make_policy(
    report: WheelReport,
    *,
    budget: int = DEFAULT_BUDGET_BYTES,
    require_arch: RequireArch = "",
    dependencies: bool = True,
    installed_budget: int | None = None,
    debug_symbols: bool = DEFAULT_DEBUG_SYMBOLS,
    manylinux: floor.Policy | None = None,
    read_index: bool = False,
    strict_device_code: bool = False,
    intent: tuple[tuple[str, CCRequest], ...] = (),
    unknown: Unknown = "fail",
) -> CheckPolicy:
    """The policy `report`'s wheel is judged against, from values parsed at the edge (`Config.parsed`, the CLI):
    sizes in bytes, the coverage request, the platform floor. Only the CCs `require_arch` names depend on the wheel."""
    require, left_out = required_ccs(require_arch, report)
    return CheckPolicy(
        require_future=isinstance(require_arch, CCRequest) and require_arch.open_ended,
        budget_bytes=budget,
        require=require,
        require_spec=str(require_arch),
        left_out=left_out,
        dependencies=dependencies,
        installed_budget_bytes=installed_budget,
        debug_symbols=debug_symbols,
        manylinux=manylinux,
        read_index=read_index,
        strict_device_code=strict_device_code,
        intent=intent,
        unknown=unknown,
    )


@dataclass(frozen=True, kw_only=True)
class PolicySettings:
    """What every verdict is asked apart from the wheel and its GPU request: the settings of `Config` (CLI >
    SLIMWHEEL_* > [tool.slimwheel] > defaults) a verdict reads, taken in one place (`of`) by every command that
    judges (check, build, slim, variants), so that none of them drops one: `build` once judged without the
    project's gpu-intent and strict-device-code that `check` in the same folder applied."""

    budget: int = DEFAULT_BUDGET_BYTES
    installed_budget: int | None = None
    debug_symbols: bool = DEFAULT_DEBUG_SYMBOLS
    manylinux: floor.Policy | None = None
    strict_device_code: bool = False
    intent: tuple[tuple[str, CCRequest], ...] = ()
    unknown: Unknown = "fail"
    read_index: bool = False
    dependencies: bool = True

    @classmethod
    def of(cls, cfg: Config, *, read_index: bool, dependencies: bool = True) -> PolicySettings:
        return cls(
            budget=cfg.parsed.budget_bytes,
            installed_budget=cfg.parsed.installed_budget_bytes,
            debug_symbols=cfg.debug_symbols,
            manylinux=cfg.parsed.manylinux,
            strict_device_code=cfg.strict_device_code,
            intent=intent_table(cfg.gpu_intent),
            unknown=cfg.unknown,
            read_index=read_index,
            dependencies=dependencies,
        )


NO_SETTINGS = PolicySettings()  # the defaults: what a library caller gets (no index, nothing configured)


def policy_for(
    report: WheelReport,
    settings: PolicySettings,
    *,
    require_arch: RequireArch,
    made_for: tuple[CC, ...] | None = None,
    strict_device_code: bool = False,
) -> CheckPolicy:
    """`make_policy` from the settings and the GPUs this command asks for (`require_arch`: check's --require-arch,
    build's plan). `made_for`: the GPUs a slimmed wheel was made for (slim's and variants' request): its
    gpu-intent is narrowed to them (`coverage.intent_within`). `strict_device_code`: the command's own reason to
    fail a wheel with no device code (slim: code it dropped is not code built at run time), beside the setting."""
    intent = settings.intent if made_for is None else intent_within(settings.intent, made_for)
    return make_policy(
        report,
        budget=settings.budget,
        require_arch=require_arch,
        dependencies=settings.dependencies,
        installed_budget=settings.installed_budget,
        debug_symbols=settings.debug_symbols,
        manylinux=settings.manylinux,
        read_index=settings.read_index,
        strict_device_code=settings.strict_device_code or strict_device_code,
        intent=intent,
        unknown=settings.unknown,
    )


def check_wheel_file(
    report: WheelReport,
    policy: CheckPolicy,
    *,
    file: Path | None = None,
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> Verdict:
    """`judge` of the wheel `report` was read from (`analyze`): its RECORD, its use of torch, its Python sources."""
    return judge(analyze(report.path, report=report, file=file, imports=imports, graph=graph), policy)


def check_wheel(
    report: WheelReport,
    policy: CheckPolicy,
    *,
    record_problems: Sequence[RecordProblem] = (),
    torch: torchext.TorchUse | None = None,
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> Verdict:
    """`judge` of an analysis put together by the caller (tests, and callers that hold the parts already)."""
    analysis = WheelAnalysis(
        report=report, file=report.path, record=tuple(record_problems), torch=torch, imports=imports, graph=graph
    )
    return judge(analysis, policy)


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
