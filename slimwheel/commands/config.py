"""`slimwheel config`: the configuration a run would use, and where each value came from; or the JSON schema."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from slimwheel import config as cfgmod
from slimwheel.commands._options import format_option
from slimwheel.errors import ExitCode


@click.command(
    "config",
    help="Show the resolved configuration of PROJECT_DIR (default: the current folder) and where each value came "
    "from (default, pyproject.toml, a SLIMWHEEL_* variable). Every problem in it is reported at once (exit "
    f"{ExitCode.BAD_INPUT:d}).",
)
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--schema", is_flag=True, help="Print the JSON schema of [tool.slimwheel] instead.")
@format_option(["json", "table"], "json")
def command(project_dir: Path | None, schema: bool, fmt: str) -> None:
    if schema:
        click.echo(cfgmod.schema_text(), nl=False)
        return
    project = project_dir or Path.cwd()
    env = dict(os.environ)
    _, table = cfgmod.read_pyproject(project)
    name = str(project / "pyproject.toml")
    cfg = cfgmod.resolve(table, env, {}, file_name=name)
    origin = cfgmod.origins(table, env, {}, file_name=name)
    values = cfg.to_json()
    if fmt == "json":
        data = {"schema": 1, "config": values, "origin": {k.replace("-", "_"): v for k, v in origin.items()}}
        click.echo(json.dumps(data, indent=2))
        return
    t = Table(title=f"slimwheel configuration of {project}", title_justify="left")
    for col in ("key", "value", "from"):
        t.add_column(col)
    for key, where in origin.items():
        t.add_row(key, json.dumps(values[key.replace("-", "_")]), where)
    Console().print(t)
