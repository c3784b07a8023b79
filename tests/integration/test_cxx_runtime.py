"""A library that carries libstdc++ linked statically and exports it (the faiss wheels built on the GPU machine
carried one and crashed in index_factory; docs/faiss.md): real libraries compiled with g++ here, read by slimwheel's
ELF reader, judged by the one dependency rule that check and repair share. And the cause, as the GPU machine had it
(lab/results/h200/cxx_probe.txt): a GCC under /opt/gcc whose libstdc++.so link dangles, so that -lstdc++ takes
libstdc++.a; slimwheel's CMake package makes its targets link the shared library all the same."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.cmakerun import CMAKE, configure

from slimwheel.cli import main
from slimwheel.deps import cxx_runtime_problem, dependency_problems
from slimwheel.errors import ExitCode, SlimwheelError
from slimwheel.inspect.dynamic import ElfInfo, read_dynamic
from slimwheel.inspect.elf import read_elf_file
from slimwheel.repair import repair_wheel
from slimwheel.toolkit import Toolkit
from testkit.wheelmaker import make_wheel

SOURCE = r"""
#include <regex>
#include <string>
extern "C" __attribute__((visibility("default"))) int PyInit__demo(const char* s) {
    std::smatch m;
    std::string text(s);
    return std::regex_match(text, m, std::regex("IVF([0-9]+),Flat")) ? std::stoi(m[1].str()) : -1;
}
"""
LINKS = {
    "dynamic": [],  # libstdc++.so.6 in DT_NEEDED, the usual way
    "static-exported": ["-static-libstdc++"],  # its symbols stay in the dynamic symbol table
    "static-hidden": ["-static-libstdc++", "-Wl,--exclude-libs,ALL"],  # a private copy: nothing exported
}


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cxx")
    (d / "demo.cpp").write_text(SOURCE)
    out = {}
    for kind, extra in LINKS.items():
        so = d / f"{kind}.so"
        subprocess.run(
            ["g++", "-O1", "-fPIC", "-shared", "-fvisibility=hidden", "-o", str(so), str(d / "demo.cpp"), *extra],
            check=True,
        )
        out[kind] = so
    return out


def test_the_reader_tells_the_three_links_apart(libs: dict[str, Path]) -> None:
    seen = {kind: read_elf_file(so, so.name) for kind, so in libs.items()}
    assert {k: r.exports_cxx_runtime for k, r in seen.items() if r} == {
        "dynamic": False,
        "static-exported": True,
        "static-hidden": False,
    }
    dynamic, static_exported = seen["dynamic"], seen["static-exported"]
    assert dynamic is not None and static_exported is not None
    assert "libstdc++.so.6" in dynamic.needed
    assert "libstdc++.so.6" not in static_exported.needed
    # The shared libstdc++ itself defines the marker and is never a problem.
    system = Path(
        subprocess.run(
            ["g++", "-print-file-name=libstdc++.so.6"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    shared = read_dynamic(system.resolve(), "libstdc++.so.6")
    assert shared is not None and shared.exports_cxx_runtime is False


def test_only_the_exported_static_copy_is_a_problem(libs: dict[str, Path]) -> None:
    for kind, so in libs.items():
        info = read_dynamic(so, f"demo/{so.name}")
        assert info is not None
        problem = cxx_runtime_problem(info)
        assert (problem is not None) == (kind == "static-exported"), kind
    bad = ElfInfo(
        path="demo/_demo.so", soname=None, needed=("libc.so.6",), rpath=(), runpath=(), exports_cxx_runtime=True
    )
    v = dependency_problems([bad], cuda_major=None, requires=[], tags=["cp312-abi3-manylinux_2_28_x86_64"])
    assert len(v.problems) == 1 and "libstdc++ linked statically" in v.problems[0]


def test_check_fails_and_repair_refuses_a_wheel_with_an_exported_copy(
    libs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = make_wheel(tmp_path / "good", files={"demo/_demo.abi3.so": libs["static-hidden"].read_bytes()})
    bad = make_wheel(tmp_path / "bad", files={"demo/_demo.abi3.so": libs["static-exported"].read_bytes()})
    assert main(["check", "--require-arch", "none", str(good)]) == ExitCode.OK
    assert main(["check", "--require-arch", "none", str(bad)]) == ExitCode.INCONSISTENT_DEPENDENCIES
    assert "carries libstdc++ linked statically and exports it" in capsys.readouterr().out
    with pytest.raises(SlimwheelError, match="libstdc\\+\\+ linked statically"):
        repair_wheel(bad, tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.whl"))


# --------------------------------------------------------------------------------------------- the compiler's side
# The system g++ with -B <folder>: the driver puts that folder first on the link's search path, as a GCC installed
# under /opt/gcc puts its own. The folder holds libstdc++.a and a libstdc++.so link that dangles (the GPU machine's
# /opt/gcc/lib/gcc/x86_64-linux-gnu/13/libstdc++.so -> ../../../x86_64-linux-gnu/libstdc++.so.6), so ld takes the
# archive, while `g++ -print-file-name=libstdc++.so` still names the system's shared one further down the path.
REPO = Path(__file__).resolve().parents[2]
CMAKELISTS = """\
cmake_minimum_required(VERSION 3.18...3.31)
project(cxxrt LANGUAGES CXX CUDA)
find_package(slimwheel CONFIG REQUIRED)
add_library(demo MODULE demo.cpp)
slimwheel_cuda_target(demo)
add_library(linked MODULE demo.cpp)  # a project that keeps its own flags and only links CUDA through slimwheel
slimwheel_link_cuda(linked LIBRARIES cudart)
add_library(plain MODULE demo.cpp)  # not slimwheel's: links as the compiler does
"""


def _g_plus_plus(*args: str) -> str:
    return subprocess.run(["g++", *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def relocated_gcc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gcc")
    gccdir = d / "lib" / "gcc" / "x86_64-linux-gnu" / "13"
    gccdir.mkdir(parents=True)
    (gccdir / "libstdc++.a").symlink_to(_g_plus_plus("-print-file-name=libstdc++.a"))
    (gccdir / "libstdc++.so").symlink_to("../../../x86_64-linux-gnu/libstdc++.so.6")  # dangles, as there
    compilers = {}
    for name, hide in (("g++", False), ("g++-no-so6", True)):
        script = d / "bin" / name
        script.parent.mkdir(exist_ok=True)
        # The second also finds no libstdc++.so.6 at all: nothing shared to link.
        hide_line = 'for a in "$@"; do [[ "$a" == -print-file-name=libstdc++.so.6 ]] && { echo libstdc++.so.6; exit 0; }; done\n'
        script.write_text(f'#!/bin/bash\n{hide_line if hide else ""}exec g++ -B{gccdir}/ "$@"\n')
        script.chmod(0o755)
        compilers[name] = script
    return compilers


def _configure(toolkit: Toolkit, src: Path, build: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    """slimwheel's package from this checkout, sm_90 only; `defines` name the compiler under test."""
    return configure(
        toolkit,
        src,
        build,
        f"-Dslimwheel_DIR={REPO / 'slimwheel' / 'cmake'}",
        "-DSLIMWHEEL_CUDA_ARCHITECTURES=90-real",
        "-DSLIMWHEEL_COMPRESSION=size",
        *defines,
    )


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "demo.cpp").write_text(SOURCE)
    (root / "CMakeLists.txt").write_text(CMAKELISTS)
    return root


