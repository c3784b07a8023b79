"""slimwheel_nvrtc_embed and slimwheel/nvrtc.hpp with real CMake, g++ and NVRTC (no GPU, no nvcc needed).

tests/packages/nvrtc-embed is configured with hostile kernel "sources" generated here (every byte value but NUL,
the raw-literal terminators the generator must avoid, CR LF and lone CR, files far longer than one literal piece);
the built `dump` program writes back what it embedded, which must be the files byte for byte. The same build holds
the NVRTC compile check (examples/topk-nvrtc's kernels compiled to cubins by the nvidia-cuda-nvrtc wheel's library)
and a shared library linked with --gc-sections and -s, which inspect.nvrtc must read. The disk cache is tested by a
C++ program (tests/cpp/nvrtc_cache_test.cpp) built against the header alone.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.cmakerun import CMAKE

from slimwheel.inspect.elf import embedded_sources

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tests/packages/nvrtc-embed"
CXX = shutil.which("g++") or "c++"
SLIMWHEEL_CMAKE = REPO / "slimwheel/cmake"


def hostile(rng: random.Random, size: int) -> bytes:
    """Bytes 1..255 with raw-literal terminators and carriage returns sprinkled in."""
    traps = [b')"', b')slw0"', b')slw1"', b')slw2"', b'R"slw0(', b"\r\n", b"\r", b"\r\r\n", b"\\\n", b"??/\n"]
    out = bytearray()
    while len(out) < size:
        if rng.random() < 0.2:
            out += rng.choice(traps)
        else:
            out += bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 40)))
    return bytes(out[:size])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nvrtc-embed")
    src = root / "src"
    (src / "inc" / "deep").mkdir(parents=True)
    rng = random.Random(15)
    # main.cuh includes a header by its folder, one from INCLUDE_DIRS, which includes an empty one in a subfolder.
    (src / "main.cuh").write_bytes(
        b'#include "local.cuh"\n#include "found_in_include_dir.cuh"\n' + hostile(rng, 50_000) + b"\r\n"
    )
    (src / "local.cuh").write_bytes(hostile(rng, 3_000))
    (src / "inc" / "found_in_include_dir.cuh").write_bytes(b'#include "deep/empty.cuh"\n' + hostile(rng, 70_000))
    (src / "inc" / "deep" / "empty.cuh").write_bytes(b"")
    (src / "second.cu").write_bytes(b')slw0"' * 5000 + b'#include "local.cuh"\n')
    build = root / "build"
    configure(src, build, [src / "main.cuh", src / "second.cu"])
    return root


def configure(src: Path, build: Path, sources: list[Path]) -> None:
    subprocess.run(
        [
            CMAKE,
            "-S",
            str(PACKAGE),
            "-B",
            str(build),
            f"-Dslimwheel_DIR={SLIMWHEEL_CMAKE}",
            f"-DNVT_SOURCES={';'.join(map(str, sources))}",
            f"-DNVT_INCLUDE_DIRS={src / 'inc'}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    r = subprocess.run([CMAKE, "--build", str(build), "-j", "2"], check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


def dump(root: Path) -> dict[str, bytes]:
    out = root / "dumped"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    r = subprocess.run([str(root / "build/dump"), str(out)], check=True, capture_output=True, text=True)
    files = {}
    for line in r.stdout.splitlines():
        index, name, size = line.split()
        files[name] = (out / index).read_bytes()
        assert len(files[name]) == int(size)
    return files


def test_embedded_bytes_are_the_files(built: Path) -> None:
    src = built / "src"
    files = dump(built)
    expected = {
        "main.cuh": src / "main.cuh",
        "second.cu": src / "second.cu",
        "local.cuh": src / "local.cuh",
        "found_in_include_dir.cuh": src / "inc/found_in_include_dir.cuh",
        "deep/empty.cuh": src / "inc/deep/empty.cuh",
    }
    assert sorted(files) == sorted(expected)
    for name, path in expected.items():
        assert files[name] == path.read_bytes(), name
    header = (built / "build/slimwheel_nvrtc/dump/embedded.h").read_text(encoding="latin-1")
    # Raw literals stay below MSVC's 16380-byte limit (one literal per line of the generated header).
    assert max(len(line) for line in header.splitlines()) < 16_100
    # second.cu is made of the first delimiter's terminator: the generator had to pick another one for it.
    assert 'R"slw1()slw0")slw0"' in header


def test_regenerated_when_an_included_header_changes_or_gains_an_include(built: Path) -> None:
    src = built / "src"
    (src / "local.cuh").write_bytes(b"changed\r\n")
    r = subprocess.run([CMAKE, "--build", str(built / "build")], check=True, capture_output=True, text=True)
    assert "embedding NVRTC sources of dump" in r.stdout
    assert dump(built)["local.cuh"] == b"changed\r\n"
    # An include that did not exist at configure time: the generator's depfile makes the next build see it.
    (src / "new.cuh").write_bytes(b"new header\n")
    (src / "local.cuh").write_bytes(b'#include "new.cuh"\n')
    subprocess.run([CMAKE, "--build", str(built / "build")], check=True, capture_output=True, text=True)
    assert dump(built)["new.cuh"] == b"new header\n"
    (src / "new.cuh").write_bytes(b"newer header\n")
    r = subprocess.run([CMAKE, "--build", str(built / "build")], check=True, capture_output=True, text=True)
    assert "embedding NVRTC sources of dump" in r.stdout
    assert dump(built)["new.cuh"] == b"newer header\n"
    r = subprocess.run([CMAKE, "--build", str(built / "build")], check=True, capture_output=True, text=True)
    assert "embedding NVRTC sources" not in r.stdout  # nothing changed: nothing regenerated


def test_a_nul_byte_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.cuh").write_bytes(b"int a;\0int b;\n")
    r = subprocess.run(
        [
            CMAKE,
            "-D_SLWN_SOURCES=" + str(tmp_path / "bad.cuh"),
            "-D_SLWN_OUTPUT=" + str(tmp_path / "out.h"),
            "-D_SLWN_NAMESPACE=x",
            "-D_SLWN_CUDA_MAJOR=13",
            "-D_SLWN_SONAME=libnvrtc.so.13",
            "-D_SLWN_FOLDER=f",
            "-D_SLWN_PACKAGE=p",
            "-D_SLWN_DEPTH=1",
            "-P",
            str(SLIMWHEEL_CMAKE / "SlimWheelNvrtc.cmake"),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert (
        r.returncode != 0 and "contains a NUL byte" in " ".join(r.stderr.split()) and not (tmp_path / "out.h").exists()
    )


def test_detects_the_sources_in_a_stripped_gc_sectioned_library(built: Path) -> None:
    lib = built / "build/libembedded.so"
    (record,) = embedded_sources(lib.read_bytes(), lib.name)
    csrc = REPO / "examples/topk-nvrtc/csrc"
    assert [f.name for f in record.files] == ["topk.cuh", "topk_sort.cuh"]
    for f in record.files:
        assert f.sha256 == hashlib.sha256((csrc / f.name).read_bytes()).hexdigest()
    assert (record.bundle, record.cuda_major, record.nvrtc_package) == ("lib_kernels", 13, "nvidia-cuda-nvrtc")


def test_cache_rejects_planted_corrupted_and_foreign_files(tmp_path: Path) -> None:
    exe = tmp_path / "cache_test"
    subprocess.run(
        [
            CXX,
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{SLIMWHEEL_CMAKE / 'include'}",
            str(REPO / "tests/cpp/nvrtc_cache_test.cpp"),
            "-o",
            str(exe),
            "-ldl",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLIMWHEEL_NVRTC", "XDG_"))}
    r = subprocess.run([str(exe), str(scratch)], check=False, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    oks = [line for line in r.stdout.splitlines() if line.startswith("ok ")]
    assert len(oks) >= 60 and "0 failure(s)" in r.stdout
    assert any("planted file for another key is not loaded" in line for line in oks)
    assert any("forged header" in line for line in oks)
    # issue 24 item 7: the path as given and as resolved, at each use; writers' temporary files
    for check in (
        "a cache reached through a link in a world-writable folder is refused",
        "the next store is refused",
        "a parent made world-writable stops loads and stores",
        "a killed writer's temporary file is removed",
        "a live temporary file counts against the cap",
    ):
        assert any(check in line for line in oks), check


def nvrtc_library() -> Path:
    # The namespace package of the nvidia-* wheels ([test] extra: nvidia-cuda-nvrtc).
    nvidia = importlib.import_module("nvidia")
    for folder in nvidia.__path__:
        lib = Path(folder) / "cu13/lib/libnvrtc.so.13"
        if lib.is_file():
            return lib
    raise AssertionError("libnvrtc.so.13 not found: pip install 'nvidia-cuda-nvrtc==13.0.*' (the [test] extra)")


def test_nvrtc_compiles_the_example_kernels_and_reports_its_log(built: Path) -> None:
    r = subprocess.run(
        [str(built / "build/compile_check"), str(nvrtc_library())], check=False, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" is a cubin") == 14 and "0 failure(s)" in r.stdout
    assert "the error carries NVRTC's log" in r.stdout and 'identifier "undeclared_name" is undefined' in r.stdout
