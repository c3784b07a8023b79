"""What `check` costs over `size-report` on every corpus wheel (issue 36 item 1: at most 1.1x), from one run.

Both commands run as users run them, with the same output format (`--format json`: check's JSON holds the same
report plus its verdicts), page cache warm, slimwheel's bytecode written. `check` runs `--offline`: the package index
is another machine's time, not this one's. The runs are interleaved (each repeat times every wheel, size-report and
check in turns, their order flipped every other repeat) so that a change of load on this shared machine falls on both
commands alike; each command's least and median time per wheel are kept, the ratio is of the least times (the one
least disturbed by other work) with the ratio of the medians beside it.

    .venv/bin/python lab/bench/check_cost.py                 # every corpus wheel: lab/results/check-vs-size-report.json
    .venv/bin/python lab/bench/check_cost.py --only faiss    # wheels whose requirement contains one of these
    .venv/bin/python lab/bench/check_cost.py --markdown      # the table of the results file, no run

The corpus (pins, download cache) is testkit/corpus.py; the process helpers (slimwheel as installed, atomic results)
are lab/bench/cost.py's. docs/results.md's `check-cost` block is this file's `markdown` of the results
(`python -m lab.tables --write`; lab/tests/test_tables.py fails when it drifts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: lab (the shared helpers) and testkit (the corpus)
from lab.scriptload import load_script
from slimwheel.errors import ExitCode
from testkit import corpus

cost = load_script("lab/bench/cost.py")
OUT = REPO / "lab" / "results" / "check-vs-size-report.json"
GOAL = 1.1  # issue 36: check at most 1.1x size-report on every corpus wheel
# Exit statuses of a verdict (check's own codes): the command did all its work.
VERDICTS = {
    ExitCode.OK,
    ExitCode.OVER_BUDGET,
    ExitCode.MISSING_COVERAGE,
    ExitCode.INCONSISTENT_DEPENDENCIES,
    ExitCode.CHECK_FAILED,
    ExitCode.BAD_RECORD,
    ExitCode.DEBUG_INFO,
    ExitCode.ABOVE_PLATFORM_FLOOR,
}


def commands(wheel: Path) -> dict[str, list[str]]:
    return {
        "size_report": [cost.SLIMWHEEL, "-q", "size-report", "--format", "json", str(wheel)],
        "check": [cost.SLIMWHEEL, "-q", "check", "--offline", "--format", "json", str(wheel)],
    }


def work(wheel: Path) -> dict[str, int]:
    """What check inflates and hashes that size-report does not (from the zip directory and the members' first
    bytes): the members the report never reads (inflated for the RECORD verdict only) and every member's bytes, hashed."""
    from slimwheel.inspect.scan import report_members
    from slimwheel.inspect.wheel import WheelArchive

    with WheelArchive(wheel) as archive:
        read = {m.name for m in report_members(archive)}
        others = [m for m in archive.members if m.name not in read]
        return {
            "members": len(archive.members),
            "only_check_members": len(others),
            "only_check_bytes": sum(m.uncompressed for m in others),
            "hashed_bytes": sum(m.uncompressed for m in archive.members),
        }


def _seconds(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user and system, every thread of the process) and exit status of one run."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cost.AS_INSTALLED)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return took, usage.ru_utime + usage.ru_stime, proc.returncode


# Run in a fresh interpreter: run one command's CLI on a wheel, then print the modules it loaded (one per line).
_MODULES = """
import contextlib, io, sys
from slimwheel.cli import main
sys.argv = ["slimwheel", "-q", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main()
sys.__stdout__.write("\\n".join(sorted(sys.modules)))
"""

# Run in a fresh interpreter: import the modules given on stdin's first line (size-report's), then time importing
# those of its second line (the ones only check loads), in that order.
_IMPORT = """
import importlib, sys, time
first, second = (line.split() for line in sys.stdin.read().split("\\n")[:2])
for name in first:
    try:
        importlib.import_module(name)
    except Exception:
        pass
t = time.perf_counter()
for name in second:
    try:
        importlib.import_module(name)
    except Exception:
        pass
print(time.perf_counter() - t)
"""


