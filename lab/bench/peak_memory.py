#!/usr/bin/env python3
"""Peak memory of `slimwheel size-report`, `check` and `repair` on the zip bombs of issue 12 item 1.

The wheels are built in a temporary folder in seconds (a full-flushed deflate block of zeros, repeated; see
testkit/zipraw.py) by a child process, and each command runs as its own child process; its peak RSS comes
from os.wait4. A forked child's peak includes the RSS it inherited before exec, so this script keeps its own small
(it never holds a wheel) and reports it beside the figures.

    python lab/bench/peak_memory.py [--json lab/results/peak-memory.json] [--no-raised]

Cases:
  lying   a 5.95 MB wheel whose ELF member declares 16 bytes and inflates to 6 GB (before: 5.9 GB, MemoryError)
  honest  a 2.2 MB wheel whose ELF member declares and inflates to 2.2 GB (before: 2.18 GB in every command);
          refused by the default ratio limit (100:1 above 64 MiB)
  honest, limits raised   the same wheel read with ZipLimits(ratio=2000) through the library: the member is spooled
          to a temporary file and mapped, which shows what reading it costs (skip with --no-raised)
Requirement: every case under 300 MB. Exit status 1 when one is not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LIMIT_MB = 300
RAISED = (
    "import sys; from pathlib import Path; from slimwheel.inspect.scan import inspect_wheel; "
    "from slimwheel.inspect.zipread import ZipLimits; "
    "r = inspect_wheel(Path(sys.argv[1]), ZipLimits(ratio=2000)); "
    "print(f'read: {len(r.elfs)} ELF, {r.installed_size} bytes installed, targets {[str(t) for t in r.targets]}')"
)


@dataclass(frozen=True, kw_only=True)
class Run:
    case: str
    wheel_bytes: int
    command: str
    exit: int
    peak_rss_mb: float  # 10**6 bytes
    seconds: float
    output: str  # the last line the command printed


def build(folder: Path) -> dict[str, Path]:
    """Write the bomb wheels into `folder` (run in a child process: see the docstring)."""
    sys.path.insert(0, str(REPO))  # the repository root: testkit (the synthesizers)
    from testkit.binsynth import elf, fatbin, fatbin_entry
    from testkit.zipraw import RawMember, raw_zip, wheel_members, zeros_stream

    so = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90, payload=b"\1" * 256)])}, needed=("libc.so.6",))
    lie, _crc, _size = zeros_stream(so, 6_000_000_000, b"", with_crc=False)
    lying = raw_zip(
        folder / "lying-1.0-py3-none-any.whl",
        [*wheel_members("lying"), RawMember(name="lying/_ext.so", payload=lie, crc=0, declared=16)],
    )
    big, crc, size = zeros_stream(so, 2_200_000_000, b"")
    honest = raw_zip(
        folder / "honest-1.0-py3-none-any.whl",
        [*wheel_members("honest"), RawMember(name="honest/_ext.so", payload=big, crc=crc, declared=size)],
    )
    return {"lying": lying, "honest": honest}


def measure(argv: list[str], env: dict[str, str]) -> tuple[int, float, float, str]:
    """(exit status, peak RSS in MB, seconds, last line of its output) of one child process."""
    t = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    assert child.stdout is not None
    out = child.stdout.read().decode(errors="replace")
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in out.splitlines() if line.strip()]
    return child.returncode, usage.ru_maxrss * 1024 / 1e6, time.perf_counter() - t, lines[-1] if lines else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="write the numbers here (lab/results/peak-memory.json)")
    ap.add_argument("--no-raised", action="store_true", help="skip the case that inflates 2.2 GB to a temp file")
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child that writes the wheels
    args = ap.parse_args()
    if args.build:
        build(args.build)
        return 0
    rows: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="slimwheel-bombs-") as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, __file__, "--build", tmp], check=True)
        wheels = {"lying": folder / "lying-1.0-py3-none-any.whl", "honest": folder / "honest-1.0-py3-none-any.whl"}
        env = dict(os.environ, TMPDIR=tmp)  # the spool of the raised case lands here and goes with it
        runs: list[tuple[str, str, list[str]]] = []
        for case, wheel in wheels.items():
            for cmd in ("size-report", "check"):
                runs.append((case, cmd, [sys.executable, "-m", "slimwheel", "-q", cmd, str(wheel)]))
            out = str(folder / f"repaired-{case}")
            runs.append((case, "repair", [sys.executable, "-m", "slimwheel", "-q", "repair", "-w", out, str(wheel)]))
        if not args.no_raised:
            raised = [sys.executable, "-c", RAISED, str(wheels["honest"])]
            runs.append(("honest", "library, ZipLimits(ratio=2000)", raised))
        for case, cmd, argv in runs:
            code, mb, secs, last = measure(argv, env)
            wheel = wheels[case]
            rows.append(
                Run(
                    case=case,
                    wheel_bytes=wheel.stat().st_size,
                    command=cmd,
                    exit=code,
                    peak_rss_mb=round(mb, 1),
                    seconds=round(secs, 2),
                    output=last.replace(tmp, "$TMP")[:300],
                )
            )
    print(f"{'case':8} {'wheel MB':>8}  {'command':32} {'exit':>4} {'peak RSS MB':>11} {'s':>6}  output")
    for r in rows:
        print(
            f"{r.case:8} {r.wheel_bytes / 1e6:8.2f}  {r.command:32} {r.exit:>4} {r.peak_rss_mb:>11.1f} "
            f"{r.seconds:>6.2f}  {r.output[:90]}"
        )
    worst = max(r.peak_rss_mb for r in rows)
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    print(f"worst peak RSS {worst:.1f} MB (requirement: under {LIMIT_MB} MB); MB = 10**6 bytes")
    print(f"(this script's own peak RSS, which a child inherits until exec: {parent:.1f} MB)")
    if args.json:
        doc = {
            "schema": 1,
            "what": "peak RSS of slimwheel on the zip bombs of issue 12 item 1 (lab/bench/peak_memory.py)",
            "machine": f"{platform.node()} ({platform.machine()}): {os.cpu_count()} CPUs, "
            f"{platform.python_implementation()} "
            f"{platform.python_version()}",
            "limit_mb": LIMIT_MB,
            "parent_rss_mb": round(parent, 1),
            "runs": [asdict(r) for r in rows],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp_json = args.json.with_name(f".{args.json.name}.tmp")
        tmp_json.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp_json, args.json)
    return 0 if worst < LIMIT_MB else 1


if __name__ == "__main__":
    sys.exit(main())
