"""The `slimwheel` command line: a thin layer over the library, and its single error boundary.

Each command lives in `slimwheel/commands/<name>.py` and exposes a click command called `command`; they are found
here by module name, so adding a command never edits this file.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import click

import slimwheel
import slimwheel.commands
from slimwheel import shown
from slimwheel.errors import NO_SPACE_ERRNOS, ExitCode, SlimwheelError, exit_codes, os_error

log = logging.getLogger("slimwheel")


class _Shown(logging.Formatter):
    """Log records name members and paths from wheels in their arguments (`log.warning("%s: %s", wheel, problem)`):
    each argument is escaped whole for the terminal (a newline in a name is shown, not obeyed); the format string is
    ours. What a message holds already formatted is escaped line by line."""

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.args, tuple):
            record.args = tuple(shown.terminal(str(a)) if isinstance(a, (str, os.PathLike)) else a for a in record.args)
        return _lines(super().format(record))


def _lines(text: str) -> str:
    """Our own line breaks kept, everything else in each line escaped for the terminal."""
    return "\n".join(shown.terminal(line) for line in text.split("\n"))


def _configure_logging(obj: dict[str, Any]) -> None:
    level = logging.ERROR if obj["quiet"] else {0: logging.WARNING, 1: logging.INFO}.get(obj["verbose"], logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Shown("%(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def _root_obj(ctx: click.Context) -> dict[str, Any]:
    root = ctx.find_root()
    if root.obj is None:
        root.obj = {"verbose": 0, "quiet": False}
    obj: dict[str, Any] = root.obj
    return obj


def _more_verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    if value:
        obj = _root_obj(ctx)
        obj["verbose"] += value
        _configure_logging(obj)


def _quieter(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        obj = _root_obj(ctx)
        obj["quiet"] = True
        _configure_logging(obj)


def _global_params() -> list[click.Parameter]:
    """-v/-q on every command too, so they work after the command name (`slimwheel check -v x.whl`) as before it."""
    return [
        click.Option(
            ["-v", "--verbose"],
            count=True,
            expose_value=False,
            callback=_more_verbose,
            help="More detail (also before the command name): -v each step, -vv debug output.",
        ),
        click.Option(
            ["-q", "--quiet"],
            is_flag=True,
            expose_value=False,
            callback=_quieter,
            help="Only errors and the final verdict (also before the command name).",
        ),
    ]


def _has_format(cmd: click.Command) -> bool:
    return any(isinstance(p, click.Option) and "--format" in p.opts for p in cmd.params)


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        import pkgutil  # only --help lists the commands; running one imports its module alone

        # Private modules (`_options`: what several commands share) are not commands, as in get_command.
        return sorted(
            m.name.replace("_", "-")
            for m in pkgutil.iter_modules(slimwheel.commands.__path__)
            if not m.name.startswith("_")
        )

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        mod_name = name.replace("-", "_")
        # A command is a public module of slimwheel.commands: importing it is the lookup (no listing of the folder).
        if not mod_name.isidentifier() or mod_name.startswith("_"):
            return None
        try:
            mod = importlib.import_module(f"slimwheel.commands.{mod_name}")
        except ModuleNotFoundError as e:
            if e.name != f"slimwheel.commands.{mod_name}":
                raise  # a command that exists and fails to import is a bug, not an unknown command
            return None
        cmd: click.Command = mod.command
        # Each command module stays a plain click command; the options every command shares are added here, once.
        taken = {o for p in cmd.params for o in getattr(p, "opts", ())}
        cmd.params.extend(p for p in _global_params() if not taken & set(p.opts))
        return cmd

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command name gets the closest names as a suggestion (`slimwheel chek` -> check)."""
        name = click.utils.make_str(args[0])
        if self.get_command(ctx, name) is None and not name.startswith("-"):
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(map(repr, close))}?")
        return super().resolve_command(ctx, args)


def quiet(ctx: click.Context) -> bool:
    """Whether -q was given (before or after the command name): commands then print only errors and the verdict."""
    obj = ctx.find_root().obj
    return bool(obj and obj.get("quiet"))


_HELP = f"""Build, repair, check and explain slim, correct CUDA wheels.

    -v, -q and --format work before or after the command name. Colour: on a terminal, unless NO_COLOR is set;
    FORCE_COLOR turns it on in pipes and CI logs.

    Exit codes: {exit_codes()}.
    """


@click.group(
    cls=_Group,
    help=_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(slimwheel.__version__, "--version", prog_name="slimwheel")
@click.option(
    "-v", "--verbose", count=True, help="More detail: -v logs each step and external command, -vv debug output."
)
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the final verdict.")
@click.option(
    "--format",
    "fmt",
    default=None,
    metavar="FORMAT",
    help="Output format of the command (each command lists its own: table, json, markdown, ...); the same "
    "as the command's --format.",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool, fmt: str | None) -> None:
    ctx.obj = {"verbose": verbose, "quiet": quiet}
    _configure_logging(ctx.obj)
    if fmt is not None and ctx.invoked_subcommand is not None:
        assert isinstance(ctx.command, click.Group)
        cmd = ctx.command.get_command(ctx, ctx.invoked_subcommand)
        if cmd is None or not _has_format(cmd):
            raise click.UsageError(f"slimwheel {ctx.invoked_subcommand} has no --format")
        # The command's own --format, given after its name, still wins: this is only its default.
        ctx.default_map = {**(ctx.default_map or {}), ctx.invoked_subcommand: {"fmt": fmt}}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of exiting (testable). CI cancels a job with SIGTERM: it becomes
    KeyboardInterrupt while a command runs, so clean-up blocks (temporary folders, temp siblings of outputs) run.
    Signals reach the main thread only; the previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="slimwheel", standalone_mode=False)
    except SlimwheelError as e:
        click.echo(f"slimwheel: error: {_lines(str(e))}", err=True)
        return int(e.exit_code)
    except click.exceptions.Abort:
        click.echo("slimwheel: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("slimwheel: interrupted", err=True)
        return 130
    except OSError as e:
        if e.errno not in NO_SPACE_ERRNOS:
            return _internal(e)
        # A full disk or quota met where no caller named the file (copying into a work folder, a tool's cache): the
        # machine's state, with its own exit code, never "internal error" or "bad input".
        err = os_error(e, str(e.filename or "a file slimwheel was writing"), "cannot be written")
        click.echo(f"slimwheel: error: {_lines(str(err))}", err=True)
        return int(err.exit_code)
    except Exception as e:
        return _internal(e)
    return rv if isinstance(rv, int) else 0


def _internal(e: Exception) -> int:
    """The one place a bug is turned into a message (traceback print_exc still sees it: called inside `except`)."""
    if logging.getLogger("slimwheel").isEnabledFor(logging.DEBUG):
        import traceback

        traceback.print_exc()
    click.echo(
        f"slimwheel: internal error: {type(e).__name__}: {_lines(str(e))} (run with -vv for the traceback)",
        err=True,
    )
    return int(ExitCode.INTERNAL)


def entry() -> None:
    sys.exit(main())
