"""`slimwheel footprint`: GPU memory and time of importing a CUDA package and of its first call, eager vs lazy.

Each figure comes from a fresh process (module loading is decided when the CUDA context is created, and memory once
taken is not given back), with CUDA_MODULE_LOADING set to EAGER or LAZY. Per mode two processes run: a bare one that
only creates the primary context (the figure every CUDA process pays), and one that creates it, imports the module and
makes the first call. Memory is measured three ways: NVML's device-wide use against the use before the process made
its context; cuMemGetInfo (total - free) deltas within the process over its own bare context; and NVML's per-process
usedGpuMemory. torch's allocator counters would not see the context or the loaded kernels.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from slimwheel.errors import BadInputError, ToolError
from slimwheel.tools import run_tool_status

log = logging.getLogger("slimwheel.footprint")

MODES = ("EAGER", "LAZY")

# Runs in the child process: the same interpreter as slimwheel, so slimwheel.runtime.driver is importable.
_CHILD = r"""
import importlib, json, os, sys, time
from slimwheel.runtime.driver import CudaDriver, Nvml
target, call, device, bare = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
out = {"pid": os.getpid(), "stages": []}
nvml = Nvml.open()
cuda = CudaDriver.open()
if cuda is None:
    print(json.dumps({"error": "no NVIDIA driver (libcuda.so.1) on this machine"})); sys.exit(0)
before = None
if nvml is not None:
    gpus = nvml.gpus()
    before = gpus[device].memory_used if len(gpus) > device else None
def stage(name, t):
    used = cuda.mem_used()
    # The delta against the use before the context compares NVML with NVML: cuMemGetInfo and NVML count reserved
    # memory differently (on the H200 their difference is ~600 MiB), so mixing them gives negative deltas.
    now = nvml.gpus()[device].memory_used if (nvml is not None and before is not None) else None
    out["stages"].append({
        "stage": name, "seconds": t,
        "device_used": used, "delta_vs_before": (now - before) if (now is not None and before is not None) else None,
        "nvml_process": nvml.process_memory(os.getpid(), device) if nvml is not None else None,
    })
t0 = time.perf_counter()
rc = cuda.retain_primary_context(device)
if rc != 0:
    print(json.dumps({"error": f"creating the CUDA context failed (CUresult {rc})"})); sys.exit(0)
stage("context", time.perf_counter() - t0)
if not bare:
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(target)
    except Exception as e:
        print(json.dumps({"error": f"import {target} failed: {type(e).__name__}: {e}"})); sys.exit(0)
    cuda.synchronize()
    stage("import", time.perf_counter() - t0)
    if call:
        env = {"m": mod, target.split(".")[0]: importlib.import_module(target.split(".")[0])}
        t0 = time.perf_counter()
        try:
            eval(call, env)
        except Exception as e:
            print(json.dumps({"error": f"--call {call!r} failed: {type(e).__name__}: {e}"})); sys.exit(0)
        cuda.synchronize()
        stage("first call", time.perf_counter() - t0)
print(json.dumps(out))
"""


@dataclass(frozen=True, kw_only=True)
class Stage:
    stage: str  # context | import | first call
    seconds: float
    device_used: int | None  # bytes, cuMemGetInfo total - free
    delta_vs_before: int | None  # bytes: NVML device-wide use now minus before this process made a context
    nvml_process: int | None  # bytes: NVML usedGpuMemory of this process


@dataclass(frozen=True, kw_only=True)
class Run:
    mode: str  # EAGER | LAZY
    bare: tuple[Stage, ...]
    module: tuple[Stage, ...]


@dataclass(frozen=True, kw_only=True)
class FootprintReport:
    target: str
    call: str | None
    device: int
    runs: tuple[Run, ...]


def _child(target: str, call: str | None, device: int, mode: str, bare: bool, python: str) -> tuple[Stage, ...]:
    env = dict(os.environ)
    env["CUDA_MODULE_LOADING"] = mode
    if python != sys.executable:
        # Another interpreter (the package's environment) still needs slimwheel.runtime.driver (standard library only).
        import slimwheel

        pkg_root = str(Path(slimwheel.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    cmd = [python, "-c", _CHILD, target, call or "", str(device), "1" if bare else "0"]
    what = f"footprint child ({mode}, {'bare' if bare else target})"
    proc = run_tool_status(cmd, what=what, env=env, timeout=600, separate_stderr=True)
    lines = [ln for ln in proc.output.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise ToolError(
            f"footprint child ({mode}, {'bare' if bare else target}) failed (exit {proc.returncode}):\n"
            + "\n".join(proc.stderr.strip().splitlines()[-10:])
        )
    data = json.loads(lines[-1])
    if "error" in data:
        raise ToolError(f"footprint ({mode}): {data['error']}")
    return tuple(Stage(**s) for s in data["stages"])


def measure(
    target: str,
    *,
    call: str | None = None,
    device: int = 0,
    modes: tuple[str, ...] = MODES,
    python: str | None = None,
) -> FootprintReport:
    if not target.replace(".", "").replace("_", "").isalnum():
        raise BadInputError(f"{target!r} is not a module name", hint="give the import name, e.g. faiss or knn")
    if python is not None and shutil.which(python) is None:
        raise BadInputError(f"--python {python}: no such interpreter", hint="give the path of a python executable")
    runs = []
    for mode in modes:
        bare = _child(target, None, device, mode, True, python or sys.executable)
        module = _child(target, call, device, mode, False, python or sys.executable)
        log.debug("%s: bare %s, module %s", mode, bare, module)
        runs.append(Run(mode=mode, bare=bare, module=module))
    return FootprintReport(target=target, call=call, device=device, runs=tuple(runs))


def footprint_to_json(report: FootprintReport) -> dict[str, object]:
    data: dict[str, object] = json.loads(json.dumps({"schema": 1, "units": "bytes, seconds", **asdict(report)}))
    return data
