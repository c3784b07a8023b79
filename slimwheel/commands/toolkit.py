"""`slimwheel toolkit`: find a CUDA toolkit or assemble one from PyPI wheels, check it, and say what it holds."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slimwheel.commands._options import CUDA_REQUEST, format_option
from slimwheel.cuda.versions import CudaVersion
from slimwheel.toolkit import ensure_toolkit, toolkit_to_json


@click.command("toolkit")
@click.option(
    "--cuda",
    type=CUDA_REQUEST,
    metavar="TEXT",
    default="auto",
    show_default=True,
    help='CUDA release: "13.0" (assembled from PyPI wheels when none is installed), "12.4", "11.8", or "auto" '
    "(any toolkit found, else 13.0).",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Use the toolkit in this folder (holding bin/nvcc) and nothing else.",
)
@format_option(["table", "json"], "table")
def command(cuda: CudaVersion | None, root: Path | None, fmt: str) -> None:
    """Find or assemble a CUDA toolkit, check that it compiles and links a cuBLAS program, and describe it."""
    tk = ensure_toolkit(cuda, root=root, env=dict(os.environ))
    info = toolkit_to_json(tk)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    render_table(info, Console())


def render_table(info: dict[str, Any], console: Console) -> None:
    t = Table(title=f"CUDA toolkit {info['version']}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    how = {"pypi": "assembled from PyPI wheels", "system": "found on this machine", "debian": "Debian packages"}
    t.add_row("version", f"{info['version']} (CUDA {info['cuda_major']})")
    t.add_row("source", how.get(info["source"], info["source"]))
    t.add_row("root", info["root"])
    t.add_row("nvcc", info["nvcc"])
    t.add_row("targets", " ".join(info["supported"]))
    t.add_row("components", ", ".join(info["components"]))
    statics = ", ".join(Path(p).name for p in info["static_libs"].values())
    t.add_row("static libraries", statics or "none")
    t.add_row("nvprune", info["nvprune"] or "no (needed only for static linking: slimwheel prune)")
    t.add_row("cuobjdump", info["cuobjdump"] or "no")
    if info["packages"]:
        t.add_row("wheels", ", ".join(f"{k}=={v}" for k, v in info["packages"].items()))
    chk = info["check"]
    if chk:
        t.add_row("check", f"ok: compiled and linked a cuBLAS program in {chk['seconds']} s" if chk["ok"] else "failed")
    console.print(t)
