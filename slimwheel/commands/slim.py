"""`slimwheel slim`: drop the device code no requested GPU uses from a built wheel, without rebuilding it."""

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
from slimwheel.cli import quiet
from slimwheel.commands._options import (
    budget_option,
    format_option,
    offline_option,
    ptx_keep_option,
    read_index,
    slim_archs_option,
    unknown_option,
)
from slimwheel.commands.size_report import emit
from slimwheel.cuda.arch import RequireArch
from slimwheel.errors import ExitCode
from slimwheel.postbuild.slim import PtxKeep, SlimResult, result_to_json, slim
from slimwheel.units import human

_ROWS = 40  # rows of the dropped-code table; the JSON lists every file


def _draw_quiet(r: SlimResult, console: Console) -> None:
    console.print(f"slimmed: {shown.markup(str(r.rewritten.wheel))}")
    render.render_verdicts([r.verdict], console, notes=False)


def _draw(r: SlimResult, console: Console) -> None:
    b, a = r.before, r.after
    console.print(f"slimmed: {shown.markup(str(r.rewritten.wheel))}")
    console.print(
        f"  kept for: {', '.join(str(cc) for cc in r.request.ccs)}; PTX: {r.request.ptx}"
        + (f" + {', '.join(str(c) for c in r.request.ptx_ccs)}" if r.request.ptx_ccs else "")
    )
    if r.left_out:
        console.print(f"  left out (integrated aarch64 GPUs): {', '.join(map(str, r.left_out))}")
    console.print(f"  targets: {' '.join(map(str, b.targets))} -> {' '.join(map(str, a.targets))}")
    sizes = Table(show_edge=False, pad_edge=False)
    for col in ("", "before", "after", "saved"):
        sizes.add_column(col, justify="left" if not col else "right")
    fat_b = sum(e.fatbin_bytes for e in b.elfs)
    fat_a = sum(e.fatbin_bytes for e in a.elfs)
    for label, x, y in (
        ("wheel (zip)", b.size, a.size),
        ("installed", b.installed_size, a.installed_size),
        ("fatbin containers", fat_b, fat_a),
    ):
        sizes.add_row(label, human(x), human(y), f"{human(x - y)} ({100 * (x - y) / x if x else 0:.1f}%)")
    console.print(sizes)
    dropped = Table(title="dropped device code", show_edge=False, pad_edge=False)
    for col in ("file", "kind", "arch", "entries", "bytes"):
        dropped.add_column(col, justify="right" if col in ("entries", "bytes") else "left")
    rows = [
        (f.name, kind, arch, n, nbytes) for f in r.rewritten.files for (kind, arch), (n, nbytes) in f.by_arch().items()
    ]
    rows.sort(key=lambda row: -row[4])
    for name, kind, arch, n, nbytes in rows[:_ROWS]:
        dropped.add_row(shown.markup(name), kind, arch, str(n), human(nbytes))
    if len(rows) > _ROWS:  # flashinfer-cubin's 1,952 cubins for 10.3 would be a page each
        rest = rows[_ROWS:]
        dropped.add_row(
            f"... {len({row[0] for row in rest})} more files",
            "",
            "",
            str(sum(row[3] for row in rest)),
            human(sum(row[4] for row in rest)),
        )
    if rows:
        console.print(dropped)
    else:
        console.print("  nothing dropped: every entry serves a requested GPU")
    removed = [f for f in r.rewritten.files if f.removed]
    console.print(
        "sizes: KiB/MiB = 2**10/2**20 bytes; freed bytes stay in the files as zeros"
        + (
            f"; {len(removed)} cubin file(s) for none of the GPUs ({human(sum(f.size for f in removed))}) left "
            "the wheel"
            if removed
            else " (installed size unchanged)"
        )
    )
    render.render_verdicts([r.verdict], console)


@click.command(
    "slim",
    help=f"""Rewrite WHEEL's fatbins to keep only the code that serves the --archs GPUs, in place (no rebuild, no
    relink).

    The new wheel gets a local version label (1.0+slim.sm90), keeps its tags, and is checked with the requested
    GPUs required: exit {ExitCode.MISSING_COVERAGE:d} if one of them lost its code, {ExitCode.OVER_BUDGET:d} if it is
    over the budget. A request that no code of the wheel serves is refused (exit {ExitCode.MISSING_COVERAGE:d}, nothing
    written); so are compute capabilities no GPU has (exit {ExitCode.BAD_INPUT:d}). WHEEL is never changed.
    """,
)
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@slim_archs_option()
@ptx_keep_option()
@click.option(
    "-o",
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("wheelhouse"),
    show_default=True,
    help="Folder for the slimmed wheel.",
)
@budget_option("Size budget the result is checked against (as `check --budget`).")
@format_option(("table", "json"), "table")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the JSON report to FILE (atomically).",
)
@click.option(
    "--rewrite-record",
    is_flag=True,
    help="Accept an input whose RECORD does not match its files (refused "
    f"with exit {ExitCode.BAD_RECORD:d} by default, as by repair); the output gets a correct RECORD.",
)
@click.option(
    "--allow-unserved",
    is_flag=True,
    help="Write the wheel even when none of its CUDA modules runs on any --archs GPU (all its device code "
    f"is dropped); without it that is refused, exit {ExitCode.MISSING_COVERAGE:d}, and nothing is written.",
)
@offline_option()
@unknown_option()
def command(
    wheel: Path,
    archs: RequireArch,
    ptx: PtxKeep,
    out_dir: Path,
    budget: str | None,
    fmt: str,
    report: Path | None,
    rewrite_record: bool,
    allow_unserved: bool,
    offline: bool | None,
    unknown: str | None,
) -> None:
    heap.return_freed_buffers()
    cfg = cfgmod.load(Path.cwd(), dict(os.environ), {"budget": budget, "unknown": unknown})
    result = slim(
        wheel,
        out_dir,
        archs=archs,
        ptx=ptx,
        budget=cfg.parsed.budget_bytes,
        rewrite_record=rewrite_record,
        allow_unserved=allow_unserved,
        read_index=read_index(offline),
        debug_symbols=cfg.debug_symbols,  # as `slimwheel check` judges the output
        unknown=cfg.unknown,
    )
    data = json.dumps(result_to_json(result), indent=2) + "\n"
    if report is not None:
        emit(data, report)
    if fmt == "json":
        emit(data, None)
    elif quiet(click.get_current_context()):  # -q: the wheel written and the verdict
        emit(render.table_text(lambda console: _draw_quiet(result, console), color=sys.stdout.isatty()), None)
    else:
        emit(render.table_text(lambda console: _draw(result, console), color=sys.stdout.isatty()), None)
    checkmod.raise_for([result.verdict])
