"""`slimwheel variants`: one wheel per GPU family, labelled as PEP 825 (draft) wheel variants, plus the universal one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from slimwheel import check as checkmod
from slimwheel import config as cfgmod
from slimwheel import heap, render, shown
from slimwheel.commands._options import budget_option, format_option, offline_option, read_index, unknown_option
from slimwheel.commands.size_report import emit
from slimwheel.postbuild.variants import VariantsResult, make_variants, result_to_json
from slimwheel.units import human


def _draw(r: VariantsResult, console: Console) -> None:
    table = Table(show_edge=False, pad_edge=False)
    for col in ("variant", "GPUs", "targets", "nvidia :: sm_arch", "zip", "installed"):
        table.add_column(col, justify="right" if col in ("zip", "installed") else "left")
    b = r.before
    table.add_row(
        "(universal)", "all it serves", " ".join(map(str, b.targets)), "-", human(b.size), human(b.installed_size)
    )
    for v in r.variants:
        table.add_row(
            v.family.label,
            ", ".join(str(c) for c in v.family.request.ccs),
            " ".join(map(str, v.report.targets)),
            ", ".join(v.properties["nvidia"]["sm_arch"]),
            human(v.report.size),
            human(v.report.installed_size),
        )
    console.print(table)
    console.print(f"universal: {shown.markup(str(r.universal))}")
    for v in r.variants:
        console.print(f"{v.family.label}: {shown.markup(str(v.rewritten.wheel))}")
    console.print(f"index metadata: {shown.markup(str(r.index_file))} (serve it beside the wheels; see docs/slim.md)")
    console.print(f"PEP 503 page: {shown.markup(str(r.simple))} (uv --index-url <folder>/simple)")
    console.print("sizes: KiB/MiB = 2**10/2**20 bytes")
    render.render_verdicts([v.verdict for v in r.variants], console)


@click.command("variants")
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("wheelhouse"),
    show_default=True,
    help="Folder for the variant wheels, the universal wheel, the index JSON and the PEP 503 pages (simple/).",
)
@budget_option("Size budget each variant is checked against (as `check --budget`).")
@format_option(("table", "json"), "table")
@click.option(
    "--rewrite-record",
    is_flag=True,
    help="Accept an input whose RECORD does not match its files (refused "
    "with exit 14 by default, as by repair); the output gets a correct RECORD.",
)
@offline_option()
@unknown_option()
def command(
    wheel: Path,
    out_dir: Path,
    budget: str | None,
    fmt: str,
    rewrite_record: bool,
    offline: bool | None,
    unknown: str | None,
) -> None:
    """Split WHEEL into one variant wheel per GPU family of its SASS (7.5, 8.x, 9.0, 10.x, 12.x ...), each with only
    that family's code (the newest family keeps the newest PTX), labelled `-sm<major>x` with a variant.json of
    `nvidia :: sm_arch` and `nvidia :: cuda_version_lower_bound` properties; WHEEL itself is copied beside them as the
    universal fallback. uv --preview-features wheel-variants installs the variant that fits the GPU from DIR."""
    heap.return_freed_buffers()
    cfg = cfgmod.load(Path.cwd(), dict(os.environ), {"budget": budget, "unknown": unknown})
    result = make_variants(
        wheel,
        out_dir,
        budget=cfg.parsed.budget_bytes,
        rewrite_record=rewrite_record,
        read_index=read_index(offline),
        debug_symbols=cfg.debug_symbols,  # as `slimwheel check` judges each output
        unknown=cfg.unknown,
    )
    if fmt == "json":
        emit(json.dumps(result_to_json(result), indent=2) + "\n", None)
    else:
        emit(render.table_text(lambda console: _draw(result, console), color=sys.stdout.isatty()), None)
    checkmod.raise_for([v.verdict for v in result.variants])
