"""`mypy --strict slimwheel` is clean (issue 13): typed values for closed sets and parsed settings stay checked."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_mypy_strict_is_clean(repo_root) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "slimwheel"], cwd=repo_root, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
