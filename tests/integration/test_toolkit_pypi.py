"""The CUDA 13 toolkit from PyPI wheels: assembled (concurrently, into a fresh cache), checked, usable by CMake;
and the errors a user sees when there is no toolkit to be had."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from slimwheel.cuda.arch import CC
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]


def _needed(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        dyn = ELFFile(fh).get_section_by_name(".dynamic")
        assert isinstance(dyn, DynamicSection), path
        # pyelftools sets `needed` on DT_NEEDED tags at run time; its type stubs do not declare it
        return [t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]


def _env(**kw: str) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("CUDA_HOME", "CUDA_PATH", "SLIMWHEEL_CUDA", "SLIMWHEEL_TOOLKIT"):
        env.pop(var, None)
    env.update(kw)
    return env


def test_toolkit13_is_cuda_13_0_and_checked(toolkit13: Toolkit) -> None:
    tk = toolkit13
    assert (tk.version.major, tk.version.minor) == (13, 0)
    assert tk.nvcc.is_file()
    # nvcc 13.0 lists these (shared/cuda-facts.md, section 3); Maxwell to Volta are gone.
    assert {CC(7, 5), CC(8, 0), CC(9, 0), CC(10, 0), CC(12, 0)} <= set(tk.supported)
    assert CC(7, 0) not in tk.supported
    for comp in ("nvcc", "cudart", "cublas", "cudart_static", "cccl"):
        assert comp in tk.components
    assert tk.env["CUDACXX"] == str(tk.nvcc)


def test_assembles_from_pypi_once_under_concurrency(tmp_path: Path) -> None:
    """Two processes ask for the toolkit at once in an empty cache: one assembles, the other waits and reuses it."""
    cache = tmp_path / "cache"
    code = textwrap.dedent(
        f"""
        import json, sys
        from slimwheel.cuda.versions import CudaVersion
        from slimwheel.toolkit import ensure_toolkit
        tk = ensure_toolkit(CudaVersion(13, 0), env={{"PATH": "", "SLIMWHEEL_CACHE": {str(cache)!r}}})
        print(json.dumps({{"root": str(tk.root), "source": tk.source, "version": str(tk.version)}}))
        """
    )
    t0 = time.monotonic()
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=900) for p in procs]
    cold = time.monotonic() - t0
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    prefix = cache / "toolkits" / "cuda-13.0"
    assert results[0] == results[1] == {"root": str(prefix), "source": "pypi", "version": "13.0"}
    manifest = json.loads((prefix / "slimwheel-toolkit.json").read_text())
    assert manifest["check"]["ok"] and manifest["installed"]["nvidia-cuda-nvcc"].startswith("13.0.")
    assert manifest["installed"]["nvidia-cublas"].startswith("13.0.")
    # nothing half-built is left beside it
    assert sorted(p.name for p in (cache / "toolkits").iterdir() if "cuda-13.0" in p.name) == [
        ".cuda-13.0.lock",
        "cuda-13.0",
    ]

    t1 = time.monotonic()
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(warm.stdout.strip().splitlines()[-1])["root"] == str(prefix)
    print(f"toolkit assembly: cold {cold:.1f} s (two processes), warm {time.monotonic() - t1:.1f} s")
    shutil.rmtree(cache)  # 1.1 GB; pytest keeps the temporary folders of the last three runs


def test_cmake_accepts_the_assembled_prefix(toolkit13: Toolkit, tmp_path: Path) -> None:
    """enable_language(CUDA) + FindCUDAToolkit with CMAKE_CUDA_COMPILER and CUDAToolkit_ROOT, linking cuBLAS."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        textwrap.dedent(
            """
            cmake_minimum_required(VERSION 3.18)
            project(probe LANGUAGES CXX CUDA)
            find_package(CUDAToolkit REQUIRED)
            add_executable(probe probe.cu)
            set_target_properties(probe PROPERTIES CUDA_ARCHITECTURES "75-real;90")
            target_link_libraries(probe PRIVATE CUDA::cublas CUDA::cudart)
            """
        )
    )
    (src / "probe.cu").write_text(
        "#include <cublas_v2.h>\n__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n"
        "int main() { cublasHandle_t h; float* x; cudaMalloc(&x, 64); k<<<1, 16>>>(x);\n"
        "  return (int)cublasCreate(&h); }\n"
    )
    b = tmp_path / "b"
    conf = subprocess.run(
        [
            "cmake",
            "-S",
            str(src),
            "-B",
            str(b),
            f"-DCMAKE_CUDA_COMPILER={toolkit13.nvcc}",
            f"-DCUDAToolkit_ROOT={toolkit13.root}",
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert conf.returncode == 0, conf.stdout + conf.stderr
    assert "Found CUDAToolkit" in conf.stdout and "13.0" in conf.stdout
    build = subprocess.run(["cmake", "--build", str(b), "-j2"], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    needed = _needed(b / "probe")
    assert "libcublas.so.13" in needed and "libcudart.so.13" in needed


def test_device_lto_links_with_the_assembled_prefix(toolkit13: Toolkit, tmp_path: Path) -> None:
    """Device LTO (-dlto): two files compiled to LTO IR, device-linked into sm_90 code. nvlink loads
    <bin>/../nvvm/lib64/libnvvm.so for it, which the cu13 wheels keep in lib/; without the prefix's nvvm/lib64 the
    link stops with "nvlink fatal: elfLink linker library load error"."""
    (tmp_path / "a.cu").write_text("__device__ float twice(float v) { return 2.0f * v; }\n")
    (tmp_path / "b.cu").write_text(
        "__device__ float twice(float v);\n__global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n"
    )
    nvcc = str(toolkit13.nvcc)
    for name in ("a", "b"):
        r = subprocess.run(
            [nvcc, "-rdc=true", "-gencode", "arch=compute_90,code=lto_90", "-c", f"{name}.cu", "-o", f"{name}.o"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [nvcc, "-dlink", "-dlto", "-arch=sm_90", "a.o", "b.o", "-o", "dlink.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    elves = subprocess.run(
        [str(toolkit13.root / "bin" / "cuobjdump"), "-lelf", "dlink.o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert "sm_90" in elves.stdout, elves.stdout + elves.stderr


def test_cli_reports_the_toolkit(toolkit13: Toolkit) -> None:
    out = subprocess.run(
        [*CLI, "toolkit", "--root", str(toolkit13.root), "--format", "json"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["schema"] == 1 and info["cuda_major"] == 13 and info["release"] == "13.0"
    assert info["version"].startswith("13.0.")
    assert info["check"]["ok"] is True
    assert info["has_static_libs"] is True  # libcudart_static.a from the runtime wheel
    assert info["nvprune"] is None  # no PyPI wheel ships nvprune
    table = subprocess.run([*CLI, "toolkit", "--root", str(toolkit13.root)], capture_output=True, text=True)
    assert table.returncode == 0 and "CUDA 13" in table.stdout and "static libraries" in table.stdout


def test_missing_nvcc_is_one_clear_error(tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "toolkit", "--root", str(tmp_path)], capture_output=True, text=True, env=_env())
    assert out.returncode == 4
    lines = out.stderr.strip().splitlines()
    assert lines[0] == f"slimwheel: error: no nvcc in {tmp_path}: {tmp_path}/bin/nvcc does not exist"
    assert "Traceback" not in out.stderr and len(lines) == 2  # the error and its hint


def test_cuda12_request_without_a_cuda12_toolkit(tmp_path: Path) -> None:
    """No CUDA 12 on PATH or CUDA_HOME, an empty cache, and a release the cuda12 assembler does not know."""
    env = _env(PATH="/usr/bin:/bin", SLIMWHEEL_CACHE=str(tmp_path))
    out = subprocess.run([*CLI, "toolkit", "--cuda", "12.2"], capture_output=True, text=True, env=env)
    assert out.returncode == 3, out.stderr
    err = [ln for ln in out.stderr.splitlines() if ln.startswith("slimwheel: error:")]
    assert len(err) == 1 and "Traceback" not in out.stderr
    assert "no CUDA 12.2 toolkit" in err[0] and "PyPI has no CUDA 12 nvcc" in err[0]
    assert not (tmp_path / "toolkits" / "cuda-12.2").exists()
