"""`slimwheel container`: build manylinux wheels in a container with cibuildwheel, configured from [tool.slimwheel]."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from slimwheel import compilercache, container
from slimwheel import config as cfgmod
from slimwheel.commands._options import format_option
from slimwheel.cuda.versions import CUDA13_RELEASES, DEFAULT_CUDA
from slimwheel.errors import ToolError


@click.command("container")
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--cuda",
    type=click.Choice([str(v) for v in container.CUDA12_RELEASES + CUDA13_RELEASES]),
    default=None,
    help="CUDA release: 13.x (assembled from PyPI wheels in the container) or 12.4 (NVIDIA's rpm "
    f"repository). Default: [tool.slimwheel] cuda, else {DEFAULT_CUDA}.",
)
@click.option(
    "--arch",
    "arch",
    type=click.Choice(container.ARCHS),
    default="x86_64",
    show_default=True,
    help="Wheel architecture: aarch64 builds for Grace (GH200/GB200) servers, natively on an arm64 host or "
    "under QEMU emulation.",
)
@click.option(
    "--gpu-test",
    is_flag=True,
    help="Run the tests with the host's GPUs (--gpus all; needs the NVIDIA container toolkit); the build "
    "stops before the tests unless nvidia-smi sees a GPU in the container.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Only print the configuration (as [tool.cibuildwheel] TOML and as CIBW_* variables) and exit.",
)
@format_option(
    ["text", "toml", "env", "json"],
    "text",
    help="With --print-config: both forms (text), or one of them.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("wheelhouse"),
    show_default=True,
    help="Where cibuildwheel puts the repaired wheels.",
)
@click.option("--engine", type=click.Choice(["auto", "docker", "podman"]), default="auto", show_default=True)
@click.option(
    "--only", default=None, help="Build one identifier only, e.g. cp312-manylinux_x86_64 (cibuildwheel's --only)."
)
@click.option("--import-name", default=None, help="Module the test command imports (default: from pyproject.toml).")
@click.option(
    "--env",
    "extra_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="Add a variable to the container's build environment (repeatable). $VAR and ${VAR} expand in the "
    "container; command substitution ($(...), `...`), double quotes and backslashes are refused.",
)
@click.option(
    "--slimwheel-spec",
    default=None,
    metavar="PIP-SPEC",
    help="What pip installs as slimwheel in the container and for the audit step: a requirement, or slimwheel's own "
    "wheel file (its folder is mounted and put on PIP_FIND_LINKS there). Default: this checkout when slimwheel runs "
    "from one, else this version's wheel in a local folder of PIP_FIND_LINKS, else slimwheel==<this version> from "
    "the index.",
)
def command(
    project_dir: Path | None,
    cuda: str | None,
    arch: container.Arch,
    gpu_test: bool,
    print_config: bool,
    fmt: str,
    output_dir: Path,
    engine: str,
    only: str | None,
    import_name: str | None,
    extra_env: tuple[str, ...],
    slimwheel_spec: str | None,
) -> None:
    """Build PROJECT_DIR's wheels in a manylinux_2_28 container with cibuildwheel.

    The configuration comes from [tool.slimwheel] (targets, compression, libraries, external-libs): before-all
    installs the CUDA toolkit, the plan's CMake variables go in as config-settings, `slimwheel repair` repairs,
    `slimwheel check` (and abi3audit for abi3 wheels) audits, and the test command imports the wheel. Needs docker or
    podman with a running engine; without one it prints what it would run and exits with status 4.
    """
    project_dir = (project_dir or Path.cwd()).resolve()
    cfg = cfgmod.load(project_dir, dict(os.environ), {"cuda": cuda})
    release = cfg.fallback_release()
    project = container.load_project(project_dir, import_name=import_name)
    if print_config:
        chosen = engine if engine != "auto" else "docker"
        problem = None
    else:
        chosen, problem = container.pick_engine(engine, dict(os.environ))
        problem = "; ".join(p for p in (problem, container.cibuildwheel_problem()) if p) or None
    env_pairs = {}
    for item in extra_env:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE", param_hint="--env")
        env_pairs[name] = value
    # the host folder of the compiler cache's local storage, mounted (podman refuses a missing one)
    cache_dir = None
    if (tool := compilercache.tool_of(cfg.compiler_cache)) is not None:
        cache_dir = compilercache.local_dir(tool, dict(os.environ))
        if not print_config:
            cache_dir.mkdir(parents=True, exist_ok=True)
    table = container.cibw_config(
        cfg,
        release,
        project,
        origin=container.find_origin(slimwheel_spec, find_links=os.environ.get("PIP_FIND_LINKS", "")),
        arch=arch,
        engine=chosen,
        gpu_test=gpu_test,
        extra_env=env_pairs,
        compiler_cache_dir=cache_dir,
    )
    inv = container.invocation(table, project, output_dir.resolve(), only=only)
    if print_config or problem is not None:
        _show(table, inv, fmt)
    if print_config:
        return
    if problem is not None:
        raise ToolError(
            f"cannot build in a container: {problem}",
            hint="start docker (or podman), or run the configuration above on a machine that has one",
        )
    container.run(inv, dict(os.environ))
    click.echo(f"wheels in {output_dir}")


def _show(table: dict[str, Any], inv: container.Invocation, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps({"schema": 1, "cibuildwheel": table, "env": inv.env, "argv": list(inv.argv)}, indent=2))
        return
    if fmt in ("text", "toml"):
        if fmt == "text":
            click.echo("# pyproject.toml form:")
        click.echo(container.render_toml(table), nl=False)
    if fmt in ("text", "env"):
        if fmt == "text":
            click.echo("\n# what slimwheel container runs (CIBW_* variables over the project's own settings):")
        click.echo(container.render_shell(inv.env, inv.argv), nl=False)
