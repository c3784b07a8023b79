"""One analysis of a wheel: what every command that judges or rewrites a wheel starts from.

A wheel is read once into a `WheelAnalysis`: its report (files, ELF, fatbins: `inspect.scan`), its RECORD's problems,
what its ELF files take from torch, its Python sources' imports (parsed only when a rule asks) and, when the index may
be read, what its requirements' own requirements install (walked only when a rule asks). `check`, `build`, `slim`,
`variants` and `repair` hand the analysis to the one verdict (`slimwheel.check.judge`), so the same wheel gets the same
verdict from each of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slimwheel.deps import Installs
    from slimwheel.inspect.elf import ElfReport
    from slimwheel.inspect.files import Buffer
    from slimwheel.inspect.pyimports import PythonImports
    from slimwheel.inspect.report import WheelReport
    from slimwheel.inspect.wheel import Member
    from slimwheel.reqgraph import Lookup, RequirementGraph
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
    from slimwheel.inspect.scan import Taps, inspect_file, inspect_wheel

    symbols: dict[str, frozenset[str]] | None = None
    if report is None and Path(path).suffix.lower() == ".whl":
        # one pass: every member hashed for RECORD, the Python sources kept and the torch symbols read, as the
        # members inflate for the report; this module's own imports made meanwhile, before the caller's
        symbols = {}
        sources = _Sources()
        tap = _torch_tap(symbols)
        taps = Taps(elf=tap) if imports is not None else Taps(keep=sources.keep, elf=tap)
        report = inspect_wheel(path, taps=taps, meanwhile=lambda: _imports(meanwhile))
        from slimwheel.wheelfile import record_problems_of

        record = record_problems_of(report.path, taps.digests)
        if imports is None:
            imports = sources.imports(taps.kept)
    else:
        if report is None:
            report = inspect_file(path, meanwhile=meanwhile)
        if not report.path.name.endswith(".whl"):
            return WheelAnalysis(report=report, file=file or report.path)
        from slimwheel.wheelfile import archive_record_problems

        record = archive_record_problems(file or report.path)
    from slimwheel import torchext
    from slimwheel.inspect.pyimports import PythonImports

    where = file or report.path
    return WheelAnalysis(
        report=report,
        file=where,
        record=tuple(record),
        torch=torchext.audit_wheel(where, {e.name: e.needed for e in report.elfs}, symbols),
        imports=imports if imports is not None else PythonImports.from_wheel(where),
        graph=graph,
    )


def _imports(then: Callable[[], object] | None) -> None:
    """What the analysis needs after the scan, imported while the members inflate (`scan.inspect_wheel`'s
    `meanwhile`: a small wheel's check spent 50 ms importing them first), then the caller's own work."""
    import slimwheel.inspect.pyimports
    import slimwheel.torchext
    import slimwheel.wheelfile  # noqa: F401

    if then is not None:
        then()


def _torch_tap(into: dict[str, frozenset[str]]) -> Callable[[str, Buffer, ElfReport], None]:
    """A `scan.Taps.elf` that keeps the torch symbols of each ELF member that needs a torch library
    (`torchext.member_symbols`). It runs in the scan's workers; torchext is imported by the calling thread meanwhile
    (`_imports`), and a worker that gets here first waits for that import or makes it."""

    def tap(name: str, data: Buffer, elf: ElfReport) -> None:
        from slimwheel.torchext import member_symbols

        found = member_symbols(name, data, elf)
        if found is not None:
            into[name] = found

    return tap


class _Sources:
    """The wheel's Python sources, kept by the scan (`scan.Taps.keep`): every .py member of at most `MAX_SOURCE`
    bytes, when together they are at most `MAX_SOURCES` (more than the reader parses anyway); past that none is kept
    and the reader reads them from the wheel, one at a time, if a rule asks."""

    def __init__(self) -> None:
        self.names: tuple[str, ...] | None = None  # every .py member, in the wheel's order; None: none kept

    def keep(self, members: tuple[Member, ...]) -> frozenset[str]:
        from slimwheel.inspect.pyimports import MAX_SOURCE, MAX_SOURCES

        py = [m for m in members if m.name.endswith(".py")]
        small = [m.name for m in py if m.uncompressed <= MAX_SOURCE]
        if sum(m.uncompressed for m in py if m.uncompressed <= MAX_SOURCE) > MAX_SOURCES:
            return frozenset()
        self.names = tuple(m.name for m in py)
        return frozenset(small)

    def imports(self, kept: Mapping[str, bytes]) -> PythonImports | None:
        """The reader of the kept sources (a source over `MAX_SOURCE` is None, as `PythonImports.from_wheel` gives
        it); None when none were kept."""
        from slimwheel.inspect.pyimports import PythonImports

        if self.names is None:
            return None
        return PythonImports.from_sources({name: kept.get(name) for name in self.names})


def requirement_graph(report: WheelReport) -> RequirementGraph:
    """What the wheel's requirements install, and theirs, read from the index on first use (`reqgraph`)."""
    return requirements_graph(report.requires_dist, report.tags)


def requirements_graph(
    requires: Sequence[str], tags: Sequence[str], index: Callable[[Installs], Lookup] | None = None
) -> RequirementGraph:
    """What `requires` (the Requires-Dist of a wheel with these tags) install, and theirs, walked on first question.
    `index`: the lookup for the machines and Pythons the wheel installs on (default: the package index)."""
    from slimwheel.deps import Installs
    from slimwheel.reqgraph import RequirementGraph

    installs = Installs.from_tags(tags)
    return RequirementGraph(requires, installs.environments(), (index or index_lookup)(installs))


def index_lookup(installs: Installs) -> Lookup:
    """The package index's lookup for the machines and Pythons a wheel installs on."""
    from slimwheel.pypindex import IndexLookup  # urllib and html.parser only when the index is to be read

    return IndexLookup(machines=installs.machines, pythons=installs.pythons)
