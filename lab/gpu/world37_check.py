#!/usr/bin/env python3
"""Issue 37 item 8 on a real GPU: wheels whose verdict changed, run against a CPU reference.

    python3 lab/gpu/world37_check.py --npp NPP_WHEEL --memory-saver TMS_WHEEL [--out DIR]

- NPP: `slimwheel slim --archs 9.0` of nvidia-npp 13.2.0.93 (whose original failed coverage for 8.0-12.0 over two
  empty sm_75 containers; slimmed, the empty containers are kept as they are). Installed into a folder of its own and
  run in a fresh process with CUDA_MODULE_LOADING=EAGER, so that every CUDA module of every NPP library is loaded
  when the libraries load, a container the slim broke would fail there: all eleven libraries are loaded, then
  nppsAdd_32f, nppsSum_32f (libnpps) and nppiAdd_32f_C1R (libnppial) run on the GPU (device memory through CuPy,
  which the machine has) and are compared with NumPy on the CPU.
- torch-memory-saver 0.0.10: no device code at all (its verdict is "no device code" instead of "runs on no GPU"):
  a tensor made in one of its regions is paused (its GPU memory released) and resumed, and its values after resume are
  compared with a CPU copy made before (CPU backup), under torch on the GPU.

Prints a line per check and writes world37_check.json under --out ($OUT by default). Exit 0 when all pass.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

NPP_LIBS = ("nppc", "nppial", "nppicc", "nppidei", "nppif", "nppig", "nppim", "nppist", "nppisu", "nppitc", "npps")

NPP_RUN = r"""
import ctypes, json, sys
import numpy as np
import cupy as cp

lib = sys.argv[1]
libs = {}
for name in sys.argv[2:]:
    libs[name] = ctypes.CDLL(f"{lib}/lib{name}.so.13", mode=ctypes.RTLD_GLOBAL)

class Ctx(ctypes.Structure):
    _fields_ = [("hStream", ctypes.c_void_p), ("nCudaDeviceId", ctypes.c_int), ("nMultiProcessorCount", ctypes.c_int),
                ("nMaxThreadsPerMultiProcessor", ctypes.c_int), ("nMaxThreadsPerBlock", ctypes.c_int),
                ("nSharedMemPerBlock", ctypes.c_size_t), ("nCudaDevAttrComputeCapabilityMajor", ctypes.c_int),
                ("nCudaDevAttrComputeCapabilityMinor", ctypes.c_int), ("nStreamFlags", ctypes.c_uint),
                ("nReserved0", ctypes.c_int)]

class Size(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int)]

cp.cuda.runtime.setDevice(0)
ctx = Ctx()
assert libs["nppc"].nppGetStreamContext(ctypes.byref(ctx)) == 0
out = {"cc": f"{ctx.nCudaDevAttrComputeCapabilityMajor}.{ctx.nCudaDevAttrComputeCapabilityMinor}"}
rng = np.random.default_rng(37)
n = 1 << 20
a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
da, db, dc = cp.asarray(a), cp.asarray(b), cp.empty(n, dtype=cp.float32)
P = ctypes.c_void_p
st = libs["npps"].nppsAdd_32f_Ctx(P(da.data.ptr), P(db.data.ptr), P(dc.data.ptr), ctypes.c_size_t(n), ctx)
cp.cuda.runtime.deviceSynchronize()
out["nppsAdd_32f"] = {"status": st, "max_abs_err": float(np.abs(cp.asnumpy(dc) - (a + b)).max())}

size = ctypes.c_size_t()
assert libs["npps"].nppsSumGetBufferSize_32f_Ctx(ctypes.c_size_t(n), ctypes.byref(size), ctx) == 0
buf, dsum = cp.empty(max(size.value, 1), dtype=cp.uint8), cp.empty(1, dtype=cp.float32)
st = libs["npps"].nppsSum_32f_Ctx(P(da.data.ptr), ctypes.c_size_t(n), P(dsum.data.ptr), P(buf.data.ptr), ctx)
cp.cuda.runtime.deviceSynchronize()
ref = float(a.astype(np.float64).sum())
out["nppsSum_32f"] = {"status": st, "rel_err": abs(float(cp.asnumpy(dsum)[0]) - ref) / ref}

