"""Measure what each CUDA 13 release's nvcc targets, for slimwheel/cuda/versions.py's tables.

For every release 13.0 ... 13.5: download its nvidia-cuda-nvcc wheel (no dependencies, ~60 MB each) and run
`nvcc --list-gpu-arch`; for the releases slimwheel has assembled in its cache (`slimwheel toolkit --cuda 13.N`), also
the PTX ISA version that `nvcc -ptx` writes. Writes tests/data/cuda13-archs.json.
    python lab/bench/cuda13-archs.py [--out tests/data/cuda13-archs.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from slimwheel.cuda.versions import CUDA13_RELEASES
from slimwheel.fsutil import cache_dir, write_text_atomic

KERNEL = "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"


def list_archs(nvcc: Path) -> list[str]:
    out = subprocess.run([str(nvcc), "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout
    return sorted({m for m in re.findall(r"compute_(\d+)", out)}, key=int)


def nvcc_from_wheel(release: str, work: Path) -> tuple[str, Path]:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(work),
            f"nvidia-cuda-nvcc=={release}.*",
        ],
        check=True,
    )
    wheel = next(work.glob(f"nvidia_cuda_nvcc-{release}.*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith("/bin/nvcc"))
        target = work / release / "nvcc"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zf.read(name))
    target.chmod(0o755)
    return wheel.name.split("-")[1], target


def ptx_isa(root: Path, work: Path) -> str | None:
    nvcc = root / "bin" / "nvcc"
    if not nvcc.is_file():
        return None
    src = work / "k.cu"
    src.write_text(KERNEL)
    out = work / "k.ptx"
    subprocess.run([str(nvcc), "-ptx", "-arch=compute_90", str(src), "-o", str(out)], check=True)
    m = re.search(r"^\.version (\d+\.\d+)", out.read_text(), re.M)
    return m.group(1) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("tests/data/cuda13-archs.json"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for release in map(str, CUDA13_RELEASES):
            work = Path(tmp) / release
            work.mkdir()
            version, nvcc = nvcc_from_wheel(release, work)
            compute = list_archs(nvcc)
            isa = ptx_isa(cache_dir() / "toolkits" / f"cuda-{release}", work)
            rows.append({"release": release, "nvcc_wheel": version, "compute": compute, "ptx_isa": isa})
            print(
                f"CUDA {release} (nvcc {version}): compute_{', compute_'.join(compute)}; "
                f"PTX ISA {isa or 'not measured (no assembled toolkit)'}"
            )
    doc = {
        "schema": 1,
        "command": "python lab/bench/cuda13-archs.py",
        "machine": f"{platform.node()} ({platform.machine()}, {platform.system()})",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "releases": rows,
    }
    write_text_atomic(args.out, json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
