"""RECORD: the wheel's files as its RECORD lists them (`wheelfile.record_problems`, read by the analysis)."""

from __future__ import annotations

from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    return Findings(
        failures=tuple(Failure(kind="record", message=str(p), exit_code=ExitCode.BAD_RECORD) for p in analysis.record)
    )
