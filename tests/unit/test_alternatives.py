"""Issue 14 item 7: wheels that carry one library per CUDA version and load one of them (bitsandbytes:
libbitsandbytes_cuda118.so ... _cuda132.so) are judged per alternative, not as if all loaded together."""

from __future__ import annotations

from pathlib import Path

from slimwheel.check import check_wheel, make_policy
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.cuda.versions import MAJOR_DRIVER
from slimwheel.inspect.report import alternative_groups, report_to_json
from slimwheel.inspect.scan import inspect_wheel
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel


def _lib(needed: str, *sms: int) -> bytes:
    fb = fatbin([fatbin_entry(sm=sm) for sm in sms] + [fatbin_entry(kind="ptx", sm=max(sms), ptx_isa=(8, 0))])
    return elf(sections={".nv_fatbin": fb}, needed=(needed, "libc.so.6"))


def _wheel(tmp_path: Path, names: dict[str, bytes]) -> Path:
    return make_wheel(
        tmp_path, name="bnb", files={**names, "bnb/__init__.py": b""}, tag="py3-none-manylinux_2_28_x86_64"
    )


ALTS = {
    "bnb/libbnb_cuda118.so": _lib("libcudart.so.11.0", 50, 60, 70),
    "bnb/libbnb_cuda124.so": _lib("libcudart.so.12", 75, 80),
    "bnb/libbnb_cuda130.so": _lib("libcudart.so.13", 90, 100),
}


def test_alternatives_are_grouped_by_the_cuda_token() -> None:
    from slimwheel.inspect.elf import read_elf

    elfs = tuple(read_elf(b, n) for n, b in [*ALTS.items(), ("bnb/_other.so", _lib("libcudart.so.13", 90))])
    assert alternative_groups(elfs) == {"bnb/libbnb_cuda*.so": tuple(ALTS)}


def test_coverage_asks_whether_some_alternative_serves_each_cc(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, ALTS))
    # each CC 5.0-10.0 is served natively by one of the three, although no single file serves them all
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("5.0-10.0"), dependencies=False))
    assert v.ok, v.failures
    assert {str(cc) for cc in r.coverage.native} >= {"5.0", "6.0", "7.0", "7.5", "8.0", "9.0", "10.0"}


def test_cuda_major_and_driver_floor_per_alternative(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, ALTS))
    assert [(a.cuda, a.cuda_major) for a in r.alternatives] == [("11.8", 11), ("12.4", 12), ("13.0", 13)]
    assert r.cuda_major == 13 and "alternatives for CUDA 11.8, 12.4, 13.0" in r.cuda_major_why
    # the oldest driver that runs one of them: CUDA 11's (the 11.8 file), not CUDA 13's
    assert r.driver_floor == MAJOR_DRIVER[11]
    assert [a["file"] for a in report_to_json(r)["cuda"]["alternatives"]] == list(ALTS)


def test_without_the_token_the_files_are_judged_together(tmp_path: Path) -> None:
    names = {n.replace("_cuda", "_v"): b for n, b in ALTS.items()}
    r = inspect_wheel(_wheel(tmp_path, names))
    assert r.alternatives == ()
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("5.0-10.0"), dependencies=False))
    assert not v.ok


def test_each_alternative_is_judged_on_its_own_in_one_line(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, ALTS))
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("none")))
    msgs = [f.message for f in v.failures]
    assert len(msgs) == 3, msgs  # one per alternative, not one per library
    (m118,) = [m for m in msgs if "cuda118" in m]
    assert "alternative for CUDA 11.8, one of 3 loaded per process" in m118 and "nvidia-cuda-runtime-cu11" in m118
    # a library of another major than the newest alternative's is no mixed-major problem
    assert not any("another CUDA major" in m for m in msgs)


def test_summary_states_coverage_and_driver_floor_per_alternative(tmp_path: Path) -> None:
    from slimwheel.render import render_markdown, report_text

    r = inspect_wheel(_wheel(tmp_path, ALTS))
    text = report_text(r, width=300, color=False)
    line118 = next(line for line in text.splitlines() if "libbnb_cuda118.so (CUDA 11.8): SASS" in line)
    assert "SASS: 5.0" in line118 and "10.0" not in line118.split("PTX")[0] and MAJOR_DRIVER[11] in line118
    line130 = next(line for line in text.splitlines() if "libbnb_cuda130.so (CUDA 13.0): SASS" in line)
    assert "SASS: 5.0" not in line130 and MAJOR_DRIVER[13] in line130
    assert "minimum driver: per alternative" in text and "minimum driver: " + MAJOR_DRIVER[11] not in text
    assert "libbnb\\_cuda124.so (CUDA 12.4)" in render_markdown([r])  # names escaped for Markdown (shown.md_text)


