"""`slimwheel build` end to end on examples/knn with the CUDA 13 toolkit from PyPI wheels, and its error paths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from slimwheel.check import check_wheel, make_policy
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.cuda.versions import CudaVersion
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for var in [v for v in env if v.startswith("SLIMWHEEL_") and v not in ("SLIMWHEEL_CACHE",)]:
        env.pop(var)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"  # CI has two cores
    return env


@pytest.fixture(scope="module")
def knn(repo_root: Path) -> Path:
    project = repo_root / "examples" / "knn"
    if not (project / "pyproject.toml").is_file():
        pytest.fail(f"{project}: the example project is missing")
    return project


@pytest.fixture(scope="module")
def built(
    knn: Path, toolkit13: Toolkit, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    """One build of the example for three targets: SASS 75, 80, 90 + PTX 90."""
    out_dir = tmp_path_factory.mktemp("wheelhouse")
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(knn),
            "--archs",
            "7.5,8.0,9.0",
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit13.root),
            "--out-dir",
            str(out_dir),
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    secs = time.monotonic() - t0
    print(f"\nslimwheel build examples/knn (3 targets): {secs:.1f} s\n{proc.stdout}")
    return proc, out_dir, secs


def test_build_succeeds_and_reports(
    built: tuple[subprocess.CompletedProcess[str], Path, float], toolkit13: Toolkit
) -> None:
    proc, out_dir, _ = built
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = sorted(out_dir.glob("*.whl"))
    assert len(wheels) == 1
    wheel = wheels[0]
    assert "manylinux" in wheel.name
    # phases, each with its time, as plain lines (not a terminal here)
    for phase in ("plan", "toolkit", "build", "repair", "check", "report"):
        assert f"[{phase}] done in " in proc.stderr
    assert "check:    ok" in proc.stdout

    report = json.loads(wheel.with_name(wheel.name.removesuffix(".whl") + ".slimwheel.json").read_text())
    assert report["schema"] == 1 and report["ok"] is True
    assert report["plan"]["sass"] == ["75", "80", "90"] and report["plan"]["ptx"] == ["90"]
    assert report["plan"]["compression"] == "size"
    assert report["toolkit"]["root"] == str(toolkit13.root)
    assert report["toolkit"]["source"] == toolkit13.source
    assert set(report["phases"]) >= {"plan", "toolkit", "build", "repair", "check", "total"}
    assert any("cmake.define.SLIMWHEEL_CUDA_ARCHITECTURES=75-real;80-real;90" in a for a in report["build_command"])
    assert any(a.startswith("-Ccmake.define.slimwheel_DIR=") for a in report["build_command"])


def test_wheel_has_the_planned_targets_and_passes_check(
    built: tuple[subprocess.CompletedProcess[str], Path, float],
) -> None:
    _, out_dir, _ = built
    wheel = next(out_dir.glob("*.whl"))
    # an independent look at the wheel (the inspect area's reader), not the build's own report
    rep = inspect_wheel(wheel)
    assert sorted(str(t) for t in rep.targets) == ["compute_90", "sm_75", "sm_80", "sm_90"]
    assert rep.cuda_major == 13
    verdict = check_wheel(rep, make_policy(rep, budget=20 * 2**20, require_arch=parse_require_arch("7.5-9.0")))
    assert verdict.ok, verdict.failures
    reqs = " ".join(rep.requires_dist)
    assert "nvidia-cublas" in reqs and "nvidia-cuda-runtime" in reqs
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    # dynamic mode: cuBLAS is required from the nvidia-* wheel, never vendored
    assert not [n for n in names if "libcublas" in n or "libcudart" in n]


def test_failed_check_gives_a_nonzero_exit(knn: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    """A budget no wheel can meet: the build completes, the report says why, the exit status is 10."""
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(knn),
            "--archs",
            "9.0",
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit13.root),
            "--budget",
            "1KiB",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 10, proc.stdout + proc.stderr
    assert "FAILED (budget)" in proc.stdout
    (report,) = tmp_path.glob("*.slimwheel.json")
    data = json.loads(report.read_text())
    assert data["ok"] is False and data["plan"]["sass"] == ["90"]


def test_dry_run_builds_nothing(knn: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(knn),
            "--dry-run",
            "--archs",
            "7.5,8.0,9.0",
            "--toolkit",
            str(toolkit13.root),
            "--out-dir",
            str(tmp_path / "wh"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert "75-real;80-real;90" in proc.stdout
    assert "-m build --wheel" in proc.stdout and f"cmake.define.CMAKE_CUDA_COMPILER={toolkit13.nvcc}" in proc.stdout
    assert not (tmp_path / "wh").exists()


def test_project_without_slimwheel_table_gets_defaults(knn: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    project = tmp_path / "knn"
    shutil.copytree(knn, project, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    text = (project / "pyproject.toml").read_text()
    start = text.index("[tool.slimwheel]")
    end = text.index("\n[", start + 1)
    (project / "pyproject.toml").write_text(text[:start] + text[end + 1 :])
    proc = subprocess.run(
        [*CLI, "build", str(project), "--dry-run", "--toolkit", str(toolkit13.root)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    # default: every non-integrated GPU CUDA 13 targets -> one cubin per major + PTX of the newest
    assert "75-real;80-real;90-real;100-real;120" in proc.stdout


@pytest.mark.parametrize("archs", ["7.5,abc", "sm_9x"])
def test_bad_arch_string_is_one_clear_error(knn: Path, tmp_path: Path, archs: str) -> None:
    t0 = time.monotonic()
    proc = subprocess.run(
        [*CLI, "build", str(knn), "--archs", archs, "--out-dir", str(tmp_path / "wh")],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("slimwheel: error:")]
    assert len(errors) == 1 and repr(archs) in errors[0] and "Traceback" not in proc.stderr
    assert "[toolkit]" not in proc.stderr  # refused before any toolkit work
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "wh").exists()


def test_not_a_project(tmp_path: Path) -> None:
    proc = subprocess.run([*CLI, "build", str(tmp_path)], capture_output=True, text=True, env=_env())
    assert proc.returncode == 3
    assert "no pyproject.toml" in proc.stderr


def test_cuda12_build_requires_the_cu12_wheels(knn: Path, tmp_path: Path) -> None:
    """The same command with --cuda 12.4: the toolkit comes from slimwheel.toolkit.cuda12 (set up by
    scripts/test.sh), the plan from nvcc 12.4, and the wheel requires the -cu12 runtime wheels."""
    from slimwheel.toolkit import ensure_toolkit

    tk12 = ensure_toolkit(CudaVersion(12, 4))
    proc = subprocess.run(
        [*CLI, "build", str(knn), "--cuda", "12.4", "--archs", "8.0,9.0", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = tmp_path.glob("*.whl")
    rep = inspect_wheel(wheel)
    assert sorted(str(t) for t in rep.targets) == ["compute_90", "sm_80", "sm_90"]
    assert rep.cuda_major == 12
    reqs = " ".join(rep.requires_dist)
    assert "nvidia-cublas-cu12" in reqs and "nvidia-cuda-runtime-cu12" in reqs
    data = json.loads(next(tmp_path.glob("*.slimwheel.json")).read_text())
    assert data["toolkit"]["root"] == str(tk12.root) and data["toolkit"]["release"] == "12.4"
    # before 12.8 there is no --compress-mode: the plan falls back to fatbinary's -compress-all
    assert data["plan"]["compression"] == "legacy"


FRESH_VENV_PROBE = r"""
import json, numpy, knn
maps = open("/proc/self/maps").read().split()
libs = sorted({p for p in maps if "/libcudart.so" in p or "/libcublas" in p})
try:
    knn.search(numpy.random.rand(100, 8).astype("float32"), numpy.random.rand(4, 8).astype("float32"), k=3)
    error = None
