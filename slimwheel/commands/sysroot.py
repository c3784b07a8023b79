"""`slimwheel sysroot`: assemble an old Debian release's compiler, glibc and libstdc++ for a low manylinux floor."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import click

from slimwheel.commands._options import format_option
from slimwheel.toolkit.sysroot import SPECS, cap_for, ensure_sysroot


@click.command("sysroot")
@click.argument("name", default="debian11", type=click.Choice(sorted(SPECS)))
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Assemble into this folder (default: <cache>/sysroots/NAME).",
)
@format_option(
    ["env", "json"],
    "env",
    help="env: shell `export` lines for CC, CXX and CUDAHOSTCXX; json: the sysroot's facts.",
)
@click.option(
    "--manylinux",
    "manylinux",
    default="",
    metavar="POLICY",
    help="A target below the root's own policy (e.g. 2_28): print compilers that bind glibc symbols at versions it "
    "allows (exp, log, pow at GLIBC_2.2.5, not 2.29).",
)
def command(name: str, into: Path | None, fmt: str, manylinux: str) -> None:
    """Assemble sysroot NAME once (debian11: Debian 11's GCC 10, glibc 2.31, libstdc++ GLIBCXX_3.4.28, i.e.
    manylinux_2_31) from Debian's archive, without installing anything, and print how to build with it.

    `[tool.slimwheel] sysroot = "debian11"` makes `slimwheel build` use it; any other build reads the printed
    CC/CXX/CUDAHOSTCXX (nvcc: -ccbin "$CUDAHOSTCXX"). With --manylinux below the root's policy, the compilers
    printed include a generated header of `.symver` directives that keeps glibc symbols whose old version has the
    same ABI (the 2.29 exp/log/pow family) at versions the target allows; `check --manylinux` judges the rest."""
    s = ensure_sysroot(name, env=dict(os.environ), into=into)
    cap = cap_for(s, manylinux)
    if fmt == "json":
        click.echo(json.dumps({**s.to_json(), "env": s.env(cap), "cap": cap.to_json() if cap else None}, indent=2))
        return
    click.echo(
        f"# slimwheel sysroot {s.spec.name}: Debian {s.spec.suite}, GCC {s.spec.gcc}, glibc {s.spec.glibc}; "
        f"wheels linked with it stay within {s.spec.policy}"
    )
    if cap is not None:
        pinned = ", ".join(f"{p.symbol}@{p.pinned}" for p in cap.pinned)
        click.echo(
            f"# capped at {cap.policy}: {pinned}; {len(cap.beyond)} newer glibc symbols have no older version of "
            f"the same ABI (check --manylinux {cap.policy.removeprefix('manylinux_')} names any a wheel uses)"
        )
        if cap.glibcxx_shims:
            click.echo(
                f"# g++ links define libstdc++'s GLIBCXX_{', GLIBCXX_'.join(cap.glibcxx_shims)} string-stream "
                "constructors inside each module (hidden), which the target's libstdc++ lacks"
            )
    for k, v in s.env(cap).items():
        click.echo(f"export {k}={shlex.quote(v)}")
