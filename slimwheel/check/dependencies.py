"""Dependencies: every library each ELF file needs, loads or opens is accounted for (`slimwheel.deps`)."""

from __future__ import annotations

from slimwheel import deps
from slimwheel.analysis import WheelAnalysis, requirement_graph
from slimwheel.check.policy import CheckPolicy, Failure, Findings
from slimwheel.errors import ExitCode
from slimwheel.inspect.dynamic import ElfInfo


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    if not policy.dependencies:
        return Findings()
    report = analysis.report
    graph = analysis.graph
    if graph is None and policy.read_index and analysis.is_wheel and report.requires_dist:
        graph = requirement_graph(report)
    dv = deps.dependency_problems(
        [ElfInfo.from_report(e) for e in report.elfs],
        cuda_major=report.cuda_major,
        requires=report.requires_dist,
        tags=report.tags,
        files=[f.name for f in report.files],
        name=report.name,
        imports=analysis.imports,
        graph=graph,
    )
    unknown = tuple(
        Failure(kind="dependencies", message=u, exit_code=ExitCode.UNKNOWN)
        for u in dv.unknown
        if policy.unknown == "fail"
    )
    return Findings(
        failures=tuple(
            Failure(kind="dependencies", message=p, exit_code=ExitCode.INCONSISTENT_DEPENDENCIES) for p in dv.problems
        )
        + unknown,
        notes=dv.notes + (() if unknown else dv.unknown),
    )
