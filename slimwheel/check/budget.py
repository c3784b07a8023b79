"""The size budget: the wheel's compressed size against the policy's."""

from __future__ import annotations

from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode
from slimwheel.units import mb, mib


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    size = analysis.report.size
    if size <= policy.budget_bytes:
        return Findings(notes=(f"size {mib(size)} of a {mib(policy.budget_bytes)} budget",))
    return Findings(
        failures=(
            Failure(
                kind="budget",
                message=f"{mib(size)} ({mb(size)}, {size} bytes) is over the budget of "
                f"{mib(policy.budget_bytes)} ({mb(policy.budget_bytes)}, {policy.budget_bytes} bytes) by "
                f"{size - policy.budget_bytes} bytes",
                exit_code=ExitCode.OVER_BUDGET,
            ),
        )
    )
