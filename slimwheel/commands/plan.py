"""`slimwheel plan`: the GPU targets, compression, link mode and driver floor a build would use, and why."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slimwheel import config as cfgmod
from slimwheel import context
from slimwheel.commands._options import budget_option, format_option, require_arch_option
from slimwheel.config import COMPRESSION_MODES, LINK_MODES, Config
from slimwheel.plan import BuildPlan, cmake_cache_script, cmake_defines, plan_to_json

# The [tool.slimwheel] keys a command line may override; shared by `plan` and `build`.
_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option("--cuda", help='CUDA release, e.g. 13.0 or 12.4; "auto" takes the toolkit found, else 13.0.'),
    click.option("--toolkit", "toolkit", help="Root of the CUDA toolkit to use (holding bin/nvcc)."),
    click.option("--archs", help='GPUs to serve natively: "all", "7.5-12.0", "8.0+", "8.0,9.0".'),
    click.option("--targets", help='Explicit targets instead of a plan: "75-real;80-real;90".'),
    click.option("--extra-sass", help='More SASS targets, comma separated: "86,90a".'),
    click.option("--ptx", help='"newest", "none", or compute capabilities "9.0,12.0".'),
    click.option(
        "--exclude-integrated/--include-integrated", default=None, help="Leave out Jetson/Thor/GB10 (aarch64 only)."
    ),
    click.option("--compression", type=click.Choice(COMPRESSION_MODES), help="Fatbin compression."),
    click.option("--link", type=click.Choice(LINK_MODES), help="Link the CUDA libraries dynamically or statically."),
    click.option("--libraries", help='CUDA components the extension links: "cudart,cublas".'),
    budget_option('Largest wheel allowed: "60MiB", "100MB".'),
    require_arch_option('Compute capabilities the wheel must serve: "7.5-12.0".'),
    click.option("--loader/--no-loader", default=None, help="Put slimwheel's run-time loader into the wheel."),
)
CONFIG_KEYS = (
    "cuda",
    "toolkit",
    "archs",
    "targets",
    "extra_sass",
    "ptx",
    "exclude_integrated",
    "compression",
    "link",
    "libraries",
    "budget",
    "require_arch",
    "loader",
)


def config_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_OPTIONS):
        fn = opt(fn)
    return fn


def load_config(project_dir: Path | None, kwargs: dict[str, Any], keys: tuple[str, ...] = CONFIG_KEYS) -> Config:
    """Defaults <- PROJECT/pyproject.toml [tool.slimwheel] <- SLIMWHEEL_* <- the flags given (`keys`: the command's
    configuration flags, popped from `kwargs`)."""
    return load_config_origins(project_dir, kwargs, keys)[0]


def load_config_origins(
    project_dir: Path | None, kwargs: dict[str, Any], keys: tuple[str, ...] = CONFIG_KEYS
) -> tuple[Config, dict[str, str]]:
    """`load_config`, and where each setting came from (`config.origins`)."""
    cli = {k: kwargs.pop(k) for k in keys}
    env = dict(os.environ)
    return cfgmod.load(project_dir, env, cli), cfgmod.load_origins(project_dir, env, cli)


@click.command("plan")
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@config_options
@format_option(["table", "json", "cmake"], "table")
def command(project_dir: Path | None, fmt: str, **kwargs: Any) -> None:
    """Pick the fewest GPU targets that serve the wanted GPUs natively, plus PTX for newer ones, and explain them.

    PROJECT_DIR (default: the current folder) supplies [tool.slimwheel]; flags override it.
    """
    cfg = load_config(project_dir or Path.cwd(), kwargs)
    ctx = context.resolve(cfg, dict(os.environ), assemble=False)
    p, origin = ctx.plan, ctx.origin
    if fmt == "json":
        data = plan_to_json(p)
        data["origin"] = origin
        click.echo(json.dumps(data, indent=2))
    elif fmt == "cmake":
        click.echo(cmake_cache_script(cmake_defines(p, package_dir=None)), nl=False)
    else:
        render_plan(p, origin, Console())


def render_plan(p: BuildPlan, origin: str, console: Console) -> None:
    data = plan_to_json(p)
    t = Table(title=f"Architecture plan (CUDA {p.cuda})", title_justify="left")
    t.add_column("target")
    t.add_column("runs natively on")
    t.add_column("why")
    for s in data["steps"]:
        t.add_row(s["target"], " ".join(s["serves"]) or "-", s["why"])
    console.print(t)
    cov = data["coverage"]
    console.print(f"CMake architectures: {p.arch.cmake_architectures}")
    console.print(f"native (SASS): {' '.join(cov['native']) or '-'}; by PTX JIT: {' '.join(cov['ptx_only']) or '-'}")
    console.print(f"compression: {p.compression} ({p.compression_flag or 'no flag'})")
    console.print(f"driver floor: >= {p.driver_floor} ({'; '.join(p.driver_why)})")
    libs = ", ".join(f"{lib.soname} ({lib.package})" for lib in p.libraries)
    console.print(f"link: {p.link}" + (f": {libs}" if libs else ""))
    for note in p.notes:
        console.print(f"note: {note}")
    console.print(f"[dim]{origin}[/dim]")
