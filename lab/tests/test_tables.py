"""The slim/variants and NVRTC tables of docs/results.md are renderings of the committed results JSON (lab/tables.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from lab.scriptload import load_script

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    return load_script("lab/tables.py")


def test_readme_tables_are_current() -> None:
    text = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert _module().render(text) == text, "run: python -m lab.tables --write"
    for page in (REPO / "README.md", REPO / "docs" / "compiler-cache.md"):
        assert _module().render(page.read_text(encoding="utf-8"), page) == page.read_text(encoding="utf-8"), page
