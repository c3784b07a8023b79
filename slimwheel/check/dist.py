"""The distribution checks of `slimwheel.distcheck` (installed size, debug symbols), as the policy asks."""

from __future__ import annotations

from slimwheel import distcheck
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    found = distcheck.findings(
        analysis.report, installed_budget=policy.installed_budget_bytes, debug=policy.debug_symbols
    )
    return Findings(failures=tuple(Failure(kind=f.kind, message=f.message, exit_code=f.exit_code) for f in found))
