"""The faiss recipe (faiss/) without compiling faiss: fetch the tree, plan the profiles, configure each with CMake.

Real tools: scripts/fetch-faiss.sh (apt), the CUDA 13.0 toolkit of the `toolkit13` fixture, CMake, SWIG, the
scipy-openblas32 wheel. A configure run is what decides every compile and link flag, so the generated build.ninja is
read for the flags the profiles promise; compiling (an hour on 2 cores) is scripts/faiss-profiles.py's job.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from slimwheel.cuda.arch import CC, Kind, Target, generation, parse_targets, served_by
from slimwheel.cuda.versions import CudaVersion, supported_archs

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "faiss"
sys.path.insert(0, str(RECIPE / "build_support"))

import faiss_profiles
import faiss_requires


@pytest.fixture(scope="session")
def faiss_source() -> Path:
    """The fetch script's tree (fetched on first use; later runs find it in the cache)."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "fetch-faiss.sh")], capture_output=True, text=True, check=False)
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


def fortran_blas_names(src: Path) -> set[str]:
    """Every Fortran-style name (`sgemm_(`) declared inside an extern "C" block of faiss's CPU sources."""
    names: set[str] = set()
    for f in (src / "faiss").rglob("*.cpp"):
        if "gpu" in f.relative_to(src / "faiss").parts:
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


def test_fetched_tree_is_faiss_1_7_3_with_gpu(faiss_source: Path) -> None:
    text = (faiss_source / "CMakeLists.txt").read_text()
    assert re.search(r"^\s*VERSION 1\.7\.3\s*$", text, flags=re.MULTILINE)
    assert (faiss_source / "faiss" / "gpu" / "impl" / "IcmEncoder.cu").is_file()
    assert sorted((faiss_source / "faiss" / "gpu" / "test").glob("test_*.py")), "faiss's GPU Python tests are missing"


def test_blas_mapping_covers_faiss_and_exists_in_scipy_openblas(faiss_source: Path) -> None:
    import scipy_openblas32  # the test extra installs it
    used = fortran_blas_names(faiss_source)
    assert "sgemm_" in used
    assert cmake_list("FAISS_BLAS_SYMBOLS") == used
    lib = Path(scipy_openblas32.get_lib_dir()) / scipy_openblas32.get_library(fullname=True)
    with lib.open("rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        exported = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    assert {f"scipy_{n}" for n in used} <= exported
    assert not (used & exported), "unprefixed names exported too: the mapping would be unnecessary"


def test_profiles_plan_what_the_issue_asks() -> None:
    slim = faiss_profiles.make_profile("slim")
    sass = {t.cc for t in slim.arch.targets if t.kind is Kind.SASS}
    ptx = {t.cc for t in slim.arch.targets if t.kind is Kind.PTX}
    assert sass == {CC(7, 5), CC(8, 0), CC(9, 0), CC(10, 0), CC(12, 0)}
    assert ptx == {CC(12, 0)}
    # Every discrete GPU CUDA 13.0 can target, 7.5 up, runs a cubin: nothing left to PTX JIT or unserved.
    discrete = [c for c in supported_archs(CudaVersion(13, 0)) if not (generation(c) and generation(c).integrated)]
    assert all(served_by(c, slim.arch.targets)[0] == "sass" for c in discrete)
    upstream = faiss_profiles.make_profile("upstream")
    assert set(upstream.arch.targets) == set(parse_targets("75-real;80-real;86-real;89-real;90"))
    assert CC(12, 0) in upstream.coverage.ptx_only  # Blackwell only through PTX 9.0 in upstream's list
    assert slim.cmake_defines()["FAISS_BLAS"] == "scipy-openblas32" and upstream.cmake_defines()["FAISS_BLAS"] == "system"


def test_requirements_follow_the_blas_choice() -> None:
    assert not any("openblas" in r for r in faiss_requires.requirements({"FAISS_BLAS": "system"}))
    assert any(r.startswith("scipy-openblas32") for r in faiss_requires.requirements({"FAISS_BLAS": "scipy-openblas32"}))
    with pytest.raises(ValueError, match="FAISS_BLAS"):
        faiss_requires.requirements({"FAISS_BLAS": "mkl"})


def _configure(tmp: Path, src: Path, toolkit, defines: dict[str, str]) -> subprocess.CompletedProcess:
    args = ["cmake", "-S", str(RECIPE), "-B", str(tmp), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
            f"-DFAISS_SOURCE_DIR={src}", f"-DPython_EXECUTABLE={sys.executable}",
            f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}", f"-DCUDAToolkit_ROOT={toolkit.root}",
            "-DSLIMWHEEL_CUDA_LIBDIRS=" + ";".join(map(str, toolkit.lib_dirs)),
            "-DSLIMWHEEL_CUDA_INCLUDEDIRS=" + ";".join(map(str, toolkit.include_dirs))]
    args += [f"-D{k}={v}" for k, v in defines.items()]
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return subprocess.run(args, capture_output=True, text=True, env=env, check=False)


