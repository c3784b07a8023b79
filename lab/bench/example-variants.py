#!/usr/bin/env python3
"""A universal wheel beside its slimmed and per-family variant wheels: sizes side by side (examples/knn by default).

    nice -n 10 python lab/bench/example-variants.py [--wheel UNIVERSAL.whl] [--work DIR] [--out lab/results/example-variants.json]
    nice -n 10 python lab/bench/example-variants.py --wheel faiss_gpu-1.15.1-...whl --archs 8.0-9.0 --budget 200MiB \
        --out lab/results/faiss-gpu-1.15.1-variants.json       # PyPI's faiss-gpu (issue 16: sizes only)

Without --wheel the example is built first (`slimwheel build examples/knn --cuda 13.0`, every GPU CUDA 13 targets:
SASS 7.5, 8.0, 9.0, 10.0, 12.0 + PTX 12.0). Then `slimwheel slim --archs ARCHS` (default 9.0) and `slimwheel variants`, through the
CLI as a user runs them. Wheels stay under --work; the JSON (schema 1) goes to --out, and a Markdown table is printed.
Sizes are bytes; the table uses KiB = 2**10 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from slimwheel.fsutil import write_text_atomic
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.units import human

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "slimwheel"]


def run(cmd: list[str]) -> str:
    print(f"$ {' '.join(cmd)}", flush=True)
    r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def row(kind: str, label: str, report: WheelReport, universal: WheelReport) -> dict[str, object]:
    fat = sum(e.fatbin_bytes for e in report.elfs)
    entries = sum(e.stored_size for e in report.fatbin_entries)
    return {
        "kind": kind,
        "label": label,
        "wheel": report.path.name,
        "bytes": report.size,
        "installed_bytes": report.installed_size,
        "fatbin_container_bytes": fat,
        "fatbin_entry_bytes": entries,
        "targets": [str(t) for t in report.targets],
        "vs_universal": round(report.size / universal.size, 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help="the universal wheel (default: build examples/knn)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/slimwheel-variants"))
    ap.add_argument("--out", type=Path, default=REPO / "lab" / "results" / "example-variants.json")
    ap.add_argument("--archs", default="9.0", help="what `slimwheel slim --archs` keeps (default 9.0)")
    ap.add_argument("--budget", default=None, help="`--budget` for slim and variants (default: slimwheel's)")
    args = ap.parse_args()
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    build_s = None
    if args.wheel is None:
        t0 = time.perf_counter()
        env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL="2")
        cmd = [*CLI, "build", str(REPO / "examples" / "knn"), "--cuda", "13.0", "--out-dir", str(work / "universal")]
        print(f"$ {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        build_s = round(time.perf_counter() - t0, 1)
        (universal_path,) = (work / "universal").glob("*.whl")
    else:
        universal_path = args.wheel.absolute()
    budget = ["--budget", args.budget] if args.budget else []
    slim = json.loads(
        run(
            [
                *CLI,
                "slim",
                str(universal_path),
                "--archs",
                args.archs,
                *budget,
                "-o",
                str(work / "slim"),
                "--format",
                "json",
            ]
        )
    )
    variants = json.loads(
        run([*CLI, "variants", str(universal_path), *budget, "-o", str(work / "variants"), "--format", "json"])
    )
    universal = inspect_wheel(universal_path)
    slimmed = inspect_wheel(Path(slim["wheel"]))
    slim_label = f"slim --archs {args.archs}"
    tables = [("universal", universal), (slim_label, slimmed)]
    rows = [row("universal", "universal", universal, universal), row("slim", slim_label, slimmed, universal)]
    for v in variants["variants"]:
        rep = inspect_wheel(Path(v["wheel"]))
        tables.append((v["label"], rep))
        r = row("variant", v["label"], rep, universal)
        r["gpus"] = v["gpus"]
        r["properties"] = v["properties"]
        rows.append(r)
    data = {
        "schema": 1,
        "what": (f"{universal_path.name}: " if args.wheel else "examples/knn (CUDA 13.0, nvcc from PyPI wheels): ")
        + f"universal wheel, slimmed to {args.archs}, one variant per GPU family (PEP 825 draft labels)",
        "measured_on": f"the CPU build machine ({platform.machine()}, {os.cpu_count()} CPUs), Python "
        f"{platform.python_version()}",
        "command": "nice -n 10 python lab/bench/example-variants.py"
        + (f" --wheel {universal_path.name}" if args.wheel else "")
        + (f" --archs {args.archs}" if args.archs != "9.0" else "")
        + (f" --budget {args.budget}" if args.budget else ""),
        "budget": args.budget,
        "build_seconds": build_s,
        "checks_ok": bool(slim["check"]["ok"]) and all(v["check"]["ok"] for v in variants["variants"]),
        "wheels": rows,
        "units": "bytes",
    }
    write_text_atomic(args.out, json.dumps(data, indent=2) + "\n")
    print("\n| wheel | targets | zip | installed | fatbin entries | vs universal |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for label, rep in tables:
        entries = sum(e.stored_size for e in rep.fatbin_entries)
        print(
            f"| {label} | {' '.join(map(str, rep.targets))} | {human(rep.size)} | {human(rep.installed_size)} | "
            f"{human(entries)} | {rep.size / universal.size:.2f}x |"
        )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
