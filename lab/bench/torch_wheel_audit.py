"""A published torch-extension wheel through `slimwheel size-report`, `check` and `slim --archs 9.0`: sizes, targets,
what it takes from torch, every check failure by kind, and the slimmed wheel's sizes and verdict, into one JSON
(lab/results/torch-wheel-<name>.json); `--markdown JSON` prints the README rows from it.

    python lab/bench/torch_wheel_audit.py WHEEL [--out lab/results/torch-wheel-sgl-kernel.json]
    python lab/bench/torch_wheel_audit.py --markdown lab/results/torch-wheel-sgl-kernel.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

SLIMWHEEL = [sys.executable, "-m", "slimwheel"]


def _run(args: list[str]) -> tuple[int, float]:
    t0 = time.monotonic()
    proc = subprocess.run([*SLIMWHEEL, *args], capture_output=True, text=True)
    if proc.returncode not in (0, 10, 11, 12, 13, 14):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.returncode, round(time.monotonic() - t0, 1)


def _failures(verdict: dict[str, object]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for f in verdict["failures"]:  # type: ignore[attr-defined]
        out[f["kind"]].append(f["message"])
    return dict(out)


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8")
    return [
        v for k, _, v in (line.partition(": ") for line in text.split("\n\n")[0].splitlines()) if k == "Requires-Dist"
    ]


def audit(wheel: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        _size_rc, size_s = _run(["size-report", "--format", "json", "-o", str(t / "size.json"), str(wheel)])
        check_rc, check_s = _run(["check", "--format", "json", "-o", str(t / "check.json"), str(wheel)])
        slim_rc, slim_s = _run(
            ["slim", str(wheel), "--archs", "9.0", "-o", str(t / "slim"), "--report", str(t / "slim.json")]
        )
        size = json.loads((t / "size.json").read_text())["wheels"][0]
        check = json.loads((t / "check.json").read_text())["verdicts"][0]
        slim = json.loads((t / "slim.json").read_text())
    torch_notes = [n for n in check["notes"] if n.startswith("torch:")]
    elfs = size["elfs"]
    code: dict[str, list[str]] = {}
    for e in elfs:
        cubins = sorted(
            {x["arch"] for fb in e.get("fatbins", []) for x in fb.get("entries", []) if x.get("kind") == "sass"}
        )
        ptx = sorted(
            {x["arch"] for fb in e.get("fatbins", []) for x in fb.get("entries", []) if x.get("kind") == "ptx"}
        )
        if cubins or ptx:
            code[e["name"]] = [f"sm_{a}" for a in cubins] + [f"compute_{a}" for a in ptx]
    return {
        "schema": 1,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": f"python lab/bench/torch_wheel_audit.py {wheel.name}",
        "wheel": wheel.name,
        "zip_bytes": wheel.stat().st_size,
        "installed_bytes": size["wheel"]["installed_bytes"],
        "tags": size["wheel"]["tags"],
        "fatbin_bytes": slim["sizes"]["before_fatbin_bytes"],
        "targets": size["targets"],
        "cuda": {k: size["cuda"].get(k) for k in ("major", "major_evidence", "ptx_release", "driver_floor")},
        "requires_dist": _requires(wheel),
        "code_per_file": code,
        "check": {"exit": check_rc, "seconds": check_s, "failures": _failures(check), "torch": torch_notes},
        "size_report_seconds": size_s,
        "slim_9_0": {
            "exit": slim_rc,
            "seconds": slim_s,
            "wheel": Path(slim["wheel"]).name,
            "zip_bytes": slim["sizes"]["after_bytes"],
            "fatbin_bytes": slim["sizes"]["after_fatbin_bytes"],
            "targets_after": slim["targets_after"],
            "failures": _failures(slim["check"]),
            "notes": slim["check"]["notes"],
        },
    }


def markdown(data: dict[str, Any]) -> str:  # the audit's JSON record
    def mib(b: int) -> str:
        return f"{int(b) / 2**20:.1f} MiB"

    def kinds(f: dict[str, list[str]]) -> str:
        return ", ".join(f"{k} ({len(v)})" for k, v in sorted(f.items())) or "none"

    s = data["slim_9_0"]
    c = data["check"]
    assert isinstance(s, dict) and isinstance(c, dict)
    rows = [
        "| wheel | zip | fatbins (installed) | targets | `check` fails on | `slim --archs 9.0` |",
        "| --- | ---: | ---: | --- | --- | --- |",
        f"| {data['wheel']} | {mib(data['zip_bytes'])} | {mib(data['fatbin_bytes'])} | {' '.join(data['targets'])} "
        f"| {kinds(c['failures'])} | {mib(s['zip_bytes'])} ({int(s['zip_bytes']) / int(data['zip_bytes']):.2f}x), "
        f"{' '.join(s['targets_after'])}; fails on {kinds(s['failures'])} |",
    ]
    req = data["requires_dist"]
    facts = [f"Requires-Dist: {', '.join(req) if req else 'none'}"]
    facts += [f"{n.removeprefix('torch: ')}" for n in c["torch"]]
    code = data["code_per_file"]
    assert isinstance(code, dict)
    for name in sorted(code):  # the package's own modules (lib/ holds its bundled libraries)
        if name.endswith(".so") and "/" in name and not name.startswith("lib/"):
            facts.append(f"`{name}`: {' '.join(code[name])}")
    return "\n".join(rows) + "\n\n" + "\n".join(f"- {f}" for f in facts) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel", nargs="?", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--markdown", type=Path)
    a = ap.parse_args()
    if a.markdown:
        print(markdown(json.loads(a.markdown.read_text())), end="")
        return
    data = audit(a.wheel)
    out = a.out or Path(__file__).resolve().parents[1] / "results" / f"torch-wheel-{a.wheel.name.split('-')[0]}.json"
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
