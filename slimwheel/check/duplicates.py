"""Byte-identical files (`slimwheel.inspect.duplicates`): a note naming each group and the bytes its extra copies
waste, largest first.

A note, not a failure. Copies waste space but break nothing, and space already has its gate: the budget check fails
a wheel that is too big, and this note then says where the bytes went. Failing on copies alone (as pydistcheck does
by default) would fail wheels that meet their budget for a choice that is theirs to make, such as a tool shipping the
same helper binary under two names.
"""

from __future__ import annotations

from slimwheel import shown
from slimwheel.analysis import WheelAnalysis
from slimwheel.check.policy import CheckPolicy, Findings
from slimwheel.inspect.duplicates import fix_text
from slimwheel.units import human

# Groups named one by one; the rest are counted, so that a wheel of many copies gets a note of bounded length.
SHOWN_GROUPS = 5


def findings(analysis: WheelAnalysis, policy: CheckPolicy) -> Findings:
    groups = analysis.report.duplicates
    if not groups:
        return Findings()
    wasted, wasted_installed = analysis.report.duplicate_waste
    notes = [
        f"byte-identical files: {len(groups)} group(s) waste {human(wasted)} of the wheel "
        f"({human(wasted_installed)} installed)"
    ]
    for g in groups[:SHOWN_GROUPS]:
        # names as the wheel has them: every renderer escapes notes for where it shows them
        notes.append(
            f"  {shown.abbreviated(g.names, limit=4)}: {human(g.wasted_compressed)} wasted ({human(g.wasted_uncompressed)} installed); "
            f"{fix_text(g)}"
        )
    if len(groups) > SHOWN_GROUPS:
        rest = groups[SHOWN_GROUPS:]
        notes.append(
            f"  and {len(rest)} more group(s): {human(sum(g.wasted_compressed for g in rest))} wasted "
            f"(size-report --format json lists them all)"
        )
    return Findings(notes=tuple(notes))