def test_the_simulated_compiler_links_libstdcxx_statically(relocated_gcc: dict[str, Path], tmp_path: Path) -> None:
    # The premise of the next tests: without slimwheel this compiler makes what the GPU machine's made.
    (tmp_path / "demo.cpp").write_text(SOURCE)
    so = tmp_path / "demo.so"
    subprocess.run(
        [
            str(relocated_gcc["g++"]),
            "-O1",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
            "-o",
            str(so),
            str(tmp_path / "demo.cpp"),
        ],
        check=True,
    )
    report = read_elf_file(so, so.name)
    assert report is not None and report.exports_cxx_runtime
    assert "libstdc++.so.6" not in report.needed
    # and the driver's own answer would not have told: it names a shared libstdc++ all the same
    assert (
        subprocess.run(
            [str(relocated_gcc["g++"]), "-print-file-name=libstdc++.so"], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .startswith("/")
    )


def test_slimwheel_targets_link_the_shared_libstdcxx(
    toolkit13: Toolkit, relocated_gcc: dict[str, Path], tmp_path: Path
) -> None:
    src = _project(tmp_path / "src")
    build = tmp_path / "build"
    r = _configure(toolkit13, src, build, f"-DCMAKE_CXX_COMPILER={relocated_gcc['g++']}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    warning = " ".join(r.stderr.split())
    assert "links" in warning and "libstdc++.a, so its modules would carry libstdc++ statically" in warning, warning
    r = subprocess.run([CMAKE, "--build", str(build)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    demo, linked, plain = (read_elf_file(build / f"lib{n}.so", f"lib{n}.so") for n in ("demo", "linked", "plain"))
    assert demo is not None and linked is not None and plain is not None
    assert "libstdc++.so.6" in demo.needed and not demo.exports_cxx_runtime
    assert "libstdc++.so.6" in linked.needed and not linked.exports_cxx_runtime
    assert plain.exports_cxx_runtime  # the same compiler, the same source, outside slimwheel_cuda_target
    demo_lib = read_dynamic(build / "libdemo.so", "pkg/_demo.so")
    assert demo_lib is not None and cxx_runtime_problem(demo_lib) is None


def test_a_healthy_compiler_is_left_alone(toolkit13: Toolkit, tmp_path: Path) -> None:
    src = _project(tmp_path / "src")
    r = _configure(toolkit13, src, tmp_path / "build", f"-DCMAKE_CXX_COMPILER={shutil.which('g++') or 'g++'}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "libstdc++" not in r.stderr
    assert not (tmp_path / "build" / "slimwheel-cxx-runtime").exists()


def test_no_shared_libstdcxx_at_all_fails_configure_clearly(
    toolkit13: Toolkit, relocated_gcc: dict[str, Path], tmp_path: Path
) -> None:
    src = _project(tmp_path / "src")
    r = _configure(toolkit13, src, tmp_path / "build", f"-DCMAKE_CXX_COMPILER={relocated_gcc['g++-no-so6']}")
    assert r.returncode != 0
    message = " ".join(r.stderr.split())
    assert "finds no libstdc++.so.6" in message and "development package" in message, message


CUDA_ONLY = """\
cmake_minimum_required(VERSION 3.18...3.31)
project(cudaonly LANGUAGES CUDA)
find_package(slimwheel CONFIG REQUIRED)
add_library(demo MODULE demo.cu)
slimwheel_cuda_target(demo)
"""
CUDA_SOURCE = r"""
#include <sstream>
#include <string>
extern "C" __attribute__((visibility("default"))) int demo_len(const char* s) {
    std::ostringstream out;
    out << s << 42;
    return static_cast<int>(out.str().size());
}
"""


def test_a_cuda_only_project_is_probed_through_its_host_compiler(
    toolkit13: Toolkit, relocated_gcc: dict[str, Path], tmp_path: Path
) -> None:
    # No CXX language: nvcc links with its host compiler (CMAKE_CUDA_HOST_COMPILER), which is what gets probed.
    src = tmp_path / "src"
    src.mkdir()
    (src / "demo.cu").write_text(CUDA_SOURCE)
    (src / "CMakeLists.txt").write_text(CUDA_ONLY)
    build = tmp_path / "build"
    r = _configure(toolkit13, src, build, f"-DCMAKE_CUDA_HOST_COMPILER={relocated_gcc['g++']}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "so its modules would carry libstdc++ statically" in " ".join(r.stderr.split()), r.stderr
    r = subprocess.run([CMAKE, "--build", str(build)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    demo = read_elf_file(build / "libdemo.so", "libdemo.so")
    assert demo is not None and "libstdc++.so.6" in demo.needed and not demo.exports_cxx_runtime
