"""The platform floor: GNU symbol versions of the ELF files against a manylinux policy (`slimwheel.floor`)."""

from __future__ import annotations

from slimwheel import floor
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode
from slimwheel.inspect.report import WheelReport
from slimwheel.shown import abbreviated


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


def stale_tags_note(report: WheelReport) -> str | None:
    """A note naming the wheel's manylinux tags that promise older systems than its files' symbol versions allow
    (`floor.below_floor`), and the files that need more; None when every tag holds. Said without a `--manylinux`
    target too: pip installs the wheel on such a system by that tag, and those files fail to load there (taichi 1.7.4,
    tagged manylinux_2_27: "version `GLIBC_2.32' not found" on import). Those files may be parts a process never loads
    (bitsandbytes' XPU libraries): the note names them."""
    have = floor.wheel_floor(report.elfs)
    if have is None:  # above every policy, or no file of a known machine: no tag holds or none is judged
        return None
    stale = floor.below_floor(report.tags, have)
    oldest = max((p for t in stale if (p := floor.tag_policy(t)) is not None), key=lambda p: p.priority, default=None)
    if oldest is None:
        return None
    files = floor.files_above(report.elfs, oldest)
    return (
        f"platform tag {', '.join(stale)} promises older systems than {abbreviated(files)} "
        f"{'needs' if len(files) == 1 else 'need'} ({have.name}): pip "
        f"installs the wheel there, and {'that file fails' if len(files) == 1 else 'those files fail'} to load "
        "(`slimwheel repair` drops such tags)"
    )


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    stale = stale_tags_note(analysis.report)
    if policy.manylinux is None:
        return Findings(notes=(stale,) if stale else ())
    failures, note = floor_failures(analysis.report, policy.manylinux)
    return Findings(failures=tuple(failures), notes=(note, stale) if stale else (note,))
