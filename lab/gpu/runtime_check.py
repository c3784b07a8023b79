#!/usr/bin/env python3
"""The run-time loader on a real GPU: one copy of each CUDA library with torch, the wheel folder's copy without it.

    python3 lab/gpu/runtime_check.py .carry/knn/knn_cuda_example-0.1.0-cp312-abi3-manylinux_2_28_x86_64.whl

Input: a wheel repaired by `slimwheel repair` (dynamic link mode, with the loader), e.g. the examples/knn wheel built
by `slimwheel build examples/knn`. Needs, on the GPU machine: python3 with torch (CUDA 13 build) and the nvidia-* cu13
wheels installed, numpy. No network: the wheel is installed with `pip install --no-index --no-deps --target` into a temporary
folder put on PYTHONPATH, so the machine's site-packages (torch, the nvidia-* wheels) is the one both torch and the
wheel use.

Checks, each in a fresh process:
  A. torch first (a matmul loads its cuBLAS), then the wheel and one call: the process maps exactly one libcudart and
     one libcublas, torch's, and the loader reports them as already loaded;
  B. the wheel alone, one call: libcudart/libcublas come from a nvidia/cu13/lib folder of site-packages, via "wheel";
  C. `slimwheel doctor` on the wheel (driver, GPUs, SASS/PTX coverage of each GPU, where the libraries resolve);
  D. footprint: GPU memory and time of import + first call, CUDA_MODULE_LOADING=EAGER vs LAZY, each next to a bare
     context measured in the same run.
All results: $OUT/runtime_h200.json (or --out). A short summary is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

PROBE = r"""
import json, os, sys, importlib
with_torch = sys.argv[1] == "1"
module, call = sys.argv[2], sys.argv[3]
if with_torch:
    import torch
    a = torch.ones(64, 64, device="cuda")
    (a @ a).sum().item()   # loads torch's cuBLAS
mod = importlib.import_module(module)
result = None
if call:
    r = eval(call, {module: mod, "m": mod})
    result = repr(type(r))
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if len(l.split()) >= 6 and ".so" in l.split()[-1]})
state = None
for name in (module + "._slimwheel_loader", "_slimwheel_loader_" + module):
    if name in sys.modules:
        state = sys.modules[name].STATE
