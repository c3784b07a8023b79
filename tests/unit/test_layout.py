"""The package stays readable in pieces (issue 36): no module of slimwheel/ over 700 lines, no function over 150.
A concern that outgrows them is split by concern (pypindex/, inspect.elf's elffile and elfsyms, toolkit.sysroot's
parts), not carried on in one file a reader cannot hold."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 150


def _module_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _function_lines(path: Path) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method in `path`, nested ones too, each from its
    `def` to its last line: its decorators (a click command's options) are declarations, not the body to read."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, child.lineno, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")


def _package_files(repo: Path) -> list[Path]:
    return sorted((repo / "slimwheel").rglob("*.py"))


def test_the_function_measure_finds_long_and_nested_functions(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(150))
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import click\n\n\n"
        "@click.command()\n"
        "def long() -> None:\n" + body + "\n\n"
        "class C:\n"
        "    def method(self) -> None:\n"
        "        def inner() -> None:\n"
        "            pass\n"
    )
    found = {name: (line, n) for name, line, n in _function_lines(probe)}
    assert found["long"] == (5, 151)  # from its def, the decorator left out
    assert found["C.method"] == (159, 3)
    assert found["C.method.inner"] == (160, 2)
    assert _module_lines(probe) == 161


def test_no_module_is_over_700_lines(repo_root: Path) -> None:
    over = [
        f"{p.relative_to(repo_root)}: {n} lines"
        for p in _package_files(repo_root)
        if (n := _module_lines(p)) > MAX_MODULE_LINES
    ]
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {over}"


def test_no_function_is_over_150_lines(repo_root: Path) -> None:
    over = [
        f"{p.relative_to(repo_root)}:{line}: {name} ({n} lines)"
        for p in _package_files(repo_root)
        for name, line, n in _function_lines(p)
        if n > MAX_FUNCTION_LINES
    ]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"
