"""What slimwheel costs on real wheels (issue 22 item 7), as ratios against baselines measured in the same run:

- `size-report` wall time / the `unzip` + `cuobjdump --list-elf` route (unzip of the ELF members, cuobjdump on each);
  best of `--repeat` runs of each, page cache warm for both; the goal is at most 0.5;
- `slim --archs 9.0` and `variants` peak RSS / the wheel's largest member (goal: at most 1.5), the same less the
  interpreter's own start-up RSS (measured here too), which dominates small wheels, and the same less the command's
  fixed cost: its peak on a wheel of one 1 KiB library (`_tiny_wheel`, made in the run), which holds everything the
  command imports and builds whatever the wheel (check, its tables, a read of the package index over HTTPS: the
  library needs libnvJitLink.so.13, which no requirement of the wheel accounts for, as the jax plugin's variants read
  it) and no data to speak of: what is left is what the wheel's bytes cost, the copies the goal is about;
- `variants` wall time / `slim` wall time, with the number of wheels variants wrote: one read of the input and one
  write per wheel, where it used to be a full pass (inspect, unpack, slim, pack, inspect) per variant;
- the floor under size-report's ratio: a minimal Python route (`_FLOOR`: interpreter start, the zip directory, every
  ELF member inflated with ISA-L on a thread per core, fatbin magics counted; no slimwheel, nothing checked or
  printed), best of `--repeat`, against the same baseline: what no size-report written in Python can go below on
  small wheels, where start-up and a few small members are all the work (on members of hundreds of MB it is no
  bound: it holds each member whole in memory, where slimwheel spools the biggest to disk);
- start-up: the import time of `slimwheel size-report --help` (`python -X importtime`, the sum over the top-level
  imports, in µs; the least of `--repeat` runs), which loads everything size-report loads before reading a byte.

    .venv/bin/python lab/bench/cost.py                       # every wheel below; JSON to lab/results/cost.json
    .venv/bin/python lab/bench/cost.py --only faiss,jax      # wheels whose requirement contains one of these
    .venv/bin/python lab/bench/cost.py --markdown            # the Markdown table of lab/results/cost.json, no run

Wheels come from the corpus cache (<slimwheel cache>/corpus, ~/.cache/slimwheel/corpus), downloaded there when missing
(`ensure_wheel`); cuobjdump from the `nvidia-cuda-cuobjdump` wheel, unpacked into the same cache (`cuobjdump`), or a
cached toolkit's bin/cuobjdump. Runs on this machine (2 shared cores: timings are noisy; the ratios are what counts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from slimwheel.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "lab" / "results" / "cost.json"
SLIMWHEEL = str(Path(sys.executable).parent / "slimwheel")
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)
CUOBJDUMP = "nvidia-cuda-cuobjdump==13.5.37"

# (requirement, Python version its wheel is for)
WHEELS: tuple[tuple[str, str], ...] = (
    ("jax-cuda13-plugin==0.12.0.1", "3.12"),
    ("bitsandbytes==0.50.2", "3.11"),
    ("faiss-gpu-cu12==1.14.1.post1", "3.11"),
    ("cupy-cuda13x==14.2.0", "3.11"),
    ("faiss-gpu==1.15.1", "3.11"),
    ("jax-cuda13-pjrt==0.12.0.1", "3.11"),
    ("cumm-cu120==0.6.3", "3.11"),
    ("spconv-cu120==2.3.6", "3.11"),
    ("nvidia-curand==10.4.0.35", "3.11"),
    ("nvidia-cufft==12.5.0.14", "3.11"),
    ("nvidia-cusparse==12.9.4.2", "3.11"),
    ("nvidia-cusolver==12.4.1.2", "3.11"),
    ("nvidia-nccl-cu13==2.32.3", "3.11"),
    ("nvidia-cublas==13.10.0.20", "3.11"),
    ("nvidia-cudnn-cu13==9.28.1.4", "3.11"),
    ("ctranslate2==4.8.5", "3.11"),
    ("torchvision==0.26.0", "3.11"),
    ("onnxruntime-gpu==1.31.1", "3.11"),
)


def cache() -> Path:
    from slimwheel import fsutil

    return fsutil.cache_dir() / "corpus"


def ensure_wheel(requirement: str, python: str = "3.11", folder: Path | None = None) -> Path:
    """The wheel of `requirement` (name==version) in the corpus cache, downloaded there by pip when missing (a failed
    download raises). Meant to be shared: the corpus test's helper may replace it."""
    folder = folder or cache()
    name, version = requirement.split("==")
    stem = re.sub(r"[-_.]+", "_", name).lower() + "-" + version + "-"
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(stem))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python,
        *(f"--platform={p}" for p in PLATFORMS),
        "-d",
        str(folder),
        requirement,
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(stem))
    if not found:
        raise RuntimeError(f"pip download {requirement} brought no wheel into {folder}")
    return found[0]


