"""Issue 38 item 4, a build that talks: the log named when the build phase starts, a line a minute off a terminal,
and the summary saying where each setting came from."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from rich.console import Console

from slimwheel import config as cfgmod
from slimwheel import render
from slimwheel.commands.build import settings_line


def test_the_build_summary_says_where_each_setting_came_from(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nbudget = "20MiB"\n')
    env = {"SLIMWHEEL_ARCHS": "8.0+"}
    cli_values = {"require_arch": "9.0"}
    cfg = cfgmod.load(tmp_path, env, cli_values)
    line = settings_line(cfg, cfgmod.load_origins(tmp_path, env, cli_values))
    assert f"budget 20MiB ({tmp_path / 'pyproject.toml'} [tool.slimwheel])" in line
    assert "archs 8.0+ (environment SLIMWHEEL_ARCHS)" in line
    assert "require-arch 9.0 (command line)" in line
    assert "debug-symbols true (default)" in line and "strip false (default)" in line
    plain = settings_line(cfgmod.load(None, {}, {}), cfgmod.load_origins(None, {}, {}))
    assert "require-arch the archs' GPUs (default)" in plain and "budget 60MiB (default)" in plain


def test_a_phase_with_a_log_names_it_when_it_starts(tmp_path: Path) -> None:
    out = io.StringIO()
    line = render.ProgressLine(Console(file=out, width=300), live=False, heartbeat=None)
    log = tmp_path / "logs" / "build-knn.log"
    line.start("build", log)
    line.done("build", 2.0)
    assert out.getvalue().splitlines()[:2] == ["[build] ...", f"[build] log: {log}"]
    live_out = io.StringIO()
    live = render.ProgressLine(Console(file=live_out, force_terminal=True, width=300), live=True)
    live.start("build", log)
    live.close()
    assert f"[build] log: {log}" in live_out.getvalue()


def test_off_a_terminal_a_running_phase_says_where_it_is_each_heartbeat(tmp_path: Path) -> None:
    out = io.StringIO()
    lock = threading.Lock()

    class Locked(io.StringIO):
        def write(self, s: str) -> int:
            with lock:
                return out.write(s)

    line = render.ProgressLine(Console(file=Locked(), width=300), live=False, heartbeat=0.02)
    log = tmp_path / "build.log"
    log.write_text("[3/10] Building CUDA object a.o\n")
    line.start("build", log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with lock:
            beats = [x for x in out.getvalue().splitlines() if x.startswith("[build] ") and "3/10 steps" in x]
        if len(beats) >= 2:
            break
        time.sleep(0.01)
    line.done("build", 1.0)
    with lock:
        after_done = out.getvalue()
    time.sleep(0.1)
    assert len(beats) >= 2 and "phase 1" in beats[0] and "total" in beats[0]
    assert out.getvalue() == after_done  # no line once the phase is over
    line.close()
