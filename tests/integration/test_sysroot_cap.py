"""A sysroot capped below its own policy (`slimwheel sysroot debian11 --manylinux 2_28`): code that calls exp, log
and pow links them at GLIBC_2.2.5 instead of 2.29, so the library's floor drops from manylinux_2_31 to what it
otherwise needs; the results are the same numbers, and the root's own loader loads it. The uncapped compiler is the
control: the same source then needs GLIBC_2.29 (the test can fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slimwheel import floor
from slimwheel.inspect.elf import file_version_definitions, read_elf_file
from slimwheel.toolkit import Toolkit
from slimwheel.toolkit.sysroot import (
    GLIBCXX_SHIM_ARCHIVE,
    GLIBCXX_SHIM_SYMBOLS,
    SPECS,
    Sysroot,
    cap_for,
    cap_wrapper,
    ensure_sysroot,
)

pytestmark = pytest.mark.integration

SOURCE = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
extern "C" double mix(double x, double y) { return std::pow(x, y) + std::log(x) + std::exp(y) + std::log2(x) + std::exp2(y); }
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) std::printf("%.17g\n", mix(std::atof(argv[i]), 0.5 + i));
}
"""


@pytest.fixture(scope="module")
def sysroot() -> Sysroot:
    return ensure_sysroot("debian11")