def cuobjdump() -> Path:
    """NVIDIA's cuobjdump: from the nvidia-cuda-cuobjdump wheel (unpacked into the cache once), else a cached
    toolkit's."""
    folder = cache() / ("cuobjdump-" + CUOBJDUMP.split("==")[1])
    exe = folder / "cuobjdump"
    if not exe.exists():
        wheel = ensure_wheel(CUOBJDUMP)
        with zipfile.ZipFile(wheel) as zf:
            member = next((n for n in zf.namelist() if n.endswith("/bin/cuobjdump")), None)
            if member is None:
                toolkits = sorted((cache().parent / "toolkits").glob("*/bin/cuobjdump"))
                if not toolkits:
                    raise RuntimeError(f"{wheel} holds no bin/cuobjdump and no cached toolkit has one")
                return toolkits[-1]
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / ".cuobjdump.tmp"
            tmp.write_bytes(zf.read(member))
            tmp.chmod(0o755)
            tmp.replace(exe)
    return exe


# slimwheel runs as pip installs it: with its modules' bytecode. This workplace sets PYTHONDONTWRITEBYTECODE=1, which
# left every earlier run compiling slimwheel's sources each time (about 26 ms of a 0.2-s size-report); the first run
# of each command writes the bytecode (not timed: `_best` takes the best of several).
AS_INSTALLED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _best(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=AS_INSTALLED)
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=AS_INSTALLED)
        best = min(best, time.perf_counter() - t)
    return best


def import_time(repeat: int) -> int:
    """Microseconds `python -X importtime` counts for `slimwheel size-report --help` (the sum of the cumulative times
    of the top-level imports; the least of `repeat` runs, after one that writes the bytecode)."""
    cmd = [sys.executable, "-X", "importtime", SLIMWHEEL, "size-report", "--help"]
    best = None
    for i in range(repeat + 1):
        err = subprocess.run(cmd, capture_output=True, text=True, check=True, env=AS_INSTALLED).stderr
        # "import time: self [us] | cumulative | name": top-level imports are those without indentation
        total = sum(int(m.group(1)) for m in re.finditer(r"^import time:\s+\d+ \|\s+(\d+) \| \S", err, re.M))
        if i and (best is None or total < best):
            best = total
    assert best is not None
    return best


def _elf_members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        out = []
        for info in zf.infolist():
            if info.file_size >= 16 and not info.is_dir():
                with zf.open(info) as fh:
                    if fh.read(4) == b"\x7fELF":
                        out.append(info.filename)
        return out


def _route(wheel: Path, elfs: list[str], exe: Path, repeat: int) -> float:
    """unzip of the ELF members, then cuobjdump --list-elf on each: what a maintainer runs without slimwheel."""
    best = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            if elfs:
                subprocess.run(["unzip", "-q", "-o", str(wheel), *elfs, "-d", tmp], check=True)
            for e in elfs:
                subprocess.run([str(exe), "--list-elf", str(Path(tmp) / e)], capture_output=True, check=False)
            best = min(best, time.perf_counter() - t)
    return best


