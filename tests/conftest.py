"""Shared fixtures.

- Unit tests (tests/unit) may not start subprocesses: they stay fast and pure.
- Integration tests get real tools through session fixtures that set them up once (cached across runs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the fixture imports the toolkit module on first use: unit tests need none of it
    from slimwheel.toolkit import Toolkit

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_subprocess_in_unit_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "tests/unit" not in str(request.path).replace("\\", "/"):
        return

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"unit tests may not start subprocesses: {args[:1]}")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "check_output", forbidden)
    monkeypatch.setattr(subprocess, "check_call", forbidden)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def slimwheel_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """slimwheel's own sdist and wheel, built from this checkout by pypa/build (isolated, as a release is): the folder
    that PIP_FIND_LINKS names where a test builds a project that requires slimwheel, as users must (no index has it)."""
    import sys

    out = tmp_path_factory.mktemp("slimwheel-dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def toolkit13() -> Toolkit:
    """A CUDA 13.0 toolkit: assembled from PyPI wheels into the slimwheel cache (or found), verified."""
    from slimwheel.cuda.versions import CudaVersion
    from slimwheel.toolkit import ensure_toolkit

    return ensure_toolkit(CudaVersion(13, 0))
