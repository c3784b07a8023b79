"""Static CUDA linking with the real CUDA 11.8 toolchain: nvprune, the static link, the wheel, a fresh venv.

The toolchain comes from scripts/setup-cuda11.sh, which the session fixture runs (idempotent: a no-op in 0.02 s when
installed; a cold install is ~1 GB of apt packages and needs root). Nothing is mocked: real nvprune, cuobjdump, nvcc
11.8 + g++-11, CMake + scikit-build-core through `slimwheel build`, auditwheel, pip into a new virtual environment.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from slimwheel.cuda.arch import parse_targets
from slimwheel.cuda.versions import CudaVersion
from slimwheel.inspect.scan import inspect_binary, inspect_wheel
from slimwheel.prune import prune_libraries
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tests/packages/static-knn"


@pytest.fixture(scope="session")
def toolkit118() -> Toolkit:
    """Debian's CUDA 11.8 (installed by scripts/setup-cuda11.sh when missing), as ensure_toolkit describes it."""
    subprocess.run(["bash", str(REPO / "scripts/setup-cuda11.sh")], check=True)
    from slimwheel.toolkit import ensure_toolkit

    return ensure_toolkit(CudaVersion(11, 8))


def cubins(cuobjdump: Path, lib: Path) -> dict[str, int]:
    """cubin / PTX counts per arch in a library, as cuobjdump lists them: {"sm_90": 182, "ptx sm_90": 3}."""
    counts: dict[str, int] = {}
    for flag, prefix in (("--list-elf", ""), ("--list-ptx", "ptx ")):
        out = subprocess.run([str(cuobjdump), flag, str(lib)], capture_output=True, text=True, check=False).stdout
        for arch in re.findall(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)", out):
            counts[prefix + arch] = counts.get(prefix + arch, 0) + 1
    return counts


def test_prune_removes_other_sass_and_hits_the_cache(toolkit118: Toolkit, tmp_path: Path) -> None:
    targets = parse_targets("90-real")
    t0 = time.monotonic()
    first = prune_libraries(toolkit118, targets, ("cublas",), cache=tmp_path)
    cold = time.monotonic() - t0
    by = {lib.component: lib for lib in first.libs}
    assert set(by) == {"cublas", "cublasLt", "culibos", "cudart"}
    for name in ("cublas", "cublasLt"):
        lib = by[name]
        assert not lib.cache_hit and lib.after < lib.before
        assert toolkit118.cuobjdump is not None
        before, after = cubins(toolkit118.cuobjdump, lib.source), cubins(toolkit118.cuobjdump, lib.pruned)
        # The shipped library has many architectures; the pruned copy only sm_90 (no PTX: the plan has none).
        assert {"sm_70", "sm_80", "sm_90"} <= set(before), before
        assert set(after) == {"sm_90"}, after
        assert after["sm_90"] == before["sm_90"]
        assert lib.source.stat().st_size == lib.before  # the toolkit's library is untouched
        # slimwheel's own fatbin reader agrees, on members taken out of the pruned archive.
        listing = subprocess.run(
            [str(toolkit118.cuobjdump), "--list-elf", str(lib.pruned)], capture_output=True, text=True, check=False
        ).stdout
        with_code = re.findall(r"member [^:\n]+:([^:\n]+\.o):\n+ELF file", listing)
        out = tmp_path / f"members-{name}"
        out.mkdir()
        sample = sorted(set(with_code))[:5]
        assert sample, listing[:500]
        subprocess.run(["ar", "x", "--output", str(out), str(lib.pruned), *sample], check=True)
        seen = {str(e.target) for m in sample for fb in inspect_binary(out / m).fatbins for e in fb.entries}
        assert seen == {"sm_90"}, (sample, seen)
    assert by["cudart"].host_only and by["cudart"].pruned == by["cudart"].source
    for lib in first.libs:
        assert (first.libdir / lib.source.name).resolve() == lib.pruned.resolve()

    t0 = time.monotonic()
    second = prune_libraries(toolkit118, targets, ("cublas",), cache=tmp_path)
    warm = time.monotonic() - t0
    assert [lib.cache_hit for lib in second.libs if not lib.host_only] == [True, True]
    assert second.libdir == first.libdir
    assert [lib.pruned for lib in second.libs] == [lib.pruned for lib in first.libs]
    assert warm < 5 < cold, (warm, cold)


