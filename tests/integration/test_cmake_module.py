"""SlimWheel.cmake with real CMake and a real nvcc (the CUDA 13.0 toolkit fixture).

One tiny CUDA project, used three ways: built into a wheel by scikit-build-core, which finds slimwheel through its
`cmake.root` entry point (then the .so is inspected: RUNPATH, DT_NEEDED, exported symbols, fatbin); configured
through add_subdirectory() of this repository (then the compile and link lines are inspected); and configured with
-Dslimwheel_DIR and bad or missing settings (the errors and the announced defaults). Only the first one compiles.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from helpers.cmakerun import CMAKE, configure, tool_env

from devtools import cmake_tables as tables
from slimwheel.cuda.versions import CudaVersion
from slimwheel.inspect.scan import inspect_binary
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

KERNEL_CU = """\
#include <cublas_v2.h>
#include <cuda_runtime.h>
__global__ void tiny_scale_kernel(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
int tiny_scale(float* x, float a, int n) {
  tiny_scale_kernel<<<(n + 255) / 256, 256>>>(x, a, n);
  return static_cast<int>(cudaGetLastError());
}
int tiny_blas_version() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return -1;
  int v = 0;
  cublasGetVersion(h, &v);
  cublasDestroy(h);
  return v;
}
"""

PROBE_CPP = """\
int tiny_scale(float*, float, int);
int tiny_blas_version();
extern "C" __attribute__((visibility("default"))) int tiny_probe() { return tiny_blas_version() + tiny_scale(nullptr, 1.f, 0); }
"""

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.18...3.31)
project(tiny LANGUAGES CXX CUDA)
{use_slimwheel}
add_library(tiny_kernels STATIC kernel.cu)
slimwheel_cuda_target(tiny_kernels)

add_library(tiny MODULE probe.cpp)
slimwheel_cuda_target(tiny)
# Linked before the archive that needs them: they must stay DT_NEEDED under --as-needed all the same.
slimwheel_link_cuda(tiny LIBRARIES cudart cublas)
target_link_libraries(tiny PRIVATE tiny_kernels)

add_library(tiny_deep MODULE probe.cpp)
target_link_libraries(tiny_deep PRIVATE tiny_kernels)
slimwheel_cuda_target(tiny_deep)
slimwheel_link_cuda(tiny_deep LIBRARIES CUBLAS PACKAGE_DEPTH 2)

install(TARGETS tiny tiny_deep LIBRARY DESTINATION tiny)
"""

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "tiny-cuda"
version = "0.1.0"

[tool.scikit-build]
wheel.packages = []
"""


def write_project(root: Path, use_slimwheel: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernel.cu").write_text(KERNEL_CU)
    (root / "probe.cpp").write_text(PROBE_CPP)
    (root / "CMakeLists.txt").write_text(CMAKELISTS.format(use_slimwheel=use_slimwheel))
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def compile_command(build: Path, source: str) -> list[str]:
    entries = json.loads((build / "compile_commands.json").read_text())
    return next(shlex.split(e["command"]) for e in entries if e["file"].endswith(source))


def link_command(build: Path, target: str) -> list[str]:
    return shlex.split((build / "CMakeFiles" / f"{target}.dir" / "link.txt").read_text())


def exported_symbols(path: Path) -> set[str]:
    """Symbols the .so defines and exports (what another library or dlsym could bind to)."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        assert isinstance(dynsym, SymbolTableSection), path
        return {
            s.name
            for s in dynsym.iter_symbols()
            if s.name
            and s["st_shndx"] != "SHN_UNDEF"
            and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
            and s["st_other"]["visibility"] == "STV_DEFAULT"
        }


