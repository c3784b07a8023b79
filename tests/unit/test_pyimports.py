"""Optional extension modules: imported by the package only where it survives the import failing (CuPy's NCCL and
cuTENSOR bindings). The sources are generated here; the real CuPy wheel is judged in tests/integration/test_corpus.py."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
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


@settings(max_examples=200, deadline=None)
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
