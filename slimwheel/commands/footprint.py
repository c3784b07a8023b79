"""`slimwheel footprint`: GPU memory and time of import and first call, eager vs lazy, next to a bare context."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from slimwheel.commands._options import format_option
from slimwheel.footprint import MODES, footprint_to_json, measure

MIB = 2**20


def _mib(v: int | None) -> str:
    return "-" if v is None else f"{v / MIB:.0f}"


@click.command("footprint")
@click.argument("module")
@click.option(
    "--call",
    default=None,
    help='A Python expression for the first call, e.g. "knn.search(x, 5)"; '
    "the module is bound to its top-level name and to m.",
)
@click.option("--device", default=0, show_default=True, help="GPU index.")
@click.option("--mode", "modes", multiple=True, type=click.Choice(MODES), help="Only these modes (default both).")
@click.option("--python", "python", default=None, help="Interpreter of the package's environment (default: this one).")
@format_option(["table", "json"], "table")
def command(module: str, call: str | None, device: int, modes: tuple[str, ...], python: str | None, fmt: str) -> None:
    """Measure MODULE (an installed package or module) in fresh processes. Memory in MiB (2**20 bytes)."""
    report = measure(module, call=call, device=device, modes=modes or MODES, python=python)
    if fmt == "json":
        click.echo(json.dumps(footprint_to_json(report), indent=2))
        return
    t = Table(title=f"footprint of {module} on GPU {device} (MiB = 2**20 bytes)")
    for col in ("mode", "process", "stage", "seconds", "device delta MiB", "over own context MiB", "NVML process MiB"):
        t.add_column(col)
    for run in report.runs:
        for label, stages in (("bare context", run.bare), (module, run.module)):
            ctx = stages[0].device_used
            for s in stages:
                over = None if ctx is None or s.device_used is None else s.device_used - ctx
                t.add_row(
                    run.mode,
                    label,
                    s.stage,
                    f"{s.seconds:.3f}",
                    _mib(s.delta_vs_before),
                    _mib(over),
                    _mib(s.nvml_process),
                )
    Console().print(t)
