"""docs/architecture.md's Layout section names every module of the package and every top-level folder of the
repository, and has a line for every module (the layout the docs describe is the tree)."""

from __future__ import annotations

import re
from pathlib import Path

import click


def _modules(repo: Path) -> set[str]:
    pkg = repo / "slimwheel"
    names = {p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__")}
    names |= {p.name for p in pkg.iterdir() if p.is_dir() and not p.name.startswith("__")}
    return names


def test_layout_names_every_module_and_folder(repo_root: Path) -> None:
    text = (repo_root / "docs" / "architecture.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    block = layout[layout.index("```") : layout.index("```", layout.index("```") + 3)]
    words = set(re.findall(r"[a-z0-9_]+", block))
    missing = sorted(m for m in _modules(repo_root) if m not in words)
    assert not missing, f"docs/architecture.md's Layout section does not name {missing}"
    folders = {p.name for p in repo_root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    folders -= {"build", "dist", "wheelhouse"}  # outputs (.gitignore)
    unnamed = sorted(d for d in folders if not re.search(rf"^{re.escape(d)}/ ", block, re.M))
    assert not unnamed, f"docs/architecture.md's Layout section does not name the folders {unnamed}"


def test_readme_is_a_short_page_for_users(repo_root: Path) -> None:
    lines = (repo_root / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; reference and records belong in docs/"


def test_architecture_doc_has_a_line_for_every_module(repo_root: Path) -> None:
    text = (repo_root / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = "\n".join(line for line in text.splitlines() if line.startswith("| `"))
    missing = sorted(m for m in _modules(repo_root) if not re.search(rf"`{m}(\.py`|/)", rows))
    assert not missing, f"docs/architecture.md has no line for {missing}"


def test_architecture_doc_names_every_module_of_every_sub_package(repo_root: Path) -> None:
    """Each module of a sub-package is named in its sub-package's row (`| \\`deps/\\` | ... \\`resolve\\` ...`) or has
    a row of its own (`| \\`cuda/arch.py\\` |`); commands/ is one module per command, each a command of the CLI."""
    text = (repo_root / "docs" / "architecture.md").read_text(encoding="utf-8")
    pkg = repo_root / "slimwheel"
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_]+)/` \|(.*)$", text, re.M)}
    missing = []
    for sub in sorted(p for p in pkg.iterdir() if p.is_dir() and not p.name.startswith("__") and p.name != "commands"):
        words = set(re.findall(r"[a-z0-9_]+", rows.get(sub.name, "")))
        for mod in sorted(p.stem for p in sub.glob("*.py") if p.stem != "__init__"):
            if mod not in words and not re.search(rf"`{sub.name}/{mod}\.py`", text):
                missing.append(f"{sub.name}/{mod}")
    assert not missing, f"docs/architecture.md names no row for {missing}"


def test_every_command_module_is_a_command(repo_root: Path) -> None:
    from slimwheel.cli import cli

    # private modules (`_options.py`: what several commands share) are no commands
    modules = (repo_root / "slimwheel" / "commands").glob("*.py")
    names = {p.stem.replace("_", "-") for p in modules if not p.stem.startswith("_")}
    commands = set(cli.list_commands(click.Context(cli)))
    assert names <= commands, names - commands
