#!/usr/bin/env python3
"""GPU check of the knn example wheel (examples/knn): results against NumPy, timings, libraries loaded.

Run on a machine with an NVIDIA GPU, in an environment that has numpy and the CUDA 13 nvidia-* wheels
(nvidia-cuda-runtime, nvidia-cublas):

    python lab/gpu/knn_check.py --wheel .carry/knn_cuda_example-0.1.0-cp312-abi3-linux_x86_64.whl

--wheel installs the wheel first (pip --no-deps, offline). Writes $OUT/knn_h200.json (or ./knn_h200.json), prints a
summary, and exits 1 when any result is wrong.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def load_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("knn_reference", REPO / "examples/knn/tests/reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def loaded_libraries() -> dict[str, str]:
    """The CUDA libraries this process mapped, by file name (which copy the RUNPATH or a loader found)."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        name = os.path.basename(path)
        if name.startswith(("libcudart", "libcublas", "libnvJitLink", "libcuda.so")):
            out[name] = path
    return out


def gpu_description() -> dict[str, str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    r = subprocess.run(
        [smi, "--query-gpu=name,compute_cap,driver_version,memory.total", "--format=csv,noheader"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    fields = [f.strip() for f in r.stdout.splitlines()[0].split(",")] if r.returncode == 0 and r.stdout else []
    return dict(zip(("name", "compute_cap", "driver", "memory"), fields, strict=False))


def timed(fn: Callable[[], T], repeats: int) -> tuple[T, float, float]:
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return result, first, best


def no_device_error() -> dict[str, Any]:
    """With no visible device (CUDA_VISIBLE_DEVICES empty) a search must raise RuntimeError, not crash."""
    code = (
        "import numpy as np, knn\n"
        "try:\n"
        "    knn.search(np.zeros((10, 4), np.float32), np.zeros((2, 4), np.float32), 3)\n"
        "    print('NO ERROR')\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError:', e)\n"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120)
    ok = r.returncode == 0 and r.stdout.startswith("RuntimeError: CUDA error")
    return {"ok": ok, "returncode": r.returncode, "stdout": r.stdout.strip(), "stderr": r.stderr.strip()[-2000:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help="install this knn wheel first (pip --no-deps --force-reinstall)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = ap.parse_args()

    result: dict[str, Any] = {"schema": 1, "ok": False}  # the JSON record
    try:
        if args.wheel:
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--no-deps",
                    "--force-reinstall",
                    "--no-index",
                    str(args.wheel),
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=300,
            )
            result["wheel"] = {
                "name": args.wheel.name,
                "returncode": r.returncode,
                "log": (r.stdout + r.stderr)[-2000:],
            }
            if r.returncode != 0:
                print(result["wheel"]["log"])
                return 1
        return check(result)
    except Exception:
        result["error"] = traceback.format_exc()
        print(result["error"])
        return 1
    finally:
        args.out.mkdir(parents=True, exist_ok=True)
        out = args.out / "knn_h200.json"
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, out)
        print(f"{'OK' if result['ok'] else 'FAILED'}; wrote {out}")


def check(result: dict[str, Any]) -> int:
    t0 = time.perf_counter()
    import knn  # type: ignore[import-not-found]  # the example's wheel, installed on the GPU machine

    import_s = time.perf_counter() - t0
    ref = load_reference()
    rng = np.random.default_rng(0)
    result.update(
        {
            "module": knn._knn.__file__,
            "import_s": round(import_s, 4),
            "runtime": knn.runtime_info(),
            "device_count": knn.device_count(),
            "gpu": gpu_description(),
        }
    )
    cases: list[dict[str, Any]] = []
    failed = False

    n, d, m = 20000, 64, 100
    db = rng.standard_normal((n, d), dtype=np.float32)
    q = rng.standard_normal((m, d), dtype=np.float32)
    for k in (1, 8, 32, 64, 128, 5, 100):
        (dist, idx), first, best = timed(functools.partial(knn.search, db, q, k), repeats=3)
        problems = ref.mismatches(db, q, k, dist, idx)
        failed |= bool(problems)
        cases.append(
            {
                "case": f"random {n}x{d}, {m} queries",
                "k": k,
                "ok": not problems,
                "problems": problems[:5],
                "first_call_s": round(first, 5),
                "best_s": round(best, 5),
            }
        )
    result["libraries"] = loaded_libraries()

    base = rng.integers(-3, 4, size=(2000, 16)).astype(np.float32)
    tdb = np.concatenate([base, base, base])
    tq = rng.integers(-3, 4, size=(50, 16)).astype(np.float32)
    for k in (8, 64):
        dist, idx = knn.search(tdb, tq, k)
        problems = ref.mismatches(tdb, tq, k, dist, idx)
        failed |= bool(problems)
        cases.append(
            {"case": "ties: integer data, every row three times", "k": k, "ok": not problems, "problems": problems[:5]}
        )

    big = rng.standard_normal((200_000, 16), dtype=np.float32)
    bq = rng.standard_normal((350, 16), dtype=np.float32)
    (dist, idx), first, best = timed(lambda: knn.search(big, bq, 32), repeats=2)
    sample = np.r_[0:10, 340:350]
    problems = ref.mismatches(big, bq[sample], 32, dist[sample], idx[sample])
    failed |= bool(problems)
    cases.append(
        {
            "case": "200000x16, 350 queries (two query chunks)",
            "k": 32,
            "ok": not problems,
            "problems": problems[:5],
            "first_call_s": round(first, 5),
            "best_s": round(best, 5),
        }
    )
    result["cases"] = cases

    result["no_visible_device"] = nodev = no_device_error()
    failed |= not nodev["ok"]

    tests_dir = REPO / "examples/knn/tests"
    if importlib.util.find_spec("pytest"):
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests_dir)],
            check=False,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tests_dir,
        )
        result["pytest"] = {"returncode": r.returncode, "tail": r.stdout.strip().splitlines()[-3:]}
        failed |= r.returncode != 0
    result["ok"] = not failed

    print(
        f"knn {knn._knn.__file__}: {result['runtime']}, GPU {result['gpu'].get('name', '?')} "
        f"(CC {result['gpu'].get('compute_cap', '?')}), import {import_s:.3f} s"
    )
    for name, path in sorted(result["libraries"].items()):
        print(f"  loaded {name}: {path}")
    for c in cases:
        timing = f"  first {c['first_call_s']:.4f} s, best {c['best_s']:.4f} s" if "best_s" in c else ""
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['case']}, k={c['k']}{timing}")
        for p in c["problems"]:
            print(f"       {p}")
    print(f"  {'ok  ' if nodev['ok'] else 'FAIL'} no visible device -> {nodev['stdout'] or nodev['stderr'][-300:]}")
    if "pytest" in result:
        print(
            f"  pytest examples/knn/tests: exit {result['pytest']['returncode']}: {' '.join(result['pytest']['tail'])}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
