#!/usr/bin/env python3
"""Build the GPU probes for lab/gpu/inspect_check.py (run HERE, not on the GPU machine; needs nvcc 13.0).

Each probe is tests/packages/fatbin-fixtures/saxpy.cu built as a shared library (static cudart, so it needs only the
driver) with one set of targets and one fatbin compression. slimwheel predicts from the fatbin alone how a CC 9.0 GPU
(H100/H200) runs it: SASS, PTX JIT, or not at all. The predictions go beside the probes in .carry/inspect/; the GPU
script checks them against what really happens.

    python lab/gpu/build_inspect_probes.py        # writes .carry/inspect/*.so and predictions.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion
from slimwheel.inspect.report import module_coverage
from slimwheel.inspect.scan import inspect_binary
from slimwheel.toolkit import ensure_toolkit

SRC = REPO / "tests" / "packages" / "fatbin-fixtures" / "saxpy.cu"
OUT = REPO / ".carry" / "inspect"
PROBES = {
    "sass80": ["-gencode=arch=compute_80,code=sm_80"],
    "sass90a_size": ["-gencode=arch=compute_90a,code=sm_90a", "--compress-mode=size"],
    "ptx90_speed_lz4": ["-gencode=arch=compute_90,code=compute_90", "--compress-mode=speed"],
    "sass90_none": ["-gencode=arch=compute_90,code=sm_90", "--compress-mode=none"],
    "ptx80": ["-gencode=arch=compute_80,code=compute_80"],
    "ptx120": ["-gencode=arch=compute_120,code=compute_120"],
    "sass100f": ["-gencode=arch=compute_100f,code=sm_100f"],
    "sass75_ptx75": ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_75,code=compute_75"],
    "sass100a_ptx90a": ["-gencode=arch=compute_100a,code=sm_100a", "-gencode=arch=compute_90a,code=compute_90a"],
}
GPU = CC(9, 0)


def main() -> int:
    tk = ensure_toolkit(CudaVersion(13, 0))
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **tk.env}
    predictions = {}
    for name, flags in PROBES.items():
        so = OUT / f"{name}.so"
        cmd = [
            str(tk.nvcc),
            "-shared",
            "-Xcompiler=-fPIC",
            "-cudart=static",
            *flags,
            *(f"-I{d}" for d in tk.include_dirs),
            *(f"-L{d}" for d in tk.lib_dirs),
            "-o",
            str(so),
            str(SRC),
        ]
        subprocess.run(["nice", "-n", "10", *cmd], env=env, check=True)
        elf = inspect_binary(so)
        cov, _ = module_coverage((elf,), (GPU,))
        how = "sass" if cov.native else "ptx" if cov.ptx_only else "none"
        entries = [f"{e.kind} {e.arch} {e.compression}" for fb in elf.fatbins for e in fb.entries]
        predictions[name] = {"cc": str(GPU), "predicted": how, "entries": entries}
        print(f"{name}: {', '.join(entries)} -> CC {GPU}: {how}")
    (OUT / "predictions.json").write_text(json.dumps({"schema": 1, "probes": predictions}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
