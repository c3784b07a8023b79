#!/usr/bin/env python3
"""On the GPU machine: does every probe run exactly when slimwheel's size-report said it would?

Inputs: .carry/inspect/*.so and predictions.json from lab/gpu/build_inspect_probes.py. Each probe runs in its own
process (a failed module load must not poison the next). Result: $OUT/inspect_check.json; exit 1 on any mismatch.

    python3 lab/gpu/inspect_check.py
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

NO_KERNEL_IMAGE = 209
HERE = Path(__file__).resolve().parents[2] / ".carry" / "inspect"


def probe(path: str) -> int:
    lib = ctypes.CDLL(path)
    lib.slimwheel_probe.restype = ctypes.c_int
    return int(lib.slimwheel_probe())


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(probe(sys.argv[2]))
        return 0
    preds = json.loads((HERE / "predictions.json").read_text())["probes"]
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except FileNotFoundError:
        gpu = "no nvidia-smi"
    results: dict[str, dict[str, object]] = {}
    ok = True
    # Eager loading loads every module at start-up (the device-link one too): predictions must hold both ways.
    for loading in ("LAZY", "EAGER"):
        env = {**os.environ, "CUDA_MODULE_LOADING": loading}
        for name, p in sorted(preds.items()):
            r = subprocess.run(
                [sys.executable, __file__, "--one", str(HERE / f"{name}.so")],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
                env=env,
            )
            rc = int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else None
            ran = rc == 0
            # "none" must fail for the right reason: 209, cudaErrorNoKernelImageForDevice.
            match = (rc == 0) if p["predicted"] != "none" else (rc == NO_KERNEL_IMAGE)
            ok &= match
            results[f"{name}/{loading.lower()}"] = {
                **p,
                "loading": loading,
                "cuda_status": rc,
                "ran": ran,
                "match": match,
                "stderr": r.stderr[-500:],
            }
            print(
                f"{'OK      ' if match else 'MISMATCH'} {loading:5} {name}: predicted {p['predicted']}, "
                f"status {rc} ({', '.join(p['entries'])})"
            )
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "inspect_check.json").write_text(
        json.dumps({"schema": 1, "gpu": gpu, "ok": ok, "probes": results}, indent=2) + "\n"
    )
    print(f"gpu: {gpu}; {'all predictions held' if ok else 'MISMATCHES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
