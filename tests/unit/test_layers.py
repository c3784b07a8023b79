"""The import structure docs/architecture.md describes, enforced: no import cycle in the package, each layer imports
only the layers below it, only the CLI and the renderers print, and neither the package nor its tests import the lab
(lab/) or the generators (devtools/). The lab, in turn, never reaches into tests/: what both need lives in testkit/."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "slimwheel"

# Layer of each top-level part of the package, lowest first. A module may import its own part and any part of a
# lower layer, never one of a higher layer (docs/architecture.md, "Layers").
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors"}),
    frozenset({"units", "envvars", "fsutil", "heap", "rpath", "cuda", "resources", "shown", "textable"}),
    frozenset({"inspect"}),
    frozenset({"wheelfile", "deps", "external", "tools", "torchext", "reqgraph"}),
    frozenset(
        {
            "config",
            "configtables",
            "toolkit",
            "plan",
            "analysis",
            "check",
            "floor",
            "render",
            "runtime",
            "distcheck",
            "pypindex",
            "compilercache",
        }
    ),
    frozenset({"context", "prune", "repair", "strip", "postbuild", "doctor", "footprint", "container"}),
    frozenset({"build"}),
    frozenset({"commands", "cli", "__main__", "cmake"}),
)
# What writes to the terminal: the CLI's parts, and the renderers it hands a console to (modules).
PRINTERS = {"cli", "commands", "render"}
PRINTING_MODULES = {"slimwheel.postbuild.diff"}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(part: str) -> int:
    for i, names in enumerate(LAYERS):
        if part in names:
            return i
    raise AssertionError(f"slimwheel.{part} has no layer in tests/unit/test_layers.py (and docs/architecture.md)")


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module `module` imports (at any depth of its code), with the line."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            for alias in node.names:  # `from slimwheel.inspect import elf` imports the module slimwheel.inspect.elf
                full = f"{name}.{alias.name}"
                yield (full if full in MODULES else name), node.lineno


def _internal_graph() -> dict[str, set[str]]:
    return {m: {n for n, _ in _imports(m, p) if n in MODULES and n != m} for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    assert _cycles(_internal_graph()) == []


def test_no_layer_imports_a_higher_one() -> None:
    wrong = []
    for module, path in MODULES.items():
        mine = _part(module)
        if mine == "__init__":
            continue
        for name, line in _imports(module, path):
            if name in MODULES and _part(name) not in (mine, "__init__") and _layer(_part(name)) > _layer(mine):
                wrong.append(
                    f"{path.relative_to(REPO)}:{line}: {module} (layer {_layer(mine)}) imports {name} "
                    f"(layer {_layer(_part(name))})"
                )
    assert not wrong, "\n".join(wrong)


def test_every_part_of_the_package_has_a_layer() -> None:
    for module in MODULES:
        if _part(module) != "__init__":
            _layer(_part(module))


def _printing_calls(path: Path) -> Iterator[int]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "print") or (
                isinstance(f, ast.Attribute)
                and f.attr in ("echo", "secho")
                and isinstance(f.value, ast.Name)
                and f.value.id == "click"
            ):
                yield node.lineno


def test_only_the_cli_and_the_renderers_print() -> None:
    # Code that runs in a child interpreter (doctor's and footprint's probes) is a string here, not a call.
    wrong = [
        f"{p.relative_to(REPO)}:{line}"
        for m, p in MODULES.items()
        if _part(m) not in PRINTERS and m not in PRINTING_MODULES
        for line in _printing_calls(p)
    ]
    assert not wrong, f"print/click.echo outside the CLI: {wrong}"


@pytest.mark.parametrize("tree", ["slimwheel", "tests", "testkit"])
def test_the_product_never_imports_the_lab_or_the_generators(tree: str) -> None:
    # testkit (what tests and the lab both synthesize inputs with) is test code: the package never imports it
    forbidden = ("lab", "devtools", "testkit") if tree == "slimwheel" else ("lab",)
    wrong = []
    for p in sorted((REPO / tree).rglob("*.py")):
        if "packages" in p.relative_to(REPO).parts:  # test projects: their own code, built by the tests
            continue
        module = ".".join(p.relative_to(REPO).with_suffix("").parts)
        for name, line in _imports(module, p):
            if name.split(".")[0] in forbidden or name.split(".")[0] == "faissbench":
                wrong.append(f"{p.relative_to(REPO)}:{line}: imports {name}")
    assert not wrong, "\n".join(wrong)


def test_the_product_tests_load_no_lab_script_by_path() -> None:
    # load_script("lab/...py") reaches the lab without an import statement
    wrong = []
    for p in sorted((REPO / "tests").rglob("*.py")):
        if p.name == "test_layers.py" or "packages" in p.relative_to(REPO).parts:
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"), str(p))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("lab/")
                and node.value.endswith(".py")
            ):
                wrong.append(f"{p.relative_to(REPO)}:{node.lineno}: {node.value}")
    assert not wrong, "\n".join(wrong)


# Top-level names that tests/ makes importable once it is on sys.path (pytest's rootdir insertion puts it there for
# the product's tests): the lab importing one of them would run only inside the product's pytest session.
_TESTS_NAMES = {"tests", "conftest"} | {p.name for p in (REPO / "tests").iterdir() if p.is_dir()}


def _lab_files() -> list[Path]:
    return sorted(p for p in (REPO / "lab").rglob("*.py") if "results" not in p.relative_to(REPO).parts)


def _path_edits_naming_tests(path: Path) -> Iterator[int]:
    """Lines where code changes sys.path (insert, append, extend, slice assignment) with an expression that
    mentions "tests": the lab putting the product's test tree on its path."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source, str(path))):
        target: ast.AST | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("insert", "append", "extend"):
                target = node.func.value
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value if isinstance(t, ast.Subscript) else t for t in targets), None)
        else:
            continue
        if (
            isinstance(target, ast.Attribute)
            and target.attr == "path"
            and isinstance(target.value, ast.Name)
            and target.value.id == "sys"
            and '"tests"' in (ast.get_source_segment(source, node) or "").replace("'", '"')
        ):
            yield node.lineno


