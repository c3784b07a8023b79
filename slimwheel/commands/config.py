"""`slimwheel config`: the configuration a run would use, and where each value came from; or the JSON schema."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import click

from slimwheel import config as cfgmod


@click.command("config")
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--schema", is_flag=True, help="Print the JSON schema of [tool.slimwheel] instead.")
def command(project_dir: Path | None, schema: bool) -> None:
    """Show the resolved configuration of PROJECT_DIR (default: the current folder) as JSON."""
    if schema:
        click.echo(cfgmod.schema_text(), nl=False)
        return
    cfg = cfgmod.load(project_dir or Path.cwd(), dict(os.environ), {})
    click.echo(json.dumps({"schema": 1, "config": asdict(cfg)}, indent=2))
