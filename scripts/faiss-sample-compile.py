#!/usr/bin/env python3
"""Estimate a full faiss CUDA build from a few files: compile a stratified sample of the recipe's CUDA objects, one at
a time, niced, in a configured build folder, and scale each class's CPU time by the number of files in it.

    python3 scripts/faiss-sample-compile.py BUILD_DIR                 # the default sample (one file per class)
    python3 scripts/faiss-sample-compile.py BUILD_DIR --files VectorResidual.cu.o,L2Norm.cu.o

BUILD_DIR is a CMake build folder of faiss/ (Ninja), e.g. the one tests/integration/test_faiss_recipe.py or
scripts/faiss-profiles.py configures. Writes results/faiss-build-estimate.json after each file (a partial sample is
still a result); a later run over the same folder adds its files to the sample. CPU seconds (user + sys of the compiler processes) are the measure: wall time on a shared machine
says more about the neighbours than about faiss. Never a full build: a sample of a few files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from faissbench.estimate import DEFAULT_SAMPLE, cuda_objects, estimate

from slimwheel.fsutil import write_text_atomic

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results" / "faiss-build-estimate.json"

def flags_of(build_dir: Path, output: str) -> str:
    ninja = (build_dir / "build.ninja").read_text()
    m = re.search(rf"^build {re.escape(output)}: CUDA_COMPILER\S*.*?\n((?:  .*\n)+)", ninja, flags=re.MULTILINE)
    return dict(re.findall(r"^  (\w+) = (.*)$", m.group(1), flags=re.MULTILINE)).get("FLAGS", "") if m else ""


def compile_one(build_dir: Path, output: str, nice: int) -> dict[str, Any]:
    (build_dir / output).unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run(["nice", "-n", str(nice), "ninja", "-C", str(build_dir), output],
                       capture_output=True, text=True, check=False)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    entry: dict[str, Any] = {"object": Path(output).name, "rc": p.returncode, "wall_s": round(wall, 1),
                             "cpu_s": round(cpu, 1), "load_avg_1min_at_end": round(os.getloadavg()[0], 1)}
    if p.returncode != 0:
        entry["error"] = (p.stdout + p.stderr)[-2000:]
    else:
        entry["object_bytes"] = (build_dir / output).stat().st_size
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("build_dir", type=Path)
    ap.add_argument("--files", default=",".join(DEFAULT_SAMPLE), help="comma list of object file names")
    ap.add_argument("--nice", type=int, default=15)
    ap.add_argument("-o", "--output", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    if not (a.build_dir / "build.ninja").is_file():
        print(f"faiss-sample-compile: {a.build_dir}: no build.ninja (configure faiss/ with -G Ninja first)",
              file=sys.stderr)
        return 3
    objects = cuda_objects(a.build_dir)
    wanted = [f for f in a.files.split(",") if f]
    picked = []
    for name in wanted:
        match = [o for o in objects if Path(o.output).name == name]
        if not match:
            print(f"faiss-sample-compile: {name}: not a CUDA object of {a.build_dir}", file=sys.stderr)
            return 3
        picked.append(match[0])
    result: dict[str, Any] = {
        "schema": 1, "where": f"{os.uname().nodename}, {os.cpu_count()} CPUs (shared)", "build_dir": str(a.build_dir),
        "flags_of_first": flags_of(a.build_dir, picked[0].output) if picked else "", "nice": a.nice, "samples": []}
    if a.output.is_file():  # a later run over the same build folder adds to the sample (a file again: replaced)
        earlier = json.loads(a.output.read_text())
        if earlier.get("build_dir") == str(a.build_dir):
            result["samples"] = [x for x in earlier.get("samples", []) if x["object"] not in wanted]
    for o in picked:
        entry = compile_one(a.build_dir, o.output, a.nice)
        entry["class"] = o.klass
        result["samples"].append(entry)
        result["estimate"] = estimate(objects, result["samples"])
        result["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_text_atomic(a.output, json.dumps(result, indent=1) + "\n")
        print(f"{entry['object']}: {entry['cpu_s']} CPU s, {entry['wall_s']} s wall (rc {entry['rc']})", flush=True)
    print(json.dumps(result.get("estimate", {}), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
