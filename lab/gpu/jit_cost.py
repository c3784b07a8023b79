#!/usr/bin/env python3
"""What a PTX-only CUDA module costs at its first use: the driver's JIT time per module, on this GPU.

    python3 lab/gpu/jit_cost.py .carry/jit/ptx.tar.gz     # -> $OUT/jit_cost.json

Input: PTX files (a folder or a .tar.gz of them), e.g. the k > 256 objects of faiss's slim-jit profile, extracted
with `cuobjdump -xptx all` (lab/faiss/faiss-profiles.py --jit-ptx makes the archive). Each file is loaded with
cuModuleLoadData in a fresh process of its own (modules side by side, one per CPU): first with an empty JIT cache
(what the first use costs a new user; with lazy loading the driver loads, and so compiles, a module at the first use
of one of its kernels), then again from the cache that first load filled (CUDA_CACHE_PATH: what later processes pay).
Needs only the driver (libcuda.so.1, through ctypes).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed with CUresult {rc}")


def load_one(ptx: Path) -> dict[str, float]:
    """In this process: context, then cuModuleLoadData(ptx) timed."""
    cuda = ctypes.CDLL("libcuda.so.1")
    t = time.perf_counter()
    _check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    _check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    _check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    _check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    context_s = time.perf_counter() - t
    data = ptx.read_bytes() + b"\0"
    mod = ctypes.c_void_p()
    t = time.perf_counter()
    _check(cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)), f"cuModuleLoadData({ptx.name})")
    load_s = time.perf_counter() - t
    cuda.cuModuleUnload(mod)
    return {"context_s": round(context_s, 4), "load_s": round(load_s, 4)}


def _fresh(ptx: Path, env: dict[str, str]) -> dict[str, Any]:  # load_one's JSON, or the failure
    p = subprocess.run(
        [sys.executable, __file__, "--one", str(ptx)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    try:
        found: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
        return found
    except (ValueError, IndexError):
        return {"error": (p.stdout + p.stderr)[-2000:], "rc": p.returncode}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, nargs="?")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(load_one(a.one)))
        return 0
    if a.source is None:
        ap.error("give a folder or .tar.gz of PTX files")
    work = Path(tempfile.mkdtemp(prefix="jit-cost-"))
    if a.source.is_file():
        with tarfile.open(a.source) as tf:
            tf.extractall(work, filter="data")
        files = sorted(work.rglob("*.ptx"))
    else:
        files = sorted(a.source.rglob("*.ptx"))
    if not files:
        print(f"jit_cost: no .ptx files in {a.source}", file=sys.stderr)
        return 2
    # Each module in its own process, all at once (one CPU each, on a 16-core machine: the JIT runs on the CPU):
    # first with an empty cache (the JIT, plus writing the cache), then again from that cache.
    from concurrent.futures import ThreadPoolExecutor

    caches = {f: tempfile.mkdtemp(prefix="jit-cache-") for f in files}
    envs = {
        f: dict(os.environ, CUDA_CACHE_PATH=caches[f], CUDA_CACHE_MAXSIZE=str(4 << 30), CUDA_MODULE_LOADING="EAGER")
        for f in files
    }
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 4)) as pool:
        cold = dict(zip(files, pool.map(lambda f: _fresh(f, envs[f]), files), strict=False))
        warm = dict(zip(files, pool.map(lambda f: _fresh(f, envs[f]), files), strict=False))
    rows: list[dict[str, Any]] = []
    for f in files:
        rows.append({"ptx": f.name, "ptx_bytes": f.stat().st_size, "cold": cold[f], "cached": warm[f]})
        if "error" in cold[f]:
            print(f"{f.name}: failed: {cold[f]['error'][-300:]}", flush=True)
            continue
        print(
            f"{f.name:45} {f.stat().st_size / 1e6:7.2f} MB PTX  JIT {cold[f]['load_s']:8.3f} s, from cache "
            f"{warm[f].get('load_s')} s",
            flush=True,
        )
    ok = [r for r in rows if "load_s" in r["cold"]]
    summary = {
        "modules": len(rows),
        "failed": len(rows) - len(ok),
        "cold_total_s": round(sum(r["cold"]["load_s"] for r in ok), 2),
        "cold_max_s": max((r["cold"]["load_s"] for r in ok), default=None),
        "cached_total_s": round(sum(r["cached"].get("load_s", 0) for r in ok), 3),
    }
    smi = shutil.which("nvidia-smi")
    gpu = (
        subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if smi
        else None
    )
    report = {"schema": 1, "gpu": gpu, "summary": summary, "modules": rows}
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = a.out / "jit_cost.json.tmp"
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, a.out / "jit_cost.json")
    print(json.dumps(summary))
    return 0 if not summary["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
