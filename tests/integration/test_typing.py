"""`mypy --strict` is clean (issue 13) over the package and, since issue 36, over the tests, testkit and the lab too:
typed values for closed sets and parsed settings stay checked, and so does the code that uses them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

pytestmark = pytest.mark.integration


def test_mypy_strict_is_clean(repo_root: Path) -> None:
    config = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    assert {"slimwheel", "testkit", "tests", "lab"} <= set(config["files"])
    # no arguments: the files and options of pyproject's [tool.mypy], as scripts/lint.sh runs it
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_the_configuration_holds_a_test_to_strict_typing(repo_root: Path, tmp_path: Path) -> None:
    # The check above can fail on test code: an unannotated test, and a helper of tests/helpers called with the
    # wrong type, are both reported under the repository's configuration.
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "from helpers.scripts import load_script\n\n\ndef test_untyped(tmp_path):\n    load_script(3)\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(repo_root / "pyproject.toml"), str(probe)],
        cwd=repo_root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[no-untyped-def]" in proc.stdout and "[arg-type]" in proc.stdout, proc.stdout
