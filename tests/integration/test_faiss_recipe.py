"""The faiss recipe (faiss/) against the faiss 1.15 tree, without building faiss: unpack the tree, plan the profiles,
configure each with CMake, and compile ONE small CUDA file with the slim profile's flags.

Real tools: scripts/fetch-faiss.sh (the tarball; apt for the upstream profile's OpenBLAS), the CUDA 13.0 toolkit of the
`toolkit13` fixture, CMake >= 3.26 and SWIG >= 4.2 from the test extras, the scipy-openblas32 wheel. A configure run
decides every compile and link flag, so the generated build.ninja is read for the flags the profiles promise;
compiling all of faiss (hours on 2 cores) is lab/faiss/faiss-profiles.py's job. Each profile is configured once per
session (about 30-50 s each on the 2-core machine).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from helpers.scripts import load_script

from slimwheel.config import read_pyproject
from slimwheel.cuda.arch import Target
from slimwheel.inspect.scan import inspect_binary
from slimwheel.toolkit.model import Toolkit
from testkit import faiss_profiles

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "faiss"
RECIPE_TABLE = read_pyproject(RECIPE)[1]
faiss_requires = load_script("faiss/build_support/faiss_requires.py")  # the recipe's metadata provider


def profile(name: str) -> faiss_profiles.Profile:
    return faiss_profiles.make_profile(name, RECIPE_TABLE)


@pytest.fixture(scope="session")
def faiss_source() -> Path:
    """The fetch script's tree (unpacked on first use; later runs find it in the cache)."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "fetch-faiss.sh")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    src = Path(proc.stdout.strip().splitlines()[-1])
    assert (src / "faiss" / "gpu" / "GpuIndex.h").is_file()
    return src


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _configure(build: Path, src: Path, toolkit: Toolkit, defines: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The test extras' CMake (>= 3.26) and SWIG (>= 4.2) come first on PATH, as in the PEP 517 build environment;
    # SKBUILD_SABI_VERSION is what scikit-build-core passes for wheel.py-api = "cp310".
    bindir = Path(sys.executable).parent
    cmake = shutil.which("cmake", path=str(bindir)) or "cmake"
    args = [
        cmake,
        "-S",
        str(RECIPE),
        "-B",
        str(build),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DFAISS_SOURCE_DIR={src}",
        f"-DPython_EXECUTABLE={sys.executable}",
        "-DSKBUILD_SABI_VERSION=3.10",
        f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}",
        f"-DCUDAToolkit_ROOT={toolkit.root}",
    ]
    args += [f"-D{k}={v}" for k, v in defines.items()]
    env = dict(os.environ, **toolkit.env, PATH=os.pathsep.join([str(bindir), os.environ.get("PATH", "")]))
    return subprocess.run(args, capture_output=True, text=True, env=env, check=False)


@pytest.fixture(scope="session")
def configured(
    tmp_path_factory: pytest.TempPathFactory, faiss_source: Path, toolkit13: Toolkit
) -> Callable[[str], Path]:
    """name -> a build folder of the recipe configured for that profile (once per session)."""
    done: dict[str, Path] = {}
    digest = _tree_digest(faiss_source)

    def get(name: str) -> Path:
        if name not in done:
            build = tmp_path_factory.mktemp(f"faiss-{name}")
            proc = _configure(build, faiss_source, toolkit13, profile(name).cmake_defines(toolkit13))
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
            assert _tree_digest(faiss_source) == digest, "configure wrote into the faiss source tree"
            done[name] = build
        return done[name]

    return get


def fortran_blas_names(src: Path) -> set[str]:
    """Every Fortran-style name (`sgemm_(`) declared inside an extern "C" block of faiss's CPU sources and headers."""
    names: set[str] = set()
    for f in (src / "faiss").rglob("*"):
        if f.suffix not in (".cpp", ".h") or "gpu" in f.relative_to(src / "faiss").parts:
            continue
        text = f.read_text(errors="replace")
        for block in re.findall(r'extern "C" \{(.*?)\n\}', text, flags=re.DOTALL):
            names.update(re.findall(r"\b([a-z][a-z0-9]*_)\s*\(", block))
    return names


def cmake_list(name: str) -> set[str]:
    text = (RECIPE / "CMakeLists.txt").read_text()
    m = re.search(rf"set\({name}\s+(.*?)\)", text, flags=re.DOTALL)
    assert m, f"{name} not in faiss/CMakeLists.txt"
    return set(m.group(1).split())


def _ninja_block(build: Path, pattern: str) -> dict[str, str]:
    """The variables (FLAGS, INCLUDES, DEFINES, LINK_FLAGS, ...) of the first build statement whose output matches."""
    ninja = (build / "build.ninja").read_text()
    m = re.search(rf"^build ({pattern}): \S+.*?\n((?:  .*\n)+)", ninja, flags=re.MULTILINE)
    assert m, f"{pattern} not in build.ninja"
    return dict(re.findall(r"^  (\w+) = (.*)$", m.group(2), flags=re.MULTILINE))


def _cuda_vars(build: Path, obj: str) -> dict[str, str]:
    return _ninja_block(build, rf"\S*faiss_gpu_objs\.dir\S*{re.escape(obj)}")


