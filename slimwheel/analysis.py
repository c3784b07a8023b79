"""One analysis of a wheel: what every command that judges or rewrites a wheel starts from.

A wheel is read once into a `WheelAnalysis`: its report (files, ELF, fatbins: `inspect.scan`), its RECORD's problems,
what its ELF files take from torch, its Python sources' imports (parsed only when a rule asks) and, when the index may
be read, what its requirements' own requirements install (walked only when a rule asks). `check`, `build`, `slim`,
`variants` and `repair` hand the analysis to the one verdict (`slimwheel.check.judge`), so the same wheel gets the same
verdict from each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slimwheel.inspect.pyimports import PythonImports
    from slimwheel.inspect.report import WheelReport
    from slimwheel.reqgraph import RequirementGraph
    from slimwheel.torchext import TorchUse
    from slimwheel.wheelfile import RecordProblem


@dataclass(frozen=True, kw_only=True)
class WheelAnalysis:
    """Everything the checks read of one wheel. `file`: where the wheel is now (slim and variants judge their outputs
    under temporary names), `report.path` otherwise. A loose binary (not a .whl) has a report only."""

    report: WheelReport
    file: Path
    record: tuple[RecordProblem, ...] = ()
    torch: TorchUse | None = None
    imports: PythonImports | None = None  # the package's Python sources, parsed on first question
    graph: RequirementGraph | None = None  # what the requirements' requirements install, walked on first question

    @property
    def is_wheel(self) -> bool:
        return self.report.path.name.endswith(".whl")


def analyze(
    path: Path,
    *,
    report: WheelReport | None = None,
    file: Path | None = None,
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> WheelAnalysis:
    """The analysis of the wheel (or loose binary) at `path`. `report`: its report when the caller has read it already
    (slim and variants read their outputs as they write them); `file`: where it is now, if not at `report.path`;
    `imports`, `graph`: those of an input whose outputs keep its Python sources and requirements (variants: read once
    for all its wheels). `meanwhile`: the caller's work while the members inflate (`scan.inspect_wheel`; check
    imports the verdict's modules there), when the wheel is read here."""
    from slimwheel import torchext
    from slimwheel.inspect.pyimports import PythonImports
    from slimwheel.inspect.scan import MemberDigest, inspect_file, inspect_wheel
    from slimwheel.wheelfile import archive_record_problems, record_problems_of

    if report is None and Path(path).suffix.lower() == ".whl":
        # one pass: every member hashed for RECORD as it inflates for the report
        digests: dict[str, MemberDigest] = {}
        report = inspect_wheel(path, digests=digests, meanwhile=meanwhile)
        record = record_problems_of(report.path, digests)
    else:
        if report is None:
            report = inspect_file(path, meanwhile=meanwhile)
        if not report.path.name.endswith(".whl"):
            return WheelAnalysis(report=report, file=file or report.path)
        record = archive_record_problems(file or report.path)
    where = file or report.path
    return WheelAnalysis(
        report=report,
        file=where,
        record=tuple(record),
        torch=torchext.audit_wheel(where, {e.name: e.needed for e in report.elfs}),
        imports=imports if imports is not None else PythonImports.from_wheel(where),
        graph=graph,
    )


def requirement_graph(report: WheelReport) -> RequirementGraph:
    """What the wheel's requirements install, and theirs, read from the index on first use (`reqgraph`)."""
    from slimwheel.deps import Installs
    from slimwheel.pypindex import IndexLookup  # urllib and html.parser only when the index is to be read
    from slimwheel.reqgraph import RequirementGraph

    installs = Installs.from_tags(report.tags)
    lookup = IndexLookup(machines=installs.machines, pythons=installs.pythons)
    return RequirementGraph(report.requires_dist, installs.environments(), lookup)
