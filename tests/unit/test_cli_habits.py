"""The habits users bring to a CLI: global options anywhere, NO_COLOR / FORCE_COLOR, one --format, a progress line
that shows elapsed time and steps on a terminal and plain lines elsewhere."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from slimwheel import render
from slimwheel.cli import cli, main
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel

ANSI = "\x1b["


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    fb = fatbin([fatbin_entry(sm=80), fatbin_entry(kind="ptx", sm=80, ptx_isa=(8, 0))])
    so = elf(
        sections={".nv_fatbin": fb},
        needed=("libcudart.so.12", "libc.so.6"),
        runpath="$ORIGIN/../nvidia/cuda_runtime/lib",
    )
    return Path(
        make_wheel(tmp_path, name="pkg", files={"pkg/_ext.abi3.so": so}, requires=("nvidia-cuda-runtime-cu12",))
    )


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["-v", "check"], logging.INFO),
        (["check", "-v"], logging.INFO),
        (["check", "-vv"], logging.DEBUG),
        (["-v", "check", "-v"], logging.DEBUG),
        (["check", "-q"], logging.ERROR),
        (["check"], logging.WARNING),
    ],
)
def test_verbosity_works_before_and_after_the_command(wheel: Path, argv: list[str], level: int) -> None:
    assert main([*argv, str(wheel), "--budget", "1GiB"]) == 0
    assert logging.getLogger().level == level


def test_the_global_format_reaches_the_command_and_the_commands_own_wins(
    wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--format", "json", "size-report", str(wheel)]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == 1
    assert main(["--format", "json", "size-report", str(wheel), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("### `")
    assert main(["--format", "table", "config"]) == 0  # config has json (default) and table since it shows origins
    assert "from" in capsys.readouterr().out
    assert main(["--format", "yaml", "size-report", str(wheel)]) == 2
    assert "'yaml' is not one of" in capsys.readouterr().err


def test_every_command_with_output_has_one_format_option() -> None:
    ctx = click.Context(cli, info_name="slimwheel", **cli.context_settings)  # -h as well as --help, as in use
    without = set()
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        formats = [p for p in cmd.params if isinstance(p, click.Option) and "--format" in p.opts]
        if not formats:
            without.add(name)
            continue
        assert len(formats) == 1 and formats[0].name == "fmt", name  # one spelling: the global --format sets it
        # and the shared options are there once, whatever the command defines itself
        assert sum("-v" in getattr(p, "opts", ()) for p in cmd.params) == 1, name
    assert without == set()  # every command's output has a --format (config: json or table)


def test_repair_keeps_json_as_a_hidden_alias() -> None:
    ctx = click.Context(cli, info_name="slimwheel", **cli.context_settings)  # -h as well as --help, as in use
    cmd = cli.get_command(ctx, "repair")
    assert cmd is not None
    sub = cmd.make_context("repair", ["x.whl", "--json"], parent=ctx)
    assert sub.params["as_json"] is True and sub.params["fmt"] == "text"
    help_text = cmd.get_help(sub)
    assert "--format [text|json]" in help_text and "--json " not in help_text


@given(
    no_color=st.sampled_from([None, "", "1", "0"]),
    force=st.sampled_from([None, "", "1"]),
    tty=st.booleans(),
)
def test_color_rule(no_color: str | None, force: str | None, tty: bool) -> None:
    env = {k: v for k, v in (("NO_COLOR", no_color), ("FORCE_COLOR", force)) if v is not None}
    expected = False if no_color else True if force else tty
    assert render.color_wanted(env, tty=tty) is expected


def test_no_color_wins_on_a_terminal_and_force_color_colours_a_pipe(
    wheel: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["check", str(wheel), "--budget", "1GiB"]) == 0
    assert ANSI not in capsys.readouterr().out
    monkeypatch.delenv("NO_COLOR")
    assert main(["check", str(wheel), "--budget", "1GiB"]) == 0
    assert ANSI in capsys.readouterr().out  # a terminal gets colour
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert main(["check", str(wheel), "--budget", "1GiB"]) == 0
    assert ANSI not in capsys.readouterr().out  # a pipe does not ...
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["check", str(wheel), "--budget", "1GiB"]) == 0
    assert ANSI in capsys.readouterr().out  # ... unless asked


@pytest.mark.parametrize(
    ("log", "steps"),
    [
        ("[1/3] Building CUDA object a.o\n[2/3] Building CXX object b.o\n", "2/3 steps"),
        ("[ 33%] Building CUDA object a.o\n[ 66%] Linking\n", "66%"),
        ("-- Configuring done\n", None),
        ("", None),
    ],
)
def test_build_steps_from_the_build_tools_log(log: str, steps: str | None) -> None:
    assert render.build_steps(log) == steps


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_progress_line_shows_phase_elapsed_steps_and_total(tmp_path: Path) -> None:
    clock = Clock()
    line = render.ProgressLine(Console(file=io.StringIO()), live=False, clock=clock)
    line.start("plan")
    clock.now += 2.0
    line.done("plan", 2.0)
    log = tmp_path / "build.log"
    log.write_text("$ pip wheel ...\n[5/20] Building CUDA object knn.cu.o\n")
    line.start("build", log)
    clock.now += 75.5
    assert line.line() == "[build] 1:15, phase 2, 5/20 steps, total 1:17"
    log.write_text(log.read_text() + "[6/20] Building CXX object bindings.cpp.o\n")
    assert "6/20 steps" in line.line()
    log.unlink()  # a log that goes away costs the count, not the line
    assert line.line() == "[build] 1:15, phase 2, total 1:17"


def test_off_a_terminal_the_progress_is_plain_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    clock = Clock()
    line = render.ProgressLine(Console(file=out, width=200), live=False, clock=clock)
    line.start("build")
    line.done("build", 3725.0, "1 wheel")
    line.close()
    # the same lines as before the live line existed: scripts parse "done in <seconds> s" from CI logs
    assert out.getvalue().splitlines() == ["[build] ...", "[build] done in 3725.0 s  1 wheel"]
    assert ANSI not in out.getvalue() and "\r" not in out.getvalue()


def test_on_a_terminal_the_line_is_redrawn_and_cleared(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    line = render.ProgressLine(console, live=True)
    line.start("build")
    line.done("build", 1.0)
    line.close()
    text = out.getvalue()
    assert "[build] done in 1.0 s" in text and ANSI in text  # drawn live, cursor control codes included
