"""make_plan / make_plan_for_release: targets, compression, driver floor, CMake defines. Pure: no toolkit runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.build import build_command, config_settings
from slimwheel.config import Config, resolve
from slimwheel.cuda.arch import CC, Coverage, Kind, counted
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ExitCode
from slimwheel.plan import (
    CMAKE_PACKAGE_DIR,
    BuildPlan,
    cmake_cache_script,
    cmake_defines,
    make_plan,
    make_plan_for_release,
    plan_to_json,
)
from slimwheel.toolkit.model import Toolkit

V13 = CudaVersion(13, 0)
# What `nvcc 13.0 --list-gpu-arch` printed on this project's machine (shared/cuda-facts.md, section 3).
NVCC13_ARCHS = tuple(CC.parse(n) for n in ("75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"))


def cfg(**kw: object) -> Config:
    return resolve(None, None, kw)


def toolkit13(tmp: Path) -> Toolkit:
    return Toolkit(
        root=tmp,
        nvcc=tmp / "bin" / "nvcc",
        version=V13,
        source="pypi",
        supported=NVCC13_ARCHS,
        include_dirs=(tmp / "include",),
        lib_dirs=(tmp / "lib64",),
    )


def sass(p: BuildPlan) -> list[str]:
    return [t.arch for t in p.arch.sass]


def ptx(p: BuildPlan) -> list[str]:
    return [t.arch for t in p.arch.ptx]


def test_default_plan_cuda13_one_cubin_per_major_and_ptx_for_the_newest(tmp_path: Path) -> None:
    p = make_plan(cfg(), toolkit13(tmp_path))
    # 8.6/8.9 run sm_80, 10.3 runs sm_100; integrated 8.7, 11.0, 12.1 are left out of an x86_64 plan.
    assert sass(p) == ["75", "80", "90", "100", "120"]
    assert ptx(p) == ["120"]
    assert p.arch.cmake_architectures == "75-real;80-real;90-real;100-real;120"
    assert {str(cc) for cc, _ in p.arch.skipped} == {"8.7", "8.8", "11.0", "12.1"}  # 8.8: no GPU has it
    assert p.compression == "size" and p.compression_flag == "--compress-mode=size"
    assert p.driver_floor == "580.65.06"
    assert p.toolkit_source == "toolkit"


def test_three_archs_give_three_cubins_and_ptx_90(tmp_path: Path) -> None:
    p = make_plan(cfg(archs="7.5,8.0,9.0"), toolkit13(tmp_path))
    assert sass(p) == ["75", "80", "90"] and ptx(p) == ["90"]
    assert cmake_defines(p)["SLIMWHEEL_CUDA_ARCHITECTURES"] == "75-real;80-real;90"
    cov = Coverage.of(p.arch.targets)
    assert CC(8, 6) in cov.native and CC(12, 0) in cov.ptx_only


def test_range_and_extra_sass(tmp_path: Path) -> None:
    p = make_plan(cfg(archs="8.0-9.0", extra_sass=["86"]), toolkit13(tmp_path))
    assert sass(p) == ["80", "86", "90"]


def test_arch_specific_extra_target(tmp_path: Path) -> None:
    p = make_plan(cfg(archs="9.0", extra_sass=["90a"]), toolkit13(tmp_path))
    assert [t.arch for t in p.arch.sass] == ["90", "90a"]
    assert ptx(p) == ["90"]  # PTX of the plain target: 90a PTX would run on 9.0 only


def test_explicit_targets_are_taken_verbatim(tmp_path: Path) -> None:
    p = make_plan(cfg(targets="75-real;80-real;90"), toolkit13(tmp_path))
    assert sass(p) == ["75", "80", "90"] and ptx(p) == ["90"]
    assert p.arch.cmake_architectures == "75-real;80-real;90"


def test_ptx_none_and_listed(tmp_path: Path) -> None:
    assert ptx(make_plan(cfg(archs="8.0", ptx="none"), toolkit13(tmp_path))) == []
    assert ptx(make_plan(cfg(archs="8.0", ptx="9.0,12.0"), toolkit13(tmp_path))) == ["90", "120"]


def test_include_integrated_keeps_jetson(tmp_path: Path) -> None:
    p = make_plan(cfg(archs="8.7", exclude_integrated=False, ptx="none"), toolkit13(tmp_path))
    assert sass(p) == ["87"]


@pytest.mark.parametrize("archs", ["abc", "7.5,banana", "9.0-7.5", "sm_"])
def test_bad_arch_string_is_one_clear_error(tmp_path: Path, archs: str) -> None:
    with pytest.raises(BadInputError) as e:
        make_plan(cfg(archs=archs), toolkit13(tmp_path))
    assert e.value.exit_code == ExitCode.BAD_INPUT
    assert "archs" in e.value.message and repr(archs) in e.value.message


def test_only_unsupported_ccs_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no compute capability"):
        make_plan(cfg(archs="6.0"), toolkit13(tmp_path))


def test_extra_sass_beyond_the_toolkit(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="extra-sass"):
        make_plan(cfg(archs="8.0", extra_sass=["70"]), toolkit13(tmp_path))


def test_compression_before_12_8_is_the_legacy_switch() -> None:
    p = make_plan_for_release(cfg(), CudaVersion(12, 4))
    assert p.compression == "legacy" and p.compression_flag == "-Xfatbin=-compress-all"
    assert p.toolkit_source == "table"
    d = make_plan_for_release(cfg(compression="default"), CudaVersion(12, 4))
    assert d.compression == "legacy" and any("compress-all" in n for n in d.notes)
    with pytest.raises(BadInputError, match="12.8"):
        make_plan_for_release(cfg(compression="size"), CudaVersion(12, 4))


def test_driver_floors() -> None:
    # CUDA 12.4, no PTX, legacy compression: SASS only needs the first CUDA 12 driver (minor version compatibility).
    p = make_plan_for_release(cfg(archs="8.0", ptx="none"), CudaVersion(12, 4))
    assert p.driver_floor == "525.60.13"
    # With PTX the release's own driver is needed for JIT.
    p = make_plan_for_release(cfg(archs="8.0"), CudaVersion(12, 4))
    assert p.driver_floor == "550.54.14"
    # CUDA 12.8, size mode, no PTX: size-compressed fatbins need 550.54.14 on CUDA 12.
    p = make_plan_for_release(cfg(archs="8.0", ptx="none"), CudaVersion(12, 8))
    assert p.compression == "size" and p.driver_floor == "550.54.14"
    assert any("size" in w for w in p.driver_why)
    # CUDA 12.8 with PTX: 570.26 beats the compression floor.
    assert make_plan_for_release(cfg(archs="8.0"), CudaVersion(12, 8)).driver_floor == "570.26"


def test_release_table_plan_for_12_4_cannot_target_blackwell() -> None:
    p = make_plan_for_release(cfg(archs="7.0+"), CudaVersion(12, 4))
    assert sass(p) == ["70", "80", "90"] and ptx(p) == ["90"]


def test_dynamic_link_lists_runtime_libraries_in_load_order(tmp_path: Path) -> None:
    p = make_plan(cfg(), toolkit13(tmp_path))
    assert [lib.soname for lib in p.libraries] == [
        "libcudart.so.13",
        "libnvJitLink.so.13",
        "libcublasLt.so.13",
        "libcublas.so.13",
    ]
    assert make_plan(cfg(link="static"), toolkit13(tmp_path)).libraries == ()


def test_unknown_library(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="libraries"):
        make_plan(cfg(libraries=["cudart", "cufoo"]), toolkit13(tmp_path))


def test_cmake_defines_carry_the_toolkit_dirs(tmp_path: Path) -> None:
    p = make_plan(cfg(archs="9.0"), toolkit13(tmp_path))
    assert cmake_defines(p, package_dir=None) == {
        "SLIMWHEEL_CUDA_ARCHITECTURES": "90",
        "SLIMWHEEL_COMPRESSION": "size",
        "SLIMWHEEL_LINK": "dynamic",
        "SLIMWHEEL_CUDA_MAJOR": "13",
        "SLIMWHEEL_CUDA_INCLUDEDIRS": str(tmp_path / "include"),
        "SLIMWHEEL_CUDA_LIBDIRS": str(tmp_path / "lib64"),
    }
    assert "SLIMWHEEL_CUDA_LIBDIRS" not in cmake_defines(make_plan_for_release(cfg(), V13))
    script = cmake_cache_script(cmake_defines(p, package_dir=None))
    assert 'set(SLIMWHEEL_CUDA_ARCHITECTURES "90" CACHE STRING' in script


def test_plan_json_is_versioned(tmp_path: Path) -> None:
    data = plan_to_json(make_plan(cfg(archs="7.5,8.0,9.0"), toolkit13(tmp_path)))
    assert data["schema"] == 1
    assert data["sass"] == ["75", "80", "90"] and data["ptx"] == ["90"]
    assert "-gencode=arch=compute_90,code=compute_90" in data["nvcc_flags"]
    assert data["driver_floor"] == "580.65.06"


def test_build_settings_pass_plan_toolkit_and_cmake_package(tmp_path: Path) -> None:
    tk = toolkit13(tmp_path)
    p = make_plan(cfg(archs="7.5,8.0,9.0"), tk)
    settings_ = config_settings(p, tk, static_libdir=tmp_path / "pruned")
    assert "cmake.define.SLIMWHEEL_CUDA_ARCHITECTURES=75-real;80-real;90" in settings_
    assert f"cmake.define.CMAKE_CUDA_COMPILER={tk.nvcc}" in settings_
    assert f"cmake.define.CUDAToolkit_ROOT={tk.root}" in settings_
    assert f"cmake.define.SLIMWHEEL_STATIC_LIBDIR={tmp_path / 'pruned'}" in settings_
    assert f"cmake.define.slimwheel_DIR={CMAKE_PACKAGE_DIR}" in settings_
    assert (CMAKE_PACKAGE_DIR / "slimwheelConfig.cmake").is_file()
    cmd = build_command(tmp_path / "proj", tmp_path / "dist", settings_, isolation=False, python="python3")
    assert cmd[:7] == ("python3", "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), "--no-isolation")
    assert cmd[-1] == str(tmp_path / "proj")
    assert all(c.startswith("-C") for c in cmd[7:-1])


# the CCs a plan counts (arch.counted): known GPUs, integrated ones left out; 8.8 (no product) is skipped like Orin
_PLAIN = [cc for cc in NVCC13_ARCHS if counted(cc, exclude_integrated=True)]


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(_PLAIN), min_size=1))
def test_plan_is_minimal_and_serves_every_wanted_cc_natively(wanted: set[CC]) -> None:
    spec = ",".join(str(c) for c in sorted(wanted))
    p = make_plan_for_release(cfg(archs=spec), V13)
    cov = Coverage.of(p.arch.targets, sorted(wanted))
    assert set(cov.native) == set(wanted)
    # No cubin crosses a major, so one per wanted major is the minimum.
    assert len(p.arch.sass) == len({c.major for c in wanted})
    assert [t.kind for t in p.arch.ptx] == [Kind.PTX]
    assert p.arch.ptx[0].cc == max(t.cc for t in p.arch.sass)


def test_system_folders_are_not_passed_as_toolkit_dirs(tmp_path: Path) -> None:
    tk = Toolkit(
        root=Path("/usr/lib/nvidia-cuda-toolkit"),
        nvcc=Path("/usr/lib/nvidia-cuda-toolkit/bin/nvcc"),
        version=CudaVersion(11, 8),
        source="debian",
        supported=(CC(7, 5), CC(8, 0)),
        include_dirs=(Path("/usr/include"),),
        lib_dirs=(Path("/usr/lib/x86_64-linux-gnu"), tmp_path),
    )
    d = cmake_defines(make_plan(cfg(link="static"), tk))
    assert "SLIMWHEEL_CUDA_INCLUDEDIRS" not in d
    assert d["SLIMWHEEL_CUDA_LIBDIRS"] == str(tmp_path)
    assert d["SLIMWHEEL_COMPRESSION"] == "legacy" and d["SLIMWHEEL_CUDA_MAJOR"] == "11"


def test_ptx_for_a_cc_the_toolkit_cannot_target_is_refused() -> None:
    # CUDA 13 cannot compile compute_40 or compute_70: the plan must not hand such a target to CMake.
    for ptx in ("4.0", "7.0", "7.0,9.0"):
        with pytest.raises(BadInputError, match=r"ptx = .*compute_(40|70) is beyond this toolkit"):
            make_plan_for_release(resolve(cli={"ptx": ptx}), CudaVersion(13, 0))
    assert make_plan_for_release(resolve(cli={"ptx": "9.0"}), CudaVersion(13, 0)).arch.ptx[0].cc == CC(9, 0)


def test_extra_sass_naming_a_ptx_target_is_refused_not_turned_into_sass() -> None:
    with pytest.raises(BadInputError, match=r"extra-sass = \['compute_90'\]: extra SASS target compute_90 is PTX"):
        make_plan_for_release(resolve(cli={"extra_sass": "compute_90"}), CudaVersion(13, 0))
    p = make_plan_for_release(resolve(cli={"extra_sass": "86,sm_90a"}), CudaVersion(13, 0))
    assert {"86", "90a"} <= {t.arch for t in p.arch.sass}


def test_no_compression_before_cuda_12_8_is_no_flag_not_compress_mode() -> None:
    # nvcc 11.8/12.4 reject --compress-mode; SlimWheel.cmake passes nothing for "none" there, the plan must say so.
    old = make_plan_for_release(resolve(cli={"compression": "none"}), CudaVersion(12, 4))
    assert old.compression == "none" and old.compression_flag == ""
    assert plan_to_json(old)["compression_flag"] == ""
    new = make_plan_for_release(resolve(cli={"compression": "none"}), CudaVersion(13, 0))
    assert new.compression_flag == "--compress-mode=none"
