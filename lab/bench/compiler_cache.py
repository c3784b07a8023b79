#!/usr/bin/env python3
"""`slimwheel build --compiler-cache sccache`, measured in one run on one project: cold against warm.

    nice -n 10 python lab/bench/compiler_cache.py PROJECT [--work DIR] [--out JSON] [--touch REL] [--no-isolation]
        [--other-path-clone] [--skip-plain] [--last BUILD] [-- BUILD ARGS...]

The project is copied to WORK/src/<name> (the copy is what changes); every build starts from a new build folder
(slimwheel's default) and shares one sccache local cache, WORK/sccache (a new one each run):

    plain        no compiler cache (what the cache must not change: its wheel is the reference)
    cold         --compiler-cache sccache, empty cache
    warm         the same tree again
    one-file     REL (default: the project's first .cu file) given an unused inline function at its end
    clone        a fresh copy at the same path (a CI runner's next checkout), sharing the cache
    other-path   (--other-path-clone) a fresh copy at another path: nvcc names anonymous namespaces after the
                 source's path, so slimwheel keeps the project folder in the cache key and this one misses

`--last warm` (or one-file) ends the sequence there: a faiss cold build alone is 17 minutes of 16 cores, and a GPU
machine's session may not hold the whole sequence. Prints a table with each build's time against the cold one and
writes the JSON (schema 1). BUILD ARGS after `--` go
to every `slimwheel build` (e.g. `-- --archs 9.0`); the faiss recipe: `PROJECT=faiss`, FAISS_SOURCE_DIR in the
environment or faiss/faiss-src inside the recipe, `--touch faiss-src/faiss/gpu/impl/L2Norm.cu`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from slimwheel.fsutil import write_text_atomic

REPO = Path(__file__).resolve().parents[2]
LAST = ("warm", "one-file", "clone")  # the cached builds in their order; cold always runs
SKIP = shutil.ignore_patterns("build", "_skbuild", "*.egg-info", "dist", "wheelhouse", "__pycache__", ".git")


def first_cu(project: Path) -> Path:
    for p in sorted(project.rglob("*.cu")):
        if not any(part in {"build", "_skbuild", ".git"} for part in p.relative_to(project).parts):
            return p.relative_to(project)
    raise SystemExit(f"{project}: no .cu file to change; pass --touch")


def build(name: str, project: Path, work: Path, env: dict[str, str], args: list[str], cache: bool) -> dict[str, Any]:
    out = work / "out" / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "slimwheel", "build", str(project), "--out-dir", str(out), "--format", "json"]
    cmd += [*(["--compiler-cache", "sccache"] if cache else ["--compiler-cache", "none"]), *args]
    print(f"$ {shlex.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode} after {wall:.0f} s\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    wheel = Path(report["wheel"])
    stats = (report["compiler_cache"] or {}).get("build")
    row = {
        "build": name,
        "project_path": str(project),
        "build_seconds": report["phases"]["build"],
        "total_seconds": round(wall, 2),
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "sccache": stats,
    }
    hits = f"{stats['hits']} hits, {stats['misses']} misses" if stats else "no cache"
    print(f"  {name}: build {row['build_seconds']:.1f} s ({hits})", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("project", type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/slimwheel-bench-cache"))
    ap.add_argument("--out", type=Path, help="the JSON (default: lab/results/compiler-cache-<name>.json)")
    ap.add_argument("--touch", type=Path, help="the file the one-file build changes, relative to PROJECT")
    ap.add_argument("--no-isolation", action="store_true", help="build without pypa/build's isolated environment")
    ap.add_argument("--other-path-clone", action="store_true", help="also build a copy at another path")
    ap.add_argument("--skip-plain", action="store_true", help="no build without the cache (long projects)")
    ap.add_argument("--last", choices=LAST, default="clone", help="the last build of the sequence (default: clone)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: more `slimwheel build` arguments
    ns = ap.parse_args(argv[:cut])
    ns.build_args = argv[cut + 1 :]
    project = ns.project.resolve()
    name = project.name
    work = ns.work.resolve()
    touch = ns.touch or first_cu(project)
    args = [*ns.build_args, *(["--no-isolation"] if ns.no_isolation else [])]
    shutil.rmtree(work / "sccache", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_") or k in ("SCCACHE_CONF",)}
    env["SCCACHE_DIR"] = str(work / "sccache")
    src = work / "src" / name

    def fresh(at: Path) -> Path:
        shutil.rmtree(at, ignore_errors=True)
        shutil.copytree(project, at, ignore=SKIP, symlinks=True)
        return at

    rows = []
    fresh(src)
    if not ns.skip_plain:
        rows.append(build("plain", src, work, env, args, cache=False))
    rows.append(build("cold", src, work, env, args, cache=True))
    rows.append(build("warm", src, work, env, args, cache=True))
    if LAST.index(ns.last) >= LAST.index("one-file"):
        with open(src / touch, "a", encoding="utf-8") as fh:
            # code, not a comment: sccache keys on the preprocessed source, which has no comments
            fh.write("\ninline int slimwheel_bench_touched() { return 1; }  // lab/bench/compiler_cache.py\n")
        rows.append(build("one-file", src, work, env, args, cache=True))
    if ns.last == "clone":
        rows.append(build("clone", fresh(src), work, env, args, cache=True))
    if ns.other_path_clone and ns.last == "clone":
        rows.append(build("other-path", fresh(work / "src2" / name), work, env, args, cache=True))
    cold = next(r for r in rows if r["build"] == "cold")["build_seconds"]
    reference = rows[0]["wheel_sha256"]
    for r in rows:
        r["ratio_to_cold"] = round(r["build_seconds"] / cold, 3) if cold else None
        r["same_wheel_as_first"] = r["wheel_sha256"] == reference
    doc = {
        "schema": 1,
        "what": "slimwheel build --compiler-cache sccache: cold, warm, one-file change, second clone",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "command": shlex.join(["python", "lab/bench/compiler_cache.py", *sys.argv[1:]]),
        "project": str(project.relative_to(REPO)) if project.is_relative_to(REPO) else project.name,
        "touched": str(touch),
        "build_args": args,
        "builds": rows,
    }
    out = ns.out or REPO / "lab" / "results" / f"compiler-cache-{name}.json"
    write_text_atomic(out, json.dumps(doc, indent=2) + "\n")
    print("\n" + markdown(doc))
    print(f"wrote {out}")


def markdown(doc: dict[str, Any]) -> str:
    """One run as a Markdown table (printed, and in docs/compiler-cache.md through lab/tables.py)."""
    rows = doc["builds"]
    first = rows[0]["build"]
    lines = [
        f"`{doc['project']}`, {doc['date'][:10]}, {doc['machine']['cpus']} CPUs (shared), `{doc['command']}`:",
        "",
        f"| build | build phase | vs cold | hits | misses | misses by step | same wheel as `{first}` |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        s = r["sccache"] or {}
        by = ", ".join(f"{k} {v}" for k, v in sorted(s.get("misses_by_language", {}).items())) or "-"
        lines.append(
            f"| {r['build']} | {r['build_seconds']:.1f} s | {r['ratio_to_cold']:.2f}x | {s.get('hits', '-')} "
            f"| {s.get('misses', '-')} | {by} | {'yes' if r['same_wheel_as_first'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