# The floor: what any Python size-report must do at least (start, read the directory, inflate each ELF member once,
# look at its bytes). The same inflater and the same threads as slimwheel's scan; no checks, no parsing, no output.
_FLOOR = """
import os, struct, sys, zipfile
from concurrent.futures import ThreadPoolExecutor
from isal import isal_zlib
path, names = sys.argv[1], set(sys.argv[2:])
with zipfile.ZipFile(path) as zf:
    infos = sorted((i for i in zf.infolist() if i.filename in names), key=lambda i: -i.file_size)
fd = os.open(path, os.O_RDONLY)
def one(info):
    head = os.pread(fd, 30, info.header_offset)
    n, m = struct.unpack_from("<HH", head, 26)
    raw = os.pread(fd, info.compress_size, info.header_offset + 30 + n + m)
    data = isal_zlib.decompress(raw, -15, info.file_size) if info.compress_type else raw  # sized once, as slimwheel
    return data.count(b"\\x50\\xed\\x55\\xba")
with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1, len(infos)))) as pool:
    print(sum(pool.map(one, infos)))
"""


def _floor(wheel: Path, elfs: list[str], repeat: int) -> float:
    return _best([sys.executable, "-c", _FLOOR, str(wheel), *elfs], repeat)


_RSS = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
    "print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
)


def _peak(cmd: list[str]) -> tuple[int, float, int]:
    """(exit status, wall seconds, peak RSS in bytes) of one command, run alone under a fresh parent."""
    out = subprocess.run(
        [sys.executable, "-c", _RSS, *cmd], capture_output=True, text=True, check=True, env=AS_INSTALLED
    ).stdout.split()
    return int(out[0]), float(out[1]), int(out[2])


def _tiny_wheel(folder: Path) -> Path:
    """A wheel of one small extension module with SASS for 7.5 and 9.0 (testkit's synthesizers): slim and
    variants do all their steps on it, the index read included: its library needs libnvJitLink.so.13, which its one
    requirement (nvidia-cublas 13) does not account for, so the dependency check asks the index what that
    requirement's own requirements install (it fails, exit 12: the cost is the same)."""
    sys.path.insert(0, str(REPO))  # the repository root: testkit (the synthesizers)
    from testkit.binsynth import elf, fatbin, fatbin_entry
    from testkit.wheelmaker import make_wheel

    blob = fatbin([fatbin_entry(kind="sass", sm=75), fatbin_entry(kind="sass", sm=90)])
    so = elf(sections={".nv_fatbin": blob}, needed=("libc.so.6", "libnvJitLink.so.13"))
    return make_wheel(folder, name="tiny", files={"tiny/_ext.abi3.so": so}, requires=("nvidia-cublas==13.*",))


# Exit statuses of a verdict: the command did all its work.
_VERDICTS = {
    0,
    ExitCode.OVER_BUDGET,
    ExitCode.MISSING_COVERAGE,
    ExitCode.INCONSISTENT_DEPENDENCIES,
    ExitCode.CHECK_FAILED,
}


def fixed_costs() -> dict[str, int]:
    """Peak RSS of `slim --archs 9.0` and of `variants` on `_tiny_wheel`: each command's cost before data."""
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _tiny_wheel(Path(tmp))
        slim = _peak([SLIMWHEEL, "-q", "slim", "--archs", "9.0", "-o", f"{tmp}/s", str(wheel)])
        variants = _peak([SLIMWHEEL, "-q", "variants", "-o", f"{tmp}/v", str(wheel)])
    if slim[0] not in _VERDICTS or variants[0] not in _VERDICTS:
        raise SystemExit(f"the fixed-cost runs failed: slim exit {slim[0]}, variants exit {variants[0]}")
    return {"slim": slim[2], "variants": variants[2]}


