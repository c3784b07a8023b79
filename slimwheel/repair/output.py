"""The repaired wheel as it leaves repair: its name and platform tags, the requirements written into its METADATA,
the external libraries its files need, and the output read as `check` reads it and judged by the one verdict
(`check.judge`): nothing check would fail on its dependencies, or refuse, is written."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from slimwheel import floor, fsutil, wheelfile
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.external import ExternalLib, check_can_tie, resolve_external, used_externals
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_unpacked, inspect_wheel
from slimwheel.repair.requires import RequirementPlan, wheel_tags
from slimwheel.repair.source import RepairInput
from slimwheel.reqgraph import RequirementGraph

log = logging.getLogger("slimwheel.repair")


def output_target(
    out_dir: Path, name: str, wheel_file: Path, report: WheelReport, wheel: Path
) -> tuple[Path, tuple[str, ...]]:
    """Where the output goes, and the platform tags dropped: auditwheel's name without the tags the files' symbol
    versions do not allow (gpt4all 2.8.2, tagged manylinux1 and needing GLIBC_2.34, came out as
    `manylinux1_x86_64.manylinux_2_34_x86_64`: pip on glibc 2.28 installed it and its import failed). WHEEL's `Tag:`
    lines are rewritten to match, in place under the unpacked output."""
    stale = floor.below_floor(wheel_tags(name), floor.wheel_floor(report.elfs))
    if stale:
        name, text = wheelfile.without_platforms(name, wheel_file.read_text(encoding="utf-8"), stale)
        fsutil.write_text_atomic(wheel_file, text)
        log.info("%s: platform tags %s dropped: older than its files' symbol versions allow", wheel.name, stale)
    target = out_dir / name
    if target.resolve() == wheel.resolve():
        raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another -w folder")
    return target, stale


def final_judgement(written: Path, wheel: Path, src: RepairInput, graph: RequirementGraph | None = None) -> list[str]:
    """The packed output, read once as `check` reads it, judged by the one verdict (`check.judge`, with the
    requirement graph check reads, `graph`; None: as `slimwheel check --offline` judges it): a wheel whose
    dependencies (torch's included) check would fail, or that check would refuse, is never written. Size and coverage
    are the project's to judge (`build`, `check`), not repair's. Returns what the verdict could not learn (issue 41
    item 4), for repair to say."""
    from slimwheel.analysis import WheelAnalysis
    from slimwheel.check import CheckPolicy, judge

    report = _readable_by_check(written, wheel)
    analysis = WheelAnalysis(report=report, file=written, torch=src.torch, imports=src.python, graph=graph)
    # Offline (`graph` None), what only the index can tell (a required project's folder taken to hold a library the
    # user named with --external) is said, and left for check to judge, not a reason to write nothing.
    failures = [f for f in judge(analysis, CheckPolicy(unknown="fail")).failures if f.kind == "dependencies"]
    problems = [f.message for f in failures if f.exit_code is not ExitCode.UNKNOWN]
    if problems:
        raise CheckFailed(
            f"{wheel.name}: the repaired wheel would fail `slimwheel check`, so none was written: "
            + "; ".join(problems),
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    return [f.message for f in failures if f.exit_code is ExitCode.UNKNOWN]


def externals_needed(
    elfs: Mapping[str, ElfInfo], externals: Sequence[ExternalLib], wheel: Path
) -> tuple[ExternalLib, ...]:
    """The external libraries some ELF file needs, each with its folder resolved. Judged after auditwheel: a library
    it bundled may be the one that needs the external library."""
    used = used_externals(elfs.values(), externals)
    for e in externals:
        if e not in used:
            log.info("external library %s: no ELF file in %s needs it; ignored", e.pattern, wheel.name)
    external = tuple(resolve_external(e) for e in used)
    for e in external:
        if why := check_can_tie(e):
            raise BadInputError(
                f"{wheel.name}: {why}; the repaired wheel would fail check",
                hint="give a folder inside that project's own folder: SONAME=REQUIREMENT@FOLDER",
            )
    return external


def write_requirements(
    meta_path: Path, where: str, plan: RequirementPlan, external: Sequence[ExternalLib]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The plan's requirements and the external libraries' added to METADATA; returns (every requirement written,
    the wheel's own requirements kept in place of the plan's)."""
    meta_text, added, kept = wheelfile.add_requires_dist(meta_path.read_text(encoding="utf-8"), plan.reqs, path=where)
    meta_text, external_reqs = wheelfile.merge_requires_dist(meta_text, [e.requirement for e in external], path=where)
    meta_path.write_text(meta_text, encoding="utf-8")
    return (*added, *external_reqs), kept


def read_repaired(repaired: Path, root: Path, names: list[str], wheel: Path) -> WheelReport:
    """auditwheel's output unpacked under root, read by check's reader: what it refuses (a bundled library may carry
    fatbins past check's limits), the repaired wheel, which holds the same files and the loader, would be too."""
    try:
        return inspect_unpacked(repaired, root, names)
    except BadInputError as e:
        raise _refused_by_check(e, repaired, wheel) from None


def _refused_by_check(e: BadInputError, written: Path, wheel: Path) -> BadInputError:
    return BadInputError(
        f"{wheel.name}: the repaired wheel would be refused by `slimwheel check`, so none was written: "
        + e.message.replace(str(written), "the repaired wheel")
    )


def _readable_by_check(written: Path, wheel: Path) -> WheelReport:
    """The packed output read as `check` reads it (its limits: a bundled library may carry fatbins past them): a wheel
    check refuses (exit 3) is never written."""
    try:
        return inspect_wheel(written)
    except BadInputError as e:
        raise _refused_by_check(e, written, wheel) from None
