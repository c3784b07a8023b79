"""docs/records/nvrtc.md's table comes from the results JSON files (lab/bench/nvrtc-report.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType

from lab.scriptload import load_script

REPO = Path(__file__).resolve().parents[2]


def report_module() -> ModuleType:
    return load_script("lab/bench/nvrtc-report.py")


def test_the_committed_table_is_the_rendering_of_the_committed_results() -> None:
    mod = report_module()
    table = mod.render(json.loads(mod.SIZES.read_text()), json.loads(mod.H200.read_text()))
    doc = mod.DOC.read_text()
    assert mod.replace_block(doc, table) == doc, "run: python3 lab/bench/nvrtc-report.py table --write"


def test_figures_come_from_the_json() -> None:
    mod = report_module()
    sizes = json.loads(mod.SIZES.read_text())
    h200 = copy.deepcopy(json.loads(mod.H200.read_text()))
    sizes["runtime"]["wheel_bytes"] = 123 * 1024
    h200["summary"]["lazy"]["precompiled"]["mem_after_first_call_mib"] = 777.0
    h200["summary"]["identical_results"] = False
    table = mod.render(sizes, h200)
    assert "| 123.0 KiB |" in table and "| 777 MiB |" in table and "DIFFERENT" in table
