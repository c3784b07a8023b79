"""`slimwheel check`: size budget, required GPU coverage and dependency consistency, with a verdict per wheel.

Exit codes: `CHECK_EXIT_CODES` (from slimwheel.errors.ExitCode, as its --help shows them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from slimwheel import config as cfgmod
from slimwheel.analysis import analyze
from slimwheel.cli import quiet as cli_quiet
from slimwheel.commands._options import (
    budget_option,
    debug_symbols_option,
    format_option,
    installed_budget_option,
    manylinux_option,
    offline_option,
    read_index,
    require_arch_option,
    unknown_option,
)
from slimwheel.commands.size_report import FORMATS, emit, preload
from slimwheel.errors import CheckFailed, ExitCode, exit_codes

CHECK_EXIT_CODES = exit_codes(
    ExitCode.OK,
    ExitCode.OVER_BUDGET,
    ExitCode.MISSING_COVERAGE,
    ExitCode.INCONSISTENT_DEPENDENCIES,
    ExitCode.BAD_RECORD,
    ExitCode.DEBUG_INFO,
    ExitCode.ABOVE_PLATFORM_FLOOR,
    ExitCode.UNKNOWN,
    ExitCode.CHECK_FAILED,
)


@click.command(
    "check",
    help="Check WHEELs against the budget, the required GPU coverage, their library dependencies and debug info "
    f"left in.\n\nExit codes: {CHECK_EXIT_CODES}.",
)
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=Path))
@budget_option(
    "Largest wheel allowed: 60MiB (default; 2**20-byte units), 100MB (10**6), or bytes. "
    "Config key: budget; env: SLIMWHEEL_BUDGET."
)
@require_arch_option()
@manylinux_option()
@click.option("--no-dependencies", is_flag=True, help="Skip the DT_NEEDED consistency check.")
@offline_option()
@installed_budget_option()
@debug_symbols_option()
@unknown_option()
@click.option(
    "--strict-device-code/--no-strict-device-code",
    default=None,
    help="Fail --require-arch for a wheel with no device code (kernels built at run time, or none), exit "
    f"{ExitCode.MISSING_COVERAGE:d}; off by default (it passes with a note). Config key: strict-device-code.",
)
@click.option(
    "--release-total",
    is_flag=True,
    help="Also add up the WHEELS as one release against PyPI's project size limit (10 GiB); exit "
    f"{ExitCode.OVER_BUDGET:d} when over it.",
)
@format_option(FORMATS, "table")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the verdicts (and reports, for json/markdown) to FILE atomically.",
)
def command(
    wheels: tuple[Path, ...],
    budget: str | None,
    require_arch: str | None,
    manylinux: str | None,
    no_dependencies: bool,
    offline: bool | None,
    unknown: str | None,
    installed_budget: str | None,
    debug_symbols: bool | None,
    strict_device_code: bool | None,
    release_total: bool,
    fmt: str,
    output: Path | None,
) -> None:
    quiet = cli_quiet(click.get_current_context())
    # CLI > SLIMWHEEL_* > [tool.slimwheel] of the current folder's pyproject.toml > defaults.
    cfg = cfgmod.load(
        Path.cwd(),
        dict(os.environ),
        {
            "budget": budget,
            "require_arch": require_arch,
            "installed_budget": installed_budget,
            "debug_symbols": debug_symbols,
            "strict_device_code": strict_device_code,
            "manylinux": manylinux,
            "unknown": unknown,
        },
    )
    # The verdict's modules and the renderer (a third of a small wheel's check when imported first) are imported
    # while the first wheel's members inflate and hash, by this thread (scan.inspect_wheel says why).
    analyses = [
        analyze(w, meanwhile=preload("slimwheel.check", "slimwheel.render") if not i else None)
        for i, w in enumerate(wheels)
    ]
    from slimwheel import check as checkmod  # imported above; an import that failed there fails here
    from slimwheel import distcheck, render

    reports = [a.report for a in analyses]
    settings = checkmod.PolicySettings.of(cfg, read_index=read_index(offline), dependencies=not no_dependencies)
    require = cfg.require_arch_for(None)
    verdicts = [checkmod.judge(a, checkmod.policy_for(a.report, settings, require_arch=require)) for a in analyses]
    if fmt == "json":
        text = render.render_json(reports, verdicts)
    elif fmt == "markdown":
        text = render.render_markdown(reports, verdicts)
    else:
        color = output is None and render.color_wanted(os.environ, tty=sys.stdout.isatty())
        text = render.verdicts_text(verdicts, notes=not quiet, color=color)
    emit(text, output)
    over = None
    if release_total:
        total = distcheck.release_total(reports)
        if not quiet:
            click.echo(total.line(), err=True)  # stderr: stdout may be JSON
        over = distcheck.release_finding(total)
    if over is not None:
        failed = checkmod.exit_code_for(verdicts) is not ExitCode.OK
        raise CheckFailed(over.message, ExitCode.CHECK_FAILED if failed else over.exit_code)
    checkmod.raise_for(verdicts)