def _modules(args: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _MODULES, *args], capture_output=True, text=True, check=True, env=cost.AS_INSTALLED
    )
    return out.stdout.split()


def check_imports(wheel: Path, repeat: int) -> dict[str, Any]:
    """What loading check's own code costs on this wheel: the modules a `check` run loads that a `size-report` run
    of the same wheel does not, imported after size-report's (least of `repeat` fresh interpreters). Check must run
    this code (its verdicts) and holds Python's lock while importing it, so no second core hides it."""
    report = _modules(["size-report", "--format", "json", str(wheel)])
    checked = _modules(["check", "--offline", "--format", "json", str(wheel)])
    only = [m for m in checked if m not in set(report)]
    stdin = " ".join(report) + "\n" + " ".join(only) + "\n"
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", _IMPORT],
                input=stdin,
                capture_output=True,
                text=True,
                check=True,
                env=cost.AS_INSTALLED,
            ).stdout
        )
        for _ in range(repeat)
    ]
    return {"modules": len(only), "seconds": round(min(times), 4)}


def sha256_rate() -> float:
    """SHA-256 throughput of one core here, bytes per second (least time of 3 over 64 MiB): check must hash every
    member's bytes to verify RECORD, and size-report hashes none."""
    import hashlib

    data = os.urandom(64 << 20)
    best = min(_timed(lambda: hashlib.sha256(data).digest()) for _ in range(3))
    return len(data) / best


