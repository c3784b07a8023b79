#!/usr/bin/env python3
"""What device LTO (`-rdc=true -dlto`) saves on faiss's k-selection kernels: issue 11's "did it pay" for one cut.

The 24 WarpSelect/BlockSelect files of a faiss 1.15 tree are compiled for one architecture two ways: as usual (one
cubin per object) and as LTO IR, device-linked with `nvcc -dlink -dlto` into one cubin. The SASS bytes (the
uncompressed cubins that `cuobjdump -xelf` extracts) are summed and compared. Writes results/faiss-dlto-probe.json.

    python3 scripts/faiss-dlto-probe.py --faiss-src DIR [--toolkit PREFIX] [--arch 90] [--work DIR] [--reuse]

--faiss-src: a faiss checkout (its faiss/gpu/utils/{warpselect,blockselect} are read); --toolkit: a CUDA prefix
(default: slimwheel's CUDA 13.0 from PyPI in the cache); --reuse keeps objects already in --work (same flags).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from slimwheel.fsutil import write_text_atomic  # noqa: E402

# faiss's own flags for its CUDA objects (faiss/gpu/CMakeLists.txt), without its -Xfatbin=-compress-all: the
# comparison is of SASS bytes before compression.
FLAGS = ["-O3", "-DNDEBUG", "-std=c++20", "-Xcompiler=-fPIC", "--expt-extended-lambda", "--expt-relaxed-constexpr"]


def sources(src: Path) -> list[Path]:
    utils = src / "faiss" / "gpu" / "utils"
    files = sorted(utils.glob("warpselect/*.cu")) + sorted(utils.glob("blockselect/*.cu"))
    files += [utils / "WarpSelectFloat.cu", utils / "BlockSelectFloat.cu"]
    missing = [f for f in files if not f.is_file()]
    if missing or len(files) < 3:
        sys.exit(f"faiss-dlto-probe: {src}: not a faiss tree with faiss/gpu/utils/warpselect ({missing[:2]})")
    return files


def cubin_bytes(cuobjdump: Path, objects: list[Path]) -> tuple[int, int]:
    """(cubins, their total bytes) that cuobjdump extracts from the objects' fatbins."""
    with tempfile.TemporaryDirectory() as d:
        for o in objects:
            subprocess.run([str(cuobjdump), "-xelf", "all", str(o.resolve())], cwd=d, check=True, capture_output=True)
        cubins = list(Path(d).glob("*.cubin"))
        return len(cubins), sum(c.stat().st_size for c in cubins)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--faiss-src", type=Path, required=True)
    ap.add_argument("--toolkit", type=Path, default=Path.home() / ".cache" / "slimwheel" / "toolkits" / "cuda-13.0")
    ap.add_argument("--arch", default="90")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "faiss-dlto-probe.json")
    a = ap.parse_args(argv)
    nvcc, cuobjdump = a.toolkit / "bin" / "nvcc", a.toolkit / "bin" / "cuobjdump"
    if not nvcc.is_file():
        sys.exit(f"faiss-dlto-probe: {nvcc}: no nvcc (pass --toolkit)")
    work = a.work or Path(tempfile.mkdtemp(prefix="faiss-dlto-"))
    (work / "reg").mkdir(parents=True, exist_ok=True)
    (work / "lto").mkdir(exist_ok=True)
    files = sources(a.faiss_src)
    inc = ["-I", str(a.faiss_src), "-isystem", str(a.toolkit / "include"), "-isystem", str(a.toolkit / "include" / "cccl")]

    def compile_one(f: Path) -> float:
        name = f"{f.parent.name}_{f.stem}.o"
        t = time.monotonic()
        for kind, code in (("reg", [f"-gencode=arch=compute_{a.arch},code=sm_{a.arch}"]),
                           ("lto", [f"-gencode=arch=compute_{a.arch},code=lto_{a.arch}", "-rdc=true"])):
            out = work / kind / name
            if not (a.reuse and out.is_file()):
                subprocess.run(["nice", "-n", "5", str(nvcc), *FLAGS, *inc, *code, "-c", str(f), "-o", str(out)],
                               check=True)  # fmt: skip
        return time.monotonic() - t

    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(compile_one, files))
    t_compile = time.monotonic() - t0
    reg = sorted((work / "reg").glob("*.o"))
    lto = sorted((work / "lto").glob("*.o"))
    dlink = work / "dlink.o"
    t1 = time.monotonic()
    if not (a.reuse and dlink.is_file()):
        subprocess.run(["nice", "-n", "5", str(nvcc), "-dlink", "-dlto", f"-arch=sm_{a.arch}", *map(str, lto),
                        "-o", str(dlink)], check=True)  # fmt: skip
    t_dlink = time.monotonic() - t1
    n_reg, b_reg = cubin_bytes(cuobjdump, reg)
    n_lto, b_lto = cubin_bytes(cuobjdump, [dlink])
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    result = {
        "schema": 1,
        "what": "faiss k-selection files: SASS bytes (uncompressed cubins) compiled per object vs -rdc -dlto",
        "files": [str(f.relative_to(a.faiss_src)) for f in files],
        "arch": f"sm_{a.arch}",
        "nvcc": version.strip().splitlines()[-1],
        "flags": FLAGS,
        "per_object": {"cubins": n_reg, "bytes": b_reg},
        "dlto": {"cubins": n_lto, "bytes": b_lto},
        "saved_bytes": b_reg - b_lto,
        "seconds": {"compile_both_ways": round(t_compile, 1), "device_link": round(t_dlink, 1)},
        "reused_objects": a.reuse,
    }
    write_text_atomic(a.out, json.dumps(result, indent=2) + "\n")
    print(f"{len(files)} files, sm_{a.arch}: per object {b_reg:,} B in {n_reg} cubins; -dlto {b_lto:,} B in {n_lto}: "
          f"saved {b_reg - b_lto:,} B ({(b_reg - b_lto) / b_reg:.1%}); written {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
