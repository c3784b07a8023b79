"""`slimwheel sysroot`: assemble an old Debian release's compiler, glibc and libstdc++ for a low manylinux floor."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import click

from slimwheel.toolkit.sysroot import SPECS, ensure_sysroot


@click.command("sysroot")
@click.argument("name", default="debian11", type=click.Choice(sorted(SPECS)))
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Assemble into this folder (default: <cache>/sysroots/NAME).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["env", "json"]),
    default="env",
    show_default=True,
    help="env: shell `export` lines for CC, CXX and CUDAHOSTCXX; json: the sysroot's facts.",
)
def command(name: str, into: Path | None, fmt: str) -> None:
    """Assemble sysroot NAME once (debian11: Debian 11's GCC 10, glibc 2.31, libstdc++ GLIBCXX_3.4.28, i.e.
    manylinux_2_31) from Debian's archive, without installing anything, and print how to build with it.

    `[tool.slimwheel] sysroot = "debian11"` makes `slimwheel build` use it; any other build reads the printed
    CC/CXX/CUDAHOSTCXX (nvcc: -ccbin "$CUDAHOSTCXX")."""
    s = ensure_sysroot(name, env=dict(os.environ), into=into)
    if fmt == "json":
        click.echo(json.dumps(s.to_json(), indent=2))
        return
    click.echo(
        f"# slimwheel sysroot {s.spec.name}: Debian {s.spec.suite}, GCC {s.spec.gcc}, glibc {s.spec.glibc}; "
        f"wheels linked with it stay within {s.spec.policy}"
    )
    for k, v in s.env().items():
        click.echo(f"export {k}={shlex.quote(v)}")
