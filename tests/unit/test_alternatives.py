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
    v = check_wheel(r, make_policy(r, require_arch="none"))
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
