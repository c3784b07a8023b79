"""CUDA 13.5, the newest release on PyPI: `slimwheel toolkit --cuda 13.5` assembles it from the nvidia-* wheels
(nvidia-cuda-cccl is numbered 13.3.5.x there), its nvcc lists what slimwheel's table says, and `slimwheel build`
makes the example with it. The wheel's PTX is ISA 9.5, whose driver row slimwheel has not read: the report says the
floor is unknown instead of naming an older release's driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit.pypi13 import read_manifest

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]
V135 = CudaVersion(13, 5)


@pytest.fixture(scope="module")
def toolkit135() -> dict[str, Any]:  # `slimwheel toolkit --format json`
    t0 = time.monotonic()
    proc = subprocess.run([*CLI, "toolkit", "--cuda", "13.5", "--format", "json"], capture_output=True, text=True)
    print(f"\nslimwheel toolkit --cuda 13.5: {time.monotonic() - t0:.1f} s (cached after the first run)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info: dict[str, Any] = json.loads(proc.stdout)
    return info


def test_the_toolkit_is_13_5_from_pypi_and_matches_the_table(toolkit135: dict[str, Any]) -> None:
    assert toolkit135["release"] == "13.5" and toolkit135["version"].startswith("13.5.")
    assert toolkit135["source"] == "pypi"
    assert toolkit135["supported"] == [str(c) for c in supported_archs(V135)]  # 10.7 arrived in 13.4
    manifest = read_manifest(Path(toolkit135["root"]))
    assert manifest is not None and manifest["installed"]["nvidia-cuda-cccl"].startswith("13.3.5.")


@pytest.fixture(scope="module")
def built(toolkit135: dict[str, Any], repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(repo_root / "examples" / "knn"),
            "--cuda",
            "13.5",
            "--archs",
            "9.0,10.0",
            "--toolkit",
            toolkit135["root"],
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    print(f"\nslimwheel build examples/knn --cuda 13.5 (SASS 90, 100 + PTX 100): {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


def test_the_example_builds_with_13_5(built: Path) -> None:
    r = inspect_wheel(built)
    assert sorted(str(t) for t in r.targets) == ["compute_100", "sm_100", "sm_90"]
    assert r.cuda_major == 13
    ptx = [e for elf in r.elfs for fb in elf.fatbins for e in fb.entries if e.kind == "ptx"]
    assert {e.ptx_isa for e in ptx} == {(9, 5)}  # what nvcc 13.5 writes (tests/data/cuda13-archs.json)
    assert r.ptx_release == V135
    # SASS runs on the CUDA 13 driver branch; PTX 9.5 needs 13.5's driver, whose number the table does not hold
    assert r.driver_floor == "580.65.06" and r.ptx_driver_floor is None
    assert any(q.startswith("nvidia-cuda-runtime") for q in r.requires_dist)


def test_family_and_thor_cubins_from_nvcc_13_5_read_back(toolkit135: dict[str, Any], tmp_path: Path) -> None:
    from slimwheel.cuda.arch import CC, served_by
    from slimwheel.inspect.scan import inspect_binary

    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    obj = tmp_path / "k.o"
    gencode = [
        "-gencode=arch=compute_100f,code=sm_100f",
        "-gencode=arch=compute_110,code=sm_110",
        "-gencode=arch=compute_120f,code=[sm_120f,compute_120f]",
    ]
    subprocess.run([str(Path(toolkit135["nvcc"])), "-c", *gencode, str(src), "-o", str(obj)], check=True)
    targets = {e.target for fb in inspect_binary(obj).fatbins for e in fb.entries if e.target is not None}
    assert sorted(str(t) for t in targets) == ["compute_120f", "sm_100f", "sm_110", "sm_120f"]
    assert served_by(CC(10, 3), targets)[0] == "sass"  # the family cubin serves Blackwell Ultra
    assert served_by(CC(11, 0), targets)[0] == "sass"  # Thor, by its CUDA 13 number
    assert served_by(CC(12, 1), targets)[0] == "sass" and served_by(CC(9, 0), targets)[0] == "none"
