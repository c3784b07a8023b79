#!/usr/bin/env python3
"""Print the faiss tables (markdown) made from the results JSON files; --write puts them in docs/results.md: the
side-by-side (faiss-table block) and the slim wheel's slimmed and variant wheels (faiss-variants block).

    python3 lab/faiss/faiss-report.py            # print
    python3 lab/faiss/faiss-report.py --write    # replace docs/results.md's faiss-table block (atomically)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: lab.* and slimwheel

from lab.faissbench.report import (
    DLTO,
    JIT,
    MAIN_H200,
    PROFILES_HERE,
    PTX_RUN,
    PYPI,
    TEST_RERUNS,
    VARIANTS_END,
    VARIANTS_START,
    render,
    render_variants,
    replace_block,
)
from slimwheel.fsutil import write_text_atomic

REPO = Path(__file__).resolve().parents[2]


def load(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError as e:
        sys.exit(f"faiss-report: {path}: not valid JSON ({e})")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--readme", type=Path, default=REPO / "docs" / "results.md")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    reruns = [(name, load(REPO / name)) for name in TEST_RERUNS]
    h200 = load(REPO / MAIN_H200)
    table = render(
        load(REPO / PYPI),
        load(REPO / PROFILES_HERE),
        h200,
        reruns,
        load(REPO / JIT),
        load(REPO / PTX_RUN),
        load(REPO / DLTO),
    )
    variants = render_variants(h200)
    if not a.write:
        print(table + "\n" + variants, end="")
        return 0
    try:
        new = replace_block(replace_block(a.readme.read_text(), table), variants, VARIANTS_START, VARIANTS_END)
    except ValueError as e:
        sys.exit(f"faiss-report: {a.readme}: {e}")
    write_text_atomic(a.readme, new)
    print(f"written {a.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
