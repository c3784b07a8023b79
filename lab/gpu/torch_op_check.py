"""examples/torch-op on a GPU beside the machine's own torch: each wheel installed (--no-deps, into its own folder:
torch and its nvidia-* wheels are the machine's), then, in a fresh process per wheel:

- results against a torch reference (alpha * x + beta * y in float32 by torch: bitwise, or within 1e-6 where the
  kernel's fused multiply-add rounds once where torch rounds twice; float64 for the error bound), sizes 0 .. 2**24,
  a non-contiguous input, a side stream, factors that multiply exactly (2, -0.5) and ones that do not (-1.5, 0.75,
  0.3, 3.0); wrong inputs refused with torch's RuntimeError;
- the CUDA libraries mapped (/proc/self/maps): each once, all from the torch installation's own folders (its
  site-packages' nvidia/ wheels or torch/lib), none from the extension's folder;
- GPU memory of the process (nvidia-smi) after CUDA is initialised by torch and after the first call, and the time of
  that call.

    python3 lab/gpu/torch_op_check.py OUT.json WHEEL...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CHILD = r"""
import json, os, re, subprocess, sys, time
import torch

def used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return None
    for line in out.splitlines():
        pid, _, mem = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(mem.strip())
    return None

def device_used_mib():
    free, total = torch.cuda.mem_get_info()
    return (total - free) // 2**20

module = __import__(sys.argv[1])
op = module.axpby
dev = torch.device("cuda")
torch.zeros(1, device=dev)
torch.cuda.synchronize()
mem = {"after_context_process_mib": used_mib(), "after_context_device_mib": device_used_mib()}
x = torch.randn(1 << 20, device=dev)
y = torch.randn(1 << 20, device=dev)
t0 = time.perf_counter()
out = op(x, y, 2.0, -0.5)
torch.cuda.synchronize()
first_call_s = time.perf_counter() - t0
mem.update({"after_first_call_process_mib": used_mib(), "after_first_call_device_mib": device_used_mib(),
            "torch_allocated_mib": torch.cuda.memory_allocated() / 2**20})

cases = []
def case(name, x, y, a, b, stream=None):
    if stream is None:
        got = op(x, y, a, b)
    else:
        with torch.cuda.stream(stream):
            got = op(x, y, a, b)
        stream.synchronize()
    torch.cuda.synchronize()
    ref32 = a * x + b * y
    ref64 = (a * x.double() + b * y.double())
    err = (got.double() - ref64).abs()
    # relative to the terms' size (|a x| + |b y|): the bound of a correctly rounded fused or unfused evaluation is
    # about 1-1.5 eps of it, also where the terms cancel (an error relative to the result would blow up there)
    scale = (abs(a) * x.double().abs() + abs(b) * y.double().abs()).clamp_min(torch.finfo(torch.float32).tiny)
    ulp = (err / (scale * torch.finfo(torch.float32).eps)).max().item() if got.numel() else 0.0
    cases.append({"case": name, "n": x.numel(), "equal_to_torch_fp32": bool(torch.equal(got, ref32.contiguous().view_as(got))),
                  "max_abs_diff_vs_torch_fp32": (got - ref32.contiguous().view_as(got)).abs().max().item() if got.numel() else 0.0,
                  "max_err_vs_fp64_in_eps_of_terms": ulp,
                  "ok": got.shape == x.shape and bool(torch.allclose(got, ref32.contiguous().view_as(got), rtol=2e-7, atol=1e-6))})

for n in (0, 1, 7, 1000, (1 << 20) + 3, 1 << 24):
    a = torch.randn(n, device=dev); b = torch.randn(n, device=dev)
    case(f"n={n} a=2 b=-0.5", a, b, 2.0, -0.5)
    case(f"n={n} a=1 b=0 (copy)", a, b, 1.0, 0.0)
    case(f"n={n} a=0.3 b=3", a, b, 0.3, 3.0)
m = torch.randn(512, 1024, device=dev)
case("non-contiguous (transposed 512x1024)", m.t(), torch.randn(1024, 512, device=dev), 0.25, 3.0)
case("side stream", x, y, -1.5, 0.75, stream=torch.cuda.Stream())
refused = {}
for name, args in (("cpu tensors", (torch.ones(4), torch.ones(4))),
                   ("float64", (torch.ones(4, device=dev, dtype=torch.float64),) * 2),
                   ("size mismatch", (torch.ones(4, device=dev), torch.ones(5, device=dev)))):
    try:
        op(*args, 1.0, 1.0)
        refused[name] = "accepted"
    except RuntimeError as e:
        refused[name] = "RuntimeError: " + str(e).splitlines()[0][:160]

site = os.path.dirname(os.path.dirname(torch.__file__))
ext_dir = os.path.dirname(module.__file__)
paths = sorted({l.split(None, 5)[5].strip() for l in open("/proc/self/maps") if len(l.split(None, 5)) == 6 and ".so" in l})
cuda_re = re.compile(r"^lib(cudart|cublas|cublasLt|nvrtc|nvJitLink|cufft|curand|cusolver|cusparse|cudnn\w*|nccl|nvshmem\w*|cupti)\.so")
cuda = {}
for p in paths:
    base = os.path.basename(p)
    if cuda_re.match(base):
        cuda.setdefault(base, []).append(p)
torch_owned = all(p.startswith((os.path.join(site, "nvidia") + "/", os.path.join(site, "torch") + "/"))
                  for ps in cuda.values() for p in ps)
print(json.dumps({
    "module": sys.argv[1], "torch": torch.__version__, "torch_cuda": torch.version.cuda,
    "gpu": torch.cuda.get_device_name(), "first_call_s": first_call_s, "memory": mem,
    "cases": cases, "all_ok": all(c["ok"] for c in cases) and all(v.startswith("RuntimeError") for v in refused.values()),
    "refused": refused, "extension_file": [p for p in paths if p.startswith(ext_dir)],
    "cuda_libraries_mapped": cuda, "each_once": all(len(v) == 1 for v in cuda.values()),
    "only_torchs_copies": torch_owned and not any(p.startswith(ext_dir) for ps in cuda.values() for p in ps),
}))
"""


def main() -> None:
    out, wheels = Path(sys.argv[1]), [Path(w) for w in sys.argv[2:]]
    results = []
    for wheel in wheels:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-index",
                    "--no-deps",
                    "--no-compile",
                    "--target",
                    tmp,
                    str(wheel),
                ],
                check=True,
            )
            module = next(n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith("__init__.py"))
            env = {**os.environ, "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", "")}
            proc = subprocess.run([sys.executable, "-c", CHILD, module], capture_output=True, text=True, env=env)
            rec = {"wheel": wheel.name, "wheel_bytes": wheel.stat().st_size, "rc": proc.returncode}
            if proc.returncode == 0:
                rec.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            else:
                rec["stderr"] = proc.stderr[-3000:]
            results.append(rec)
            print(json.dumps({k: rec.get(k) for k in ("wheel", "rc", "all_ok", "each_once", "only_torchs_copies")}))
    data = {
        "schema": 1,
        "host": os.uname().nodename,
        "python": sys.version.split()[0],
        "command": " ".join(["python3", *sys.argv]),
        "results": results,
    }
    out.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
