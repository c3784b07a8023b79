"""slimwheel.torchext: what a torch extension takes from torch, the torch range it serves, what check says of it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from helpers.scripts import load_script
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from slimwheel import torchext
from slimwheel.cuda.arch import CC, Kind, Target
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import undefined_symbols
from testkit.binsynth import elf

TORCH_211 = torchext.TorchBuild(version=Version("2.11.0+cu130"), cuda="13.0")
CXX = "_ZN3c1010TensorImpl4sizeEv"  # a c10 member function: the classic C++ ABI
NEEDED = {"pkg/_C.so": ("libtorch.so", "libc10.so", "libcudart.so.13", "libc.so.6")}


def use(*symbols: str) -> torchext.TorchUse:
    got = torchext.torch_use(NEEDED, {"pkg/_C.so": symbols})
    assert got is not None
    return got


def test_torchs_libraries_come_from_its_wheel() -> None:
    names = torchext.torch_sonames()
    for soname in (
        "libc10.so",
        "libc10_cuda.so",
        "libtorch.so",
        "libtorch_cpu.so",
        "libtorch_cuda.so",
        "libtorch_python.so",
    ):
        assert soname in names and torchext.is_torch_library(soname)
    assert "libgomp.so.1" not in names and not torchext.is_torch_library("libcudart.so.13")
    assert torchext.is_torch_library("libtorch_cuda_cu.so")  # torch 1.x's split library


def test_symbols_are_classified() -> None:
    for name in (CXX, "_ZNK2at10TensorBase5numelEv", "_ZN5torch7Library3defEv", "_ZTVN3c1011StorageImplE"):
        assert torchext.is_torch_symbol(name), name
    for name in ("_ZNSt6locale7classicEv", "_ZN4pkg3fooEv", "cudaLaunchKernel", "memcpy"):
        assert not torchext.is_torch_symbol(name), name
    assert torchext.is_torch_symbol("aoti_torch_get_data_ptr") and torchext.is_torch_symbol("torch_library_impl")


def test_the_stable_floor_is_the_newest_function_it_uses() -> None:
    old = use("aoti_torch_get_data_ptr", "aoti_torch_library_impl")
    assert old.abi == "stable" and old.floor == "2.9"
    new = use("aoti_torch_get_data_ptr", "torch_library_impl")
    assert new.floor == "2.10"
    assert use("aoti_torch_get_data_ptr", "torch_not_in_any_release").floor is None


def test_a_wheel_without_torchs_libraries_is_no_torch_extension() -> None:
    assert torchext.torch_use({"a.so": ("libcudart.so.13",)}, {"a.so": ("aoti_torch_x",)}) is None


def test_requirements() -> None:
    assert torchext.requirement(use(CXX), TORCH_211, cuda_major=13) == "torch==2.11.*"
    # the stable functions ask for 2.10; PyPI's torch 2.10 is CUDA 12.8, so a CUDA 13 wheel needs 2.11
    assert torchext.requirement(use("torch_library_impl"), TORCH_211, cuda_major=13) == "torch>=2.11"
    assert torchext.requirement(use("torch_library_impl"), TORCH_211, cuda_major=12) == "torch>=2.10"
    unknown = use("torch_new_function")
    assert torchext.requirement(unknown, TORCH_211, cuda_major=12) == "torch>=2.11"  # the version built against


def test_judge_classic() -> None:
    assert torchext.judge(use(CXX), ["torch==2.11.*"], cuda_major=13).problems == ()
    loose = torchext.judge(use(CXX), ["torch>=2.9"], cuda_major=13)
    assert any("C++ ABI" in p and "admits torch 2.9, 2.10, 2.11 and later releases:" in p for p in loose.problems)
    # no torch requirement (or one under an extra only): the dependency rules say so, once (test_reqgraph.py)
    for requires in (["numpy"], ['torch==2.11.*; extra == "gpu"']):
        missing = torchext.judge(use(CXX), requires, cuda_major=13)
        assert missing.problems == () and missing.serves == () and missing.notes


def test_judge_stable_range_cuda_major_and_pins() -> None:
    ok = torchext.judge(use("torch_library_impl"), ["torch>=2.11", "nvidia-cuda-runtime>=13.0,<14"], cuda_major=13)
    assert ok.problems == () and ok.serves[0] == "2.11"
    early = torchext.judge(use("torch_library_impl"), ["torch>=2.9"], cuda_major=12)
    assert any("first in torch 2.10" in p and "admits torch 2.9" in p for p in early.problems)
    cuda = torchext.judge(use("torch_library_impl"), ["torch>=2.10"], cuda_major=13)
    (cross,) = [p for p in cuda.problems if "torch 2.10" in p and "CUDA 12.8" in p]
    # xformers 0.0.35's shape: no CUDA wheels of its own, so beside torch 2.10 its CUDA 13 files find none
    assert cross.endswith(
        "no CUDA 13 libraries are installed, so its files that need them fail to load (or, where "
        "a CUDA 13 toolkit provides them, one process loads two CUDA runtimes)"
    )
    own = torchext.judge(use("torch_library_impl"), ["torch>=2.10", "nvidia-nccl-cu13"], cuda_major=13)
    assert any(p.endswith("whose PyPI build is CUDA 12.8: one process loads two CUDA runtimes") for p in own.problems)
    pins = torchext.judge(use(CXX), ["torch==2.11.*", "nvidia-cublas>=13.2,<14"], cuda_major=13)
    assert any("nvidia-cublas 13.1.0.3" in p for p in pins.problems)


def test_admitted_minors() -> None:
    assert torchext.admitted_minors(SpecifierSet("==2.11.*")) == ["2.11"]
    assert torchext.admitted_minors(SpecifierSet(">=2.10.1,<2.12")) == ["2.10", "2.11"]
    assert torchext.admitted_minors(SpecifierSet("<2"))[-1] == "1.13"


def test_version_py_and_option() -> None:
    got = torchext.parse_version_py("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n", where="v.py")
    assert got.cuda == "13.0" and got.cuda_major == 13 and str(got.version) == "2.11.0+cu130"
    cpu = torchext.parse_version_py("__version__ = '2.11.0+cpu'\ncuda: Optional[str] = None\n", where="v.py")
    assert cpu.cuda is None
    with pytest.raises(BadInputError, match="no __version__"):
        torchext.parse_version_py("cuda = '13.0'\n", where="v.py")
    assert torchext.parse_torch_option("2.11.0+cu130").cuda == "13.0"
    assert torchext.parse_torch_option("2.9.1+cu118").cuda == "11.8"
    assert torchext.parse_torch_option("2.10.0").cuda == "12.8"  # PyPI's build of 2.10
    for bad in ("2.11.0+rocm6", "x.y", "9.9.0"):
        with pytest.raises(BadInputError):
            torchext.parse_torch_option(bad)


def test_installed_torch_is_read_without_importing_it(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda = '13.0'\n")
    assert torchext.installed_torch(tmp_path) == torchext.TorchBuild(version=Version("2.11.0+cu130"), cuda="13.0")
    assert torchext.installed_torch(tmp_path / "none") is None


def test_a_cuda_mismatch_names_both() -> None:
    why = torchext.cuda_mismatch(TORCH_211, 12, where="proj")
    assert why is not None and "CUDA 12" in why and "13.0" in why and "2.11.0" in why
    assert torchext.cuda_mismatch(TORCH_211, 13, where="proj") is None
    cpu = torchext.TorchBuild(version=Version("2.11.0+cpu"), cuda=None)
    assert "CPU build" in (torchext.cuda_mismatch(cpu, 13, where="proj") or "")


def test_arch_list() -> None:
    sass = [Target(CC(7, 5)), Target(CC(9, 0)), Target(CC(12, 0))]
    archs, extra = torchext.arch_list([*sass, Target(CC(12, 0), Kind.PTX)])
    assert archs == "7.5;9.0;12.0+PTX" and extra == ()
    archs, extra = torchext.arch_list([Target(CC(9, 0)), Target(CC(8, 0), Kind.PTX)])
    assert archs == "9.0" and extra == ("-gencode=arch=compute_80,code=compute_80",)


def test_build_env_by_backend(tmp_path: Path) -> None:
    targets = [Target(CC(9, 0)), Target(CC(9, 0), Kind.PTX)]
    cm = torchext.build_env(
        torchext.TorchProject(backend="scikit-build-core", why="x"),
        targets,
        compression_flag="--compress-mode=size",
        cuda_root=tmp_path,
    )
    assert cm == {"TORCH_CUDA_ARCH_LIST": "9.0+PTX"}  # compression comes through SlimWheel.cmake there
    st_env = torchext.build_env(
        torchext.TorchProject(backend="setuptools", why="x"),
        targets,
        compression_flag="--compress-mode=size",
        cuda_root=tmp_path,
        build_dir=tmp_path,
    )
    assert st_env["NVCC_APPEND_FLAGS"] == "--compress-mode=size" and st_env["CUDA_HOME"] == str(tmp_path)
    assert "build_base" in torchext.setuptools_config(tmp_path) and st_env["DIST_EXTRA_CONFIG"].startswith(
        str(tmp_path)
    )


def test_torch_projects_are_recognised(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    assert torchext.torch_project(tmp_path) is None
    (tmp_path / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n")
    got = torchext.torch_project(tmp_path)
    assert got is not None and got.backend == "setuptools"
    other = tmp_path / "cm"
    other.mkdir()
    (other / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core", "torch>=2.11"]\nbuild-backend = "scikit_build_core.build"\n'
    )
    got = torchext.torch_project(other)
    assert got is not None and got.backend == "scikit-build-core" and "build-system.requires" in got.why
    (other / "pyproject.toml").write_text("[build-system\n")
    with pytest.raises(BadInputError, match="pyproject.toml"):
        torchext.torch_project(other)


def test_undefined_symbols_of_an_elf() -> None:
    data = elf(needed=["libtorch.so"], symbols=["PyInit_x", CXX + "_defined"], undefined=[CXX, "memcpy", "torch_x"])
    assert undefined_symbols(data, "x.so", torchext.is_torch_symbol) == frozenset({CXX, "torch_x"})
    assert undefined_symbols(data, "x.so", lambda n: True) == frozenset({CXX, "memcpy", "torch_x"})


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2048), st.integers(min_value=0, max_value=4096))
def test_undefined_symbols_of_hostile_bytes_fail_cleanly(noise: bytes, at: int) -> None:
    data = bytearray(elf(needed=["libtorch.so"], undefined=[CXX, "torch_x"]))
    data[at : at + len(noise)] = noise
    with contextlib.suppress(BadInputError):
        undefined_symbols(bytes(data), "x.so", torchext.is_torch_symbol)


def test_the_header_reader_follows_version_gates() -> None:
    mod = load_script("devtools/torch_abi.py")
    text = """
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_old(int x);
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_10_0
AOTI_TORCH_EXPORT AOTITorchError torch_ten(
    int x);
