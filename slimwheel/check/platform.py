"""The platform floor: GNU symbol versions of the ELF files against a manylinux policy (`slimwheel.floor`)."""

from __future__ import annotations

from slimwheel import floor
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode
from slimwheel.inspect.report import WheelReport


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


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    if policy.manylinux is None:
        return Findings()
    failures, note = floor_failures(analysis.report, policy.manylinux)
    return Findings(failures=tuple(failures), notes=(note,))
