"""`slimwheel diff OLD NEW`: the size change per file, ELF section, architecture and fatbin module."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from slimwheel.commands._options import format_option
from slimwheel.commands.size_report import emit
from slimwheel.inspect.scan import inspect_file
from slimwheel.postbuild import diff as diffmod
from slimwheel.render import table_text


@click.command("diff")
@click.argument("old", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("new", type=click.Path(dir_okay=False, path_type=Path))
@format_option(
    ("table", "json", "markdown"),
    "table",
    help="markdown: a block for $GITHUB_STEP_SUMMARY.",
)
@click.option(
    "--fail-over",
    "fail_over",
    default=None,
    metavar="SIZE|PERCENT",
    help="Exit 10 when NEW is larger than OLD by more than this: 1MiB, 500kB, 5%.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to FILE (atomically) instead of standard output.",
)
@click.option("--rows", default=40, show_default=True, help="Table/Markdown: the largest changes shown.")
def command(old: Path, new: Path, fmt: str, fail_over: str | None, output: Path | None, rows: int) -> None:
    """Compare two wheels (or two binaries): which file, section, GPU architecture and CUDA module grew or shrank.

    Sizes: KiB/MiB = 2**10/2**20 bytes. Exit 10 with --fail-over when the wheel grew beyond the limit.
    """
    threshold = diffmod.parse_threshold(fail_over) if fail_over is not None else None
    d = diffmod.diff_reports(inspect_file(old), inspect_file(new))
    if fmt == "json":
        text = diffmod.render_json(d, threshold)
    elif fmt == "markdown":
        text = diffmod.render_markdown(d, threshold, rows=rows)
    else:
        color = output is None and sys.stdout.isatty()
        text = table_text(lambda console: diffmod.render_table(d, console, threshold, rows=rows), color=color)
    emit(text, output)
    diffmod.raise_over(d, threshold)