except Exception as e:  # what a user without a GPU sees
    error = f"{type(e).__name__}: {e}"
print(json.dumps({"libs": libs, "error": error}))
"""


def test_a_fresh_venv_installs_it_with_pypis_cuda13_wheels(
    built: tuple[subprocess.CompletedProcess[str], Path, float], tmp_path: Path
) -> None:
    """The wheel from PyPI's point of view: pip pulls nvidia-cuda-runtime and nvidia-cublas, the extension resolves
    them from that venv's nvidia/cu13/lib, and a GPU call on this GPU-less machine is a Python exception, not a crash."""
    _, out_dir, _ = built
    (wheel,) = sorted(out_dir.glob("*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = subprocess.run(
        [py, "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # run outside the repo, so that nothing from the source tree can be imported by accident
    proc = subprocess.run([py, "-c", FRESH_VENV_PROBE], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    folder = os.path.join(site, "nvidia", "cu13", "lib")
    libs = {os.path.basename(p): os.path.dirname(p) for p in out["libs"]}
    assert libs.get("libcudart.so.13") == folder, out["libs"]
    assert libs.get("libcublas.so.13") == folder, out["libs"]
    assert libs.get("libcublasLt.so.13") == folder, out["libs"]
    assert out["error"] and out["error"].startswith("RuntimeError: CUDA error"), out["error"]
