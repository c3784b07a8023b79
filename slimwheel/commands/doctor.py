"""`slimwheel doctor`: the driver, the GPUs, where the CUDA libraries come from, and whether a wheel runs here."""

from __future__ import annotations

import json
import shlex

import click
from rich.console import Console
from rich.table import Table

from slimwheel import shown
from slimwheel.commands._options import format_option
from slimwheel.doctor import DoctorReport, doctor_to_json, run_doctor
from slimwheel.errors import CheckFailed, ExitCode


@click.command(
    "doctor",
    help=f"""Check this machine for TARGET (a .whl file or an installed distribution's name), or in general.

    Exits {ExitCode.DOCTOR_PROBLEMS:d} when it finds a reason TARGET cannot run here (a needed CUDA library missing, a
    GPU its code cannot serve, a driver too old); the report is printed first.
    """,
)
@click.argument("target", required=False)
@format_option(["table", "json"], "table")
def command(target: str | None, fmt: str) -> None:
    report = run_doctor(target)
    if fmt == "json":
        click.echo(json.dumps(doctor_to_json(report), indent=2))
    else:
        _print_table(report)
    if not report.ok:
        lines = "\n".join(f"  - {p}" for p in report.problems)
        raise CheckFailed(f"doctor: {len(report.problems)} problem(s):\n{lines}", ExitCode.DOCTOR_PROBLEMS)


def _print_table(report: DoctorReport) -> None:
    console = Console()
    console.print(
        f"driver: {report.driver_version or 'none'} (CUDA {report.driver_cuda or '-'})   "
        f"module loading: {report.module_loading} ({report.module_loading_source})"
    )
    if report.gpus:
        t = Table(title="GPUs")
        for col in ("#", "name", "CC", "served by"):
            t.add_column(col)
        for g in report.gpus:
            t.add_row(str(g.index), g.name, g.cc, g.served_by if g.ok else f"[red]{g.served_by}[/red]")
        console.print(t)
    if report.libraries:
        t = Table(title="CUDA libraries")
        for col in ("library", "from", "path / places looked"):
            t.add_column(col)
        for lib in report.libraries:
            system = [t for t in lib.tried if t.startswith("system search: /")]
            where = lib.found or (
                f"not in {len(lib.tried) - 1} folders (--format json lists them)" + (f"; {system[0]}" if system else "")
            )
            via = (
                lib.via
                if lib.via != "missing"
                else f"[red]missing[/red] (pip install {shown.markup(shlex.quote(lib.install))})"
            )
            t.add_row(lib.soname, via, where)
        console.print(t)
    for note in report.notes:
        console.print(f"note: {note}")
    console.print("ok" if report.ok else "[red]problems found[/red]")
