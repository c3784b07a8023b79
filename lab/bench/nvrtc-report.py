#!/usr/bin/env python3
"""examples/topk-nvrtc, precompiled against runtime-compiled: sizes here, figures from the H200, as Markdown.

    python3 lab/bench/nvrtc-report.py sizes PRECOMPILED.whl RUNTIME.whl   # measure the wheels -> lab/results/nvrtc-sizes.json
    python3 lab/bench/nvrtc-report.py table                              # print the table
    python3 lab/bench/nvrtc-report.py table --write                      # replace the table block in docs/records/nvrtc.md

The H200 figures come from lab/results/h200/nvrtc_h200.json (lab/gpu/nvrtc_check.py on the device machine).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: lab.* and slimwheel

from lab.blocks import replace_between

REPO = Path(__file__).resolve().parents[2]

from slimwheel.fsutil import write_text_atomic
from slimwheel.inspect.report import report_to_json
from slimwheel.inspect.scan import inspect_wheel, wheel_embedded_sources

SIZES = REPO / "lab" / "results" / "nvrtc-sizes.json"
H200 = REPO / "lab" / "results" / "h200" / "nvrtc_h200.json"
DOC = REPO / "docs" / "records" / "nvrtc.md"
START, END = "<!-- nvrtc-table:start -->", "<!-- nvrtc-table:end -->"


def measure_sizes(precompiled: Path, runtime: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": 1,
        "where": "the 2-core build machine",
        "command": "python3 lab/bench/nvrtc-report.py sizes PRECOMPILED.whl RUNTIME.whl",
    }
    for variant, path in (("precompiled", precompiled), ("runtime", runtime)):
        rep = report_to_json(inspect_wheel(path))
        totals = rep["totals"]
        out[variant] = {
            "wheel": rep["wheel"]["file"],
            "wheel_bytes": rep["wheel"]["bytes"],
            "installed_bytes": rep["wheel"]["installed_bytes"],
            "targets": rep["targets"],
            "fatbin_stored_bytes": sum(t["stored"] for t in totals),
            "fatbin_uncompressed_bytes": sum(t["uncompressed"] for t in totals),
            "embedded_source_bytes": sum(
                r.source_bytes for records in wheel_embedded_sources(path).values() for r in records
            ),
        }
    return out


def kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds >= 0.001 else f"{seconds * 1000:.2f} ms"


def render(sizes: dict[str, Any], h200: dict[str, Any]) -> str:
    """The comparison table; every figure from the two JSON files."""
    s = h200["summary"]
    pre, rt = sizes["precompiled"], sizes["runtime"]
    lazy, eager = s["lazy"], s["eager"]
    rows = [
        ("wheel (cp312-abi3)", kib(pre["wheel_bytes"]), kib(rt["wheel_bytes"])),
        ("installed", kib(pre["installed_bytes"]), kib(rt["installed_bytes"])),
        (
            "kernel code in the wheel",
            f"fatbin {kib(pre['fatbin_stored_bytes'])} ({kib(pre['fatbin_uncompressed_bytes'])} uncompressed), "
            + " ".join(pre["targets"]),
            f"sources {kib(rt['embedded_source_bytes'])}, compiled for the GPU it meets",
        ),
    ]
    for name, mode in (("LAZY", lazy), ("EAGER", eager)):
        p, cold, warm = mode["precompiled"], mode["runtime_empty_cache"], mode["runtime_warm_cache"]
        rows += [
            (
                f"GPU memory after import + context ({name}; bare context {mode['context_mib']:.0f} MiB)",
                f"{p['mem_after_init_mib']:.0f} MiB",
                f"{warm['mem_after_init_mib']:.0f} MiB",
            ),
            (
                f"GPU memory after the first call ({name})",
                f"{p['mem_after_first_call_mib']:.0f} MiB",
                f"{warm['mem_after_first_call_mib']:.0f} MiB",
            ),
            (
                f"first call: kernel ready ({name}; caches empty / slimwheel's disk cache)",
                ms(p["prepare_s"]),
                f"{ms(cold['prepare_s'])} / {ms(warm['prepare_s'])}",
            ),
        ]
        if (
            "runtime_driver_cache_only" in mode
        ):  # results from before lab/gpu/nvrtc_check.py separated the driver's cache
            rows.append(
                (
                    f"first call: kernel ready ({name}; only the driver's compute cache warm)",
                    "nothing to compile",
                    ms(mode["runtime_driver_cache_only"]["prepare_s"]),
                )
            )
    rows += [
        (
            f"each of the {s['instantiations']} instantiations ready (median, max)",
            f"{ms(s['precompiled_lazy_load_per_kernel_s']['median'])}, "
            f"{ms(s['precompiled_lazy_load_per_kernel_s']['max'])} (lazy load)",
            f"compile {ms(s['compile_per_kernel_s']['median'])}, {ms(s['compile_per_kernel_s']['max'])}; "
            f"disk cache {ms(s['cached_per_kernel_s']['median'])}, {ms(s['cached_per_kernel_s']['max'])}",
        ),
        (
            f"GPU memory after all {s['instantiations']} (LAZY / EAGER)",
            f"{s['mem_after_all_mib']['precompiled_lazy']:.0f} / {s['mem_after_all_mib']['precompiled_eager']:.0f} MiB",
            f"{s['mem_after_all_mib']['runtime']:.0f} MiB",
        ),
    ]
    for key, b in sorted(s["bench_ms"].items()):
        rows.append(
            (
                f"steady time per launch, {key}",
                f"{b['precompiled']:.3f} ms",
                f"{b['runtime']:.3f} ms ({b['runtime_vs_precompiled']:+.1%})",
            )
        )
    rows.append(
        (
            "results",
            "reference",
            f"{'identical' if s.get('identical_results') else 'DIFFERENT'} ({s.get('compared_arrays', 0)} arrays)",
        )
    )
    lines = ["| | precompiled | runtime-compiled (NVRTC) |", "| --- | ---: | ---: |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    env = h200["environment"]
    lines += [
        "",
        f"H200: {env.get('gpu')}, Python {env.get('python')}, nvidia-cuda-nvrtc {env.get('nvidia-cuda-nvrtc')}, "
        f"torch {env.get('torch')}; medians of fresh processes (lab/gpu/nvrtc_check.py, lab/results/h200/nvrtc_h200.json). "
        f"Sizes: {sizes['where']} (lab/results/nvrtc-sizes.json).",
        "",
        break_even(h200),
    ]
    if "load_api_mib" in s:
        lines += [
            "",
            "GPU memory of loading one cached cubin through the driver's module API / library API (fresh processes): "
            + " / ".join(", ".join(f"{v:+.0f} MiB" for v in s["load_api_mib"][api]) for api in ("module", "library"))
            + ".",
        ]
    return "\n".join(lines) + "\n"


def break_even(h200: dict[str, Any]) -> str:
    """How many distinct instantiations a process can use before the runtime build's kernel costs exceed what loading
    the precompiled wheel costs more than loading the runtime one (import + context creation, medians of fresh
    processes). A difference inside the spread between processes is reported as not measurable."""
    s = h200["summary"]
    starts = [
        p["import_s"] + p["init_s"]
        for p in h200["probes"]
        if p.get("spec", {}).get("what") == "first" and "error" not in p and "superseded" not in p
    ]
    spread = max(starts) - min(starts)
    compile_s = s["compile_per_kernel_s"]["median"]
    cached_s = s["cached_per_kernel_s"]["median"]
    parts = []
    for mode in ("lazy", "eager"):
        pre, rt = s[mode]["precompiled"], s[mode]["runtime_warm_cache"]
        extra = (pre["import_s"] + pre["init_s"]) - (rt["import_s"] + rt["init_s"])
        if abs(extra) < spread:
            parts.append(
                f"{mode.upper()}: {extra * 1000:+.1f} ms, inside the {spread * 1000:.0f} ms spread between "
                "fresh processes, so not measurable"
            )
        else:
            parts.append(
                f"{mode.upper()}: {extra * 1000:+.1f} ms = {int(max(extra, 0) // compile_s)} compiled or "
                f"{int(max(extra, 0) // cached_s)} cached kernels"
            )
    lazy_each = s["precompiled_lazy_load_per_kernel_s"]["median"]
    return (
        "Break-even (the precompiled wheel's extra load, import + context, against the runtime build's cost per "
        f"kernel: compile {compile_s * 1000:.0f} ms, disk cache {cached_s * 1000:.2f} ms): " + "; ".join(parts) + ". "
        f"Per kernel, a lazily loaded precompiled one costs {lazy_each * 1000:.2f} ms."
    )


def replace_block(text: str, table: str) -> str:
    try:
        return replace_between(text, START, END, table)
    except ValueError:
        raise SystemExit(f"nvrtc-report: {DOC} has no {START} ... {END} block") from None


def load(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"nvrtc-report: {path}: {e}") from None
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True)
    sz = sub.add_parser("sizes")
    sz.add_argument("precompiled", type=Path)
    sz.add_argument("runtime", type=Path)
    tb = sub.add_parser("table")
    tb.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    if a.command == "sizes":
        write_text_atomic(SIZES, json.dumps(measure_sizes(a.precompiled, a.runtime), indent=2) + "\n")
        print(SIZES)
        return 0
    table = render(load(SIZES), load(H200))
    if a.write:
        write_text_atomic(DOC, replace_block(DOC.read_text(), table))
    else:
        print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