def test_the_path_edit_finder_finds_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n"
        "sys.path.insert(0, str(REPO / 'tests'))\n"
        'sys.path[:0] = [str(REPO / "tests")]\n'
        "sys.path.insert(0, str(REPO))\n"
        "names.append('tests')\n"
    )
    assert sorted(_path_edits_naming_tests(probe)) == [2, 3]


def test_the_lab_never_reaches_into_the_product_tests() -> None:
    assert "helpers" in _TESTS_NAMES  # the name the lab once took the corpus from
    wrong = []
    for p in _lab_files():
        module = ".".join(p.relative_to(REPO).with_suffix("").parts)
        for name, line in _imports(module, p):
            if name.split(".")[0] in _TESTS_NAMES:
                wrong.append(f"{p.relative_to(REPO)}:{line}: imports {name}")
        wrong += [f"{p.relative_to(REPO)}:{line}: puts tests/ on sys.path" for line in _path_edits_naming_tests(p)]
    assert not wrong, "\n".join(wrong)


def test_testkit_imports_only_the_package_and_the_standard_library() -> None:
    # both trees import it, so it may depend on neither (nor on anything only one of them installs)
    allowed = set(sys.stdlib_module_names) | {"slimwheel", "testkit", "__future__"}
    wrong = [
        f"{p.relative_to(REPO)}:{line}: imports {name}"
        for p in sorted((REPO / "testkit").rglob("*.py"))
        for name, line in _imports(".".join(p.relative_to(REPO).with_suffix("").parts), p)
        if name.split(".")[0] not in allowed
    ]
    assert not wrong, "\n".join(wrong)


def test_the_lab_tests_run_apart_from_the_product_suite() -> None:
    # In one pytest session with tests/, the lab's tests would run with tests/ on sys.path (pytest's rootdir
    # insertion for tests/conftest.py) and could import its helpers unnoticed.
    import tomllib

    pytest_options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]
    assert pytest_options["ini_options"]["testpaths"] == ["tests"]
    runs = [
        line.strip()
        for script in ("test.sh", "lint.sh")
        for line in (REPO / "scripts" / script).read_text(encoding="utf-8").splitlines()
        if "-m pytest" in line and "lab/tests" in line
    ]
    assert runs and all(line.split("lab/tests")[0].count(" tests") == 0 for line in runs), runs
    workflow = (REPO / ".github" / "workflows" / "tests.yml").read_text(encoding="utf-8")
    assert "run: bash scripts/lint.sh lab" in workflow
