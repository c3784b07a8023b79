"""The measured tables of docs/results.md for slim/variants and runtime compilation, rendered from the results JSON
files; lab/tests/test_tables.py fails when the page drifts from them.

    python -m lab.tables            # print the blocks
    python -m lab.tables --write    # rewrite them in docs/results.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.blocks import replace_between
from lab.scriptload import load_script

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results.md"
VARIANTS = REPO / "lab" / "results" / "example-variants.json"
# PyPI's faiss-gpu 1.15.1 slimmed to 8.0-9.0 and split into variants (issue 16: sizes only; it needs CUDA 12).
PYPI_FAISS_VARIANTS = REPO / "lab" / "results" / "faiss-gpu-1.15.1-variants.json"


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n < 10 * 2**20 else f"{n / 2**20:.1f} MiB"


def variants_table(path: Path = VARIANTS) -> str:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    slim_gpus = data.get("command", "").partition("--archs ")[2].split(" ")[0] or "9.0"
    lines = [
        f"{data['what']}; {data['measured_on']}; `{data['command']}` (`{path.relative_to(REPO)}`).",
        "",
        "| wheel | GPUs it serves natively | targets | zip | installed | vs universal |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for w in data["wheels"]:
        gpus = ", ".join(w.get("gpus", [])) or ("every GPU it had" if w["kind"] == "universal" else slim_gpus)
        lines.append(
            f"| {w['label']} | {gpus} | {' '.join(w['targets'])} | {_kib(w['bytes'])} | "
            f"{_kib(w['installed_bytes'])} | {w['vs_universal']:.2f}x |"
        )
    lines.append("")
    lines.append(
        "Every slimmed and variant wheel passed `slimwheel check` with its GPUs required."
        if data["checks_ok"]
        else "NOT every slimmed and variant wheel passed `slimwheel check` with its GPUs required."
    )
    return "\n".join(lines) + "\n"


def nvrtc_table() -> str:
    spec = importlib.util.spec_from_file_location("nvrtc_report", REPO / "lab" / "bench" / "nvrtc-report.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table: str = mod.render(mod.load(mod.SIZES), mod.load(mod.H200))
    return table


BLOCKS: dict[str, Callable[[], str]] = {
    "variants": variants_table,
    "faiss-pypi-variants": lambda: variants_table(PYPI_FAISS_VARIANTS),
    "nvrtc": nvrtc_table,
}


TORCH_OP = REPO / "lab" / "results" / "torch-op"  # the build reports of examples/torch-op (this machine)
TORCH_OP_H200 = REPO / "lab" / "results" / "h200" / "torch_op_h200.json"  # lab/gpu/torch_op_check.py
TORCH_WHEELS = sorted((REPO / "lab" / "results").glob("torch-wheel-*.json"))  # lab/bench/torch_wheel_audit.py


def torch_op_table() -> str:
    """examples/torch-op: each wheel as built here and as it ran on the H200."""
    h200 = {r["wheel"]: r for r in json.loads(TORCH_OP_H200.read_text(encoding="utf-8"))["results"]}
    rows = [
        "| wheel | zip | requires | torch symbols (check) | serves torch | H200: cases equal to torch "
        "(bitwise / within 1e-6) | CUDA libraries mapped | GPU memory: context, after the first call |",
        "| --- | ---: | --- | --- | --- | --- | --- | --- |",
    ]
    for path in sorted(TORCH_OP.glob("*.slimwheel.json"), reverse=True):
        b = json.loads(path.read_text(encoding="utf-8"))
        t = b["torch"]
        name = Path(b["wheel"]).name
        r = h200[name]
        cases = r["cases"]
        bitwise = sum(c["equal_to_torch_fp32"] for c in cases)
        within = sum(c["ok"] for c in cases)
        libs = r["cuda_libraries_mapped"]
        where = "each once, all torch's" if r["each_once"] and r["only_torchs_copies"] else "NOT only torch's"
        symbols = (
            f"{t['unstable_symbols']} C++ (classic API)"
            if t["abi"] == "unstable"
            else f"{t['stable_symbols']} stable C shim, newest from {t['stable_floor']}"
        )
        serves = t["serves"][0] + (" only" if len(t["serves"]) == 1 else " and later")
        rows.append(
            f"| {name} | {_kib(r['wheel_bytes'])} | {', '.join(b['repair']['requires'])} | {symbols} | "
            f"{serves} | {bitwise} / {within} of {len(cases)} | {len(libs)}, {where} | "
            f"{r['memory']['after_context_process_mib']} MiB, {r['memory']['after_first_call_process_mib']} MiB |"
        )
    gpu = next(iter(h200.values()))
    note = (
        f"\nOn {gpu['gpu']} with torch {gpu['torch']} (Python {json.loads(TORCH_OP_H200.read_text())['python']}): "
        f"`python3 lab/gpu/torch_op_check.py OUT.json WHEEL...`; process memory by nvidia-smi, of which torch's "
        f"allocator holds {gpu['memory']['torch_allocated_mib']:.0f} MiB (three 4 MiB tensors)."
    )
    return "\n".join(rows) + "\n" + note + "\n"


def torch_wheels_table() -> str:
    mod = load_script("lab/bench/torch_wheel_audit.py")
    return "".join(mod.markdown(json.loads(p.read_text(encoding="utf-8"))) for p in TORCH_WHEELS)


# lab/bench/compiler_cache.py's runs on the examples, isolated and not (issue 39)
COMPILER_CACHE = tuple(REPO / "lab" / "results" / f"compiler-cache-{n}.json" for n in ("knn", "knn-no-isolation"))


def compiler_cache_table() -> str:
    mod = load_script("lab/bench/compiler_cache.py")
    return "\n".join(mod.markdown(json.loads(p.read_text(encoding="utf-8"))) for p in COMPILER_CACHE)


# lab/bench/check_cost.py: check against size-report on every corpus wheel (issue 36)
CHECK_COST = REPO / "lab" / "results" / "check-vs-size-report.json"


def check_cost_table() -> str:
    mod = load_script("lab/bench/check_cost.py")
    return str(mod.markdown(json.loads(CHECK_COST.read_text(encoding="utf-8"))))


BLOCKS["torch-op"] = torch_op_table
BLOCKS["torch-wheels"] = torch_wheels_table
BLOCKS["compiler-cache"] = compiler_cache_table
BLOCKS["check-cost"] = check_cost_table


# Which page holds which blocks: the torch extension's figures are in the README (issue 26), the compiler cache's in
# its page, the rest in the record.
PAGES = {REPO / "README.md": ("torch-op", "torch-wheels"), REPO / "docs" / "compiler-cache.md": ("compiler-cache",)}


def blocks_of(page: Path) -> tuple[str, ...]:
    return PAGES.get(page, tuple(n for n in BLOCKS if all(n not in v for v in PAGES.values())))


def render(text: str, page: Path = RESULTS) -> str:
    for name in blocks_of(page):
        start, end = f"<!-- table:{name}:start -->", f"<!-- table:{name}:end -->"
        if start not in text or end not in text:  # before make(): a missing block is not worth rendering
            raise SystemExit(f"lab/tables.py: {page.name} has no {start} ... {end} block")
        text = replace_between(text, start, end, BLOCKS[name]())
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    for page in (RESULTS, *PAGES):
        text = page.read_text(encoding="utf-8")
        new = render(text, page)
        if a.write:
            page.write_text(new, encoding="utf-8")
        else:
            for name in blocks_of(page):
                print(BLOCKS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main())
