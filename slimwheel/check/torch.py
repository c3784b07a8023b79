"""A PyTorch extension's use of torch against its torch requirement (`slimwheel.torchext.judge`)."""

from __future__ import annotations

from slimwheel import torchext
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    if not policy.dependencies or analysis.torch is None:
        return Findings()
    report = analysis.report
    tv = torchext.judge(analysis.torch, report.requires_dist, cuda_major=report.cuda_major)
    return Findings(
        failures=tuple(
            Failure(kind="dependencies", message=p, exit_code=ExitCode.INCONSISTENT_DEPENDENCIES) for p in tv.problems
        ),
        notes=tuple(tv.notes),
    )