@pytest.fixture(scope="module")
def built_wheel(toolkit13: Toolkit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny project built by scikit-build-core in this environment; slimwheel found only by its entry point."""
    root = tmp_path_factory.mktemp("tiny-skbuild")
    src = write_project(root / "src", "find_package(slimwheel CONFIG REQUIRED)")
    out = root / "dist"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(out),
        str(src),
        f"-Ccmake.define.CMAKE_CUDA_COMPILER={toolkit13.nvcc}",
        "-Ccmake.define.SLIMWHEEL_CUDA_ARCHITECTURES=80-real;90",
        "-Ccmake.define.SLIMWHEEL_COMPRESSION=size",
        f"-Cbuild-dir={root / 'build'}",
        "-Cbuild.verbose=true",
    ]
    env = tool_env(toolkit13)
    env.pop("slimwheel_DIR", None)
    r = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    cache = (root / "build" / "CMakeCache.txt").read_text()
    # Found through the entry point (the package folder itself), not through a slimwheel_DIR we passed.
    import slimwheel.cmake

    assert f"slimwheel_DIR:PATH={Path(slimwheel.cmake.__file__).parent}" in cache
    (wheel,) = out.glob("tiny_cuda-*.whl")
    unpacked = root / "unpacked"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(unpacked)
    return unpacked / "tiny"


def so(folder: Path, stem: str) -> Path:
    (path,) = folder.glob(f"lib{stem}.so")
    return path


def test_runpath_points_at_the_cu13_wheel_folder_at_the_package_depth(built_wheel: Path) -> None:
    assert inspect_binary(so(built_wheel, "tiny")).runpath == "$ORIGIN/../nvidia/cu13/lib"
    assert inspect_binary(so(built_wheel, "tiny_deep")).runpath == "$ORIGIN/../../nvidia/cu13/lib"


def test_requested_libraries_are_needed_by_soname_and_nothing_else_from_cuda(built_wheel: Path) -> None:
    report = inspect_binary(so(built_wheel, "tiny"))
    assert {"libcudart.so.13", "libcublas.so.13"} <= set(report.needed)
    # cuBLASLt is cuBLAS's own dependency; --as-needed keeps it out of ours, and no static cudart is linked in.
    assert "libcublasLt.so.13" not in report.needed
    assert not any(name.startswith("cuda") for name in exported_symbols(so(built_wheel, "tiny")))


def test_only_the_default_visibility_entry_point_is_exported(built_wheel: Path) -> None:
    for stem in ("tiny", "tiny_deep"):
        assert exported_symbols(so(built_wheel, stem)) == {"tiny_probe"}


def test_stripped_and_the_fatbin_survives_gc_sections(built_wheel: Path) -> None:
    path = so(built_wheel, "tiny")
    report = inspect_binary(path)
    assert ".symtab" not in report.sections
    entries = [e for fb in report.fatbins for e in fb.entries]
    assert {(e.kind, e.arch) for e in entries} == {("sass", "80"), ("sass", "90"), ("ptx", "90")}
    assert all(e.compression != "none" for e in entries), [(e.arch, e.compression) for e in entries]


@pytest.fixture(scope="module")
def subdir_build(toolkit13: Toolkit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Configured (not built) through add_subdirectory() of this repository, legacy compression."""
    root = tmp_path_factory.mktemp("tiny-subdir")
    src = write_project(root / "src", f'add_subdirectory("{REPO}" slimwheel)')
    build = root / "build"
    r = configure(
        toolkit13,
        src,
        build,
        "-DSLIMWHEEL_CUDA_ARCHITECTURES=75-real;120",
        "-DSLIMWHEEL_COMPRESSION=legacy",
        f"-DSLIMWHEEL_CUDA_LIBDIRS={';'.join(map(str, toolkit13.lib_dirs))}",
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return build


def test_add_subdirectory_applies_targets_and_compression(subdir_build: Path) -> None:
    cu = compile_command(subdir_build, "kernel.cu")
    assert "--generate-code=arch=compute_75,code=[sm_75]" in cu
    assert "--generate-code=arch=compute_120,code=[compute_120,sm_120]" in cu
    assert "-Xfatbin=-compress-all" in cu
    assert any(a.startswith("-Xcompiler=-fvisibility=hidden") for a in cu)
    cpp = compile_command(subdir_build, "probe.cpp")
    assert {"-fvisibility=hidden", "-ffunction-sections", "-fdata-sections"} <= set(cpp)


def test_add_subdirectory_link_line(subdir_build: Path, toolkit13: Toolkit) -> None:
    link = link_command(subdir_build, "tiny")
    assert {"-Wl,--gc-sections", "-Wl,--as-needed", "-Wl,-s"} <= set(link)
    libdir = toolkit13.lib_dirs[0]
    assert f"-Wl,--push-state,--no-as-needed,{libdir}/libcublas.so,--pop-state" in link
    # Dynamic mode: cudart by its SONAME only; CMake's default would add the static cudart to every CUDA target.
    assert not any("cudart_static" in a for a in link)


def test_unset_variables_are_announced_and_use_the_release_table(toolkit13: Toolkit, tmp_path: Path) -> None:
    src = write_project(tmp_path / "src", f'add_subdirectory("{REPO}" slimwheel)')
    # No Python_EXECUTABLE: slimwheel cannot be asked, so the committed table answers.
    r = configure(toolkit13, src, tmp_path / "build")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    expected = tables.default_architectures((13, 0))
    assert f"SLIMWHEEL_CUDA_ARCHITECTURES not set; using '{expected}' from slimwheel's default plan" in _flat(r.stdout)
    assert "SLIMWHEEL_COMPRESSION not set" in _flat(r.stdout)
    assert "--compress-mode=size" in compile_command(tmp_path / "build", "kernel.cu")


def test_unset_variables_come_from_slimwheel_plan_when_python_has_slimwheel(toolkit13: Toolkit, tmp_path: Path) -> None:
    src = write_project(tmp_path / "src", "find_package(slimwheel CONFIG REQUIRED)")
    (src / "pyproject.toml").write_text(PYPROJECT + '\n[tool.slimwheel]\narchs = "9.0+"\ncompression = "balance"\n')
    r = configure(
        toolkit13,
        src,
        tmp_path / "build",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-Dslimwheel_DIR={REPO / 'slimwheel' / 'cmake'}",
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "-m slimwheel plan` for" in _flat(r.stdout)
    cu = compile_command(tmp_path / "build", "kernel.cu")
    assert "--generate-code=arch=compute_90,code=[sm_90]" in cu
    assert not any("compute_75" in a or "compute_80" in a for a in cu)
    assert "--compress-mode=balance" in cu


def _flat(text: str) -> str:
    """CMake wraps message() text at a fixed width, so where a line breaks depends on the paths in it: compare words."""
    return " ".join(text.split())


def test_a_failing_slimwheel_plan_is_reported_not_hidden(toolkit13: Toolkit, tmp_path: Path) -> None:
    src = write_project(tmp_path / "src", f'add_subdirectory("{REPO}" slimwheel)')
    (src / "pyproject.toml").write_text(PYPROJECT + '\n[tool.slimwheel]\narchs = "banana"\n')
    r = configure(toolkit13, src, tmp_path / "build", f"-DPython_EXECUTABLE={sys.executable}")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "-m slimwheel plan` failed (exit 3)" in _flat(r.stderr)
    assert "banana" in r.stderr
    assert "from slimwheel's default plan for CUDA 13.0" in _flat(r.stdout)


@pytest.mark.parametrize(
    ("defines", "message"),
    [
        (["-DSLIMWHEEL_CUDA_MAJOR=12"], "SLIMWHEEL_CUDA_MAJOR is 12 but"),
        (["-DSLIMWHEEL_CUDA_ARCHITECTURES=native"], "name the targets"),
        (["-DSLIMWHEEL_COMPRESSION=zip"], "SLIMWHEEL_COMPRESSION is 'zip'"),
        (["-DSLIMWHEEL_LINK=shared"], "SLIMWHEEL_LINK is 'shared'"),
    ],
)
def test_bad_settings_fail_configure_with_a_clear_message(
    toolkit13: Toolkit, tmp_path: Path, defines: list[str], message: str
) -> None:
    src = write_project(tmp_path / "src", f'add_subdirectory("{REPO}" slimwheel)')
    r = configure(toolkit13, src, tmp_path / "build", *defines)
    assert r.returncode != 0
    assert message in _flat(r.stderr), r.stderr[-3000:]


def _version_cases() -> list[tuple[str, bool]]:
    import slimwheel

    major, minor = (int(x) for x in slimwheel.__version__.split(".")[:2])
    cases = [
        ("", True),
        (f"{major}.{minor}", True),
        (slimwheel.__version__, True),
        (f"{major}.{minor + 1}", False),
        (f"{major + 1}.0", False),
    ]
    # While the major is 0, a new minor may break: 0.1 does not satisfy a request for 0.0.
    if major == 0 and minor > 0:
        cases.append((f"0.{minor - 1}", False))
    return cases


@pytest.mark.parametrize(("requested", "found"), _version_cases())
def test_config_version_follows_the_package_version(tmp_path: Path, requested: str, found: bool) -> None:
    import slimwheel

    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18...3.31)\nproject(v LANGUAGES NONE)\n"
        f'find_package(slimwheel {requested} CONFIG REQUIRED PATHS "{REPO / "slimwheel" / "cmake"}" NO_DEFAULT_PATH)\n'
        'message(STATUS "slimwheel version=${slimwheel_VERSION}")\n'
    )
    cmd = [CMAKE, "-S", str(tmp_path), "-B", str(tmp_path / "b")]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert (r.returncode == 0) == found, r.stderr[-2000:]
    if found:
        assert f"slimwheel version={slimwheel.__version__}" in r.stdout


def test_cuda12_rpath_has_one_folder_per_wheel_and_legacy_compression(tmp_path: Path) -> None:
    from slimwheel.toolkit import ensure_toolkit

    tk12 = ensure_toolkit(CudaVersion(12, 4))  # set up by scripts/test.sh (`slimwheel toolkit --cuda 12.4`)
    src = write_project(tmp_path / "src", f'add_subdirectory("{REPO}" slimwheel)')
    r = configure(tk12, src, tmp_path / "build", f"-DSLIMWHEEL_CUDA_LIBDIRS={';'.join(map(str, tk12.lib_dirs))}")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    # cuda-facts.md section 1: CUDA 12 wheels put each component in its own folder.
    assert (
        "tiny links cudart;cublas dynamically; INSTALL_RPATH $ORIGIN/../nvidia/cuda_runtime/lib;$ORIGIN/../nvidia/cublas/lib"
        in r.stdout
    )
    assert "INSTALL_RPATH $ORIGIN/../../nvidia/cuda_runtime/lib;$ORIGIN/../../nvidia/cublas/lib" in r.stdout
    cu = compile_command(tmp_path / "build", "kernel.cu")
    # --compress-mode needs CUDA >= 12.8: auto means -Xfatbin=-compress-all on 12.4.
    assert "-Xfatbin=-compress-all" in cu
    assert not any(a.startswith("--compress-mode") for a in cu)
    # No architectures given: the table's plan for 12.4, from Maxwell (5.0, 12.4's oldest) with PTX for Hopper.
    assert "--generate-code=arch=compute_50,code=[sm_50]" in cu
    assert "--generate-code=arch=compute_90,code=[compute_90,sm_90]" in cu
