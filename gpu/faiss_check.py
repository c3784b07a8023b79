#!/usr/bin/env python3
"""faiss wheels on a real GPU: faiss's own GPU tests and a benchmark, per build profile. Run on the GPU machine.

    python3 gpu/faiss_check.py                      # every profile under .carry/faiss/, results in $OUT/faiss_h200.json
    python3 gpu/faiss_check.py --profiles slim --no-tests --n 200000
    python3 gpu/faiss_check.py --build upstream     # build that profile there first (16 cores), then test it

Inputs (made here by `python3.12 scripts/faiss-profiles.py --carry`):
    .carry/faiss/<profile>/*.whl        one faiss wheel per profile (cp312)
    .carry/faiss/deps/*.whl             wheels the machine lacks: scipy-openblas32 (faiss's BLAS), swig (for --build)
    .carry/faiss/faiss-src.tar.gz       the faiss tree the wheels were built from (build parts, GPU tests)

--build compiles the recipe (faiss/) on the GPU machine with its nvcc, the nvidia-* wheels' cuBLAS and cuRAND, swig
and scipy-openblas32 from deps/ (the machine has no system BLAS, so FAISS_BLAS=system becomes scipy-openblas32 there,
recorded as blas_override), without repair; the build time is recorded.

Each profile is installed with `pip install --no-index --no-deps --target` into its own folder, with a link `nvidia`
there to the machine's nvidia-* wheels (the ones torch uses), so the wheel's RPATH ($ORIGIN/../nvidia/cu13/lib) finds
the CUDA libraries exactly as in a site-packages holding both. Tests and every benchmark run in fresh processes.

Benchmark (per profile, `--runs` fresh processes): import time; GPU memory (NVML device used, and cuMemGetInfo once a
context exists) before import, after import, after StandardGpuResources, after the first search; first-search latency
(lazy module loading and fatbin decompression happen there); steady throughput of GpuIndexFlatL2 and GpuIndexIVFFlat
on n x 128 random vectors; GPU results compared with the CPU IndexFlatL2 on a query subset.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMA = 1


# --------------------------------------------------------------------------------------------------- GPU memory
def _nvml_used_mib() -> float | None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        used = pynvml.nvmlDeviceGetMemoryInfo(h).used
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
def bench_one(n: int, nq: int, k: int) -> dict:
    """Runs in a fresh process with the profile's folder first on sys.path."""
    out: dict = {"mem": {"before_import": _mem()}}
    t = time.perf_counter()
    import faiss

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
    D, I = index.search(xq[:16], k)
    out["first_search_s"] = round(time.perf_counter() - t, 4)
    out["mem"]["after_first_search"] = _mem()

    # Steady state: whole query batch, a few repetitions, best and median.
    times = []
    for _ in range(5):
        t = time.perf_counter()
        D, I = index.search(xq, k)
        times.append(time.perf_counter() - t)
    times.sort()
    out["flat"] = {"n": n, "nq": nq, "k": k, "median_s": round(times[2], 5), "best_s": round(times[0], 5),
                   "qps_median": round(nq / times[2], 1)}

    # Correctness against the CPU on a subset (same data, same k).
    sub = min(nq, 200)
    cpu = faiss.IndexFlatL2(d)
    cpu.add(xb)
    Dc, Ic = cpu.search(xq[:sub], k)
    agree = float((I[:sub] == Ic).mean())
    out["flat"]["agree_with_cpu"] = round(agree, 5)
    out["flat"]["max_abs_dist_diff"] = float(np.abs(D[:sub] - Dc).max())
    del cpu

    # IVF-Flat: nlist ~ 4 sqrt(n), trained on a sample.
    nlist = int(4 * np.sqrt(n))
    ivf = faiss.GpuIndexIVFFlat(res, d, nlist, faiss.METRIC_L2)
    t = time.perf_counter()
    ivf.train(xb[: min(n, 64 * nlist)])
    out["ivf_train_s"] = round(time.perf_counter() - t, 3)
    ivf.add(xb)
    ivf.nprobe = 32
    t = time.perf_counter()
    ivf.search(xq[:16], k)
    out["ivf_first_search_s"] = round(time.perf_counter() - t, 4)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        _, Ii = ivf.search(xq, k)
        times.append(time.perf_counter() - t)
    times.sort()
    recall = float(np.mean([len(set(Ii[i]) & set(I[i])) / k for i in range(sub)]))
    out["ivf"] = {"nlist": nlist, "nprobe": 32, "median_s": round(times[2], 5), "best_s": round(times[0], 5),
                  "qps_median": round(nq / times[2], 1), "recall_at_k_vs_flat": round(recall, 4)}
    out["mem"]["end"] = _mem()
    return out