w, h = 1024, 768
x, y = rng.random((h, w), dtype=np.float32), rng.random((h, w), dtype=np.float32)
dx, dy, dz = cp.asarray(x), cp.asarray(y), cp.empty((h, w), dtype=cp.float32)
step = w * 4
st = libs["nppial"].nppiAdd_32f_C1R_Ctx(P(dx.data.ptr), step, P(dy.data.ptr), step, P(dz.data.ptr), step,
                                         Size(w, h), ctx)
cp.cuda.runtime.deviceSynchronize()
out["nppiAdd_32f_C1R"] = {"status": st, "max_abs_err": float(np.abs(cp.asnumpy(dz) - (x + y)).max())}
print(json.dumps(out))
"""

TMS_RUN = r"""
import json, os, sys
import torch
from torch_memory_saver import torch_memory_saver as saver

out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
saver.hook_mode = "torch"  # torch's pluggable allocator, in process (the default mode wants LD_PRELOAD)
with saver.region(tag="t", enable_cpu_backup=True):
    t = torch.arange(1 << 24, device="cuda", dtype=torch.float32).mul_(0.5)
ref = t.cpu().clone()
torch.cuda.synchronize()
free_before = torch.cuda.mem_get_info()[0]
saver.pause("t")
torch.cuda.synchronize()
free_paused = torch.cuda.mem_get_info()[0]
saver.resume("t")
torch.cuda.synchronize()
out["released_bytes"] = free_paused - free_before
out["equal_after_resume"] = bool(torch.equal(t.cpu(), ref))
with saver.region(tag="scratch"):  # in torch mode every CUDA allocation goes through the hook: keep them in regions
    out["sum_on_gpu_after_resume"] = float(t.double().sum().item())
out["sum_reference_cpu"] = float(ref.double().sum().item())
out["hook_loaded"] = sorted({l.split()[-1].rsplit("/", 1)[-1] for l in open("/proc/self/maps") if "torch_memory_saver_hook" in l})
print(json.dumps(out), flush=True)
os._exit(0)  # the hook refuses frees at interpreter teardown of memory it did not hand out (torch's caches)
"""


def install(wheel: Path, into: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(into), str(wheel)]
    subprocess.run(cmd, check=True)


def run(code: str, args: list[str], env: dict[str, str]) -> tuple[dict[str, Any] | None, str]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    last = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
    return (json.loads(last[0]) if last else None), (proc.stdout[-2000:] + proc.stderr[-4000:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--npp", type=Path, required=True)
    ap.add_argument("--memory-saver", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    a = ap.parse_args()
    record: dict[str, Any] = {"npp_wheel": a.npp.name, "memory_saver_wheel": a.memory_saver.name}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        npp_dir, tms_dir = Path(tmp) / "npp", Path(tmp) / "tms"
        install(a.npp, npp_dir)
        install(a.memory_saver, tms_dir)
        env = {**os.environ, "CUDA_MODULE_LOADING": "EAGER"}
        got, log = run(NPP_RUN, [str(npp_dir / "nvidia" / "cu13" / "lib"), *NPP_LIBS], env)
        npp_ok = bool(
            got
            and all(got[k]["status"] == 0 for k in ("nppsAdd_32f", "nppsSum_32f", "nppiAdd_32f_C1R"))
            and got["nppsAdd_32f"]["max_abs_err"] == 0.0
            and got["nppiAdd_32f_C1R"]["max_abs_err"] == 0.0
            and got["nppsSum_32f"]["rel_err"] < 1e-4
        )
        record["npp"] = {"ok": npp_ok, "result": got, "loading": "EAGER", "log": "" if npp_ok else log}
        print(f"NPP slim 9.0 (EAGER, 11 libraries): {'pass' if npp_ok else 'FAIL'} {json.dumps(got)}")
        ok &= npp_ok
        tenv = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tms_dir), os.environ.get("PYTHONPATH")]))}
        got, log = run(TMS_RUN, [], tenv)
        tms_ok = bool(got and got["equal_after_resume"] and got["released_bytes"] >= (1 << 26))
        record["memory_saver"] = {"ok": tms_ok, "result": got, "log": "" if tms_ok else log}
        print(f"torch-memory-saver pause/resume: {'pass' if tms_ok else 'FAIL'} {json.dumps(got)}")
        ok &= tms_ok
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "world37_check.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