def _timed(f: Any) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def measure(wheels: list[corpus.CorpusWheel], repeat: int) -> list[dict[str, Any]]:
    """Every wheel's times, `repeat` interleaved rounds after one untimed round (bytecode, page cache)."""
    paths = {w.requirement: corpus.ensure(w) for w in wheels}
    times: dict[str, dict[str, list[float]]] = {r: {"size_report": [], "check": []} for r in paths}
    cpu: dict[str, dict[str, list[float]]] = {r: {"size_report": [], "check": []} for r in paths}
    exits: dict[str, dict[str, int]] = {r: {} for r in paths}
    for round_ in range(repeat + 1):
        for requirement, path in paths.items():
            cmds = list(commands(path).items())
            for what, cmd in cmds if round_ % 2 else reversed(cmds):
                took, used, rc = _seconds(cmd)
                exits[requirement][what] = rc
                if round_:
                    times[requirement][what].append(took)
                    cpu[requirement][what].append(used)
        if round_:
            print(f"round {round_} of {repeat} done, load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for requirement, path in paths.items():
        t = times[requirement]
        if exits[requirement]["size_report"] != 0 or exits[requirement]["check"] not in VERDICTS:
            raise SystemExit(
                f"{requirement}: size-report exit {exits[requirement]['size_report']}, check exit "
                f"{exits[requirement]['check']}: a command failed, its time means nothing"
            )
        least = {k: min(v) for k, v in t.items()}
        # the CPU time of the run whose wall time was least
        cpu_least = {k: cpu[requirement][k][v.index(min(v))] for k, v in t.items()}
        median = {k: statistics.median(v) for k, v in t.items()}
        rows.append(
            {
                "requirement": requirement,
                "wheel": path.name,
                "bytes": path.stat().st_size,
                "check_exit": exits[requirement]["check"],
                "size_report_s": {"min": round(least["size_report"], 3), "median": round(median["size_report"], 3)},
                "check_s": {"min": round(least["check"], 3), "median": round(median["check"], 3)},
                "ratio_min": round(least["check"] / least["size_report"], 3),
                "ratio_median": round(median["check"] / median["size_report"], 3),
                "runs": {k: [round(x, 3) for x in v] for k, v in t.items()},
                "check_only_work": work(path),
                "cpu_s": {k: round(v, 3) for k, v in cpu_least.items()},
                "check_imports": check_imports(path, repeat),
            }
        )
    return rows


def markdown(doc: dict[str, Any]) -> str:
    """The table for docs/results.md, from a results file (never from a run)."""
    rows = doc["wheels"]
    goal = doc["goal"]
    met = sum(r["ratio_min"] <= goal for r in rows)
    load = doc["load_average_1_5_15"]
    rate = doc.get("sha256_bytes_per_s")
    # The goal leaves check (goal - 1) x size-report's least time for all it adds; its own modules' import alone
    # (Python's lock held, nothing to overlap on a small wheel) is a part of what it adds.
    over = [
        r
        for r in rows
        if "check_imports" in r and r["check_imports"]["seconds"] > (goal - 1) * r["size_report_s"]["min"]
    ]
    out = [
        f"Measured {doc['date']} on {doc['machine']} at {doc['commit']} by `{doc['command']}`: "
        f"{doc['repeat']} interleaved rounds, both commands with `--format json`, `check --offline`; load average "
        f"(1 min) {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end. Goal: check at most "
        f"{goal}x size-report; met on {met} of {len(rows)} wheels (ratio of the least times).",
    ]
    if rate is not None:
        out[-1] += (
            f" SHA-256 here: {rate / 2**20:,.0f} MiB/s on one core. On {len(over)} of {len(rows)} wheels importing "
            f"check's own modules alone takes longer than the {goal - 1:.1f}x of size-report's time the goal leaves "
            "check for all it adds."
        )
    out += [
        "",
        "| wheel | size | size-report (least / median) | check (least / median) | check / size-report: least "
        "(median) | CPU s: size-report / check | goal leaves check | check's own imports | SHA-256 of every "
        "member (one core) | members only check inflates |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        s, c = r["size_report_s"], r["check_s"]
        w = r.get("check_only_work")
        cpu = r.get("cpu_s")
        imp = r.get("check_imports")
        hashed = f"{w['hashed_bytes'] / 2**20:.1f} MiB: {w['hashed_bytes'] / rate:.2f} s" if w and rate else "-"
        only = (
            f"{w['only_check_members']:,} of {w['members']:,} ({w['only_check_bytes'] / 2**20:.1f} MiB)" if w else "-"
        )
        out.append(
            f"| {r['requirement']} | {r['bytes'] / 2**20:.1f} MiB | {s['min']:.2f} s / {s['median']:.2f} s | "
            f"{c['min']:.2f} s / {c['median']:.2f} s | {r['ratio_min']:.2f} ({r['ratio_median']:.2f}) | "
            + (f"{cpu['size_report']:.2f} / {cpu['check']:.2f}" if cpu else "-")
            + f" | {(goal - 1) * s['min'] * 1000:.0f} ms | "
            + (f"{imp['seconds'] * 1000:.0f} ms ({imp['modules']} modules)" if imp else "-")
            + f" | {hashed} | {only} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--only", default="", help="comma-separated parts of requirements to measure")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of --out and stop")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text(encoding="utf-8"))), end="")
        return 0
    parts = [p for p in args.only.split(",") if p]
    chosen = [w for w in corpus.CORPUS if not parts or any(p in w.requirement for p in parts)]
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rate = sha256_rate()
    rows = measure(chosen, args.repeat)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "slimwheel"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    doc = {
        "schema": 1,
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}",
        "date": started,
        "commit": (commit or "unknown") + (" with uncommitted changes" if changed else ""),
        "command": "lab/bench/check_cost.py " + " ".join(sys.argv[1:]),
        # Timings on a shared machine follow its load; the ratios compare runs of the same moments.
        "load_average_1_5_15": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "repeat": args.repeat,
        "goal": GOAL,
        "sha256_bytes_per_s": round(rate),
        "wheels": rows,
    }
    print(f"{'wheel':34} {'size-report':>12} {'check':>8} {'ratio':>6} {'median':>7}")
    for r in rows:
        print(
            f"{r['requirement']:34} {r['size_report_s']['min']:11.3f}s {r['check_s']['min']:7.3f}s "
            f"{r['ratio_min']:6.2f} {r['ratio_median']:7.2f}"
        )
    cost._write(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
