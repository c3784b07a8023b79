"""The README's table of where the faiss wheels install is a rendering of lab/results/floor-route.json."""

from __future__ import annotations

import json
import re

from lab.scriptload import REPO, load_script


def test_readme_floor_table_is_current() -> None:
    mod = load_script("lab/bench/floor_route.py")
    data = json.loads((REPO / "lab/results/floor-route.json").read_text(encoding="utf-8"))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- floor-table:start -->\n(.*?)\n<!-- floor-table:end -->", readme, re.S)
    assert m, "README.md has no floor-table block"
    assert m.group(1) == mod.table(data), "run: python lab/bench/floor_route.py --table lab/results/floor-route.json"
