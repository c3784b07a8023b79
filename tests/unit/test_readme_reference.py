"""The README's CLI reference and configuration table are generated: fail when they drift from the code."""

from __future__ import annotations

from devtools import docgen


def test_readme_generated_parts_are_current(repo_root) -> None:
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    assert docgen.render(text) == text, "README.md is stale: run `python -m devtools.docgen`"


def test_every_command_and_config_key_is_documented(repo_root) -> None:
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    for name in ("build", "check", "size-report", "repair", "prune", "toolkit", "plan", "doctor", "container", "slim", "variants",
                 "diff"):
        assert f"### `slimwheel {name}`" in text
    for key in ("archs", "budget", "compression", "link", "extra-sass"):
        assert f"| `{key}` |" in text
