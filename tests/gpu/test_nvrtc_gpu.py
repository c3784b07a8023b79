"""slimwheel/nvrtc.hpp on a GPU (skipped elsewhere: nothing to launch on): compile, disk cache, load, launch; planted,
corrupted and truncated cache files are never loaded (tests/gpu/nvrtc_cache_check.py's checks, built with CMake and g++)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from helpers.cmakerun import CMAKE
from helpers.scripts import load_script

from slimwheel.runtime.driver import CudaDriver

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(CudaDriver.open() is None, reason="no NVIDIA driver (libcuda.so.1) on this machine"),
]

REPO = Path(__file__).resolve().parents[2]


def checks_module() -> ModuleType:
    return load_script("tests/gpu/nvrtc_cache_check.py")


def test_runtime_compiles_caches_and_refuses_tampered_files(tmp_path: Path) -> None:
    build = tmp_path / "build"
    for cmd in (
        [
            CMAKE,
            "-S",
            str(REPO / "tests/packages/nvrtc-embed"),
            "-B",
            str(build),
            f"-Dslimwheel_DIR={REPO / 'slimwheel/cmake'}",
        ],
        [CMAKE, "--build", str(build), "--target", "gpu_check"],
    ):
        r = subprocess.run(cmd, check=False, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    mod = checks_module()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    results = mod.run_checks(build / "gpu_check", mod.find_nvrtc(), scratch)
    assert [r["step"] for r in results if not r["ok"]] == []
    assert all(r.get("under_10_ms", True) for r in results)