@pytest.fixture(scope="session")
def static_wheel(toolkit118: Toolkit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`slimwheel build --link static` of tests/packages/static-knn for Hopper (sm_90 + PTX 9.0: quick, and small).

    --archs, not --targets 90: with explicit targets `check` requires every GPU the PTX could reach, and cuBLAS 11.8
    has PTX for only 18 of its 115 linked modules, so Blackwell is (rightly) reported as not served.
    """
    out = tmp_path_factory.mktemp("static-wheel")
    cmd = [
        sys.executable,
        "-m",
        "slimwheel",
        "build",
        str(PACKAGE),
        "--cuda",
        "11.8",
        "--link",
        "static",
        "--archs",
        "9.0",
        "--budget",
        "60MiB",
        "--no-isolation",
        "-o",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


def test_static_wheel_needs_no_cuda_library(static_wheel: Path, toolkit118: Toolkit) -> None:
    report = inspect_wheel(static_wheel)
    assert not [r for r in report.requires_dist if r.lower().startswith("nvidia-")], report.requires_dist
    (elf,) = [e for e in report.elfs if e.name.endswith("_static_knn.so")]
    assert not [n for n in elf.needed if re.match(r"lib(cublas|cudart|cuda)\b", n)], elf.needed
    # cuBLAS's kernels are inside (a few hundred cubins, all sm_90) and our own PTX 9.0 too.
    sass = {e.target for fb in elf.fatbins for e in fb.entries if e.kind == "sass"}
    ptx = {e.target for fb in elf.fatbins for e in fb.entries if e.kind == "ptx"}
    assert {str(t) for t in sass} == {"sm_90"}
    assert {str(t) for t in ptx} == {"compute_90"}  # ours, and cuBLAS's own for GPUs newer than 9.x
    assert sum(len(fb.entries) for fb in elf.fatbins) > 100
    assert report.size < 60 * 2**20


def test_static_symbols_are_present_but_not_exported(static_wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(static_wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith("_static_knn.so")]
        so = tmp_path / "_static_knn.so"
        so.write_bytes(z.read(name))
    exported = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True)
    names = {line.split()[-1] for line in exported.stdout.splitlines() if line.strip()}
    assert names == {"sk_sgemm", "sk_knn1", "sk_versions"}, sorted(names)[:20]
    # The code is there: cuBLAS's error strings and the static runtime's version string are in the file.
    data = so.read_bytes()
    assert b"CUBLAS_STATUS_" in data or b"cublas" in data
    assert inspect_binary(so).sections.get(".nv_fatbin", 0) > 10**6


def test_static_wheel_imports_in_a_fresh_venv_without_nvidia_wheels(static_wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(static_wheel)], check=True)
    listed = subprocess.run([str(py), "-m", "pip", "list"], capture_output=True, text=True, check=True).stdout
    assert "nvidia" not in listed.lower()
    # dlopen of the whole library (all cuBLAS symbols resolved inside it) on a machine with no GPU driver.
    probe = (
        "import static_knn, json;"
        "maps = [l.split()[-1] for l in open('/proc/self/maps') if '.so' in l];"
        "print(json.dumps(sorted({m for m in maps if 'cublas' in m or 'cudart' in m})))"
    )
    proc = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"  # no libcublas / libcudart file: they are inside


def test_static_wheel_passes_check(static_wheel: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slimwheel", "check", str(static_wheel), "--budget", "60MiB"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


KERNEL_CU = """\
#include <cublas_v2.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
int blas_version() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return -1;
  int v = 0;
  cublasGetVersion(h, &v);
  cublasDestroy(h);
  scale<<<1, 1>>>(nullptr, 1.f, 0);
  return v;
}
"""

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.19...3.31)
project(order LANGUAGES CXX CUDA)
find_package(slimwheel CONFIG REQUIRED)
add_library(kernels STATIC kernel.cu)
slimwheel_cuda_target(kernels)
add_library(probe MODULE probe.cpp)
slimwheel_cuda_target(probe)
slimwheel_link_cuda(probe LIBRARIES cudart cublas)
# Linked after slimwheel_link_cuda: its cuBLAS calls must still be resolved from the static archives.
target_link_libraries(probe PRIVATE kernels)
"""

PROBE_CPP = """\
int blas_version();
extern "C" __attribute__((visibility("default"))) int probe() { return blas_version(); }
"""


def test_cmake_static_link_resolves_libraries_linked_later(toolkit118: Toolkit, tmp_path: Path) -> None:
    import os

    pruned = prune_libraries(toolkit118, parse_targets("90"), ("cublas",))
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "kernel.cu").write_text(KERNEL_CU)
    (src / "probe.cpp").write_text(PROBE_CPP)
    (src / "CMakeLists.txt").write_text(CMAKELISTS)
    env = {**os.environ, **toolkit118.env}
    configure = [
        "cmake",
        "-S",
        str(src),
        "-B",
        str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-Dslimwheel_DIR={REPO / 'slimwheel/cmake'}",
        "-DSLIMWHEEL_LINK=static",
        "-DSLIMWHEEL_CUDA_ARCHITECTURES=90",
        f"-DSLIMWHEEL_STATIC_LIBDIR={pruned.libdir}",
        f"-DCMAKE_CUDA_COMPILER={toolkit118.nvcc}",
        f"-DCMAKE_CUDA_HOST_COMPILER={toolkit118.host_compiler}",
    ]
    proc = subprocess.run(configure, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "links cublas cublasLt culibos cudart statically" in proc.stdout
    proc = subprocess.run(["cmake", "--build", str(build), "-j2"], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (module,) = build.glob("*probe*.so")
    undefined = subprocess.run(["nm", "-u", str(module)], capture_output=True, text=True, check=True).stdout
    assert "cublas" not in undefined, [ln for ln in undefined.splitlines() if "cublas" in ln][:5]
    exported = subprocess.run(["nm", "-D", "--defined-only", str(module)], capture_output=True, text=True, check=True)
    assert {ln.split()[-1] for ln in exported.stdout.splitlines() if ln.strip()} == {"probe"}
    needed = subprocess.run(["readelf", "-dW", str(module)], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\[lib(cublas|cudart)", needed), needed
    # Every symbol resolves: the module loads (no GPU is needed until a CUDA call).
    loads = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(module)!r})"], check=False)
    assert loads.returncode == 0