def _targets_in(flags: str) -> set[Target]:
    out: set[Target] = set()
    for _arch, codes in re.findall(r"--generate-code=arch=compute_(\d+\w?),code=\[([^\]]+)\]", flags):
        for code in codes.split(","):
            out.add(Target.parse(code))
    return out


def test_fetched_tree_is_faiss_1_15_with_gpu(faiss_source: Path) -> None:
    text = (faiss_source / "CMakeLists.txt").read_text()
    assert re.search(r"^\s*VERSION 1\.15\.0\s*$", text, flags=re.MULTILINE)
    assert (faiss_source / "faiss" / "gpu" / "impl" / "IcmEncoder.cu").is_file()
    assert (faiss_source / "faiss" / "gpu" / "test" / "torch_test_contrib_gpu.py").is_file()
    assert sorted((faiss_source / "faiss" / "gpu" / "test").glob("test_*.py")), "faiss's GPU Python tests are missing"


def test_blas_mapping_covers_faiss_and_exists_in_scipy_openblas(faiss_source: Path) -> None:
    import scipy_openblas32  # type: ignore[import-untyped]  # the test extra installs it; it ships no types

    used = fortran_blas_names(faiss_source)
    assert "sgemm_" in used
    assert cmake_list("FAISS_BLAS_SYMBOLS") == used
    lib = Path(scipy_openblas32.get_lib_dir()) / scipy_openblas32.get_library(fullname=True)
    with lib.open("rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        assert isinstance(dynsym, SymbolTableSection), lib
        exported = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    assert {f"scipy_{n}" for n in used} <= exported
    assert not (used & exported), "unprefixed names exported too: the mapping would be unnecessary"


def test_requirements_follow_the_blas_choice() -> None:
    assert not any("openblas" in r for r in faiss_requires.requirements({"FAISS_BLAS": "system"}))
    assert any(
        r.startswith("scipy-openblas32") for r in faiss_requires.requirements({"FAISS_BLAS": "scipy-openblas32"})
    )
    assert "packaging" in faiss_requires.requirements({})  # faiss 1.15's loader.py imports it
    with pytest.raises(ValueError, match="FAISS_BLAS"):
        faiss_requires.requirements({"FAISS_BLAS": "mkl"})


@pytest.mark.parametrize("name", ["slim", "upstream"])
def test_configure_profile(name: str, configured: Callable[[str], Path], toolkit13: Toolkit) -> None:
    p = profile(name)
    build = configured(name)
    ninja = (build / "build.ninja").read_text()
    flags = _cuda_vars(build, "/WarpSelectFloat1.cu.o")["FLAGS"]
    assert _targets_in(flags) == set(p.plan(toolkit13).arch.targets)
    # 182 CUDA objects, as many as PyPI's faiss-gpu 1.15.1 registers: none left out, none compiled twice (dd: no
    # per-ISA copy of the GPU code).
    assert len(re.findall(r"^build \S+\.cu\.o: CUDA_COMPILER", ninja, flags=re.MULTILINE)) == 182

    # One abi3 module for CPython >= 3.10 (upstream's pyproject-gpu.toml does the same).
    swig = _ninja_block(build, r"\S*swigfaiss\.dir/\S*swigfaissPYTHON_wrap\.cxx\.o")
    assert "Py_LIMITED_API=0x030A0000" in swig["DEFINES"]
    assert re.search(r"^build \S*_swigfaiss\.abi3\.so: ", ninja, flags=re.MULTILINE)

    install = (build / "cmake_install.cmake").read_text().replace("\\$", "$")
    assert "$ORIGIN/../nvidia/cu13/lib" in install
    assert "_gpu_build.py" not in install, "faiss's CUDA 12 preload marker must stay out of a CUDA 13 wheel"
    if p.tuned_link:
        assert "--compress-mode=size" in flags and "-Xfatbin=-compress-all" not in flags
        assert "-fvisibility=hidden" in flags
        assert not re.search(r"^build \S*libfaiss\.so: ", ninja, flags=re.MULTILINE)
    else:
        assert "-Xfatbin=-compress-all" in flags and "--compress-mode" not in flags
        assert "-ffunction-sections" in flags
        lib = _ninja_block(build, r"\S*libfaiss\.so")
        assert "--gc-sections" in lib["LINK_FLAGS"] and "--strip-all" in lib["LINK_FLAGS"]
        assert "-flto" in _ninja_block(build, r"\S*faiss\.dir/IndexFlat\.cpp\.o")["FLAGS"]  # FAISS_USE_LTO
        assert re.search(r"libfaiss\.so", install)  # upstream's layout: libfaiss.so beside the module
        assert "RPATH [[$ORIGIN:" in install  # where _swigfaiss finds it
    if p.blas == "scipy-openblas32":
        assert "$ORIGIN/../scipy_openblas32/lib" in install
        assert "-Dsgemm_=scipy_sgemm_" in ninja
    # IcmEncoder.cu needs cuRAND's device headers, DeviceUtils.cu cuda_profiler_api.h: both of CUDA 13, not the
    # CUDA 11.8 copies a Debian system may have in /usr/include.
    for obj, header in (
        ("/impl/IcmEncoder.cu.o", "curand_kernel.h"),
        ("/utils/DeviceUtils.cu.o", "cuda_profiler_api.h"),
    ):
        inc = _cuda_vars(build, obj)["INCLUDES"]
        dirs = [d.removeprefix("-isystem=").removeprefix("-I") for d in inc.split() if d != "-isystem"]
        found = [Path(d) / header for d in dirs if (Path(d) / header).is_file()]
        assert found, inc
        assert not str(found[0]).startswith("/usr/include"), found


def test_slim_flags_compile_a_faiss_cuda_file(configured: Callable[[str], Path], toolkit13: Toolkit) -> None:
    """One small CUDA file of faiss (impl/IndexUtils.cu), compiled as the slim profile compiles all 182: the object
    holds a cubin for each planned SASS target (and PTX where the plan has it), size-compressed (zstd)."""
    build = configured("slim")
    out = re.search(
        r"^build (\S*faiss_gpu_objs\.dir/impl/IndexUtils\.cu\.o): ",
        (build / "build.ninja").read_text(),
        flags=re.MULTILINE,
    )
    assert out
    env = dict(os.environ, **toolkit13.env)
    proc = subprocess.run(
        ["ninja", "-C", str(build), out.group(1)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    obj = build / out.group(1)
    entries = [e for fb in inspect_binary(obj).fatbins for e in fb.entries]
    assert {e.target for e in entries} == set(profile("slim").plan(toolkit13).arch.targets)
    assert {e.compression for e in entries} == {"zstd"}, "--compress-mode=size stores zstd"


def test_large_k_files_get_their_own_architectures(configured: Callable[[str], Path], toolkit13: Toolkit) -> None:
    """slim-jit: the files for k > 256 (12 k-selection files, 48 generated IVF-Flat scan files) are compiled as PTX 7.5
    only and archived into libfaiss.a; every other CUDA file keeps the plan's targets."""
    jit = profile("slim-jit")
    build = configured("slim-jit")
    ninja = (build / "build.ninja").read_text()
    large = re.findall(
        r"^build (\S*faiss_large_k\.dir/\S+\.cu\.o): CUDA_COMPILER\S*.*?\n((?:  .*\n)+)", ninja, flags=re.MULTILINE
    )
    names = {Path(o).name for o, _ in large}
    assert len(names) == 60
    assert {"WarpSelectFloatT512.cu.o", "BlockSelectFloatF1024.cu.o"} <= names
    assert sum(1 for n in names if n.startswith("template_")) == 48
    for _, block in large:
        flags = dict(re.findall(r"^  (\w+) = (.*)$", block, flags=re.MULTILINE))["FLAGS"]
        assert _targets_in(flags) == {Target.parse("compute_75")}, flags
        assert "--compress-mode=size" in flags and "-fvisibility=hidden" in flags
    assert not re.search(r"faiss_gpu_objs\.dir/\S*_64_2048_8\.cu\.o: CUDA", ninja)
    kept = _cuda_vars(build, "/BlockSelectFloat256.cu.o")["FLAGS"]
    assert _targets_in(kept) == set(jit.plan(toolkit13).arch.targets)
    archive = re.search(r"^build \S*libfaiss\.a: CXX_STATIC_LIBRARY_LINKER\S* (.*)$", ninja, flags=re.MULTILINE)
    assert archive and archive.group(1).count("faiss_large_k.dir/") == 60


def test_configure_refuses_an_older_faiss(tmp_path: Path, faiss_source: Path, toolkit13: Toolkit) -> None:
    fake = tmp_path / "faiss-1.14.0"
    shutil.copytree(faiss_source / "faiss" / "gpu", fake / "faiss" / "gpu")
    text = (faiss_source / "CMakeLists.txt").read_text().replace("VERSION 1.15.0", "VERSION 1.14.0")
    (fake / "CMakeLists.txt").write_text(text)
    proc = _configure(tmp_path / "b", fake, toolkit13, profile("slim").cmake_defines())
    assert proc.returncode != 0
    assert "faiss version '1.14.0'" in proc.stderr.replace("\n", " ")


def test_slimwheel_build_dry_run_plans_the_slim_profile() -> None:
    """`slimwheel build faiss --dry-run` reads faiss/pyproject.toml's [tool.slimwheel] and plans what the slim
    profile builds, without building anything."""
    proc = subprocess.run(
        [sys.executable, "-m", "slimwheel", "build", str(RECIPE), "--dry-run"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = proc.stdout.replace("\n", " ")
    defines: dict[str, Any] = dict(re.findall(r"-Ccmake\.define\.(\w+)=([^' ]+)", out))
    slim = profile("slim").cmake_defines()
    for key in ("SLIMWHEEL_CUDA_ARCHITECTURES", "SLIMWHEEL_COMPRESSION", "SLIMWHEEL_LINK", "SLIMWHEEL_CUDA_MAJOR"):
        assert defines.get(key) == slim[key], (key, defines)
    assert not list(RECIPE.glob("build")), "a dry run must not create a build folder"
