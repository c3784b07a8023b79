"""`slimwheel check`: size budget, required GPU coverage and dependency consistency, with a verdict per wheel.

Exit codes: `CHECK_EXIT_CODES` (from slimwheel.errors.ExitCode, as its --help shows them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from slimwheel import check as checkmod
from slimwheel import config as cfgmod
from slimwheel import distcheck, render
from slimwheel.analysis import analyze
from slimwheel.cli import quiet as cli_quiet
from slimwheel.commands.size_report import FORMATS, emit
from slimwheel.errors import CheckFailed, ExitCode, exit_codes
from slimwheel.render import table_text

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

offline_option = click.option(
    "--offline",
    is_flag=True,
    default=None,
    help="Do not read the package index (SLIMWHEEL_INDEX_URL, else PIP_INDEX_URL, else PyPI) for the libraries that "
    "the requirements' own requirements install; asked only when a needed library is otherwise unaccounted for. "
    "Env: SLIMWHEEL_OFFLINE=1.",
)


def read_index(offline: bool | None) -> bool:
    """Whether the verdict may read the index: not with --offline, nor with SLIMWHEEL_OFFLINE set true."""
    return checkmod.may_read_index(os.environ, offline=offline)


@click.command(
    "check",
    help="Check WHEELs against the budget, the required GPU coverage, their library dependencies and debug info "
    f"left in.\n\nExit codes: {CHECK_EXIT_CODES}.",
)
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--budget",
    default=None,
    help="Largest wheel allowed: 60MiB (default; 2**20-byte units), 100MB (10**6), or bytes. "
    "Config key: budget; env: SLIMWHEEL_BUDGET.",
)
@click.option(
    "--require-arch",
    default=None,
    help="Compute capabilities every wheel must serve by SASS or PTX: 7.5-12.0, 8.0+, 9.0, 'toolkit' "
    "(all that the wheel's CUDA major can target), 'auto' (default: those from the oldest the wheel has code for "
    "up: no newer GPU lost), or 'none'. Config key: require-arch.",
)
@click.option(
    "--manylinux",
    default=None,
    metavar="POLICY",
    help="Fail ELF files that need newer glibc/libstdc++ symbol versions (GLIBC_*, GLIBCXX_*, CXXABI_*, "
    "GCC_*) than this manylinux policy allows (auditwheel's policy data), naming each symbol: 2_28, "
    "manylinux_2_31, manylinux2014. Config key: manylinux.",
)
@click.option("--no-dependencies", is_flag=True, help="Skip the DT_NEEDED consistency check.")
@offline_option
@click.option(
    "--unknown",
    type=click.Choice(cfgmod.UNKNOWN_MODES),
    default=None,
    help="A verdict that depends on what could not be learned (offline, the index down or silent on a "
    f"requirement's files) is never a pass: 'fail' (default, exit {ExitCode.UNKNOWN:d}) or 'note'. "
    "Config key: unknown.",
)
@click.option(
    "--installed-budget",
    default=None,
    metavar="SIZE",
    help="Largest installed size (files uncompressed), e.g. 200MiB. Config key: installed-budget.",
)
@click.option(
    "--debug-symbols/--no-debug-symbols",
    default=None,
    help="Fail ELF files left unstripped (.debug_* sections, a symbol table over 1 MiB), exit "
    f"{ExitCode.DEBUG_INFO:d}; on by default. Config key: debug-symbols.",
)
@click.option(
    "--release-total",
    is_flag=True,
    help="Also add up the WHEELS as one release against PyPI's project size limit (10 GiB); exit "
    f"{ExitCode.OVER_BUDGET:d} when over it.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
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
            "manylinux": manylinux,
            "unknown": unknown,
        },
    )
    analyses = [analyze(w) for w in wheels]
    reports = [a.report for a in analyses]
    verdicts = [
        checkmod.judge(
            a,
            checkmod.make_policy(
                a.report,
                budget=cfg.parsed.budget_bytes,
                require_arch=cfg.require_arch_for(None),
                dependencies=not no_dependencies,
                installed_budget=cfg.parsed.installed_budget_bytes,
                debug_symbols=cfg.debug_symbols,
                manylinux=cfg.manylinux,
                read_index=read_index(offline),
                unknown=cfg.unknown,
            ),
        )
        for a in analyses
    ]
    if fmt == "json":
        text = render.render_json(reports, verdicts)
    elif fmt == "markdown":
        text = render.render_markdown(reports, verdicts)
    else:
        color = output is None and render.color_wanted(os.environ, tty=sys.stdout.isatty())
        text = table_text(lambda console: render.render_verdicts(verdicts, console, notes=not quiet), color=color)
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
