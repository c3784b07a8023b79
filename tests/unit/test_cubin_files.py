"""Standalone cubin files (flashinfer-cubin 0.6.13 ships 15,970 of them, 1.8 GiB installed, loaded by its package
with cuModuleLoad): read as device code for the GPU their ELF header names, judged by coverage, and left out of a
slimmed wheel when they serve none of the requested GPUs."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slimwheel.check import check_wheel, make_policy
from slimwheel.cli import main
from slimwheel.cuda.arch import CC, parse_require_arch
from slimwheel.errors import BadInputError, CheckFailed
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import compat_arch_specific
from slimwheel.inspect.report import coverage_detail
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.postbuild.fatbin_edit import SlimRequest, slim_elf
from slimwheel.postbuild.slim import slim
from slimwheel.postbuild.variants import make_variants
from testkit.binsynth import cubin, elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel


@pytest.mark.parametrize(
    ("sm", "abi", "arch_specific", "want"),
    [
        (100, 8, False, "sm_100"),
        (100, 8, True, "sm_100a"),
        (103, 8, True, "sm_103a"),
        (120, 8, False, "sm_120"),
        (90, 7, True, "sm_90a"),
        (80, 7, False, "sm_80"),
        (75, 6, False, "sm_75"),
    ],
)
def test_a_cubin_is_one_module_for_the_gpu_its_header_names(sm: int, abi: int, arch_specific: bool, want: str) -> None:
    data = cubin(sm, abi=abi, arch_specific=arch_specific)
    r = read_elf(data, "k.cubin")
    assert r.kind == "cubin" and r.machine == "EM_CUDA"
    (module,) = r.fatbins
    assert (module.offset, module.size, module.section) == (0, len(data), "")
    (entry,) = module.entries
    assert str(entry.target) == want and entry.kind == "sass" and entry.compression == "none"
    assert entry.stored_size == entry.uncompressed_size == len(data)
    assert r.needed == () and r.rpath is None and ".text._Z6kernelv" in r.sections
    assert read_elf(data, "k.cubin", fatbins=False).fatbins == ()


@pytest.mark.parametrize(
    ("sm", "arch_specific", "want"), [(100, True, "sm_100a"), (100, False, "sm_100"), (90, True, "sm_90a")]
)
def test_cuda_13_marks_arch_specific_cubins_in_nv_compat_alone(sm: int, arch_specific: bool, want: str) -> None:
    # nvcc 13.0.88: sm_100a and sm_100 have the same e_flags (0x6006402); .nv.compat attribute 9 says which is which.
    data = cubin(sm, arch_specific=arch_specific, compat=True)
    assert struct.unpack_from("<I", data, 48)[0] == 0x6000002 | sm << 8
    (entry,) = read_elf(data, "k.cubin").fatbins[0].entries
    assert str(entry.target) == want


@pytest.mark.parametrize(
    ("records", "want"),
    [
        ("020900000202010002050500030701010203000002060100040b08000900000000000000", False),  # nvcc 13.0 sm_100
        ("020901000202010002050500030701010203000002060100040b08000900000000000000", True),  # nvcc 13.0 sm_100a
        ("0202010002050500030701010203000002060100040b08000000000000000000", False),  # ptxas 12.9: no attribute 9
        ("040b0800020901000000000002090000", False),  # a sized record's payload is not read as records
        ("040bffff02090100", False),  # a size past the end ends the reading
        ("020901", False),  # a record cut off
        ("", False),
    ],
)
def test_nv_compat_records(records: str, want: bool) -> None:
    assert compat_arch_specific(bytes.fromhex(records), where="k.cubin") is want


@given(st.binary(max_size=256))
def test_nv_compat_reading_never_fails(data: bytes) -> None:
    assert compat_arch_specific(data, where="k.cubin") in (True, False)


def test_a_header_naming_no_gpu_is_a_module_without_a_target() -> None:
    (entry,) = read_elf(cubin(5), "odd.cubin").fatbins[0].entries
    assert entry.target is None and entry.kind == "sass"


def _lib90() -> bytes:
    return elf(
        sections={".nv_fatbin": pad8(fatbin([fatbin_entry(sm=90, payload=b"\x11" * 512)]))}, needed=("libc.so.6",)
    )


def _wheel(tmp_path: Path, *, with_lib: bool = True) -> Path:
    files = {
        "pkg/__init__.py": b"",
        "pkg/cubins/gemm_sm90a.cubin": cubin(90, arch_specific=True, text=b"\x90" * 4096),
        "pkg/cubins/gemm_sm100.cubin": cubin(100, text=b"\xa0" * 8192),
        "pkg/cubins/gemm_sm103a.cubin": cubin(103, arch_specific=True, text=b"\xa3" * 8192),
        "pkg/cubins/checksums.txt": b"not device code\n",
    }
    if with_lib:
        files["pkg/_ext.abi3.so"] = _lib90()
    return make_wheel(tmp_path / "in", name="pkg", tag="py3-none-any", files=files)


def test_size_report_and_coverage_see_the_cubins(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path))
    assert {str(t) for t in r.targets} == {"sm_90", "sm_90a", "sm_100", "sm_103a"}
    cubins = [e for e in r.elfs if e.kind == "cubin"]
    assert len(cubins) == 3 and sum(e.fatbin_bytes for e in cubins) == sum(e.size for e in cubins)
    ccs = (CC(9, 0), CC(10, 0), CC(10, 3), CC(12, 0))
    # the library's plain sm_90 runs on 9.0 alone, and a wheel serves a GPU only as well as its weakest file
    assert coverage_detail(r.elfs, ccs).coverage.native == (CC(9, 0),)
    alone = coverage_detail(inspect_wheel(_wheel(tmp_path / "2", with_lib=False)).elfs, ccs).coverage
    assert alone.native == (CC(9, 0), CC(10, 0), CC(10, 3)) and alone.none == (CC(12, 0),)


def test_check_says_why_auto_judges_no_gpu_of_a_wheel_of_cubins(tmp_path: Path) -> None:
    r = inspect_wheel(_wheel(tmp_path, with_lib=False))
    assert r.cuda_major is None
    v = check_wheel(r, make_policy(r, require_arch="auto"))
    (note,) = [n for n in v.notes if n.startswith("GPU coverage not judged")]
    assert "runs natively on 9.0, 10.0, 10.3;" in note and "--require-arch" in note
    failed = check_wheel(r, make_policy(r, require_arch=parse_require_arch("9.0-12.0")))
    assert [f.kind for f in failed.failures] == ["coverage"] and "12.0" in failed.failures[0].message


def test_slim_leaves_out_cubins_for_none_of_the_gpus_and_keeps_the_others_as_they_were(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    with zipfile.ZipFile(src) as zf:
        before = {n: zf.read(n) for n in zf.namelist()}
    r = slim(src, tmp_path / "out", archs=parse_require_arch("9.0"))
    with zipfile.ZipFile(r.rewritten.wheel) as zf:
        names = set(zf.namelist())
        assert zf.read("pkg/cubins/gemm_sm90a.cubin") == before["pkg/cubins/gemm_sm90a.cubin"]
        assert zf.read("pkg/cubins/checksums.txt") == before["pkg/cubins/checksums.txt"]
        record = zf.read(next(n for n in names if n.endswith("RECORD"))).decode()
    assert "pkg/cubins/gemm_sm100.cubin" not in names and "pkg/cubins/gemm_sm103a.cubin" not in names
    assert "gemm_sm100.cubin" not in record and "gemm_sm103a.cubin" not in record
    gone = {f.name: f.dropped for f in r.rewritten.files if f.dropped}
    assert set(gone) == {"pkg/cubins/gemm_sm100.cubin", "pkg/cubins/gemm_sm103a.cubin"}
    assert sum(d.bytes for d in gone["pkg/cubins/gemm_sm100.cubin"]) == len(before["pkg/cubins/gemm_sm100.cubin"])
    assert {str(t) for t in r.after.targets} == {"sm_90", "sm_90a"}
    assert r.verdict.ok, r.verdict.failures


def test_slim_refuses_a_request_no_cubin_serves(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match="no CUDA module of it runs on 8.0"):
        slim(_wheel(tmp_path, with_lib=False), tmp_path / "out", archs=parse_require_arch("8.0"))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_variants_split_cubins_by_family(tmp_path: Path) -> None:
    res = make_variants(_wheel(tmp_path, with_lib=False), tmp_path / "out")
    got = {}
    for v in res.variants:
        with zipfile.ZipFile(v.rewritten.wheel) as zf:
            got[v.family.label] = sorted(n.rsplit("/", 1)[1] for n in zf.namelist() if n.endswith(".cubin"))
    assert got == {"sm9x": ["gemm_sm90a.cubin"], "sm10x": ["gemm_sm100.cubin", "gemm_sm103a.cubin"]}


def test_slim_elf_of_a_cubin_keeps_it_whole_or_leaves_nothing() -> None:
    data = cubin(100)
    kept = slim_elf(data, "k.cubin", SlimRequest(ccs=(CC(10, 3),)))
    assert kept.data == data and kept.dropped == ()
    gone = slim_elf(data, "k.cubin", SlimRequest(ccs=(CC(9, 0),)))
    assert gone.data == b"" and [(d.arch, d.bytes) for d in gone.dropped] == [("100", len(data))]


def test_the_cli_table_of_dropped_code_stays_short_and_says_files_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {f"pkg/k{i:02d}_sm100.cubin": cubin(100, text=bytes([i]) * (512 + i)) for i in range(45)}
    files["pkg/k_sm90.cubin"] = cubin(90)
    src = make_wheel(tmp_path / "in", name="pkg", tag="py3-none-any", files=files)
    assert main(["slim", "--archs", "9.0", "-o", str(tmp_path / "out"), str(src)]) == 0
    out = capsys.readouterr().out
    # the kept file is not in the table of dropped code; the verdict's line on GPUs newer than 9.0 names it
    table = [line for line in out.splitlines() if "GPUs newer than" not in line]
    assert "... 5 more files" in out and not any("k_sm90.cubin" in line for line in table)
    assert "45 cubin file(s) for none of the GPUs" in out and "left the wheel" in out
    assert "installed size unchanged" not in out
    assert main(["slim", "--archs", "9.0", "--format", "json", "-o", str(tmp_path / "out2"), str(src)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sum(f["removed"] for f in doc["files"]) == 45


# ----------------------------------------------------------------------------------------- issue 41: S11


def _cubin_with_compat(records: bytes) -> bytes:
    """A CUDA 13.0 cubin (testkit.binsynth.cubin) whose .nv.compat section holds `records`."""
    body = bytearray(elf(sections={".text._Z6kernelv": b"\0" * 256, ".nv.compat": records}, e_type=2))
    body[7], body[8] = 0x41, 8
    struct.pack_into("<H", body, 18, 190)
    struct.pack_into("<I", body, 48, 0x6000002 | 100 << 8)
    return bytes(body)


def test_a_huge_nv_compat_section_is_refused_in_bounded_time_and_memory() -> None:
    """S11 of issue 41: `.nv.compat` was walked record by record whatever its size (1 GiB of zeros, a 1 MB wheel:
    54 s, 1.07 GB). nvcc writes about ten records; past MAX_COMPAT_RECORDS the cubin is refused, naming it."""
    import time
    import tracemalloc

    data = _cubin_with_compat(b"\0" * (1 << 20))
    tracemalloc.start()
    t = time.perf_counter()
    with pytest.raises(BadInputError, match=r"^pkg/k.cubin: its .nv.compat section holds more than 256 attribute"):
        read_elf(data, "pkg/k.cubin")
    took, peak = time.perf_counter() - t, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert took < 1.0 and peak < 64 << 20, (took, peak)
    # the records nvcc 13.0 wrote, attribute 9 last, behind a run of the most records a section may hold
    tail = bytes.fromhex("040b0800090000000000000002090100")
    assert str(read_elf(_cubin_with_compat(b"\2\1\0\0" * 254 + tail), "k.cubin").fatbins[0].entries[0].target) == (
        "sm_100a"
    )


def test_a_wheel_with_a_huge_nv_compat_section_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    w = make_wheel(tmp_path, files={"pkg/k.cubin": _cubin_with_compat(b"\0" * (64 << 20))})
    assert w.stat().st_size < 1 << 20  # deflate: the attack's wheel is small
    t = time.perf_counter()
    assert main(["-q", "size-report", str(w)]) == 3
    assert time.perf_counter() - t < 10.0
    assert "pkg/k.cubin: its .nv.compat section" in capsys.readouterr().err