def test_builds_for_other_gpu_platforms_beside_the_cuda_ones() -> None:
    from slimwheel.cuda.alternatives import other_backends
    from slimwheel.deps import dependency_problems
    from slimwheel.inspect.dynamic import ElfInfo

    names = [
        "bnb/libbnb_cuda121.so",
        "bnb/libbnb_cuda130.so",
        "bnb/libbnb_rocm64.so",
        "bnb/libbnb_rocm72.so",
        "bnb/libbnb_xpu2025.so",
        "bnb/libbnb_cpu.so",
        "other/librocm64.so",  # no CUDA alternatives beside it: no backend
    ]
    assert other_backends(names) == {
        "bnb/libbnb_rocm64.so": "ROCm 6.4",
        "bnb/libbnb_rocm72.so": "ROCm 7.2",
        "bnb/libbnb_xpu2025.so": "Intel XPU 2025",
    }

    def info(name: str, *needed: str) -> ElfInfo:
        return ElfInfo(path=name, soname=None, needed=needed, rpath=(), runpath=())

    elfs = [info("bnb/libbnb_rocm64.so", "libhipblas.so.2"), info("bnb/libbnb_rocm72.so", "libhipblas.so.2")]
    elfs += [info("bnb/libbnb_cuda121.so"), info("bnb/libbnb_cuda130.so"), info("bnb/libbnb_cpu.so", "libfoo.so")]
    v = dependency_problems(elfs, cuda_major=13, requires=[], tags=["py3-none-manylinux_2_28_x86_64"])
    assert len(v.problems) == 1 and "bnb/libbnb_cpu.so needs libfoo.so" in v.problems[0]  # the CPU build is judged
    (note,) = [n for n in v.notes if "another GPU platform" in n]
    assert note.startswith("bnb/libbnb_rocm64.so, bnb/libbnb_rocm72.so (ROCm 6.4, ROCm 7.2: builds for another GPU")
    assert "need libhipblas.so.2, which come with that platform's own stack" in note


# Issue 37 item 4: cuda-cccl 1.2.1 ships one folder per CUDA major (cuda/compute/cu12/..., cuda/compute/cu13/...) and
# imports one of them; the cu13 build has zstd entries and PTX ISA 9.1 (CUDA 13.1), the cu12 build neither.
def _cccl_so(cudart: str, sm: int, isa: tuple[int, int], zstd: bool) -> bytes:
    sass = fatbin_entry(sm=sm, flags=0x8011, compressed_size=10, uncompressed_size=99) if zstd else fatbin_entry(sm=sm)
    fb = fatbin([sass, fatbin_entry(kind="ptx", sm=sm, ptx_isa=isa)])
    return elf(sections={".nv_fatbin": fb}, needed=(cudart, "libc.so.6"))


IMPL = "_bindings_impl.cpython-312-x86_64-linux-gnu.so"
CCCL = {
    f"cuda/compute/cu12/{IMPL}": _cccl_so("libcudart.so.12", 80, (8, 0), zstd=False),
    f"cuda/compute/cu13/{IMPL}": _cccl_so("libcudart.so.13", 90, (9, 1), zstd=True),
}


def test_sibling_folders_that_differ_by_a_cuda_token_are_alternatives() -> None:
    from slimwheel.cuda.alternatives import alternatives, groups

    names = [
        "cuda/compute/cu12/_impl.so",
        "cuda/compute/cu13/_impl.so",
        "cuda/compute/cu13/_only13.so",  # a file only one folder has is still that folder's alternative
        "cuda/compute/_common.so",  # beside the folders: loaded whichever is chosen
        "pkg/cuda_12/x.so",
        "pkg/cuda_13/x.so",
        "nvidia/cu13/lib/libfoo.so",  # one folder of one version: nothing to choose between
        "bnb/libbnb_cuda121.so",  # the base-name case as before
        "bnb/libbnb_cuda130.so",
    ]
    assert groups(names) == {
        "bnb/libbnb_cuda*.so": ("bnb/libbnb_cuda121.so", "bnb/libbnb_cuda130.so"),
        "cuda/compute/cu*/_impl.so": ("cuda/compute/cu12/_impl.so", "cuda/compute/cu13/_impl.so"),
        "cuda/compute/cu*/_only13.so": ("cuda/compute/cu13/_only13.so",),
        "pkg/cuda_*/x.so": ("pkg/cuda_12/x.so", "pkg/cuda_13/x.so"),
    }
    alts = alternatives(names)
    assert {f: a.cuda for f, a in alts.items()} == {
        "bnb/libbnb_cuda121.so": "12.1",
        "bnb/libbnb_cuda130.so": "13.0",
        "cuda/compute/cu12/_impl.so": "12",
        "cuda/compute/cu13/_impl.so": "13",
        "cuda/compute/cu13/_only13.so": "13",
        "pkg/cuda_12/x.so": "12",
        "pkg/cuda_13/x.so": "13",
    }


def test_folder_alternatives_state_major_and_floors_each_on_their_own(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, CCCL))
    a12, a13 = r.alternatives
    assert (a12.cuda, a12.cuda_major, a13.cuda, a13.cuda_major) == ("12", 12, "13", 13)
    # the cu12 build: CUDA 12's first driver, its PTX ISA 8.0 (CUDA 12.0) JITs there too; nothing of the cu13 build
    assert (a12.driver_floor, a12.ptx_driver_floor) == (MAJOR_DRIVER[12], "525.60.13")
    assert (a13.driver_floor, a13.ptx_driver_floor) == (MAJOR_DRIVER[13], "590.44.01")
    assert r.cuda_major == 13 and "alternatives for CUDA 12, 13" in r.cuda_major_why
    # before: SASS floor 550.54.14 (the cu13 file's zstd read as CUDA 12's) and PTX floor 590.44.01 (its ISA 9.1)
    assert (r.driver_floor, r.ptx_driver_floor) == (MAJOR_DRIVER[12], "525.60.13")
    assert (a12.sass, a13.sass) == (("8.0", "8.6", "8.7", "8.9"), ("9.0",))
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("8.0,9.0"), dependencies=False))
    assert v.ok, v.failures


def test_folder_alternatives_are_no_mixture_of_majors(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, CCCL))
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("none")))
    msgs = [f.message for f in v.failures]
    assert len(msgs) == 2, msgs  # each alternative misses its own runtime
    assert any("cu12" in m and "nvidia-cuda-runtime-cu12" in m for m in msgs)
    assert not any("another CUDA major" in m or "several CUDA majors" in m for m in msgs)