def measure(
    requirement: str, python: str, exe: Path, repeat: int, base_rss: int, fixed: dict[str, int]
) -> dict[str, Any]:
    wheel = ensure_wheel(requirement, python)
    with zipfile.ZipFile(wheel) as zf:
        largest = max((i.file_size for i in zf.infolist()), default=0)
    elfs = _elf_members(wheel)
    t_report = _best([SLIMWHEEL, "-q", "size-report", str(wheel)], repeat)
    t_route = _route(wheel, elfs, exe, repeat)
    t_floor = _floor(wheel, elfs, repeat)
    row: dict[str, Any] = {
        "requirement": requirement,
        "wheel": wheel.name,
        "bytes": wheel.stat().st_size,
        "largest_member_bytes": largest,
        "elf_members": len(elfs),
        "size_report_s": round(t_report, 3),
        "cuobjdump_route_s": round(t_route, 3),
        "size_report_ratio": round(t_report / t_route, 3) if t_route else None,
        "floor_s": round(t_floor, 3),
        "floor_ratio": round(t_floor / t_route, 3) if t_route else None,
    }
    with tempfile.TemporaryDirectory() as tmp:
        rc, wall, rss = _peak(
            [SLIMWHEEL, "-q", "slim", "--archs", "9.0", "--budget", "100GiB", "-o", f"{tmp}/s", str(wheel)]
        )
        made = sorted(Path(tmp, "s").glob("*.whl"))
        row["slim"] = {
            "exit": rc,
            "s": round(wall, 2),
            "peak_rss_bytes": rss,
            "bytes_after": made[0].stat().st_size if made else None,
        }
        rc, wall_v, rss_v = _peak([SLIMWHEEL, "-q", "variants", "--budget", "100GiB", "-o", f"{tmp}/v", str(wheel)])
        row["variants"] = {
            "exit": rc,
            "s": round(wall_v, 2),
            "peak_rss_bytes": rss_v,
            "wheels": len(list(Path(tmp, "v").glob("*-sm*x.whl"))),
        }
    for key in ("slim", "variants"):
        r = row[key]
        r["rss_ratio"] = round(r["peak_rss_bytes"] / largest, 3) if largest else None
        r["rss_ratio_above_start_up"] = round(max(0, r["peak_rss_bytes"] - base_rss) / largest, 3) if largest else None
        above = max(0, r["peak_rss_bytes"] - fixed[key])
        r["rss_ratio_above_fixed"] = round(above / largest, 3) if largest else None
    row["variants_over_slim_time"] = round(wall_v / wall, 2) if wall else None
    return row


def _write(out: Path, doc: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out)


def _fixed_lines(doc: dict[str, Any]) -> list[str]:
    """The commands' fixed costs of the run, or of the partial runs that measured them (their rows show the ratio)."""
    runs = [("", doc)] if "fixed_rss_bytes" in doc else []
    runs += [(f" (the run of {p['date']})", p) for p in doc.get("partial", []) if "fixed_rss_bytes" in p]
    return [
        line
        for which, run in runs
        for line in (
            f"Fixed cost{which}, peak RSS on a wheel of one 1 KiB library: slim "
            f"{run['fixed_rss_bytes']['slim'] / 2**20:.1f} MiB, variants {run['fixed_rss_bytes']['variants'] / 2**20:.1f}"
            " MiB; in brackets in the memory columns, the peak above it over the largest member.",
            "",
        )
    ]


def _above(r: dict[str, Any]) -> str:
    return f" ({r['rss_ratio_above_fixed']:.2f})" if r.get("rss_ratio_above_fixed") is not None else ""


