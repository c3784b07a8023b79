#!/usr/bin/env python3
"""H200 measurements of examples/topk-nvrtc: the precompiled wheel against the runtime-compiled (NVRTC) one.

Run on a machine with an NVIDIA GPU, in a Python 3.12 that has numpy and the CUDA 13 nvidia-* wheels
(nvidia-cuda-runtime, nvidia-cuda-nvrtc), from the folder holding both wheels and this script:

    python3 nvrtc_check.py --wheels . --out $OUT

Installs both wheels (pip --no-deps --no-index), then measures in fresh processes (one per figure, so nothing is
warm that a user's first process would not have): GPU memory (cuMemGetInfo total - free) after import + context and
after the first call, with CUDA_MODULE_LOADING=LAZY and EAGER; first-call latency with empty caches (slimwheel's and
the driver's, CUDA_CACHE_PATH), from slimwheel's disk cache, and with only the driver's cache warm; the time to make
each of the 14 instantiations ready; steady throughput (CUDA events, data on the device); and whether both builds
return identical results. Writes nvrtc_h200.json to --out; exits 1 on a wrong result.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

VARIANTS = ("precompiled", "runtime")
DTYPES = ("float32", "float64")
KS = (32, 64, 128, 256, 512, 1024, 2048)


# ------------------------------------------------------------------------------------------------ child process side
def used_mib() -> float:
    """GPU memory in use on the current context's device (all processes), MiB."""
    cuda = ctypes.CDLL("libcuda.so.1")
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    rc = cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    if rc != 0:
        raise RuntimeError(f"cuMemGetInfo failed: {rc}")
    return (total.value - free.value) / 2**20


def bare_context() -> dict[str, Any]:
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    return {"mem_context_mib": used_mib()}


