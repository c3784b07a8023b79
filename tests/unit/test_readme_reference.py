"""The generated parts of the docs (CLI reference, configuration table, exit codes) drift-tested against the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools import docgen
from slimwheel.errors import ExitCode


@pytest.mark.parametrize("page", sorted(docgen.PAGES))
def test_generated_parts_are_current(repo_root: Path, page: str) -> None:
    text = (repo_root / page).read_text(encoding="utf-8")
    assert docgen.render(page, text) == text, f"{page} is stale: run `python -m devtools.docgen`"


def test_every_command_and_config_key_is_documented(repo_root: Path) -> None:
    text = (repo_root / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in (
        "build",
        "check",
        "size-report",
        "repair",
        "prune",
        "toolkit",
        "plan",
        "doctor",
        "container",
        "slim",
        "variants",
        "diff",
    ):
        assert f"### `slimwheel {name}`" in text
    for key in ("archs", "budget", "compression", "link", "extra-sass"):
        assert f"| `{key}` |" in text


def test_every_exit_code_has_a_reason_and_the_readme_lists_it(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert code.reason.strip(), code
        assert f"| {code.value} | {code.reason} |" in readme