def _cuda_vars(build: Path, obj: str) -> dict[str, str]:
    """The variables (FLAGS, INCLUDES, DEFINES) of one CUDA object's build statement in build.ninja."""
    ninja = (build / "build.ninja").read_text()
    m = re.search(rf"build \S*faiss\.dir/\S*{re.escape(obj)}: CUDA_COMPILER\S*.*?\n((?:  .*\n)+)", ninja)
    assert m, f"{obj} not in build.ninja"
    return dict(re.findall(r"^  (\w+) = (.*)$", m.group(1), flags=re.MULTILINE))


def _targets_in(flags: str) -> set[Target]:
    out: set[Target] = set()
    for arch, codes in re.findall(r"--generate-code=arch=compute_(\d+\w?),code=\[([^\]]+)\]", flags):
        for code in codes.split(","):
            out.add(Target.parse(code))
    return out


@pytest.mark.parametrize("name", ["slim", "upstream", "slim-jit"])
def test_configure_profile(name: str, tmp_path: Path, faiss_source: Path, toolkit13) -> None:
    profile = faiss_profiles.make_profile(name)
    before = _tree_digest(faiss_source)
    proc = _configure(tmp_path, faiss_source, toolkit13, profile.cmake_defines())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert _tree_digest(faiss_source) == before, "configure wrote into the faiss source tree"

    flags = _cuda_vars(tmp_path, "/WarpSelectFloat1.cu.o")["FLAGS"]
    assert _targets_in(flags) == set(profile.arch.targets)
    assert "-std=c++17" in flags
    if profile.tuned_link:
        assert "--compress-mode=size" in flags and "-Xfatbin=-compress-all" not in flags
        assert "-fvisibility=hidden" in flags
    else:
        assert "-Xfatbin=-compress-all" in flags and "--compress-mode" not in flags

    install = (tmp_path / "cmake_install.cmake").read_text()
    assert "$ORIGIN/../nvidia/cu13/lib" in install.replace("\\$", "$")
    if profile.blas == "scipy-openblas32":
        assert "$ORIGIN/../scipy_openblas32/lib" in install.replace("\\$", "$")
        assert "-Dsgemm_=scipy_sgemm_" in (tmp_path / "build.ninja").read_text()
    # IcmEncoder.cu needs cuRAND's device headers, DeviceUtils.cu cuda_profiler_api.h: both of CUDA 13, not the
    # CUDA 11.8 copies a Debian system may have in /usr/include.
    for obj, header in (("/impl/IcmEncoder.cu.o", "curand_kernel.h"), ("/utils/DeviceUtils.cu.o", "cuda_profiler_api.h")):
        inc = _cuda_vars(tmp_path, obj)["INCLUDES"]
        dirs = [d.removeprefix("-isystem=").removeprefix("-I") for d in inc.split() if d != "-isystem"]
        found = [Path(d) / header for d in dirs if (Path(d) / header).is_file()]
        assert found, inc
        assert not str(found[0]).startswith("/usr/include"), found


