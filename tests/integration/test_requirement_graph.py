"""`check` on RAPIDS wheels from PyPI whose libraries come through a requirement's requirement: it reads what those
install from PyPI (range reads, cached per wheel file) and passes them with a note naming the chain; `--offline`
keeps the old verdict, a failure that says which library nothing accounts for. The cache is the test's own, so the
index is read for real every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from testkit import corpus

CLI = [sys.executable, "-m", "slimwheel"]


def check(wheel: Path, cache: Path, *flags: str) -> tuple[int, dict[str, Any]]:  # the verdict's JSON
    # PyPI itself, whatever pip's configuration here says (check reads pip's indexes by default)
    env = {**os.environ, "SLIMWHEEL_CACHE": str(cache), "SLIMWHEEL_INDEX_URL": "https://pypi.org/simple/"}
    env.pop("SLIMWHEEL_OFFLINE", None)
    proc = subprocess.run(
        [*CLI, "check", "--format", "json", *flags, str(wheel)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.stdout, proc.stderr
    (verdict,) = json.loads(proc.stdout)["verdicts"]
    return proc.returncode, verdict


def test_rmm_gets_its_logger_through_librmm(tmp_path: Path) -> None:
    wheel = corpus.ensure(corpus.RMM)
    rc, v = check(wheel, tmp_path)
    assert rc == 0 and v["ok"], v["failures"]
    notes = [str(n) for n in v["notes"]]
    (logger,) = [n for n in notes if " need(s) librapids_logger.so, " in n]
    assert "which a requirement's requirement installs: rmm-cu12 requires librmm-cu12==26.10.*, which requires " in (
        logger
    )
    assert "rapids-logger" in logger and "installs rapids_logger/lib64/librapids_logger.so" in logger
    assert list((tmp_path / "index").glob("*.json")), "the wheel's facts are cached"

    # offline, what librmm-cu12's wheels bring is not known: exit 19 (UNKNOWN), never 12, never a pass
    rc, v = check(wheel, tmp_path, "--offline")
    assert rc == 19
    failures = [str(f["message"]) for f in v["failures"]]
    # one line: every module that needs it, and why nothing accounts for it
    (failure,) = failures
    assert " and 7 more need librapids_logger.so: not in the wheel, not a CUDA runtime library" in failure
    assert "whether a requirement's own wheels install it is not known: the index was not read" in failure
    rc, v = check(wheel, tmp_path, "--offline", "--unknown", "note")
    assert rc == 0 and any("librapids_logger.so" in str(n) for n in v["notes"])


def test_pylibraft_gets_cuda_libraries_through_libraft(tmp_path: Path) -> None:
    rc, v = check(corpus.ensure(corpus.PYLIBRAFT), tmp_path)
    assert rc == 0 and v["ok"], v["failures"]
    notes = " | ".join(map(str, v["notes"]))
    for soname, wheel in (
        ("libcusolver.so.11", "nvidia-cusolver-cu12"),
        ("libcublas.so.12, libcublasLt.so.12", "nvidia-cublas-cu12"),
        ("libcurand.so.10", "nvidia-curand-cu12"),
    ):
        assert f"need(s) {soname}, which a requirement's requirement installs" in notes
        assert "pylibraft-cu12 requires libraft-cu12==26.10.*, which requires cuda-toolkit[" in notes
        assert f"which requires {wheel}==" in notes