def data(dtype: str, rows: int, n: int, seed: int) -> Any:  # numpy is imported in the child only
    import numpy as np

    rng = np.random.default_rng(seed)
    # Rounded to 1/64 so that rows hold equal values: ties must be broken by index in both builds alike.
    return (np.round(rng.standard_normal((rows, n)) * 64) / 64).astype(dtype)


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """One fresh process: what spec["what"] asks for, with the variant's package."""
    if spec["what"] == "bare":
        return bare_context()
    out: dict[str, Any] = {}
    if os.environ.get("NVRTC_CHECK_PRELOAD") == "1":
        # What the package's loader will do once repair knows NVRTC wheels (docs/nvrtc.md): load libnvrtc from the
        # nvidia-cuda-nvrtc wheel by absolute path before the extension needs it.
        for entry in sys.path:
            lib = Path(entry) / "nvidia/cu13/lib/libnvrtc.so.13"
            if entry and lib.is_file():
                ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
                out["preloaded"] = str(lib)
                break
    t0 = time.perf_counter()
    mod = importlib.import_module(f"topk_{spec['variant']}")
    out["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod.init(0)
    out["init_s"] = time.perf_counter() - t0
    out["mem_after_init_mib"] = used_mib()
    what = spec["what"]
    if what == "first":
        x = data("float32", 1024, 8192, 1)
        t0 = time.perf_counter()
        mod.prepare("float32", 256)
        out["prepare_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        mod.topk(x, 200)
        out["first_call_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        mod.topk(x, 200)
        out["second_call_s"] = time.perf_counter() - t0
        out["mem_after_first_call_mib"] = used_mib()
    elif what == "all":
        per: dict[str, float] = {}
        for dtype in DTYPES:
            for k in KS:
                t0 = time.perf_counter()
                mod.prepare(dtype, k)
                per[f"{dtype}/{k}"] = time.perf_counter() - t0
        out["prepare_each_s"] = per
        out["mem_after_all_mib"] = used_mib()
    elif what == "results":
        import numpy as np

        arrays = {}
        for dtype in DTYPES:
            x = data(dtype, 64, 5000, 2)
            for k in KS:
                values, indices = mod.topk(x, k)
                arrays[f"{dtype}_{k}_values"] = values
                arrays[f"{dtype}_{k}_indices"] = indices
                # Against NumPy: a stable argsort orders equal values by index, as the kernels do.
                order = np.argsort(x, axis=1, kind="stable")[:, :k]
                if not (np.array_equal(indices, order) and np.array_equal(values, np.take_along_axis(x, order, 1))):
                    out.setdefault("mismatch_vs_numpy", []).append(f"{dtype}/{k}")
        np.savez(str(spec["save"]), **arrays)
        out["saved"] = str(spec["save"])
    elif what == "bench":
        res = {}
        for dtype, k, rows, n in (("float32", 256, 4096, 16384), ("float64", 2048, 1024, 16384)):
            x = data(dtype, rows, n, 3)
            res[f"{dtype}/{k}"] = mod.bench(x, k, int(spec.get("iters", 50)))
        out["bench_ms"] = res
    elif what == "loadapi":
        # The same cubin (from the runtime build's cache) loaded through the module or the library API: which one
        # costs GPU memory? Only the driver is called; the context is the CUDA runtime's, as in the extension.
        # A cache file: a 159-byte header (magic, key, SHA-256, size), then "C90\n" <lowered name> NUL <cubin>.
        body = Path(str(spec["file"])).read_bytes()[159:]
        name, image = body[body.index(b"\n") + 1 :].split(b"\0", 1)
        cuda = ctypes.CDLL("libcuda.so.1")
        fn = ctypes.c_void_p()
        before = used_mib()
        if spec["api"] == "module":
            mod_h = ctypes.c_void_p()
            rc = cuda.cuModuleLoadData(ctypes.byref(mod_h), ctypes.c_char_p(image))
            rc = rc or cuda.cuModuleGetFunction(ctypes.byref(fn), mod_h, ctypes.c_char_p(name))
        else:
            lib_h, kern = ctypes.c_void_p(), ctypes.c_void_p()
            rc = cuda.cuLibraryLoadData(ctypes.byref(lib_h), ctypes.c_char_p(image), None, None, 0, None, None, 0)
            rc = rc or cuda.cuLibraryGetKernel(ctypes.byref(kern), lib_h, ctypes.c_char_p(name))
            rc = rc or cuda.cuKernelGetFunction(ctypes.byref(fn), kern)
        out.update(api=spec["api"], rc=rc, mem_before_mib=before, mem_after_load_mib=used_mib())
    out["describe"] = mod.describe()
    return out


# ----------------------------------------------------------------------------------------------- parent process side
def run_probe(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, __file__, "--probe", json.dumps(spec)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"spec": spec, "error": (r.stdout + r.stderr)[-4000:], "returncode": r.returncode}
    res: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    res["spec"] = spec
    res["process_wall_s"] = wall
    return res


def driver_cache_of(cache: Path) -> Path:
    """The driver's compute cache that goes with a slimwheel cache folder (a user's later process has both warm)."""
    return Path(f"{cache}-driver")


def child_env(loading: str, cache: Path | None, driver_cache: Path) -> dict[str, str]:
    """The child's environment: module loading, slimwheel's kernel cache (or none), and the driver's compute cache.

    The driver's cache (~/.nv/ComputeCache unless CUDA_CACHE_PATH) outlives processes too, and it speeds NVRTC's
    compile of an instantiation it has seen (measured on the H200: 23-37 ms against 270-310 ms cold), so an "empty
    cache" figure must start with both caches empty; each probe names its driver cache.
    """
    env = dict(os.environ, CUDA_MODULE_LOADING=loading, CUDA_CACHE_PATH=str(driver_cache))
    env.pop("CUDA_CACHE_DISABLE", None)
    env["SLIMWHEEL_NVRTC_CACHE"] = str(cache) if cache else "off"
    return env


def install(wheels: Path) -> dict[str, Any]:
    found = {v: sorted(wheels.glob(f"topk_{v}-*.whl")) for v in VARIANTS}
    out: dict[str, Any] = {}
    for v, paths in found.items():
        if len(paths) != 1:
            raise SystemExit(f"expected one topk_{v} wheel in {wheels}, found {paths}")
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall", str(paths[0])],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out[v] = {"wheel": paths[0].name, "bytes": paths[0].stat().st_size, "returncode": r.returncode}
        if r.returncode != 0:
            raise SystemExit(r.stdout + r.stderr)
    return out


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"python": sys.version.split()[0]}
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run(
            [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        env["gpu"] = r.stdout.strip()
    try:
        from importlib.metadata import version

        for dist in ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "torch", "numpy"):
            try:
                env[dist] = version(dist)
            except Exception:
                env[dist] = None
    except ImportError:
        pass
    return env


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"schema": 1, "where": "NVIDIA H200 (device machine)", "ok": False}
    result["environment"] = environment()
    result["wheels"] = install(args.wheels)
    scratch = Path(tempfile.mkdtemp(prefix="nvrtc-check-"))
    probes: list[dict[str, Any]] = []

    preload = {"on": False}

    def go(
        spec: dict[str, Any], loading: str = "LAZY", cache: Path | None = None, driver: Path | None = None
    ) -> dict[str, Any]:
        if driver is None:  # the one that goes with slimwheel's cache, else a new one
            driver = driver_cache_of(cache) if cache else Path(tempfile.mkdtemp(dir=scratch, prefix="driver-"))
        driver_state = "warm" if driver.is_dir() and any(driver.iterdir()) else "empty"
        env = child_env(loading, cache, driver)
        if preload["on"]:
            env["NVRTC_CHECK_PRELOAD"] = "1"
        state = "off" if cache is None else ("warm" if any(cache.glob("*.slwk")) else "empty")
        res = run_probe(spec, env)
        if "error" in res and "cannot load libnvrtc" in str(res["error"]) and not preload["on"]:
            # The extension did not find NVRTC beside it (a wheel folder elsewhere on sys.path): preload it as the
            # loader will, and say so in the results.
            probes.append({**res, "loading": loading, "cache": "n/a", "superseded": "retried with NVRTC preloaded"})
            preload["on"] = True
            result["nvrtc_preloaded_by_script"] = True
            env["NVRTC_CHECK_PRELOAD"] = "1"
            res = run_probe(spec, env)
        res["loading"] = loading
        res["cache"] = state
        res["driver_cache"] = driver_state
        probes.append(res)
        print(json.dumps(res)[:600], flush=True)
        return res

    for loading in ("LAZY", "EAGER"):
        go({"what": "bare"}, loading)
    # First call, fresh process each; the runtime build with an empty cache, then the same cache warm (three times).
    for rep in range(args.repeats):
        for loading in ("LAZY", "EAGER"):
            go({"what": "first", "variant": "precompiled"}, loading)
            cache = scratch / f"cache-first-{loading}-{rep}"
            go({"what": "first", "variant": "runtime"}, loading, cache)  # empty
            go({"what": "first", "variant": "runtime"}, loading, cache)  # warm: a new process reads the disk cache
            # slimwheel's cache empty, the driver's warm from the first compile: what NVRTC costs then.
            go(
                {"what": "first", "variant": "runtime"},
                loading,
                scratch / f"cache-nvrtc-{loading}-{rep}",
                driver_cache_of(cache),
            )
    # Every instantiation: precompiled, compiled (empty cache), from the cache.
    cache_all = scratch / "cache-all"
    go({"what": "all", "variant": "precompiled"}, "LAZY")
    go({"what": "all", "variant": "precompiled"}, "EAGER")
    go({"what": "all", "variant": "runtime"}, "LAZY", cache_all)
    go({"what": "all", "variant": "runtime"}, "LAZY", cache_all)
    # Results, both builds, compared element for element.
    saved = {v: scratch / f"results-{v}.npz" for v in VARIANTS}
    for v in VARIANTS:
        go({"what": "results", "variant": v, "save": str(saved[v])}, "LAZY", cache_all)
    # Module API against library API for one cached cubin, each in a fresh process.
    cached = sorted(cache_all.glob("*.slwk"))
    if cached:
        for _ in range(2):
            for api in ("module", "library"):
                go({"what": "loadapi", "variant": "runtime", "api": api, "file": str(cached[0])}, "LAZY", None)
    # Throughput: alternate the builds so that clock drift hits both alike.
    for _ in range(args.repeats):
        for v in VARIANTS:
            go({"what": "bench", "variant": v, "iters": 50}, "LAZY", cache_all)

    result["probes"] = probes
    result["summary"] = summarize(probes, saved)
    result["ok"] = bool(result["summary"].get("identical_results")) and not any("error" in p for p in probes)
    return result


def summarize(probes: list[dict[str, Any]], saved: dict[str, Path]) -> dict[str, Any]:
    import numpy as np

    def pick(
        what: str, variant: str | None, loading: str, cache: str | None = None, driver: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            p
            for p in probes
            if "error" not in p
            and "superseded" not in p
            and p["spec"]["what"] == what
            and p["spec"].get("variant") == variant
            and p["loading"] == loading
            and (cache is None or p["cache"] == cache)
            and (driver is None or p.get("driver_cache") == driver)
        ]

    s: dict[str, Any] = {}
    for loading in ("LAZY", "EAGER"):
        bare = pick("bare", None, loading)
        row: dict[str, Any] = {"context_mib": median([p["mem_context_mib"] for p in bare])}
        # Both caches empty (a machine's first process), both warm (a later one), slimwheel's empty and the driver's
        # warm (NVRTC helped by the driver's compute cache alone).
        for key, v, cache, driver in (
            ("precompiled", "precompiled", "off", None),
            ("runtime_empty_cache", "runtime", "empty", "empty"),
            ("runtime_warm_cache", "runtime", "warm", "warm"),
            ("runtime_driver_cache_only", "runtime", "empty", "warm"),
        ):
            ps = pick("first", v, loading, cache, driver)
            row[key] = {
                "runs": len(ps),
                "import_s": median([p["import_s"] for p in ps]),
                "init_s": median([p["init_s"] for p in ps]),
                "mem_after_init_mib": median([p["mem_after_init_mib"] for p in ps]),
                "prepare_s": median([p["prepare_s"] for p in ps]),
                "first_call_s": median([p["first_call_s"] for p in ps]),
                "second_call_s": median([p["second_call_s"] for p in ps]),
                "mem_after_first_call_mib": median([p["mem_after_first_call_mib"] for p in ps]),
            }
        s[loading.lower()] = row
    all_pre = pick("all", "precompiled", "LAZY")
    all_rt = pick("all", "runtime", "LAZY")
    if all_pre and len(all_rt) == 2:
        compile_each = list(all_rt[0]["prepare_each_s"].values())
        cached_each = list(all_rt[1]["prepare_each_s"].values())
        pre_each = list(all_pre[0]["prepare_each_s"].values())
        s["instantiations"] = len(compile_each)
        s["compile_per_kernel_s"] = {"median": median(compile_each), "max": max(compile_each)}
        s["cached_per_kernel_s"] = {"median": median(cached_each), "max": max(cached_each)}
        s["precompiled_lazy_load_per_kernel_s"] = {"median": median(pre_each), "max": max(pre_each)}
        s["mem_after_all_mib"] = {
            "precompiled_lazy": all_pre[0]["mem_after_all_mib"],
            "precompiled_eager": pick("all", "precompiled", "EAGER")[0]["mem_after_all_mib"],
            "runtime": all_rt[1]["mem_after_all_mib"],
        }
        # The break-even (lab/bench/nvrtc-report.py) compares these per-kernel costs with the import + context
        # times of the "first" probes.
    bench: dict[str, dict[str, list[float]]] = {}
    for v in VARIANTS:
        for p in pick("bench", v, "LAZY"):
            for k, ms in p["bench_ms"].items():
                bench.setdefault(k, {}).setdefault(v, []).append(ms)
    s["bench_ms"] = {
        k: {
            **{v: median(ms) for v, ms in by.items()},
            "runtime_vs_precompiled": median(by.get("runtime", [])) / median(by.get("precompiled", [])) - 1,
        }
        for k, by in bench.items()
    }
    if all(path.exists() for path in saved.values()):
        a, b = np.load(saved["precompiled"]), np.load(saved["runtime"])
        s["identical_results"] = sorted(a.files) == sorted(b.files) and all(np.array_equal(a[f], b[f]) for f in a.files)
        s["compared_arrays"] = len(a.files)
    s["load_api_mib"] = {
        api: [p["mem_after_load_mib"] - p["mem_before_mib"] for p in probes if p.get("api") == api and not p.get("rc")]
        for api in ("module", "library")
    }
    s["mismatch_vs_numpy"] = [p.get("mismatch_vs_numpy") for p in probes if p.get("mismatch_vs_numpy")]
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, default=Path("."))
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        print(json.dumps(probe(json.loads(args.probe))))
        return 0
    result: dict[str, Any] = {"schema": 1, "ok": False}
    try:
        result = measure(args)
        return 0 if result["ok"] else 1
    except BaseException:
        result["error"] = traceback.format_exc()
        print(result["error"])
        return 1
    finally:
        args.out.mkdir(parents=True, exist_ok=True)
        out = args.out / "nvrtc_h200.json"
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