def test_large_k_files_get_their_own_architectures(tmp_path: Path, faiss_source: Path, toolkit13) -> None:
    """slim-jit: the 15 files for k > 256 are compiled as PTX 7.5 only and linked into libfaiss.a; every other CUDA
    file keeps the plan's targets, and the slim profile's own lines do not change (same ccache entries)."""
    jit = faiss_profiles.make_profile("slim-jit")
    proc = _configure(tmp_path, faiss_source, toolkit13, jit.cmake_defines())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    ninja = (tmp_path / "build.ninja").read_text()
    large = re.findall(r"^build (\S*faiss_large_k\.dir/\S+\.cu\.o): CUDA_COMPILER\S*.*?\n((?:  .*\n)+)", ninja,
                       flags=re.MULTILINE)
    names = {Path(o).name for o, _ in large}
    assert len(names) == 15 and {"IVFInterleaved2048.cu.o", "WarpSelectFloatT512.cu.o", "BlockSelectFloatF1024.cu.o"} <= names
    for _, block in large:
        flags = dict(re.findall(r"^  (\w+) = (.*)$", block, flags=re.MULTILINE))["FLAGS"]
        assert _targets_in(flags) == {Target.parse("compute_75")}, flags
        assert "--compress-mode=size" in flags and "-fvisibility=hidden" in flags
    assert not re.search(r"faiss\.dir/\S*IVFInterleaved(512|1024|2048)\.cu\.o: CUDA", ninja)
    assert _targets_in(_cuda_vars(tmp_path, "/IVFInterleaved256.cu.o")["FLAGS"]) == set(jit.arch.targets)
    archive = re.search(r"^build \S*libfaiss\.a: CXX_STATIC_LIBRARY_LINKER\S* (.*)$", ninja, flags=re.MULTILINE)
    assert archive and archive.group(1).count("faiss_large_k.dir/") == 15

    slim_dir = tmp_path / "slim"
    proc = _configure(slim_dir, faiss_source, toolkit13, faiss_profiles.make_profile("slim").cmake_defines())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "faiss_large_k" not in (slim_dir / "build.ninja").read_text()


def test_configure_refuses_another_faiss_version(tmp_path: Path, faiss_source: Path, toolkit13) -> None:
    fake = tmp_path / "faiss-1.8.0"
    shutil.copytree(faiss_source / "faiss" / "gpu", fake / "faiss" / "gpu")
    text = (faiss_source / "CMakeLists.txt").read_text().replace("VERSION 1.7.3", "VERSION 1.8.0")
    (fake / "CMakeLists.txt").write_text(text)
    proc = _configure(tmp_path / "b", fake, toolkit13, faiss_profiles.make_profile("slim").cmake_defines())
    assert proc.returncode != 0
    assert "faiss version '1.8.0'" in proc.stderr.replace("\n", " ")


def test_slimwheel_build_dry_run_plans_the_slim_profile(toolkit13) -> None:
    """`slimwheel build faiss --dry-run` reads faiss/pyproject.toml's [tool.slimwheel] and plans what the slim
    profile builds, without building anything."""
    proc = subprocess.run([sys.executable, "-m", "slimwheel", "build", str(RECIPE), "--dry-run"],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = proc.stdout.replace("\n", " ")
    defines = dict(re.findall(r"-Ccmake\.define\.(\w+)=([^' ]+)", out))
    slim = faiss_profiles.make_profile("slim").cmake_defines()
    for key in ("SLIMWHEEL_CUDA_ARCHITECTURES", "SLIMWHEEL_COMPRESSION", "SLIMWHEEL_LINK", "SLIMWHEEL_CUDA_MAJOR"):
        assert defines.get(key) == slim[key], (key, defines)
    assert not list(RECIPE.glob("build")), "a dry run must not create a build folder"
