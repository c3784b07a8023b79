"""Issue 14: requirement floors come from what a build uses, so a wheel built with a newer toolkit (CUDA 13.5, whose
cuBLAS is 13.10) still installs beside torch's CUDA 13.0 pins (torch 2.11: nvidia-cublas==13.1.0.3). Resolved with
`pip install --dry-run --report` against an offline folder of stub wheels carrying the pins PyPI published
(tests/data/torch-pins.json, from `python -m devtools.torch_pins 2.11.0`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slimwheel.inspect.scan import inspect_wheel
from testkit.wheelmaker import make_wheel

pytestmark = pytest.mark.integration

PINS = json.loads((Path(__file__).resolve().parents[1] / "data" / "torch-pins.json").read_text(encoding="utf-8"))


def _stubs(folder: Path) -> None:
    """Empty wheels of torch (requiring exactly its published CUDA component versions) and of each component."""
    for name, version in PINS["resolved"].items():
        make_wheel(folder, name=name, version=version, tag="py3-none-any")
    make_wheel(
        folder,
        name="torch",
        version=PINS["torch"],
        tag="py3-none-any",
        requires=[f"{n}=={v}" for n, v in PINS["resolved"].items()],
    )


def _resolve(folder: Path, *wanted: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--no-index",
            "--find-links",
            str(folder),
            "--report",
            str(folder / "report.json"),
            *wanted,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


@pytest.fixture(scope="module")
def built_135(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/knn built with the CUDA 13.5 toolkit from PyPI, one target (the floors do not depend on targets)."""
    out = tmp_path_factory.mktemp("wh135")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slimwheel",
            "build",
            str(repo_root / "examples" / "knn"),
            "--cuda",
            "13.5",
            "--archs",
            "9.0",
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    (wheel,) = sorted(out.glob("*.whl"))
    return wheel


def test_a_cuda_13_5_build_states_floors_of_what_it_uses(built_135: Path) -> None:
    report = json.loads(built_135.with_name(built_135.name.removesuffix(".whl") + ".slimwheel.json").read_text())
    built = report["repair"]["built_against"]
    assert built["nvidia-cublas"].startswith("13.10.") and built["nvidia-cuda-runtime"].startswith("13.5.")
    floors = {f["package"]: f for f in report["repair"]["floors"]}
    assert floors["nvidia-cublas"]["floor"] == "13.0" and "CUDA 13.0" in floors["nvidia-cublas"]["why"]
    assert floors["nvidia-cuda-runtime"]["floor"] == "13.0"
    requires = inspect_wheel(built_135).requires_dist
    assert "nvidia-cublas>=13.0,<14" in requires and "nvidia-cuda-runtime>=13.0,<14" in requires


def test_it_resolves_beside_torchs_cuda_13_pins(built_135: Path, tmp_path: Path) -> None:
    _stubs(tmp_path)
    make_wheel(tmp_path, name="numpy", version="2.0.0", tag="py3-none-any")  # the example's own requirement
    proc = _resolve(tmp_path, str(built_135), f"torch=={PINS['torch']}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chosen = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    assert chosen["nvidia-cublas"] == PINS["resolved"]["nvidia-cublas"]


def test_a_floor_of_the_version_built_against_would_not(tmp_path: Path) -> None:
    # The control: the floor of the old rule (the version the 13.5 build linked) conflicts with torch's pins.
    _stubs(tmp_path)
    make_wheel(tmp_path, name="strict", version="1.0", tag="py3-none-any", requires=["nvidia-cublas>=13.10,<14"])
    proc = _resolve(tmp_path, "strict==1.0", f"torch=={PINS['torch']}")
    assert proc.returncode != 0 and "nvidia-cublas" in proc.stdout + proc.stderr
