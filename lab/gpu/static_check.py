#!/usr/bin/env python3
"""A CUDA 11.8 statically linked cuBLAS library on a real GPU (driver 580): it runs, and its results are right.

    python3 lab/gpu/static_check.py .carry/static/static_knn-0.1.0-py3-none-manylinux_2_34_x86_64.whl

Input: the static-knn wheel built here by `slimwheel build tests/packages/static-knn --link static` with CUDA 11.8
(cuBLAS, cuBLASLt and cudart linked in, nvprune'd to the plan; no Requires-Dist). No network: the wheel is installed
with `pip install --no-index --no-deps --target` into a folder on PYTHONPATH, run by the machine's python3
(torch and the nvidia-* cu13 wheels live there).

Checks, each in a fresh process:
  A. alone: versions() reports CUDA runtime 11080 and cuBLAS 11.x (the static copy, on a driver of CUDA 13);
     sgemm (128 x 96 x 64) matches a float64 reference; knn1 finds the same neighbours as a brute-force search;
     the process maps no libcublas / libcudart file at all (all of it is inside _static_knn.so);
  B. next to torch: torch first (its cuBLAS 13 from the nvidia wheels runs a matmul), then the static library:
     both give right answers, the process maps torch's libcublas.so.13 and still no cuBLAS 11 file (no symbol clash).
All results: $OUT/static_h200.json (or --out). A short summary is printed; the exit status is 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROBE = r"""
import json, random, sys, time
with_torch = sys.argv[1] == "1"
out = {}
if with_torch:
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float64)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float64)
    ref = (a.cpu() @ b.cpu())
    out["torch_matmul_max_err"] = float(((a @ b).cpu() - ref).abs().max())
t0 = time.monotonic()
import static_knn
out["import_s"] = round(time.monotonic() - t0, 4)
t0 = time.monotonic()
rt, cb = static_knn.versions()
out["first_call_s"] = round(time.monotonic() - t0, 4)
out["cuda_runtime"], out["cublas"] = rt, cb

rng = random.Random(7)
m, n, k = 128, 96, 64
A = [rng.uniform(-1, 1) for _ in range(m * k)]
B = [rng.uniform(-1, 1) for _ in range(k * n)]
C = static_knn.sgemm(A, B, m, n, k)
err = 0.0
for i in range(m):
    row = A[i * k:(i + 1) * k]
    for j in range(n):
        ref = sum(row[p] * B[p * n + j] for p in range(k))
        err = max(err, abs(C[i * n + j] - ref))
out["sgemm_max_abs_err"] = err

d, npts, nq = 16, 2000, 40
X = [rng.uniform(0, 1) for _ in range(npts * d)]
Q = [rng.uniform(0, 1) for _ in range(nq * d)]
idx, dist = static_knn.knn1(X, npts, Q, nq, d)
agree, derr = 0, 0.0
for j in range(nq):
    q = Q[j * d:(j + 1) * d]
    best = min(range(npts), key=lambda i: sum((X[i * d + t] - q[t]) ** 2 for t in range(d)))
    bd = sum((X[best * d + t] - q[t]) ** 2 for t in range(d))
    # A tie within float32 rounding may pick another point at the same distance.
    agree += idx[j] == best or abs(dist[j] - bd) < 1e-4
    derr = max(derr, abs(dist[j] - bd))
out["knn_agree"], out["knn_queries"], out["knn_max_dist_err"] = agree, nq, derr
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if len(l.split()) >= 6 and ".so" in l.split()[-1]})
out["cuda_libs_mapped"] = [p for p in maps if any(s in p for s in ("libcublas", "libcudart", "libcuda.so"))]
print(json.dumps(out))
"""


def probe(site: Path, with_torch: bool) -> dict[str, Any]:  # what PROBE prints (JSON)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "1" if with_torch else "0"], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:]}
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def verdict(r: dict[str, Any], with_torch: bool) -> list[str]:
    problems = []
    if "error" in r:
        return [f"the probe failed: {r['error']}"]
    if r["cuda_runtime"] != 11080:
        problems.append(f"CUDA runtime {r['cuda_runtime']}, expected the static 11.8 (11080)")
    if not 110000 <= int(r["cublas"]) < 120000:
        problems.append(f"cuBLAS version {r['cublas']}, expected the static 11.x")
    if float(r["sgemm_max_abs_err"]) > 1e-3:
        problems.append(f"sgemm differs from the reference by {r['sgemm_max_abs_err']}")
    if r["knn_agree"] != r["knn_queries"]:
        problems.append(f"knn1 agrees with brute force on {r['knn_agree']} of {r['knn_queries']} queries")
    mapped = [p for p in r["cuda_libs_mapped"] if "libcuda.so" not in p]
    cu11 = [p for p in mapped if ".so.11" in p]
    if cu11:
        problems.append(f"a CUDA 11 library file is mapped: {cu11} (the static link should need none)")
    if not with_torch and mapped:
        problems.append(f"CUDA library files mapped without torch: {mapped}")
    if with_torch and float(r.get("torch_matmul_max_err", 1.0)) > 1e-9:
        problems.append(f"torch's matmul is off by {r.get('torch_matmul_max_err')}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "static_h200.json")
    args = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        # The machine's python3 is itself a venv holding torch: a venv made from it would not see torch, so the
        # wheel goes into a folder on PYTHONPATH and runs under this very interpreter.
        site = Path(tmp) / "site"
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
                str(site),
                str(args.wheel),
            ],
            check=True,
        )
        try:
            gpu = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        except FileNotFoundError:
            gpu = "no nvidia-smi"
        results = {"alone": probe(site, False), "with_torch": probe(site, True)}
    problems = {k: verdict(v, k == "with_torch") for k, v in results.items()}
    data = {
        "schema": 1,
        "wheel": args.wheel.name,
        "gpu": gpu,
        "results": results,
        "problems": problems,
        "ok": not any(problems.values()),
        "seconds": round(time.monotonic() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"static check on {data['gpu']}: {'OK' if data['ok'] else 'FAILED'} ({data['seconds']} s)")
    for name, r in results.items():
        if "error" in r:
            print(f"  {name}: error: {str(r['error'])[-500:]}")
            continue
        print(
            f"  {name}: runtime {r['cuda_runtime']}, cuBLAS {r['cublas']}, sgemm err {float(r['sgemm_max_abs_err']):.2e}, "
            f"knn {r['knn_agree']}/{r['knn_queries']}, import {r['import_s']} s, first call {r['first_call_s']} s, "
            f"CUDA files mapped: {[Path(str(p)).name for p in r['cuda_libs_mapped']]}"
        )
        for p in problems[name]:
            print(f"    FAIL: {p}")
    print(f"written: {args.out}")
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
