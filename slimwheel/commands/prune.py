"""`slimwheel prune`: nvprune the static CUDA libraries a static link needs to the plan's GPUs, cached."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from slimwheel import config as cfgmod
from slimwheel import context
from slimwheel.commands._options import format_option
from slimwheel.plan import arch_plan
from slimwheel.prune import PruneResult, prune_libraries, result_to_json
from slimwheel.units import human


def _render(result: PruneResult, console: Console) -> None:
    table = Table(title=f"static CUDA libraries pruned to {', '.join(map(str, result.targets))}")
    table.add_column("library")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("saved", justify="right")
    table.add_column("kept")
    table.add_column("cache")
    for lib in result.libs:
        saved = f"{lib.saved / lib.before:.0%}" if lib.before else "-"
        kept = "host code only" if lib.host_only else ", ".join(map(str, lib.kept))
        cache = "-" if lib.host_only else ("hit" if lib.cache_hit else f"pruned in {lib.seconds:.1f} s")
        table.add_row(lib.source.name, human(lib.before), human(lib.after), saved, kept, cache)
    table.add_row("total", human(result.before), human(result.after), f"{1 - result.after / result.before:.0%}", "", "")
    console.print(table)
    for lib in result.libs:
        if lib.unserved:
            console.print(f"[yellow]{lib.source.name} has no code for GPU(s) {', '.join(map(str, lib.unserved))}[/]")
    console.print(f"link folder (SLIMWHEEL_STATIC_LIBDIR): {result.libdir}")
    console.print("sizes in binary units (MiB = 2**20 bytes)")


@click.command("prune")
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--cuda", default=None, help="CUDA release with static libraries and nvprune (default 11.8).")
@click.option("--archs", default=None, help='GPUs to serve natively: "7.5-9.0", "8.0+", "all".')
@click.option("--targets", default=None, help='Explicit targets instead of a plan: "75-real;80-real;90".')
@click.option("--libraries", default=None, help='CUDA components the link needs: "cublas,cublasLt,cudart".')
@format_option(["table", "json"], "table")
def command(
    project_dir: Path | None, cuda: str | None, archs: str | None, targets: str | None, libraries: str | None, fmt: str
) -> None:
    """nvprune static cuBLAS/cuBLASLt to the GPUs of the plan; print sizes before and after.

    PROJECT_DIR (default: the current folder) supplies [tool.slimwheel]; flags override it. The pruned libraries
    are cached (by library digest, targets and nvprune version); the folder printed is what a static link uses.
    """
    if archs and targets:
        raise click.UsageError("give --archs or --targets, not both")
    cli = {"archs": archs, "targets": targets, "libraries": libraries, "cuda": cuda}
    cfg = cfgmod.load(project_dir or Path.cwd(), dict(os.environ), cli)
    tk = context.static_toolkit_for(cfg, dict(os.environ))
    plan = arch_plan(cfg, tk.supported)
    result = prune_libraries(tk, plan.targets, tuple(cfg.libraries))
    if fmt == "json":
        click.echo(json.dumps(result_to_json(result), indent=2))
    else:
        _render(result, Console())
