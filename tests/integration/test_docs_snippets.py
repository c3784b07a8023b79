"""The README's complete project (its pyproject.toml and CMakeLists.txt) and docs/cmake-example.md's CMake snippet,
each used verbatim as a new project and built with `pip wheel` (build isolation, as a user builds) and no slimwheel
flags: the build environment gets slimwheel from its own built wheel through PIP_FIND_LINKS (as README's Install says;
no index has it), its CMake package is found through its `cmake.root` entry point there, and the plan comes from the
project's [tool.slimwheel]. A snippet that lacks
`find_package(nanobind ...)` fails the way a user saw it fail ("Unknown CMake command nanobind_add_module")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import slimwheel.cmake
from slimwheel.inspect.scan import inspect_binary
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KNN = REPO / "examples" / "knn"

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10", "nanobind>=2.2", "slimwheel"]
build-backend = "scikit_build_core.build"

[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"

[tool.scikit-build]
wheel.packages = [{packages}]

[tool.slimwheel]
archs = "all"  # SLIMWHEEL_ARCHS=8.0 (pip_wheel) keeps the compile short
"""

KERNELS_CU = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""

BINDINGS_CPP = """\
#include <nanobind/nanobind.h>
void launch_scale(float* x, float a, int n);
NB_MODULE(_ext, m) { m.def("noop", []() { launch_scale(nullptr, 1.f, 0); }); }
"""


def snippet(doc: Path, lang: str) -> str:
    """The first ```LANG block of a Markdown file."""
    m = re.search(rf"^```{lang}\n(.*?)^```", doc.read_text(), re.M | re.S)
    assert m, f"no {lang} block in {doc}"
    return m.group(1)


def cmake_snippet(doc: Path) -> str:
    return snippet(doc, "cmake")


def readme_project(root: Path, cmakelists: str) -> Path:
    """examples/knn's sources with the README's pyproject.toml and `cmakelists` (its CMake block) as they stand."""
    shutil.copytree(KNN / "csrc", root / "csrc")
    shutil.copytree(KNN / "src", root / "src")
    (root / "CMakeLists.txt").write_text(cmakelists)
    (root / "pyproject.toml").write_text(snippet(REPO / "README.md", "toml"))
    return root


def docs_project(root: Path, cmakelists: str) -> Path:
    """docs/cmake-example.md's file names: kernels.cu, bindings.cpp, a module _ext in package myext."""
    (root / "myext").mkdir(parents=True)
    (root / "myext" / "__init__.py").write_text("from myext._ext import noop\n")
    (root / "kernels.cu").write_text(KERNELS_CU)
    (root / "bindings.cpp").write_text(BINDINGS_CPP)
    (root / "CMakeLists.txt").write_text(cmakelists)
    (root / "pyproject.toml").write_text(PYPROJECT.format(name="docs-snippet", packages='"myext"'))
    return root


def pip_wheel(
    toolkit: Toolkit, project: Path, out: Path, build_dir: Path, dist: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **toolkit.env}  # CUDACXX / CUDA_HOME: what any CUDA build needs, nothing of slimwheel's
    env["PIP_FIND_LINKS"] = str(dist)  # slimwheel's own wheel: what [build-system] requires = [..., "slimwheel"] gets
    for name in ("slimwheel_DIR", "CMAKE_PREFIX_PATH", "SLIMWHEEL_CUDA_ARCHITECTURES"):
        env.pop(name, None)
    # One target keeps the compile short; the README's file says "all". The variable overrides the file as it would
    # for a user, so the plan still goes through [tool.slimwheel] and slimwheel's configuration, not a CMake flag.
    env["SLIMWHEEL_ARCHS"] = "8.0"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-w",
        str(out),
        str(project),
        f"-Cbuild-dir={build_dir}",
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.parametrize(
    ("doc", "make", "package", "module"),
    [
        (REPO / "README.md", readme_project, "knn", "_knn"),
        (REPO / "docs" / "cmake-example.md", docs_project, "myext", "_ext"),
    ],
    ids=["README", "cmake-example"],
)
def test_the_snippet_builds_as_a_new_project(
    toolkit13: Toolkit,
    slimwheel_dist: Path,
    tmp_path: Path,
    doc: Path,
    make: Callable[[Path, str], Path],
    package: str,
    module: str,
) -> None:
    project = make(tmp_path / "src", cmake_snippet(doc))
    proc = pip_wheel(toolkit13, project, tmp_path / "dist", tmp_path / "build", slimwheel_dist)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    root = re.search(r"^slimwheel_ROOT:PATH=(.*)$", cache, re.M)  # set by the cmake.root entry point ...
    assert root is not None and f"slimwheel_DIR:PATH={root.group(1)}" in cache  # ... where find_package found it
    folder = Path(root.group(1))
    # the isolated environment's slimwheel, installed from its wheel: not this checkout's
    assert folder.parts[-3:] == ("site-packages", "slimwheel", "cmake") and not folder.is_relative_to(REPO)
    assert folder != Path(slimwheel.cmake.__file__).parent
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "unpacked")
    (ext,) = (tmp_path / "unpacked" / package).glob(f"{module}*.so")
    report = inspect_binary(ext)
    # the plan for archs 8.0 (SLIMWHEEL_ARCHS over the file): SASS 80 and its PTX, and the RPATH to the nvidia wheels
    assert {(e.kind, e.arch) for fb in report.fatbins for e in fb.entries} == {("sass", "80"), ("ptx", "80")}
    assert report.runpath == "$ORIGIN/../nvidia/cu13/lib"


def test_a_snippet_without_nanobinds_package_fails_as_users_saw(
    toolkit13: Toolkit, slimwheel_dist: Path, tmp_path: Path
) -> None:
    # the check above can fail: the README's old snippet had no find_package(Python/nanobind)
    snippet = "\n".join(
        ln for ln in cmake_snippet(REPO / "README.md").splitlines() if "find_package(nanobind" not in ln
    )
    project = readme_project(tmp_path / "src", snippet + "\n")
    proc = pip_wheel(toolkit13, project, tmp_path / "dist", tmp_path / "build", slimwheel_dist)
    assert proc.returncode != 0
    assert 'Unknown CMake command "nanobind_add_module"' in proc.stdout + proc.stderr
