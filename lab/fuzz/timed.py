#!/usr/bin/env python3
"""Fuzz each reader for a fixed wall-clock time (issue 41: "fuzzing the index, ELF, cubin and import readers for 15
minutes finds no internal error"), with the suite's own Hypothesis fuzzers scaled up.

    python lab/fuzz/timed.py [--minutes 15] [--per-round 3000] [--jobs 2] [--readers index,elf,cubin,import]

Each reader's fuzz tests (tests/unit/test_*fuzz*.py, test_pyimports.py) run round after round, each round a new
Hypothesis seed and SLIMWHEEL_FUZZ_EXAMPLES=--per-round examples per test, until the reader's minutes are spent (the
round in flight finishes). A round that fails stops that reader and keeps pytest's output (the falsifying example).
Examples are counted from Hypothesis's statistics (its passing, failing and invalid test cases). Readers run
--jobs at a time. Writes lab/results/fuzz.json (schema 1) and prints one line per reader.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from slimwheel.fsutil import write_text_atomic

REPO = Path(__file__).resolve().parents[2]
UNIT = "tests/unit"
# Which tests fuzz which reader: pytest node selections (file and -k expression).
READERS: dict[str, tuple[str, str]] = {
    "index": (f"{UNIT}/test_pypindex_fuzz.py", "fuzz"),
    "elf": (f"{UNIT}/test_inspect_fuzz.py", "elf or zip or no_byte"),
    "cubin": (f"{UNIT}/test_inspect_fuzz.py", "cubin or nv_compat or fatbin_reader"),
    "import": (f"{UNIT}/test_pyimports.py", "hostile or linear or generated"),
}
COUNTS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid test cases")


def one_round(path: str, expr: str, per_round: int, seed: int) -> tuple[bool, int, str]:
    env = {**os.environ, "SLIMWHEEL_FUZZ_EXAMPLES": str(per_round)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path, "-k", expr]
    cmd += [f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    examples = sum(int(p) + int(f) + int(i) for p, f, i in COUNTS.findall(proc.stdout))
    return proc.returncode == 0, examples, proc.stdout[-6000:] + proc.stderr[-2000:]


def fuzz_reader(name: str, seconds: float, per_round: int) -> dict[str, Any]:
    path, expr = READERS[name]
    rng = random.Random()
    start = time.monotonic()
    rounds = examples = 0
    failure = ""
    while time.monotonic() - start < seconds:
        seed = rng.randrange(2**32)
        ok, n, out = one_round(path, expr, per_round, seed)
        rounds += 1
        examples += n
        print(f"  {name}: round {rounds} (seed {seed}): {n} examples, {'ok' if ok else 'FAILED'}", flush=True)
        if not ok:
            failure = f"seed {seed}\n{out}"
            break
    return {
        "reader": name,
        "tests": f"{path} -k '{expr}'",
        "seconds": round(time.monotonic() - start, 1),
        "rounds": rounds,
        "examples": examples,
        "internal_errors": 0 if not failure else 1,
        "failure": failure,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--per-round", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--out", type=Path, default=REPO / "lab" / "results" / "fuzz.json")
    a = ap.parse_args()
    names = [n for n in a.readers.split(",") if n]
    unknown = [n for n in names if n not in READERS]
    if unknown:
        raise SystemExit(f"unknown reader(s): {', '.join(unknown)}; known: {', '.join(READERS)}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(lambda n: fuzz_reader(n, a.minutes * 60, a.per_round), names))
    record = {
        "schema": 1,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": "python lab/fuzz/timed.py " + " ".join(sys.argv[1:]),
        "readers": results,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(a.out, json.dumps(record, indent=2) + "\n")
    for r in results:
        verdict = "no internal error" if not r["failure"] else "FAILED (see failure in the JSON)"
        print(f"{r['reader']}: {r['examples']} examples in {r['seconds']:.0f} s ({r['rounds']} rounds): {verdict}")
    sys.exit(1 if any(r["failure"] for r in results) else 0)


if __name__ == "__main__":
    main()