def _compile(cxx: str, out: Path, src: Path, *extra: str) -> Path:
    proc = subprocess.run([cxx, "-O2", "-fPIC", *extra, str(src), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _glibc_versions(path: Path) -> set[str]:
    rep = read_elf_file(path, path.name, fatbins=False)
    assert rep is not None
    return {n.version for n in rep.version_needs if n.version.startswith("GLIBC_")}


def test_version_definitions_agree_with_objdump(sysroot: Sysroot) -> None:
    libm = (sysroot.root / "lib" / "x86_64-linux-gnu" / "libm.so.6").resolve()
    defs = file_version_definitions(libm, "libm.so.6")
    ours = {(d.symbol, d.version, d.default) for d in defs if d.symbol != d.version}
    out = subprocess.run(["objdump", "-T", str(libm)], capture_output=True, text=True, check=True).stdout
    theirs = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 6 and "*UND*" not in parts and parts[-2].startswith(("GLIBC_", "(GLIBC_")):
            ver, name = parts[-2], parts[-1]
            if name != ver.strip("()"):
                theirs.add((name, ver.strip("()"), not ver.startswith("(")))
    assert ("pow", "GLIBC_2.29", True) in ours and ("pow", "GLIBC_2.2.5", False) in ours
    assert ours == theirs


def test_capped_compiler_links_old_versions_with_same_results(sysroot: Sysroot, tmp_path: Path) -> None:
    cap = cap_for(sysroot, "2_28")
    assert cap is not None and cap.policy == "manylinux_2_28"
    assert {p.symbol for p in cap.pinned} >= {"exp", "log", "pow", "exp2", "log2"}
    assert "totalorder" not in {p.symbol for p in cap.pinned}  # its arguments changed in 2.31: never pinned
    assert cap_for(sysroot, "2_31") is None and cap_for(sysroot, "") is None
    src = tmp_path / "mix.cpp"
    src.write_text(SOURCE)
    plain = _compile(str(sysroot.cxx), tmp_path / "plain", src)
    capped = _compile(sysroot.env(cap)["CXX"], tmp_path / "capped", src)
    lib = _compile(sysroot.env(cap)["CXX"], tmp_path / "libmix.so", src, "-shared")
    assert "GLIBC_2.29" in _glibc_versions(plain)  # the control
    assert "GLIBC_2.29" not in _glibc_versions(capped)
    assert "GLIBC_2.29" not in _glibc_versions(lib)
    target = floor.parse_target("2_28")
    for f in (capped, lib):
        rep = read_elf_file(f, f.name, fatbins=False)
        assert rep is not None and floor.offenders([rep], target) == ()
    args = ["0.5", "2.0", "3.75", "1e-3", "123.456"]
    runs = [subprocess.run([str(p), *args], capture_output=True, text=True, check=True).stdout for p in (plain, capped)]
    assert runs[0] == runs[1] and len(runs[0].splitlines()) == len(args)
    assert sysroot.load_probe(lib) == []


def test_sysroot_command_prints_capped_env(sysroot: Sysroot) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slimwheel", "sysroot", "debian11", "--manylinux", "2_28"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pow@GLIBC_2.2.5" in proc.stdout and "/caps/manylinux_2_28/g++" in proc.stdout


CUDA_SOURCE = r"""
#include <cmath>
#include <cstdio>
__global__ void k(float* x) { x[threadIdx.x] = powf(x[threadIdx.x], 2.0f) + logf(2.0f); }
extern "C" double host_mix(double a) { return std::pow(a, 1.5) * std::log(a); }
int main() { std::printf("%.17g\n", host_mix(3.0)); }
"""


def test_nvcc_with_the_capped_host_compiler(sysroot: Sysroot, toolkit13: Toolkit, tmp_path: Path) -> None:
    """nvcc preprocesses device code with the host compiler (the header's __CUDA_ARCH__ guard keeps it out) and
    compiles its own preprocessed host code again (a repeated .symver): the object binds pow/log at GLIBC_2.2.5."""
    cap = cap_for(sysroot, "2_28")
    assert cap is not None
    src = tmp_path / "k.cu"
    src.write_text(CUDA_SOURCE)
    exe = tmp_path / "k"
    cmd = [str(toolkit13.nvcc), "-ccbin", sysroot.env(cap)["CUDAHOSTCXX"], "-O2", "-arch=sm_75", str(src), "-o"]
    proc = subprocess.run([*cmd, str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "GLIBC_2.29" not in _glibc_versions(exe)
    rep = read_elf_file(exe, exe.name, fatbins=False)
    assert rep is not None
    pinned = {s for n in rep.version_needs if n.version == "GLIBC_2.2.5" for s in n.symbols}
    assert {"pow", "log"} <= pinned


STREAMS_SOURCE = r"""
#include <sstream>
#include <string>
#include <cstdio>
extern "C" const char* fmt(int x) {
  static std::string keep;
  std::stringstream ss; ss << "v=" << x;
  std::ostringstream os; os << ss.str() << ";";
  std::istringstream is; is.str("12 34"); int a = 0, b = 0; is >> a >> b;
  std::wstringstream ws; ws << L"w" << a + b;
  std::wostringstream wos; std::wistringstream wis; std::stringbuf sb; std::wstringbuf wsb;
  keep = os.str() + std::to_string(a * b) + (ws.str().size() == 3 ? " ok" : " bad")
       + (wos.str().empty() && wis.str().empty() && sb.str().empty() && wsb.str().empty() ? "" : " ?");
  return keep.c_str();
}
int main() { std::puts(fmt(7)); }
"""


def _glibcxx_versions(path: Path) -> set[str]:
    rep = read_elf_file(path, path.name, fatbins=False)
    assert rep is not None
    return {n.version for n in rep.version_needs if n.version.startswith("GLIBCXX_")}


def test_string_stream_default_constructors_are_defined_in_the_module(sysroot: Sysroot, tmp_path: Path) -> None:
    """GCC 9+ headers bind `std::stringstream ss;` to basic_stringstream() @GLIBCXX_3.4.26, which RHEL 8's libstdc++
    lacks (faiss 1.15 needs it; manylinux_2_28 allows GLIBCXX up to 3.4.24). The capped g++ links the shim archive,
    which defines those constructors inside the module, hidden. -O0 keeps the calls (at -O2 GCC 10 inlines them)."""
    cap = cap_for(sysroot, "2_28")
    assert cap is not None and cap.glibcxx_shims == ("3.4.26",)
    archive = cap.folder / GLIBCXX_SHIM_ARCHIVE
    defined = subprocess.run(["nm", "--defined-only", str(archive)], capture_output=True, text=True, check=True).stdout
    names = {ln.split()[-1] for ln in defined.splitlines() if len(ln.split()) == 3}
    assert set(GLIBCXX_SHIM_SYMBOLS["3.4.26"]) <= names  # every member the table names, in both ABIs
    # ... and each of those is what the root's own libstdc++ added in 3.4.26
    libstdcxx = (sysroot.root / "usr" / "lib" / "x86_64-linux-gnu" / "libstdc++.so.6").resolve()
    versions = {d.symbol: d.version for d in file_version_definitions(libstdcxx, "libstdc++.so.6") if d.default}
    assert {versions.get(s) for s in GLIBCXX_SHIM_SYMBOLS["3.4.26"]} == {"GLIBCXX_3.4.26"}
    src = tmp_path / "streams.cpp"
    src.write_text(STREAMS_SOURCE)
    plain = _compile(str(sysroot.cxx), tmp_path / "plain", src, "-O0")
    capped = _compile(sysroot.env(cap)["CXX"], tmp_path / "capped", src, "-O0")
    lib = _compile(sysroot.env(cap)["CXX"], tmp_path / "libstreams.so", src, "-O0", "-shared")
    assert "GLIBCXX_3.4.26" in _glibcxx_versions(plain)  # the control
    target = floor.parse_target("2_28")
    for f in (capped, lib):
        rep = read_elf_file(f, f.name, fatbins=False)
        assert rep is not None
        assert floor.offenders([rep], target) == (), floor.offenders([rep], target)
    exported = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True).stdout
    ctors = [
        ln for ln in exported.splitlines() if "*UND*" not in ln and any(s in ln for s in GLIBCXX_SHIM_SYMBOLS["3.4.26"])
    ]
    assert ctors == []  # defined inside, not exported (--exclude-libs)
    loader = [str(sysroot.loader), "--library-path", ":".join(map(str, sysroot.library_path()))]
    out = [
        subprocess.run([*loader, str(p)], capture_output=True, text=True, check=True).stdout for p in (plain, capped)
    ]
    assert out[0] == out[1] == "v=7;408 ok\n"
    assert sysroot.load_probe(lib) == []


@pytest.mark.parametrize(
    ("args", "links"),
    [
        (["-c", "a.cpp", "-o", "a.o"], False),
        (["-o", "a.o", "-c", "a.cpp"], False),
        (["-E", "a.cu", "-o", "a.ii"], False),
        (["--version"], False),
        (["-dumpversion"], False),
        (["a.o", "b.o", "-shared", "-o", "lib.so"], True),
        (["a.o", "-olib.so"], True),
    ],
)
def test_capped_gxx_takes_the_shim_archive_on_links_only(tmp_path: Path, args: list[str], links: bool) -> None:
    spec = SPECS["debian11"]
    (tmp_path / "bin").mkdir()
    echo = tmp_path / "bin" / "g++"
    echo.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    echo.chmod(0o755)
    caps = tmp_path / "caps" / "manylinux_2_28"
    caps.mkdir(parents=True)
    w = caps / "g++"
    w.write_text(cap_wrapper("g++", spec, "manylinux_2_28", shim=True))
    w.chmod(0o755)
    got = subprocess.run([str(w), *args], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got[:2] == ["-include", f"{caps}/slimwheel-glibc-cap.h"] and got[2 : 2 + len(args)] == args
    tail = got[2 + len(args) :]
    assert tail == ([f"-Wl,--exclude-libs,{GLIBCXX_SHIM_ARCHIVE}", f"{caps}/{GLIBCXX_SHIM_ARCHIVE}"] if links else [])
    assert "libslimwheel-glibcxx" not in cap_wrapper("gcc", spec, "manylinux_2_28")
