#!/usr/bin/env python3
"""Benchmark: `slimwheel size-report` on faiss-gpu 1.15.1 (135 MB, PyPI) against `unzip` + `cuobjdump --list-elf`.

The baseline is what one does by hand to learn the same thing: unzip the wheel's shared libraries and run cuobjdump
on each. Both run end to end as programs (interpreter start-up included for slimwheel), several times, alternating,
and the fastest run of each counts (the least disturbed by other load on the machine).

    python lab/bench/bench_size_report.py [--repeat 5] [--wheel PATH] [--cuobjdump PATH] [--json OUT]

Targets: ratio <= 0.5 and slimwheel under 2 s. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from slimwheel.fsutil import cache_dir
from slimwheel.toolkit.find import cuobjdump_for

SPEC = "faiss-gpu==1.15.1"


def download(dest: Path) -> Path:
    found = sorted(dest.glob("faiss_gpu-1.15.1-*.whl"))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--platform",
            "manylinux_2_28_x86_64",
            "-d",
            str(dest),
            SPEC,
        ],
        check=True,
    )
    return sorted(dest.glob("faiss_gpu-1.15.1-*.whl"))[0]


def find_cuobjdump(given: str | None) -> Path:
    """The given one, else CUDA 13's from PyPI's nvidia-cuda-cuobjdump wheel (installed once into the cache)."""
    return Path(given) if given else cuobjdump_for()


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_slimwheel(wheel: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is what a busy machine cannot inflate much."""
    c, t = _child_cpu(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "slimwheel", "-q", "size-report", "--format", "json", "-o", os.devnull, str(wheel)],
        check=True,
    )
    return time.perf_counter() - t, _child_cpu() - c


def run_baseline(wheel: Path, cuobjdump: Path) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        c, t = _child_cpu(), time.perf_counter()
        subprocess.run(["unzip", "-q", "-o", str(wheel), "*.so", "*.so.*", "-d", tmp], check=True)
        entries = 0
        for so in sorted(Path(tmp).rglob("*.so*")):
            r = subprocess.run([str(cuobjdump), "--list-elf", str(so)], capture_output=True, text=True, check=False)
            entries += sum(1 for line in r.stdout.splitlines() if line.startswith("ELF file"))
        return time.perf_counter() - t, _child_cpu() - c, entries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--cuobjdump")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    if not shutil.which("unzip"):
        print("unzip is not installed (apt-get install unzip)", file=sys.stderr)
        return 2
    wheel = args.wheel or download(cache_dir() / "test-wheels")
    cuobjdump = find_cuobjdump(args.cuobjdump)
    with zipfile.ZipFile(wheel) as z:
        sos = [i for i in z.infolist() if ".so" in i.filename]
    print(
        f"wheel: {wheel.name}, {wheel.stat().st_size / 1e6:.1f} MB, {len(sos)} shared libraries "
        f"({sum(i.file_size for i in sos) / 1e6:.1f} MB unpacked); cuobjdump: {cuobjdump}"
    )
    ours: list[float] = []
    ours_cpu: list[float] = []
    base: list[float] = []
    base_cpu: list[float] = []
    entries = 0
    run_slimwheel(wheel)  # warm the page cache and Python's bytecode cache for both
    for _ in range(args.repeat):
        wall, cpu = run_slimwheel(wheel)
        ours.append(wall)
        ours_cpu.append(cpu)
        wall, cpu, entries = run_baseline(wheel, cuobjdump)
        base.append(wall)
        base_cpu.append(cpu)
    best_ours, best_base = min(ours), min(base)
    ratio = best_ours / best_base
    cpu_ratio = min(ours_cpu) / min(base_cpu)

    def runs(xs: list[float]) -> str:
        return ", ".join(f"{x:.2f}" for x in xs)

    print(f"slimwheel size-report: best {best_ours:.2f} s wall of {runs(ours)}; CPU {min(ours_cpu):.2f} s")
    print(
        f"unzip + cuobjdump --list-elf ({entries} cubins): best {best_base:.2f} s wall of {runs(base)}; "
        f"CPU {min(base_cpu):.2f} s"
    )
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(
        f"ratio: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (target <= 0.5x); slimwheel under 2 s: {best_ours < 2.0}; "
        f"{os.cpu_count()} CPUs, load {load:.1f}, {platform.python_implementation()} {platform.python_version()}"
    )
    if args.json:
        doc = {
            "schema": 1,
            "wheel": wheel.name,
            "cubins": entries,
            "load": load,
            "ratio": ratio,
            "cpu_ratio": cpu_ratio,
            "slimwheel_s": ours,
            "slimwheel_cpu_s": ours_cpu,
            "baseline_s": base,
            "baseline_cpu_s": base_cpu,
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if ratio <= 0.5 and best_ours < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
