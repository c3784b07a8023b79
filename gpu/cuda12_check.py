"""On the GPU machine: run the CUDA 12.4 probes built by gpu/build_cuda12_probe.sh (SASS sm_80+sm_90, and PTX-only
compute_80 that the driver must JIT), write $OUT/cuda12_check.json, print a summary.

    python3 gpu/cuda12_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
results = {"schema": 1, "probes": {}}
ok = True
for name in ("probe_sass", "probe_ptx"):
    exe = root / ".carry" / "cuda12" / name
    if not exe.is_file():
        results["probes"][name] = {"ok": False, "error": f"{exe} missing: run gpu/build_cuda12_probe.sh first"}
        ok = False
        continue
    exe.chmod(0o755)
    env = {**os.environ, "CUDA_CACHE_DISABLE": "1"}  # force a real JIT of the PTX, not a cached cubin
    proc = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    try:
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        res = {"ok": False, "error": proc.stdout + proc.stderr}
    res["exit"] = proc.returncode
    results["probes"][name] = res
    ok = ok and res.get("ok") is True and proc.returncode == 0
results["ok"] = ok
out = Path(os.environ.get("OUT", "."))
out.mkdir(parents=True, exist_ok=True)
(out / "cuda12_check.json").write_text(json.dumps(results, indent=2) + "\n")
for name, res in results["probes"].items():
    print(f"{name}: ok={res.get('ok')} device={res.get('device')} cc={res.get('cc')} runtime={res.get('runtime')} "
          f"driver={res.get('driver')} error={res.get('error')}")
print("cuda12_check:", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