# ------------------------------------------------------------------------------------------------- orchestration
def _run(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 900, cwd: Path | None = None):
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    return p, round(time.perf_counter() - t, 2)


def _nvidia_dir() -> Path | None:
    try:
        import nvidia  # namespace package of the nvidia-* wheels
    except ImportError:
        return None
    for p in nvidia.__path__:
        if (Path(p) / "cu13" / "lib").is_dir():
            return Path(p)
    return None


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def install(profile: str, wheel: Path, deps: list[Path], work: Path) -> tuple[Path, dict]:
    site = work / f"site-{profile}"
    shutil.rmtree(site, ignore_errors=True)
    p, secs = _run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(site),
                    str(wheel), *map(str, deps)])
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


def build_here(name: str, src: Path, deps: list[Path], work: Path) -> tuple[Path | None, dict]:
    """Builds one profile with this machine's compilers (no network: every build requirement is present or carried)."""
    sys.path.insert(0, str(REPO / "faiss" / "build_support"))
    from faiss_profiles import make_profile

    p = make_profile(name)
    defines = p.cmake_defines()
    info: dict = {"profile": name, "cmake_defines": dict(defines), "cpus": os.cpu_count()}
    # The carried build requirements go into a folder on PYTHONPATH (a venv made from this Python, itself a venv,
    # would not see its packages: numpy, scikit-build-core, the nvidia-* wheels).
    extra = work / "build-deps"
    if not extra.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(extra),
                        *map(str, deps)], check=True)
    if defines["FAISS_BLAS"] == "system" and not any(Path(d).glob("libopenblas.so*") for d in
                                                     ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        defines["FAISS_BLAS"] = "scipy-openblas32"
        info["blas_override"] = "no system OpenBLAS here: scipy-openblas32 instead"
    nv = _nvidia_dir()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if nv is None:
        info["error"] = "no nvidia-* wheels with cu13/lib in this Python"
        return None, info
    defines.update({
        "FAISS_SOURCE_DIR": str(src),
        "CMAKE_CUDA_COMPILER": nvcc,
        "SLIMWHEEL_CUDA_LIBDIRS": str(nv / "cu13" / "lib"),
        "SLIMWHEEL_CUDA_INCLUDEDIRS": str(nv / "cu13" / "include"),
    })
    out = work / "built" / name
    # -x: the recipe finds (and names, when missing) what it needs itself; pins such as nvidia-curand==10.4.0.* need
    # not match the machine's wheels exactly.
    cmd = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-x", "--outdir", str(out),
           "-C", f"build-dir={work / ('build-' + name)}"]
    cmd += [f"-Ccmake.define.{k}={v}" for k, v in defines.items()]
    cmd.append(str(REPO / "faiss"))
    env = dict(os.environ, FAISS_BLAS=defines["FAISS_BLAS"], CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 4))
    env["PATH"] = os.pathsep.join([str(extra / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(extra), env.get("PYTHONPATH", "")])
    try:
        proc, secs = _run(cmd, env=env, timeout=3000)
    except subprocess.TimeoutExpired:
        info["error"] = "build timed out"
        return None, info
    info.update({"rc": proc.returncode, "seconds": secs, "nvcc": nvcc})
    wheels = sorted(out.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        info["error"] = (proc.stdout + proc.stderr)[-4000:]
        return None, info
    info["wheel_size"] = wheels[0].stat().st_size
    return wheels[0], info


def run_tests(profile: str, site: Path, testroot: Path, work: Path, timeout: float) -> dict:
    """faiss's GPU tests, one pytest process per file: a test that aborts (faiss asserts abort the process) costs
    only its file's results."""
    tests = sorted((testroot / "faiss" / "gpu" / "test").glob("test_*.py"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(testroot / "tests")]))
    out: dict = {"files": {}, "tests": 0, "failures": 0, "errors": 0, "skipped": 0, "failed": []}
    t0 = time.perf_counter()
    for test in tests:
        junit = work / f"junit-{profile}-{test.stem}.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", str(test)]
        try:
            p, secs = _run(cmd, env=env, timeout=timeout, cwd=work)
        except subprocess.TimeoutExpired:
            out["files"][test.name] = {"timed_out": True, "timeout_s": timeout}
            out["errors"] += 1
            continue
        entry: dict = {"rc": p.returncode, "duration_s": secs}
        if junit.exists():
            root = ET.parse(junit).getroot()
            suites = [root] if root.tag == "testsuite" else list(root)
            for key in ("tests", "failures", "errors", "skipped"):
                n = sum(int(s.get(key, 0)) for s in suites)
                entry[key] = n
                out[key] += n
            for case in root.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    out["failed"].append(f"{test.name}::{case.get('classname')}.{case.get('name')}")
        else:  # the process died (abort, segfault) before pytest wrote its report
            out["errors"] += 1
            entry["crashed"] = True
        if p.returncode != 0:
            entry["tail"] = (p.stdout + p.stderr)[-2000:]
        out["files"][test.name] = entry
    out["duration_s"] = round(time.perf_counter() - t0, 1)
    return out