def markdown(doc: dict[str, Any]) -> str:
    """The table for docs and the README, from a results file (never from a run)."""
    out = [
        f"Measured {doc['date']} on {doc['machine']} by `lab/bench/cost.py`; ratios against baselines of the same run.",
        "",
        *(
            [f"Import time of `slimwheel size-report --help`: {doc['size_report_help_import_us'] / 1000:.0f} ms.", ""]
            if "size_report_help_import_us" in doc
            else []
        ),
        *_fixed_lines(doc),
        "| wheel | largest member | size-report / unzip+cuobjdump | slim peak RSS / largest (above fixed cost) | "
        "variants peak RSS / largest (above fixed cost) | variants wheels |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["wheels"]:
        s, v = r["slim"], r["variants"]
        out.append(
            f"| {r['requirement']} | {r['largest_member_bytes'] / 2**20:.1f} MiB | "
            f"{r['size_report_s']:.2f} s / {r['cuobjdump_route_s']:.2f} s = {r['size_report_ratio']:.2f}"
            + (f" (floor {r['floor_ratio']:.2f})" if "floor_ratio" in r else "")
            + " | "
            f"{s['rss_ratio']:.2f}{_above(s)} | {v['rss_ratio']:.2f}{_above(v)} | {v['wheels']} |"
        )
    for part in doc.get("partial", []):
        out.append("")
        out.append(f"{', '.join(part['requirements'])}: measured {part['date']}, same machine: `{part['command']}`.")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated parts of requirements to measure")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of --out and stop")
    ap.add_argument("--note", default="", help="the machine's state (what else ran), kept in the results file")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())), end="")
        return 0
    parts = [p for p in args.only.split(",") if p]
    chosen = [(r, py) for r, py in WHEELS if not parts or any(p in r for p in parts)]
    exe = cuobjdump()
    load_before = os.getloadavg()
    # The interpreter with slim's and variants' modules imported: what any run of them costs before reading a byte.
    _rc, _t, base_rss = _peak(
        [sys.executable, "-c", "import slimwheel.cli, slimwheel.commands.slim, slimwheel.commands.variants"]
    )
    fixed = fixed_costs()
    print(
        f"fixed cost (peak RSS on a one-library wheel): slim {fixed['slim'] / 2**20:.1f} MiB, variants "
        f"{fixed['variants'] / 2**20:.1f} MiB"
    )
    start_up_us = import_time(args.repeat)
    print(f"import time of `slimwheel size-report --help`: {start_up_us / 1000:.1f} ms (least of {args.repeat})")
    rows = []
    print(
        f"{'wheel':34} {'MiB':>6} {'largest':>8} {'report':>7} {'route':>7} {'ratio':>6} {'floor':>6} "
        f"{'slim RSS/largest':>17} {'variants RSS/largest':>21} {'var/slim time':>14}"
    )
    for requirement, python in chosen:
        row = measure(requirement, python, exe, args.repeat, base_rss, fixed)
        rows.append(row)
        s, v = row["slim"], row["variants"]
        print(
            f"{requirement:34} {row['bytes'] / 2**20:6.1f} {row['largest_member_bytes'] / 2**20:7.1f}M "
            f"{row['size_report_s']:6.2f}s {row['cuobjdump_route_s']:6.2f}s {row['size_report_ratio']:6.2f} "
            f"{row['floor_ratio']:6.2f} "
            f"{s['rss_ratio']:8.2f} ({s['rss_ratio_above_fixed']:.2f})"
            f"{v['rss_ratio']:12.2f} ({v['rss_ratio_above_fixed']:.2f}) "
            f"{row['variants_over_slim_time']:8.2f} ({v['wheels']} wheels)",
            flush=True,
        )
    if parts and args.out.exists():
        # A partial run: its rows replace those of the same wheels in the results file, the others stay as they were
        # measured, and `partial` says which rows come from which run (ratios compare runs of the same moments).
        old = json.loads(args.out.read_text())
        by_req = {r["requirement"]: r for r in old["wheels"]} | {r["requirement"]: r for r in rows}
        old["wheels"] = [by_req[r] for r, _py in WHEELS if r in by_req]
        old.setdefault("partial", []).append(
            {
                "requirements": [r["requirement"] for r in rows],
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "command": " ".join(sys.argv),
                "note": args.note,
                "fixed_rss_bytes": fixed,
                "load_average_1_5_15": {
                    "start": [round(x, 2) for x in load_before],
                    "end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        )
        _write(args.out, old)
        print(f"updated {len(rows)} rows of {args.out}")
        return 0
    doc = {
        "schema": 1,
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(sys.argv),
        # Timings on a shared machine follow its load; the ratios compare runs of the same moments.
        "load_average_1_5_15": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "cuobjdump": str(exe),
        "start_up_rss_bytes": base_rss,
        "fixed_rss_bytes": fixed,
        "size_report_help_import_us": start_up_us,
        "wheels": rows,
    }
    _write(args.out, doc)
    print(
        f"start-up RSS (slim's modules imported): {base_rss / 2**20:.0f} MiB; in brackets: RSS above the command's "
        "fixed cost / largest member"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
