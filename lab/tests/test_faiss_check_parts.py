"""The parts of lab/gpu/faiss_check.py that read build and test output (no GPU, no faiss): the SWIG module's link rule
from build.ninja, and pytest's JUnit XML with the reasons tests were skipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def faiss_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("faiss_check", REPO / "lab" / "gpu" / "faiss_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NINJA = """\
build faiss-build/faiss/CMakeFiles/faiss.dir/a.cpp.o: CXX_COMPILER__faiss_Release a.cpp
  FLAGS = -O3

build faiss-build/faiss/python/_swigfaiss.abi3.so: CXX_MODULE_LIBRARY_LINKER__swigfaiss_Release wrap.o | libfaiss.a
  LINK_FLAGS = -shared -Wl,--gc-sections -L/b/slimwheel-cxx-runtime
  LINK_LIBRARIES = libfaiss.a -lcudart
  TARGET_FILE = faiss-build/faiss/python/_swigfaiss.abi3.so

build all: phony faiss-build/faiss/python/_swigfaiss.abi3.so
"""


def test_the_module_link_rule_comes_with_its_variables(faiss_check: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "build.ninja").write_text(NINJA)
    rule = faiss_check._module_link(tmp_path)
    assert rule.splitlines()[0].startswith("build faiss-build/faiss/python/_swigfaiss.abi3.so: CXX_MODULE_LIBRARY")
    assert "  LINK_FLAGS = -shared -Wl,--gc-sections -L/b/slimwheel-cxx-runtime" in rule
    assert "TARGET_FILE" in rule and "build all" not in rule and "a.cpp.o" not in rule
    assert faiss_check._module_link(tmp_path / "missing") is None


# What pytest 8 writes with --junitxml for a unittest file: two skips with one reason, one with another, a failure.
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0"
failures="1" skipped="3" tests="5" time="0.05"><testcase classname="test_x.T" name="test_a" time="0.000"><skipped
type="pytest.skip" message="multiple GPU only test">/t/test_x.py:3: multiple GPU only test</skipped></testcase><testcase
classname="test_x.T" name="test_b" time="0.000"><skipped type="pytest.skip" message="multiple GPU only test">/t/test_x.py:5:
multiple GPU only test</skipped></testcase><testcase classname="test_x.T" name="test_c" time="0.000"><skipped
type="pytest.skip" message="only if CUVS is compiled in">/t/test_x.py:7: only if CUVS is compiled in</skipped></testcase>
<testcase classname="test_x.T" name="test_d" time="0.001"><failure message="AssertionError: 1 != 2">...</failure>
</testcase><testcase classname="test_x.T" name="test_e" time="0.000" /></testsuite></testsuites>
"""


def test_junit_skip_reasons_are_counted(faiss_check: ModuleType, tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    junit.write_text(JUNIT)
    got = faiss_check.junit_summary(junit, "test_x.py")
    assert (got["tests"], got["failures"], got["errors"], got["skipped"]) == (5, 1, 0, 3)
    assert got["failed"] == ["test_x.py::test_x.T.test_d"]
    assert got["skip_reasons"] == {"multiple GPU only test": 2, "only if CUVS is compiled in": 1}
