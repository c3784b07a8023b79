"""The sysroot's GCC 10 gets the intrinsics GCC 11 added (faiss 1.15's AVX-512 code calls `_mm256_loadu_epi8`): a
program that uses every one of them compiles with the root's g++ and prints what the host's newer GCC, which has them
natively, prints for the same source. The control: the root's compiler without the compat header refuses the source
(the test can fail). Run where the CPU has AVX-512 BW and VL; compiled everywhere."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from slimwheel.toolkit.sysroot import COMPAT_HEADER, ensure_sysroot
from slimwheel.toolkit.sysroot_wrappers import _GCC11_INTRINSICS

pytestmark = pytest.mark.integration

# Every compat intrinsic on bytes with distinct values, so a wrong width, offset or lane shows in the output.
SOURCE = r"""
#include <immintrin.h>
#include <cstdio>
#include <cstring>
#include <cstdint>
alignas(64) static uint8_t in[128];
alignas(64) static uint8_t out[128];
static void dump(const char* what, const void* p, int n) {
  std::printf("%s", what);
  for (int i = 0; i < n; ++i) std::printf(" %02x", static_cast<const uint8_t*>(p)[i]);
  std::printf("\n");
}
int main() {
  for (int i = 0; i < 128; ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint8_t* u = in + 1;  // unaligned loads
  __m128i a = _mm_add_epi8(_mm_loadu_epi8(u), _mm_add_epi8(_mm_loadu_epi16(u + 2), _mm_add_epi8(_mm_loadu_epi32(u + 3), _mm_loadu_epi64(u + 5))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), a); dump("m128", out, 16);
  __m256i b = _mm256_add_epi8(_mm256_loadu_epi8(u), _mm256_add_epi8(_mm256_loadu_epi16(u + 2), _mm256_add_epi8(_mm256_loadu_epi32(u + 3), _mm256_loadu_epi64(u + 5))));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), b); dump("m256", out, 32);
  __m512i c = _mm512_add_epi8(_mm512_loadu_epi8(u), _mm512_loadu_epi16(u + 9));
  _mm512_storeu_si512(out, c); dump("m512", out, 64);
  std::memset(out, 0, sizeof out);
  _mm_storeu_epi8(out + 1, a); _mm_storeu_epi16(out + 17, a); dump("st128", out, 40);
  std::memset(out, 0, sizeof out);
  _mm256_storeu_epi8(out + 3, b); _mm256_storeu_epi16(out + 37, b); dump("st256", out, 72);
  std::memset(out, 0, sizeof out);
  _mm512_storeu_epi8(out + 1, c); dump("st512a", out, 72);
  _mm512_storeu_epi16(out + 5, c); dump("st512b", out, 72);
  __m128i d = _mm_add_epi32(_mm_load_epi32(in + 16), _mm_load_epi64(in + 32));
  __m256i e = _mm256_add_epi32(_mm256_load_epi32(in + 32), _mm256_load_epi64(in + 64));
  std::memset(out, 0, sizeof out);
  _mm_store_epi32(out, d); _mm256_store_epi32(out + 32, e); dump("aligned", out, 64);
  std::printf("cvt %d %d\n", _mm256_cvtsi256_si32(b), _mm512_cvtsi512_si32(c));
  __m128i s32 = _mm_loadu_si32(u + 3), s16 = _mm_loadu_si16(u + 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), s32); dump("si32", out, 16);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), s16); dump("si16", out, 16);
  std::memset(out, 0, sizeof out);
  _mm_storeu_si32(out + 1, a); _mm_storeu_si16(out + 7, a); dump("stsi", out, 12);
}
"""
FLAGS = ("-O2", "-mavx512f", "-mavx512bw", "-mavx512vl", "-std=c++17")


def _host_gxx() -> str | None:
    """A host g++ of major 11 or newer (it has the intrinsics natively), else None."""
    for name in ("g++", "g++-14", "g++-13", "g++-12", "g++-11"):
        path = shutil.which(name)
        if path is None:
            continue
        out = subprocess.run([path, "-dumpversion"], capture_output=True, text=True).stdout.strip()
        if out and int(out.split(".")[0]) >= 11:
            return path
    return None


def _cpu_has_avx512bw_vl() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\bavx512bw\b", flags) and re.search(r"\bavx512vl\b", flags))


def test_every_compat_intrinsic_is_used_by_the_probe() -> None:
    names = {call.split("(", 1)[0] for call, _ in _GCC11_INTRINSICS}
    assert names and all(n in SOURCE for n in names), sorted(n for n in names if n not in SOURCE)


def test_gcc10_with_compat_header_matches_a_newer_gcc(tmp_path: Path) -> None:
    sysroot = ensure_sysroot("debian11")
    src = tmp_path / "probe.cpp"
    src.write_text(SOURCE)
    ours = tmp_path / "gcc10"
    proc = subprocess.run([str(sysroot.cxx), *FLAGS, str(src), "-o", str(ours)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The control: GCC 10 itself (no compat header) does not know these intrinsics.
    bare = sysroot.root / "usr" / "bin" / f"x86_64-linux-gnu-g++-{sysroot.spec.gcc}"
    proc = subprocess.run(
        [str(bare), f"--sysroot={sysroot.root}", *FLAGS, "-c", str(src), "-o", str(tmp_path / "bare.o")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "_mm256_loadu_epi8" in proc.stderr
    assert (sysroot.root / "bin" / COMPAT_HEADER).is_file()
    host = _host_gxx()
    assert host is not None, "the build machine's g++ (Debian 12: GCC 12) is the reference"
    theirs = tmp_path / "host"
    proc = subprocess.run([host, *FLAGS, str(src), "-o", str(theirs)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if not _cpu_has_avx512bw_vl():
        pytest.skip("compiled with both; running needs a CPU with AVX-512 BW and VL")
    # Run with the root's own loader and libraries: the binary was linked against Debian 11's libstdc++.
    env_dirs = ":".join(map(str, sysroot.library_path()))
    a = subprocess.run([str(sysroot.loader), "--library-path", env_dirs, str(ours)], capture_output=True, text=True)
    b = subprocess.run([str(theirs)], capture_output=True, text=True)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout.count("\n") == 12 and a.stdout == b.stdout


def test_host_python_headers_found_through_the_root(tmp_path: Path) -> None:
    """Debian's python3-dev splits pyconfig.h by architecture; with --sysroot the compiler would look for the
    per-architecture half in the root only (a faiss build for the GPU machine's Ubuntu Python stopped there). The
    control: the root's driver without the wrapper's search folder fails on the same source."""
    sysroot = ensure_sysroot("debian11")
    headers = sorted(Path("/usr/include").glob("python3*/pyconfig.h"))
    split = [h for h in headers if "x86_64-linux-gnu/python3" in h.read_text(errors="replace")]
    assert split, "this host (Debian 12 with python3-dev) has a multiarch pyconfig.h"
    src = tmp_path / "ext.c"
    src.write_text("#include <Python.h>\nint major(void) { return PY_MAJOR_VERSION; }\n")
    include = f"-I{split[0].parent}"
    ok = subprocess.run(
        [str(sysroot.cc), include, "-c", str(src), "-o", str(tmp_path / "ext.o")], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    bare = sysroot.root / "usr" / "bin" / f"x86_64-linux-gnu-gcc-{sysroot.spec.gcc}"
    no = subprocess.run(
        [str(bare), f"--sysroot={sysroot.root}", include, "-c", str(src), "-o", str(tmp_path / "bare.o")],
        capture_output=True,
        text=True,
    )
    assert no.returncode != 0 and "pyconfig.h" in no.stderr
