"""The README's slim/variants and NVRTC tables are renderings of the committed results JSON (scripts/readme-tables.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    return load_script("scripts/readme-tables.py")


def test_readme_tables_are_current() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert _module().render(text) == text, "run: python3 scripts/readme-tables.py --write"
