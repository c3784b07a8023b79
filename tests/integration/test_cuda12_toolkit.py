"""The CUDA 12.4 toolkit slimwheel assembles from Debian 13's nvidia-cuda-toolkit and PyPI's cu12 wheels: it is the
release it claims, it compiles and links a cuBLAS shared library with the device code asked for, CMake accepts it,
and `ensure_toolkit(CudaVersion(12, 4))` hands it out. Facts checked against outside sources, not against slimwheel's tables:
CUDA 12.4 targets sm_50 ... sm_90 (nvcc 12.4 release notes), emits PTX ISA 8.4, and cuobjdump agrees with the
inspector about what a binary holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from slimwheel.cuda.arch import CC, Kind
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.fsutil import cache_dir
from slimwheel.inspect.fatbin import FatbinEntry
from slimwheel.inspect.scan import inspect_binary
from slimwheel.toolkit import Toolkit
from slimwheel.toolkit.cuda12 import MANIFEST, assemble_cuda12, release_for

pytestmark = pytest.mark.integration

KERNEL = r"""
#include <cublas_v2.h>
#include <cuda_runtime.h>
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
extern "C" int run(int n) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  axpy<<<(n + 255) / 256, 256>>>(2.0f, x, y, n);
  float r = 0;
  cublasSnrm2(h, n, y, 1, &r);
  cublasDestroy(h);
  return 0;
}
"""


@pytest.fixture(scope="module")
def toolkit12() -> Toolkit:
    """Assembled (or reused from the cache) exactly as `slimwheel toolkit --cuda 12.4` does it."""
    return assemble_cuda12(CudaVersion(12, 4), cache_dir())


def run(
    cmd: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_it_is_cuda_12_4(toolkit12: Toolkit) -> None:
    out = run([str(toolkit12.nvcc), "--version"]).stdout
    assert "release 12.4, V12.4.131" in out
    assert toolkit12.version == CudaVersion(12, 4)
    assert toolkit12.major == 12
    assert min(toolkit12.supported) == CC(5, 0) and max(toolkit12.supported) == CC(9, 0)
    assert toolkit12.source == "debian+pypi"
    manifest = json.loads((toolkit12.root / MANIFEST).read_text())
    assert manifest["schema"] == 1 and manifest["cuda"] == "12.4"
    assert set(manifest["debian"]["packages"]) == {
        "nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb",
        "nvidia-cuda-dev_12.4.127~12.4.1-2_amd64.deb",
    }
    assert all(len(h) == 64 for h in manifest["wheels"].values())


def test_the_runtime_and_cublas_are_the_12_4_ones(toolkit12: Toolkit) -> None:
    lib = toolkit12.root / "lib64"
    assert (lib / "libcudart.so").resolve().name == "libcudart.so.12"
    assert (lib / "libcublas.so").resolve().name == "libcublas.so.12"
    header = (toolkit12.root / "include" / "cuda_runtime_api.h").read_text()
    assert "#define CUDART_VERSION  12040" in header
    cublas = (toolkit12.root / "include" / "cublas_api.h").read_text()
    assert "#define CUBLAS_VER_MINOR 4" in cublas


def test_it_compiles_and_links_a_cublas_shared_library(toolkit12: Toolkit, tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    so = tmp_path / "libk.so"
    env = {**os.environ, **toolkit12.env}
    run(
        [
            str(toolkit12.nvcc),
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-cudart",
            "shared",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            str(src),
            "-lcublas",
            "-o",
            str(so),
        ],
        env=env,
        cwd=tmp_path,
    )
    elf = inspect_binary(so)
    assert {"libcudart.so.12", "libcublas.so.12"} <= set(elf.needed)
    entries = [e for fb in elf.fatbins for e in fb.entries]
    sass = sorted(_cc(e) for e in entries if e.kind == Kind.SASS)
    ptx = [e for e in entries if e.kind == Kind.PTX]
    assert set(sass) == {CC(8, 0), CC(9, 0)}
    assert [_cc(e) for e in ptx] == [CC(9, 0)]
    assert ptx[0].ptx_isa == (8, 4)  # PTX ISA 8.4 is CUDA 12.4's (PTX ISA release notes)
    # the toolkit's own cuobjdump sees the same device code (nvcc -shared adds a device-link fatbin: a second
    # cubin per architecture)
    elfs = re.findall(r"\.sm_(\d+)\.cubin", run([str(toolkit12.cuobjdump), "--list-elf", str(so)]).stdout)
    ptxs = re.findall(r"\.sm_(\d+)\.ptx", run([str(toolkit12.cuobjdump), "--list-ptx", str(so)]).stdout)
    assert sorted(CC.parse(a) for a in elfs) == sass
    assert ptxs == ["90"]


def _cc(entry: FatbinEntry) -> CC:
    assert entry.target is not None, entry
    return entry.target.cc


def test_cmake_accepts_it(toolkit12: Toolkit, tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(k LANGUAGES CXX CUDA)\nfind_package(CUDAToolkit REQUIRED)\n"
        "add_library(k SHARED k.cu)\n"
        'set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "90" CUDA_RUNTIME_LIBRARY Shared)\n'
        "target_link_libraries(k PRIVATE CUDA::cublas)\n"
        'message(STATUS "toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_LIBRARY_DIR}")\n'
    )
    env = {**os.environ, **toolkit12.env}
    conf = run(
        ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DCUDAToolkit_ROOT={toolkit12.root}"], env=env
    )
    assert "The CUDA compiler identification is NVIDIA 12.4.131" in conf.stdout
    assert f"toolkit 12.4.131 at {toolkit12.root / 'lib64'}" in conf.stdout
    run(["cmake", "--build", str(tmp_path / "b")], env=env)
    assert {"libcudart.so.12", "libcublas.so.12"} <= set(inspect_binary(tmp_path / "b" / "libk.so").needed)


def test_it_is_cached_and_handed_out_by_ensure_toolkit(toolkit12: Toolkit) -> None:
    from slimwheel.toolkit import ensure_toolkit

    t = time.monotonic()
    again = assemble_cuda12(CudaVersion(12, 4), cache_dir())
    assert time.monotonic() - t < 5, "a cached toolkit must not be assembled again"
    assert again.root == toolkit12.root
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = "/usr/bin:/bin"  # no other nvcc: the request goes to the assembler, which finds its cache
    assert ensure_toolkit(CudaVersion(12, 4), env=env).root == toolkit12.root


def test_the_cli_reports_it(toolkit12: Toolkit) -> None:
    import shutil
    import sys

    exe = shutil.which("slimwheel", path=str(Path(sys.executable).parent))
    assert exe
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    info = json.loads(run([exe, "toolkit", "--cuda", "12.4", "--format", "json"], env=env).stdout)
    assert info["version"] == "12.4.131"
    assert info["root"] == str(toolkit12.root)
    assert info["source"] == "debian+pypi"


def test_unknown_releases_are_refused_with_a_hint() -> None:
    with pytest.raises(BadInputError, match="cannot assemble CUDA 12.6") as e:
        release_for(CudaVersion(12, 6))
    assert "12.4" in str(e.value)


def test_a_cache_entry_from_other_pins_or_half_made_is_not_reused(toolkit12: Toolkit, tmp_path: Path) -> None:
    from slimwheel.toolkit.cuda12 import _load_cached

    release = release_for(CudaVersion(12, 4))
    manifest = json.loads((toolkit12.root / MANIFEST).read_text())
    fake = tmp_path / "cuda-12.4"
    (fake / "bin").mkdir(parents=True)
    (fake / MANIFEST).write_text(json.dumps(manifest))
    assert _load_cached(fake, release) is None  # no nvcc: half made
    (fake / "bin" / "nvcc").write_bytes(b"")
    assert _load_cached(fake, release) is not None
    manifest["debian"]["version"] = "12.4.99~12.4.0-1"
    (fake / MANIFEST).write_text(json.dumps(manifest))
    assert _load_cached(fake, release) is None  # assembled from other packages: rebuilt
    (fake / MANIFEST).write_text("{not json")
    assert _load_cached(fake, release) is None


def test_the_setup_script_hands_out_the_same_toolkit(toolkit12: Toolkit, repo_root: Path) -> None:
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    out = run(["bash", str(repo_root / "scripts" / "setup-cuda12.sh"), "12.4", "--format", "json"], env=env).stdout
    info = json.loads(out)
    assert info["root"] == str(toolkit12.root) and info["version"] == "12.4.131"
