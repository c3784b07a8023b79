"""A library that carries libstdc++ linked statically and exports it (the faiss wheels built on the GPU machine
carried one and crashed in index_factory; docs/faiss.md): real libraries compiled with g++ here, read by slimwheel's
ELF reader, judged by the one dependency rule that check and repair share."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.wheelmaker import make_wheel

from slimwheel.cli import main
from slimwheel.deps import cxx_runtime_problem, dependency_problems
from slimwheel.errors import ExitCode, SlimwheelError
from slimwheel.inspect.dynamic import ElfInfo, read_dynamic
from slimwheel.inspect.elf import read_elf_file
from slimwheel.repair import repair_wheel

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
        subprocess.run(["g++", "-O1", "-fPIC", "-shared", "-fvisibility=hidden", "-o", str(so), str(d / "demo.cpp"),
                        *extra], check=True)  # fmt: skip
        out[kind] = so
    return out


def test_the_reader_tells_the_three_links_apart(libs: dict[str, Path]) -> None:
    seen = {kind: read_elf_file(so, so.name) for kind, so in libs.items()}
    assert {k: r.exports_cxx_runtime for k, r in seen.items() if r} == {
        "dynamic": False, "static-exported": True, "static-hidden": False}  # fmt: skip
    assert "libstdc++.so.6" in seen["dynamic"].needed  # type: ignore[union-attr]
    assert "libstdc++.so.6" not in seen["static-exported"].needed  # type: ignore[union-attr]
    # The shared libstdc++ itself defines the marker and is never a problem.
    system = Path(subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], capture_output=True, text=True,
                                 check=True).stdout.strip())  # fmt: skip
    assert read_dynamic(system.resolve(), "libstdc++.so.6").exports_cxx_runtime is False  # type: ignore[union-attr]


def test_only_the_exported_static_copy_is_a_problem(libs: dict[str, Path]) -> None:
    for kind, so in libs.items():
        info = read_dynamic(so, f"demo/{so.name}")
        assert info is not None
        problem = cxx_runtime_problem(info)
        assert (problem is not None) == (kind == "static-exported"), kind
    bad = ElfInfo(path="demo/_demo.so", soname=None, needed=("libc.so.6",), rpath=(), runpath=(),
                  exports_cxx_runtime=True)  # fmt: skip
    v = dependency_problems([bad], cuda_major=None, requires=[], tags=["cp312-abi3-manylinux_2_28_x86_64"])
    assert len(v.problems) == 1 and "libstdc++ linked statically" in v.problems[0]


def test_check_fails_and_repair_refuses_a_wheel_with_an_exported_copy(libs: dict[str, Path], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    good = make_wheel(tmp_path / "good", files={"demo/_demo.abi3.so": libs["static-hidden"].read_bytes()})
    bad = make_wheel(tmp_path / "bad", files={"demo/_demo.abi3.so": libs["static-exported"].read_bytes()})
    assert main(["check", "--require-arch", "none", str(good)]) == ExitCode.OK
    assert main(["check", "--require-arch", "none", str(bad)]) == ExitCode.INCONSISTENT_DEPENDENCIES
    assert "carries libstdc++ linked statically and exports it" in capsys.readouterr().out
    with pytest.raises(SlimwheelError, match="libstdc\\+\\+ linked statically"):
        repair_wheel(bad, tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.whl"))
