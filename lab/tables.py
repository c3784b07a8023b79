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

REPO = Path(__file__).resolve().parents[1]
README = REPO / "docs" / "results.md"
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
        lines.append(f"| {w['label']} | {gpus} | {' '.join(w['targets'])} | {_kib(w['bytes'])} | "
                     f"{_kib(w['installed_bytes'])} | {w['vs_universal']:.2f}x |")  # fmt: skip
    lines.append("")
    lines.append("Every slimmed and variant wheel passed `slimwheel check` with its GPUs required." if data["checks_ok"]
                 else "NOT every slimmed and variant wheel passed `slimwheel check` with its GPUs required.")
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


def render(text: str) -> str:
    for name, make in BLOCKS.items():
        start, end = f"<!-- table:{name}:start -->", f"<!-- table:{name}:end -->"
        if start not in text or end not in text:  # before make(): a missing block is not worth rendering
            raise SystemExit(f"readme-tables: docs/results.md has no {start} ... {end} block")
        text = replace_between(text, start, end, make())
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if a.write:
        README.write_text(new, encoding="utf-8")
    else:
        for make in BLOCKS.values():
            print(make())
    return 0


if __name__ == "__main__":
    sys.exit(main())