#ifdef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError torch_ten_cuda(void* s);
#endif
#else
AOTI_TORCH_EXPORT AOTITorchError torch_fallback(int x);
#endif
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_11_0
AOTI_TORCH_EXPORT AOTITorchError torch_eleven(int x);
#endif
"""
    assert mod.stable_symbols(text) == {
        "aoti_torch_old": "2.9",
        "torch_ten": "2.10",
        "torch_ten_cuda": "2.10",
        "torch_fallback": "2.9",
        "torch_eleven": "2.11",
    }


def test_the_table_holds_the_stable_functions_the_example_uses() -> None:
    table = torchext._stable_table()
    assert table["torch_library_impl"] == "2.10" and table["aoti_torch_get_current_cuda_stream"] == "2.9"
    releases = {r.minor: r for r in torchext.pypi_releases()}
    assert releases["2.11"].cuda == "13.0" and releases["2.10"].cuda_major == 12


def test_a_wheel_that_pins_one_pypi_torch_release_tells_the_build() -> None:
    from slimwheel.torchext import pinned_build

    # torchvision 0.26.0 (CUDA 13, classic API) requires torch==2.11.0: PyPI's 2.11 is CUDA 13.0
    got = pinned_build(["numpy", "torch (==2.11.0)", "pillow"], cuda_major=13)
    assert got is not None and str(got.version) == "2.11.0" and got.cuda == "13.0"
    assert pinned_build(["torch==2.11.0"], cuda_major=12) is None  # a cu12 build from PyTorch's index pins it too
    for loose in ("torch>=2.10", "torch==2.11.*", "torch==2.11.0; python_version < '3.13'", "torch==2.11.0+cu126"):
        assert pinned_build([loose], cuda_major=13) is None, loose
    assert pinned_build(["torch==1.0.0"], cuda_major=13) is None  # a release the table does not know


def test_a_carried_copy_is_said_to_double_only_where_torch_brings_that_wheel() -> None:
    # torchvision 0.26 carries cudart and nvJPEG copies; torch 2.11 requires nvidia-cuda-runtime, not nvidia-nvjpeg
    from slimwheel.deps import dependency_problems
    from slimwheel.inspect.dynamic import ElfInfo

    files = [
        ElfInfo(path=f"tv.libs/{name}", soname=None, needed=(), rpath=(), runpath=())
        for name in ("libcudart.faf08d9a.so.13", "libnvjpeg.36e11081.so.13")
    ]
    tags = ["cp311-cp311-manylinux_2_28_x86_64"]
    cudart, nvjpeg = dependency_problems(files, cuda_major=13, requires=["torch==2.11.0"], tags=tags).notes[:2]
    assert (
        "torch 2.11.0, which the wheel's Requires-Dist 'torch==2.11.0' admits, requires nvidia-cuda-runtime" in cudart
    )
    assert "does not require nvidia-nvjpeg: a process holds two only where another package loads" in nvjpeg
    (alone,) = dependency_problems(files[1:], cuda_major=13, requires=[], tags=tags).notes
    assert "(no torch release slimwheel knows requires it)" in alone


def test_torchs_own_wheel_is_no_torch_extension(tmp_path: Path) -> None:
    # torch 2.11.0's wheel: torch/_C.so needs libtorch_python.so and libc10.so, which it carries in torch/lib
    from testkit.wheelmaker import make_wheel

    files = {
        "torch/_C.cpython-311-x86_64-linux-gnu.so": elf(needed=("libtorch_python.so", "libc10.so")),
        "torch/lib/libtorch_python.so": elf(needed=("libc10.so",)),
        "torch/lib/libc10.so": elf(),
    }
    wheel = make_wheel(tmp_path, name="torch", files=files, tag="cp311-cp311-manylinux_2_28_x86_64")
    needed = {name: ["libtorch_python.so", "libc10.so"] for name in files}
    assert torchext.audit_wheel(wheel, needed) is None
    ext = torchext.audit_wheel(wheel, {"torch/_C.cpython-311-x86_64-linux-gnu.so": ["libc10.so"]})  # not carried
    assert ext is not None and ext.needed == ("libc10.so",)


# Issue 37 item 6: the releases a torch note names exist and are admitted, a classic-ABI build serves one minor, and
# long lists are abbreviated.
def test_a_classic_abi_build_serves_the_minor_it_was_built_for() -> None:
    # autoawq-kernels 0.0.9's shape: classic C++ ABI under torch>=2.5.1
    v = torchext.judge(use(CXX), ["torch>=2.5.1"], cuda_major=12)
    (serves,) = [n for n in v.notes if n.startswith("torch: serves")]
    assert (
        serves
        == "torch: serves the one minor it was built against, of 2.5 ... 2.11 (7 minors) and later releases admitted"
    )
    assert not any("3.13" in t or "2.12" in t for t in (*v.notes, *v.problems))
    assert torchext.judge(use(CXX), ["torch==2.11.*"], cuda_major=13).notes[-1] == "torch: serves 2.11 only"
    stable = torchext.judge(use("torch_library_impl"), ["torch>=2.10"], cuda_major=13)
    assert stable.notes[-1] == "torch: serves 2.10, 2.11 and later releases"


def test_notes_name_only_releases_that_exist_and_the_requirement_admits() -> None:
    from slimwheel.deps import dependency_problems
    from slimwheel.inspect.dynamic import ElfInfo

    needed = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libc.so.6")
    ext = ElfInfo(path="awq/_C.so", soname=None, needed=needed, rpath=(), runpath=())
    tags = ["cp311-cp311-manylinux_2_28_x86_64"]
    pinned = dependency_problems([ext], cuda_major=None, requires=["torch==2.4.0"], tags=tags)
    (note,) = [n for n in pinned.notes if "libc10.so" in n]
    # the table read torch 2.4.1, which torch==2.4.0 does not admit: the note names the minor
    assert "torch 2.4 from PyPI ship(s) them in torch/lib" in note and "2.4.1" not in note
    loose = dependency_problems([ext], cuda_major=None, requires=["torch>=2.5.1"], tags=tags)
    (note,) = [n for n in loose.notes if "libc10.so" in n]
    assert "torch 2.5.1 ... 2.11.0 (7 releases), releases after 2.11 from PyPI" in note
    # the releases take one short phrase, whatever the requirement admits; the rest names files and libraries
    releases = note.split(" installs them: torch ", 1)[1].split(" from PyPI", 1)[0]
    assert len(releases) < 60 and "2.12" not in note and "3.13" not in note


def test_releases_text_abbreviates_long_runs() -> None:
    assert torchext.releases_text(["2.9.1", "2.10.0"]) == "2.9.1, 2.10.0"
    many = [f"2.{m}.0" for m in range(4, 12)]
    assert (
        torchext.releases_text([*many, "releases after 2.11"]) == "2.4.0 ... 2.11.0 (8 releases), releases after 2.11"
    )
    assert torchext.minors_text(["3.0", "3.1"]) == "releases after 2.11"
