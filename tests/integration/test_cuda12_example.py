"""CUDA 12 end to end: `slimwheel build --cuda 12.4` of examples/knn with the assembled CUDA 12.4 toolkit gives a wheel
that requires PyPI's cu12 runtime wheels (nvidia-cuda-runtime-cu12, nvidia-cublas-cu12) instead of carrying them,
points its extension at their nvidia/<component>/lib folders, installs into a fresh virtual environment with those
wheels from PyPI, and loads libcudart.so.12 and libcublas.so.12 from there.

Facts from outside slimwheel: the cu12 wheels install one folder per component (nvidia/cuda_runtime/lib,
nvidia/cublas/lib); a binary built with the 12.4 runtime headers needs a 12.4 or newer runtime (CUDA minor version
compatibility goes forward only); CUDA 13 renamed the SONAMEs (libcudart.so.13), so cu12 code needs < 13.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda.versions import CudaVersion
from slimwheel.fsutil import cache_dir
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit.cuda12 import assemble_cuda12

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def run(
    cmd: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    assemble_cuda12(CudaVersion(12, 4), cache_dir())  # cached: the build below finds it through ensure_toolkit
    work = tmp_path_factory.mktemp("cuda12-knn")
    # a copy: other runs may be building the example in the shared tree at the same time
    project = work / "knn"
    shutil.copytree(repo_root / "examples" / "knn", project, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    out = work / "wheelhouse"
    run([str(BIN / "slimwheel"), "build", str(project), "--cuda", "12.4", "-o", str(out)])
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def requirements(wheel: Path) -> dict[str, Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(zf.read(meta).decode())
    reqs = [Requirement(r) for r in msg.get_all("Requires-Dist") or []]
    return {canonicalize_name(r.name): r for r in reqs if r.marker is None}


def test_it_requires_the_cu12_runtime_wheels_with_bounds(wheel: Path) -> None:
    reqs = requirements(wheel)
    nvidia = {name for name in reqs if name.startswith("nvidia-")}
    assert nvidia == {"nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12"}
    runtime, cublas = reqs["nvidia-cuda-runtime-cu12"].specifier, reqs["nvidia-cublas-cu12"].specifier
    # Every symbol it takes is in CUDA 12.0.0's libraries (resources/cuda-baseline.json): the floor is that first
    # release (docs/repair.md, rule 1), so it installs beside any CUDA 12 pins (torch 2.9 and 2.10 pin
    # nvidia-cuda-runtime-cu12==12.8.90, resources/torch-abi.json); the releases the toolkit was assembled from and
    # the newest CUDA 12 wheels are in, CUDA 13 and CUDA 11's wheels out
    for spec, ok in ((runtime, ("12.0.107", "12.4.127", "12.8.90", "12.9.79")), (cublas, ("12.0.1.189", "12.4.5.8"))):
        assert all(spec.contains(v) for v in ok), spec
        assert not spec.contains("13.0.0") and not spec.contains("11.8.89"), spec


def test_it_carries_no_cuda_library_and_finds_the_component_folders(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert not [n for n in names if "/libcu" in n or "/libnv" in n], names
    report = inspect_wheel(wheel)
    (ext,) = [e for e in report.elfs if e.name.endswith(".so")]
    assert {"libcudart.so.12", "libcublas.so.12"} <= set(ext.needed)
    search = (ext.runpath or ext.rpath or "").split(":")
    assert {"$ORIGIN/../nvidia/cuda_runtime/lib", "$ORIGIN/../nvidia/cublas/lib"} <= set(search), search
    assert report.cuda_major == 12


def test_slimwheel_check_passes_with_the_projects_budget(wheel: Path, repo_root: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "slimwheel"), "check", str(wheel), "--budget", "20MiB"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


PROBE = r"""
import json, knn
maps = open("/proc/self/maps").read().split()
libs = sorted({p for p in maps if "/libcudart.so" in p or "/libcublas" in p})
print(json.dumps({"libs": libs, "runtime": knn.runtime_info()}))
"""


def test_a_fresh_venv_installs_it_with_pypis_cu12_wheels(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", str(wheel)])
    run([str(py), "-m", "pip", "check"])
    site = Path(run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    out = json.loads(run([str(py), "-c", PROBE], cwd=tmp_path).stdout.splitlines()[-1])
    libs = {Path(p).name: Path(p) for p in out["libs"]}
    assert libs["libcudart.so.12"].parent == site / "nvidia" / "cuda_runtime" / "lib"
    assert libs["libcublas.so.12"].parent == site / "nvidia" / "cublas" / "lib"
    assert libs["libcublasLt.so.12"].parent == site / "nvidia" / "cublas" / "lib"
    assert out["runtime"].startswith("CUDA runtime 12."), out["runtime"]