def run_bench(profile: str, site: Path, runs: int, n: int, nq: int, k: int, timeout: float) -> list[dict]:
    results = []
    env = dict(os.environ, PYTHONPATH=str(site))
    for i in range(runs):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--bench-one", f"--n={n}", f"--nq={nq}", f"--k={k}"]
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


def machine() -> dict:
    info: dict = {"python": platform.python_version(), "host": platform.node()}
    smi = shutil.which("nvidia-smi")
    if smi:
        p = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, check=False)
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
    ap.add_argument("--bench-one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.bench_one:
        print(json.dumps(bench_one(a.n, a.nq, a.k)))
        return 0

    builds = [s for s in a.build.split(",") if s]
    names = [s for s in a.profiles.split(",") if s] or builds or sorted(
        d.name for d in a.carry.iterdir() if d.is_dir() and d.name != "deps" and any(d.glob("*.whl"))
    )
    if not names:
        print(f"faiss_check: no profile wheels under {a.carry}", file=sys.stderr)
        return 2
    deps = sorted((a.carry / "deps").glob("*.whl"))
    work = Path(tempfile.mkdtemp(prefix="faiss-check-"))
    srcroot = work / "faiss-src"
    tarball = a.carry / "faiss-src.tar.gz"
    if not a.no_tests or builds:
        if not tarball.exists():
            print(f"faiss_check: {tarball} missing (scripts/faiss-profiles.py --carry makes it)", file=sys.stderr)
            return 2
        with tarfile.open(tarball) as tf:
            tf.extractall(srcroot, filter="data")

    report: dict = {"schema": SCHEMA, "machine": machine(), "params": {"n": a.n, "nq": a.nq, "k": a.k, "runs": a.runs},
                    "profiles": {}}
    for name in names:
        entry: dict = {}
        if name in builds:
            wheel, entry["build"] = build_here(name, srcroot, deps, work)
            wheels = [wheel] if wheel else []
        else:
            wheels = sorted((a.carry / name).glob("*.whl"))
        if len(wheels) != 1:
            entry["error"] = entry.get("build", {}).get("error") or f"expected one wheel in {a.carry / name}, found {len(wheels)}"
            report["profiles"][name] = entry
            continue
        site, info = install(name, wheels[0], [d for d in deps if not d.name.startswith("swig-")], work)
        entry["install"] = info
        if info["pip_rc"] == 0:
            if not a.no_tests:
                entry["tests"] = run_tests(name, site, srcroot, work, a.test_timeout)
            entry["bench"] = run_bench(name, site, a.runs, a.n, a.nq, a.k, timeout=600)
        report["profiles"][name] = entry

    a.out.mkdir(parents=True, exist_ok=True)
    dest = a.out / "faiss_h200.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, dest)

    print(f"{'profile':10} {'wheel MB':>9} {'tests':>16} {'import s':>9} {'first s':>8} {'flat qps':>10} "
          f"{'ivf qps':>9} {'mem after 1st (MiB)':>20}")
    for name, e in report["profiles"].items():
        if "install" not in e or e["install"].get("pip_rc"):
            why = e.get("error") or e.get("install", {}).get("pip_error", "")
            print(f"{name:10} failed before the tests: {str(why)[-600:]}")
            continue
        t = e.get("tests", {})
        ts = f"{t.get('tests', 0) - t.get('failures', 0) - t.get('errors', 0) - t.get('skipped', 0)}/{t.get('tests', '?')} ok" if t else "-"
        for b in e["bench"]:
            if "error" in b or b.get("timed_out"):
                print(f"{name:10} bench run {b['run']} failed: {str(b.get('error', 'timeout'))[-400:]}")
                continue
            m = b["mem"]["after_first_search"]
            print(f"{name:10} {e['install']['wheel_size'] / 1e6:9.1f} {ts:>16} {b['import_s']:9.3f} "
                  f"{b['first_search_s']:8.3f} {b['flat']['qps_median']:10.0f} {b['ivf']['qps_median']:9.0f} "
                  f"{m['cu_used_mib']!s:>20}")
        if "build" in e:
            print(f"{name:10} built here in {e['build'].get('seconds')} s on {e['build'].get('cpus')} cores")
    print(f"written {dest}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
