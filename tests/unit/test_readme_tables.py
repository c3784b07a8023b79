"""The README's slim/variants and NVRTC tables are renderings of the committed results JSON (scripts/readme-tables.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_tables", REPO / "scripts" / "readme-tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_tables_are_current() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert _module().render(text) == text, "run: python3 scripts/readme-tables.py --write"