print(json.dumps({"maps": maps, "state": state, "call_result": result}))
"""


def top_module(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/")[0] for n in zf.namelist()}
    mods = sorted(t for t in tops if not t.endswith((".dist-info", ".libs", ".data", ".slimwheel")))
    names = [m[:-3] if m.endswith(".py") else m.split(".")[0] for m in mods]
    return names[0]


def cuda_libs(maps: list[str]) -> dict[str, list[str]]:
    def pick(stem: str) -> list[str]:
        return [p for p in maps if os.path.basename(p).startswith(stem)]

    return {"libcudart": pick("libcudart.so"), "libcublas": pick("libcublas.so"), "libcublasLt": pick("libcublasLt.so")}


def run_probe(python: str, module: str, call: str, with_torch: bool) -> dict[str, Any]:  # a JSON record
    t0 = time.perf_counter()
    proc = subprocess.run(
        [python, "-c", PROBE, "1" if with_torch else "0", module, call],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    out: dict[str, Any] = {"rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 3)}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        out["stderr"] = proc.stderr[-4000:]
        return out
    data = json.loads(lines[-1])
    out.update(libs=cuda_libs(data["maps"]), loader_state=data["state"], call_result=data["call_result"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--module", help="import name (default: the wheel's top-level package)")
    ap.add_argument("--call", default=None, help="first call, a Python expression with the module bound to its name")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "runtime_h200.json")
    args = ap.parse_args()
    wheel = args.wheel.resolve()
    module = args.module or top_module(wheel)
    call = args.call
    if call is None and module == "knn":
        np = "__import__('numpy')"
        call = f"knn.search({np}.random.rand(20000, 64), {np}.random.rand(100, 64), k=8)"
    result: dict[str, Any] = {"schema": 1, "wheel": str(wheel), "module": module, "call": call, "python": sys.version}

    # --target, not a venv: the interpreter's own site-packages (torch, the nvidia-* wheels) stays exactly as it is,
    # whether python3 is a system Python or itself a virtual environment.
    target = Path(tempfile.mkdtemp(prefix="slimwheel-rt-")) / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    result["install"] = {"rc": pip.returncode, "target": str(target), "stderr": pip.stderr[-2000:]}
    # slimwheel's doctor reads the wheel with pyelftools and packaging; the GPU machine may lack them (no network):
    # .carry/runtime-deps/ holds their wheels.
    probe = subprocess.run([sys.executable, "-c", "import elftools, packaging"], capture_output=True, check=False)
    deps = sorted((REPO / ".carry" / "runtime-deps").glob("*.whl"))
    if probe.returncode != 0 and deps:
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
                str(target),
                *map(str, deps),
            ],
            check=False,
        )
    old_pp = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), str(REPO), old_pp) if p)
    py = sys.executable

    a = run_probe(py, module, call or "", True)
    b = run_probe(py, module, call or "", False)
    result["with_torch"] = a
    result["alone"] = b

    def one_each(r: dict[str, Any]) -> bool:
        libs = r.get("libs") or {}
        return len(libs.get("libcudart", [])) == 1 and len(libs.get("libcublas", [])) == 1

    result["checks"] = {
        "with_torch_one_cudart_one_cublas": one_each(a),
        "with_torch_loader_reused": bool(a.get("loader_state"))
        and all(r["via"] == "already-loaded" for r in a["loader_state"]["libraries"]),
        "alone_from_wheel_folder": one_each(b)
        and all("/nvidia/cu13/lib/" in p for p in b["libs"]["libcudart"] + b["libs"]["libcublas"]),
        "alone_loader_via_wheel": bool(b.get("loader_state"))
        and all(r["via"] == "wheel" for r in b["loader_state"]["libraries"]),
    }

    sys.path[:0] = [str(target)]
    from slimwheel.doctor import doctor_to_json, run_doctor
    from slimwheel.footprint import footprint_to_json, measure

    try:
        result["doctor"] = doctor_to_json(run_doctor(str(wheel)))
    except Exception as e:  # the run must still record the rest
        result["doctor"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        result["footprint"] = footprint_to_json(measure(module, call=call, python=py))
    except Exception as e:
        result["footprint"] = {"error": f"{type(e).__name__}: {e}"}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, args.out)

    print(f"wheel: {wheel.name}  module: {module}")
    for k, v in result["checks"].items():
        print(f"  {'ok  ' if v else 'FAIL'} {k}")
    for label, r in (("with torch", a), ("alone", b)):
        libs = r.get("libs") or {}
        print(
            f"  {label}: cudart {libs.get('libcudart')} cublas {libs.get('libcublas')}"
            + (f"  stderr: {r['stderr'][-300:]}" if "stderr" in r else "")
        )
    doc = result["doctor"]
    if "gpus" in doc:
        print(
            f"  doctor: driver {doc['driver_version']} (CUDA {doc['driver_cuda']}); "
            + "; ".join(f"GPU {g['index']} {g['name']} CC {g['cc']}: {g['served_by']}" for g in doc["gpus"])
        )
    else:
        print(f"  doctor: {doc}")
    fp = result["footprint"]
    if "runs" in fp:

        def mib(v: int | None) -> str:
            return "-" if v is None else f"{v / 2**20:.0f}"

        for run in fp["runs"]:
            ctx = run["bare"][-1]
            print(
                f"  footprint {run['mode']}: bare context {mib(ctx['delta_vs_before'])} MiB (device delta), "
                f"{mib(ctx['nvml_process'])} MiB (NVML process)"
            )
            own = run["module"][0]["device_used"]
            for s in run["module"]:
                over = None if own is None or s["device_used"] is None else s["device_used"] - own
                print(
                    f"    {s['stage']:<10} {s['seconds']:.3f} s  device delta {mib(s['delta_vs_before'])} MiB  "
                    f"over own context {mib(over)} MiB  NVML process {mib(s['nvml_process'])} MiB"
                )
    else:
        print(f"  footprint: {fp}")
    print(f"results: {args.out}")
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
