"""Optional extension modules: imported by the package only where it survives the import failing (CuPy's NCCL and
cuTENSOR bindings). The sources are generated here; the real CuPy wheel is judged in tests/integration/test_corpus.py."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers.fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from slimwheel.deps import dependency_problems
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.pyimports import PythonImports, extension_module, source_module

TAGS = ["cp311-cp311-manylinux_2_28_x86_64"]
EXT = "pkg/libs/nccl.cpython-311-x86_64-linux-gnu.so"


def _src(files: dict[str, str]) -> PythonImports:
    return PythonImports.from_sources({k: textwrap.dedent(v).encode() for k, v in files.items()})


GUARDED = """
    available = True
    try:
        from pkg.libs.nccl import *  # noqa
    except ImportError as e:
        available = False
"""


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("pkg/libs/nccl.cpython-311-x86_64-linux-gnu.so", "pkg.libs.nccl"),
        ("pkg/_core.abi3.so", "pkg._core"),
        ("pkg/_plain.so", "pkg._plain"),
        ("pkg-1.0.data/platlib/pkg/_x.cpython-312-x86_64-linux-gnu.so", "pkg._x"),
        ("pkg.libs/libnccl-1234abcd.so.2", None),
        ("pkg-1.0.data/scripts/x.so", None),
        ("pkg-1.0.dist-info/x.so", None),
        ("my-pkg/_x.so", None),
    ],
)
def test_extension_module_names(path: str, module: str | None) -> None:
    assert extension_module(path) == module


def test_source_module_names() -> None:
    assert source_module("pkg/__init__.py") == "pkg"
    assert source_module("pkg/cuda/nccl.py") == "pkg.cuda.nccl"
    assert source_module("pkg-1.0.data/purelib/pkg/a.py") == "pkg.a"
    assert source_module("pkg-1.0.dist-info/a.py") is None


def test_a_module_imported_only_under_a_soft_guard_is_optional() -> None:
    got = _src({"pkg/cuda/nccl.py": GUARDED, "pkg/__init__.py": "from pkg.cuda import nccl\n"}).optional(EXT)
    assert got is not None
    assert got.module == "pkg.libs.nccl"
    assert [str(g) for g in got.guards] == ["pkg/cuda/nccl.py:4"]


def test_an_unguarded_import_makes_it_required() -> None:
    imports = _src({"pkg/cuda/nccl.py": GUARDED, "pkg/__init__.py": "from pkg.libs import nccl\n"})
    assert imports.optional(EXT) is None


def test_a_handler_that_raises_again_is_no_guard() -> None:
    src = """
        try:
            from .libs import nccl
        except ImportError as e:
            raise ImportError("install NCCL") from e
    """
    assert _src({"pkg/__init__.py": src}).optional(EXT) is None


@pytest.mark.parametrize("handler", ["ImportError", "ModuleNotFoundError", "(OSError, ImportError)", "Exception", ""])
def test_handlers_that_catch_a_failed_import(handler: str) -> None:
    src = f"try:\n    import pkg.libs.nccl\nexcept {handler}:\n    pass\n"
    assert _src({"pkg/x.py": src}).optional(EXT) is not None


def test_a_handler_for_another_error_is_no_guard() -> None:
    src = "try:\n    import pkg.libs.nccl\nexcept KeyError:\n    pass\n"
    assert _src({"pkg/x.py": src}).optional(EXT) is None


def test_the_guard_may_sit_one_wrapper_up() -> None:
    # cupyx/cutensor.py imports the binding unguarded; cupy/linalg/_einsum.py imports cupyx.cutensor under a guard
    files = {
        "pkg/wrap.py": "from pkg.libs import nccl\n",
        "pkg/use.py": "def f():\n    try:\n        from pkg import wrap\n    except ImportError:\n        return None\n",
    }
    got = _src(files).optional(EXT)
    assert got is not None and [str(g) for g in got.guards] == ["pkg/use.py:3"]
    files["pkg/__init__.py"] = "from . import wrap\n"  # the wrapper imported unguarded by the package itself
    assert _src(files).optional(EXT) is None


def test_relative_imports_and_import_module_are_sites() -> None:
    rel = "try:\n    from .libs import nccl\nexcept ImportError:\n    nccl = None\n"
    assert _src({"pkg/__init__.py": rel}).optional(EXT) is not None
    rel2 = "try:\n    from ..libs import nccl\nexcept ImportError:\n    nccl = None\n"
    assert _src({"pkg/cuda/x.py": rel2}).optional(EXT) is not None
    dyn = "import importlib\nnccl = importlib.import_module('pkg.libs.nccl')\n"
    assert _src({"pkg/cuda/x.py": GUARDED, "pkg/y.py": dyn}).optional(EXT) is None


def test_no_import_site_is_no_evidence() -> None:
    assert _src({"pkg/__init__.py": "x = 1\n"}).optional(EXT) is None
    assert _src({}).optional(EXT) is None


def test_a_cycle_of_unguarded_wrappers_is_no_evidence() -> None:
    files = {"pkg/a.py": "import pkg.b\nfrom pkg.libs import nccl\n", "pkg/b.py": "import pkg.a\n"}
    assert _src(files).optional(EXT) is None


def test_unreadable_sources_are_no_evidence_either_way() -> None:
    files = {"pkg/cuda/nccl.py": GUARDED, "pkg/bad.py": "from pkg.libs import nccl\ndef (:\n", "pkg/nul.py": "\0"}
    assert _src(files).optional(EXT) is not None  # the broken file is skipped, not read as a required import


@fuzz(200)
@given(st.binary(max_size=400))
def test_hostile_sources_never_raise(data: bytes) -> None:
    PythonImports.from_sources({"pkg/x.py": data, "pkg/cuda/nccl.py": GUARDED.encode()}).optional(EXT)


def test_deeply_nested_source_is_no_evidence() -> None:
    deep = "x = " + "(" * 100_000 + ")" * 100_000 + "\n"
    assert _src({"pkg/x.py": deep, "pkg/cuda/nccl.py": GUARDED}).optional(EXT) is not None


NCCL = ElfInfo(path=EXT, soname=None, needed=("libnccl.so.2", "libc.so.6"), rpath=(), runpath=())


def test_check_notes_a_missing_library_of_an_optional_module() -> None:
    imports = _src({"pkg/cuda/nccl.py": GUARDED})
    v = dependency_problems([NCCL], cuda_major=13, requires=[], tags=TAGS, imports=imports)
    assert v.problems == ()
    (note,) = [n for n in v.notes if "optional part" in n]
    assert "libnccl.so.2" in note and "pkg/cuda/nccl.py:4" in note and "pip install nvidia-nccl-cu13" in note


def test_control_without_sources_or_with_an_unguarded_import_it_fails() -> None:
    v = dependency_problems([NCCL], cuda_major=13, requires=[], tags=TAGS)
    assert len(v.problems) == 1 and "libnccl.so.2" in v.problems[0]
    imports = _src({"pkg/cuda/nccl.py": GUARDED, "pkg/__init__.py": "import pkg.libs.nccl\n"})
    v = dependency_problems([NCCL], cuda_major=13, requires=[], tags=TAGS, imports=imports)
    assert len(v.problems) == 1


def test_a_requirement_pinned_to_the_wrong_major_stays_a_problem_for_an_optional_module() -> None:
    info = ElfInfo(path=EXT, soname=None, needed=("libcublas.so.13", "libc.so.6"), rpath=(), runpath=())
    imports = _src({"pkg/cuda/nccl.py": GUARDED})
    v = dependency_problems([info], cuda_major=13, requires=["nvidia-cublas>=12"], tags=TAGS, imports=imports)
    assert len(v.problems) == 1 and "does not pin nvidia-cublas" in v.problems[0]
    assert not [n for n in v.notes if "optional part" in n]


def test_a_non_cuda_library_of_an_optional_module_is_a_note_without_a_pip_command() -> None:
    info = ElfInfo(path=EXT, soname=None, needed=("libfoo.so.3", "libc.so.6"), rpath=(), runpath=())
    v = dependency_problems([info], cuda_major=13, requires=[], tags=TAGS, imports=_src({"pkg/cuda/nccl.py": GUARDED}))
    assert v.problems == ()
    (note,) = [n for n in v.notes if "optional part" in n]
    assert "libfoo.so.3" in note and "pip install" not in note


def test_cuda_wheels_alone_are_not_said_to_turn_on_a_part_that_needs_more() -> None:
    # sgl-kernel 0.3.21's flashmla_ops needs libcudart.so.12 and torch's libraries, and requires neither
    info = ElfInfo(path=EXT, soname=None, needed=("libtorch.so", "libcudart.so.13"), rpath=(), runpath=())
    v = dependency_problems([info], cuda_major=13, requires=[], tags=TAGS, imports=_src({"pkg/cuda/nccl.py": GUARDED}))
    (note,) = [n for n in v.notes if "optional part" in n]
    assert note.endswith(
        "(pip install nvidia-cuda-runtime brings the CUDA ones; libtorch.so must come from elsewhere)"
    ), note
    assert "turns it on" not in note


def test_the_verdict_lists_libraries_only_optional_parts_need() -> None:
    """What repair leaves unrequired: NCCL needed by the optional module alone; not a library a required part also
    needs (that one stays a problem, and off the list)."""
    imports = _src({"pkg/cuda/nccl.py": GUARDED})
    v = dependency_problems([NCCL], cuda_major=13, requires=[], tags=TAGS, imports=imports)
    assert v.optional == ("libnccl.so.2",)
    core = ElfInfo(path="pkg/_core.abi3.so", soname=None, needed=("libnccl.so.2", "libc.so.6"), rpath=(), runpath=())
    v = dependency_problems([NCCL, core], cuda_major=13, requires=[], tags=TAGS, imports=imports)
    assert v.optional == () and len(v.problems) == 1 and "pkg/_core.abi3.so" in v.problems[0]
    assert dependency_problems([NCCL], cuda_major=13, requires=[], tags=TAGS).optional == ()


# ------------------------------------------------------------------ issue 41, S10: linear, bounded, no recursion

GUARDED_TOP = "try:\n    import pkg.use\nexcept ImportError:\n    pass\n"
PLAIN = "pkg/_ext.cpython-311-x86_64-linux-gnu.so"


def _timed(files: dict[str, bytes], path: str = PLAIN) -> tuple[object, float, float]:
    """(optional(path), seconds, peak MiB of Python allocations): timed in one run, memory traced in another (the
    tracer slows allocation several times)."""
    import time
    import tracemalloc

    t = time.perf_counter()
    got = PythonImports.from_sources(files).optional(path)
    took = time.perf_counter() - t
    tracemalloc.start()
    PythonImports.from_sources(files).optional(path)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return got, took, peak


def test_32000_import_lines_take_linear_time_and_memory() -> None:
    """32,000 import lines took 148 s: every site of a module was searched for once per import of it."""
    files = {"pkg/wrap.py": b"import pkg._ext\n", "pkg/use.py": b"import pkg.wrap\n" * 32_000}
    files["pkg/top.py"] = GUARDED_TOP.encode()
    got, took, peak = _timed(files)
    assert got is not None and [str(g) for g in got.guards] == ["pkg/top.py:2"]  # type: ignore[attr-defined]
    assert took < 2.0 and peak < 128, (took, peak)  # 0.4 s, 59 MiB traced here


def test_an_import_chain_of_1500_modules_is_walked_without_recursion() -> None:
    """Each module imports the one before it unguarded, the last is imported under a guard: a RecursionError."""
    files = {"pkg/m0.py": b"import pkg._ext\n"}
    files |= {f"pkg/m{i}.py": f"import pkg.m{i - 1}\n".encode() for i in range(1, 1500)}
    files["pkg/top.py"] = b"try:\n    import pkg.m1499\nexcept ImportError:\n    pass\n"
    got, took, _peak = _timed(files)
    assert got is not None and took < 2.0, took
    files["pkg/m700.py"] = b"import pkg.m699\nimport pkg.m1200\n"  # a cycle in the middle: required
    assert PythonImports.from_sources(files).optional(PLAIN) is None


def test_diamonds_of_imports_cost_one_visit_per_module() -> None:
    """Two modules per layer, each importing both of the layer below: every path was walked (2**40 for 40 layers;
    a 6.5 kB wheel ran past 600 s)."""
    files = {"pkg/a0.py": b"import pkg._ext\n", "pkg/b0.py": b"import pkg._ext\n"}
    for i in range(1, 40):
        files[f"pkg/a{i}.py"] = files[f"pkg/b{i}.py"] = f"import pkg.a{i - 1}\nimport pkg.b{i - 1}\n".encode()
    files["pkg/top.py"] = b"try:\n    import pkg.a39\n    import pkg.b39\nexcept ImportError:\n    pass\n"
    got, took, _peak = _timed(files)
    assert got is not None and took < 1.0, took


def test_a_2500_term_expression_is_read() -> None:
    """The syntax tree of `a + a + ... + a` nests 2,500 deep: walking it recursively was a RecursionError."""
    deep = "x = " + " + ".join(["a"] * 2500) + "\nimport pkg._ext\n"
    guarded = "try:\n    import pkg._ext\nexcept ImportError:\n    pass\n"
    assert _src({"pkg/deep.py": deep, "pkg/g.py": guarded}).optional(PLAIN) is None  # its import is seen
    calls = "x = " + " + ".join(["f(a)"] * 2500) + "\nimportlib.import_module('pkg._ext')\n"
    assert _src({"pkg/deep.py": calls, "pkg/g.py": guarded}).optional(PLAIN) is None  # walked into expressions too
    assert _src({"pkg/deep.py": "x = " + " + ".join(["a"] * 2500), "pkg/g.py": guarded}).optional(PLAIN) is not None


def test_a_2500_term_requirement_marker_is_judged(tmp_path: Path) -> None:
    """The other reader of expressions: Requires-Dist markers, parsed by packaging (flat `or`/`and` chains; deep
    parentheses are InvalidRequirement, "cannot be parsed"). A 2,500-term marker gets a verdict, not a
    RecursionError."""
    from slimwheel.cli import main
    from testkit.binsynth import elf
    from testkit.wheelmaker import make_wheel

    marker = " or ".join(['python_version > "3"'] * 2500)
    w = make_wheel(
        tmp_path,
        files={"pkg/_x.abi3.so": elf(needed=("libcudart.so.13", "libc.so.6"), runpath="$ORIGIN/../nvidia/cu13/lib")},
        requires=[f"nvidia-cuda-runtime>=13,<14; {marker}"],
    )
    assert main(["-q", "check", "--offline", str(w)]) == 0


def test_past_a_cap_nothing_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source over MAX_SOURCE, sources over MAX_SOURCES, sites over MAX_SITES or a walk over MAX_STEPS: the module
    is required as far as the reader can tell (skipping the file could hide its one unguarded import)."""
    from slimwheel.inspect import pyimports

    guarded = {"pkg/g.py": b"try:\n    import pkg._ext\nexcept ImportError:\n    pass\n"}
    assert PythonImports.from_sources(guarded).optional(PLAIN) is not None
    big = b"import pkg._ext\n" + b"#" * pyimports.MAX_SOURCE
    assert PythonImports.from_sources(guarded | {"pkg/big.py": big}).optional(PLAIN) is None
    no_import = b"x = 1\n" * (pyimports.MAX_SOURCE // 6)  # no import in it: not parsed, not counted
    assert PythonImports.from_sources(guarded | {"pkg/data.py": no_import}).optional(PLAIN) is not None
    monkeypatch.setattr(pyimports, "MAX_SOURCES", 100)
    assert PythonImports.from_sources(guarded | {"pkg/z.py": b"import os\n" * 20}).optional(PLAIN) is None
    monkeypatch.undo()
    monkeypatch.setattr(pyimports, "MAX_SITES", 10)
    assert PythonImports.from_sources(guarded | {"pkg/z.py": b"import os\n" * 20}).optional(PLAIN) is None
    monkeypatch.undo()
    monkeypatch.setattr(pyimports, "MAX_STEPS", 5)
    assert PythonImports.from_sources(guarded | {"pkg/z.py": b"import pkg._ext.x\n" * 20}).optional(PLAIN) is None


def test_64_mib_of_sources_in_a_wheel_stay_bounded(tmp_path: Path) -> None:
    """64 MiB of import lines peaked at 2.0 GB: every source was held and every site kept. Now one source at a time,
    and reading stops at MAX_SOURCES (12 MiB here, as much past the cap as 64 MiB would be; about 0.4 s)."""
    import resource
    import time

    from testkit.wheelmaker import make_wheel

    chunk = b"import pkg.a\n" * (500 * 1024 // 13)
    files = {f"pkg/f{i}.py": chunk for i in range(24)}
    files["pkg/g.py"] = b"try:\n    import pkg._ext\nexcept ImportError:\n    pass\n"
    w = make_wheel(tmp_path, files=files)
    del files
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB: the process's peak so far
    t = time.perf_counter()
    assert PythonImports.from_wheel(w).optional(PLAIN) is None  # past the caps: no evidence
    took = time.perf_counter() - t
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert took < 10 and grown < 512, (took, grown)  # about 1 s; the peak grew by at most this many MiB


def _reference(files: dict[str, str], module: str) -> bool:
    """The recursive walk this module had before issue 41 (exponential, but exact on small graphs): whether
    `module` is optional."""
    imports = _src(files)

    def guards(mod: str, seen: frozenset[str]) -> bool:
        sites = imports.sites_of(mod)
        if not sites:
            return False
        for site, importer in sites:
            if site.guarded:
                continue
            if importer is None or any(m == importer or m.startswith(importer + ".") for m in seen):
                return False
            if not guards(importer, seen | {importer}):
                return False
        return True

    return guards(module, frozenset({module}))


MODULES = ["pkg", "pkg.a", "pkg.b", "pkg.a.c", "pkg.d"]


@fuzz(300)
@given(
    st.lists(st.tuples(st.sampled_from(MODULES), st.sampled_from([*MODULES, "pkg._ext"]), st.booleans()), max_size=9)
)
def test_the_linear_walk_answers_as_the_recursive_one_did(edges: list[tuple[str, str, bool]]) -> None:
    """Random import graphs over packages and their modules (cycles, diamonds, a package imported from under it):
    the same answer as the exponential walk."""
    body: dict[str, str] = {}
    for importer, imported, guarded in edges:
        line = f"import {imported}\n"
        if guarded:
            line = f"try:\n    import {imported}\nexcept ImportError:\n    pass\n"
        path = importer.replace(".", "/") + ("/__init__.py" if importer in ("pkg", "pkg.a") else ".py")
        body[path] = body.get(path, "") + line
    got = _src(body).optional(PLAIN)
    assert (got is not None) == _reference(body, "pkg._ext"), body


NAMES = ["pkg._ext", "pkg.a", "pkg.b", "pkg.a.c", "os", "pkg"]


@st.composite
def _source(draw: st.DrawFn, depth: int = 0) -> str:
    """Python source: import statements (absolute, relative, from-imports, import_module calls) nested in try,
    if, def and with blocks, handlers that catch or raise again, and expressions that nest deep."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(
                ["import", "from", "rel", "call", "expr", "try", "if", "def"] if depth < 4 else ["import", "expr"]
            )
        )
        name = draw(st.sampled_from(NAMES))
        if kind == "import":
            lines.append(f"import {name}")
        elif kind == "from":
            lines.append(f"from {name.rpartition('.')[0] or name} import {name.rpartition('.')[2]}")
        elif kind == "rel":
            lines.append(f"from {'.' * draw(st.integers(1, 3))}{name.rpartition('.')[2]} import x")
        elif kind == "call":
            lines.append(
                f"m = importlib.import_module({name!r}) + " + " + ".join(["f(a)"] * draw(st.integers(0, 1500)))
            )
        elif kind == "expr":
            lines.append("x = " + "(" * draw(st.integers(0, 50)) + "1" + ")" * draw(st.integers(0, 50)))
        else:
            body = textwrap.indent(draw(_source(depth + 1)), "    ")
            if kind == "try":
                handler = draw(st.sampled_from(["ImportError", "KeyError", "(OSError, ImportError)", "Exception", ""]))
                again = draw(st.sampled_from(["pass", "raise", "x = None"]))
                lines.append(f"try:\n{body}\nexcept {handler}:\n    {again}")
            elif kind == "if":
                lines.append(f"if x:\n{body}\nelse:\n    pass")
            else:
                lines.append(f"def f():\n{body}")
    return "\n".join(lines) + "\n"


@fuzz(100)
@given(
    st.dictionaries(
        st.sampled_from(["pkg/__init__.py", "pkg/a/__init__.py", "pkg/b.py", "pkg/a/c.py", "pkg/d.py"]),
        _source(),
        max_size=5,
    )
)
def test_generated_sources_are_read_as_the_recursive_walk_read_them(files: dict[str, str]) -> None:
    """The import reader fuzzed with generated packages: no exception, and the answer of the walk before issue 41."""
    got = _src(files).optional(PLAIN)
    assert (got is not None) == _reference(files, "pkg._ext")


def test_a_question_parses_only_the_sources_that_can_answer_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's 339 sources cost 0.6 s of check parsed whole; a question parses those that name the module's last part
    or lie in a module of that name (relative imports), and the answer is the one the whole parse gives."""
    import ast

    parsed: list[str] = []
    parse = ast.parse

    def counting(source: Any, *args: Any, **kwargs: Any) -> Any:
        parsed.append(kwargs.get("filename", ""))  # pytest parses too, to show a failed assertion
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    sources = {
        "pkg/mid/__init__.py": b"from .. import _ext\n",
        # imports pkg.mid (its own package) without naming it: found through its own module's name
        "pkg/mid/sub.py": b"try:\n    from . import x\nexcept ImportError:\n    pass\n",
        "pkg/other.py": b"import os\n",
    }
    got = PythonImports.from_sources(sources).optional("pkg/_ext.cpython-311-x86_64-linux-gnu.so")
    assert got is not None and [str(g) for g in got.guards] == ["pkg/mid/sub.py:2"]
    assert sorted(parsed) == ["pkg/mid/__init__.py", "pkg/mid/sub.py"]
