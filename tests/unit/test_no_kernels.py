"""Modules with no kernels (issue 37 item 1): cubins that define no function and PTX without `.entry` are "no
kernels", left out of coverage, the driver floors and the "only through PTX JIT" counts, kept as they are by slim;
and coverage is monotone under slim."""

from __future__ import annotations

import json
from pathlib import Path

import lz4.block
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slimwheel.check import check_wheel, make_policy
from slimwheel.cli import main
from slimwheel.cuda.arch import CC, KNOWN_CCS, counted, parse_require_arch
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import FLAG_LZ4, FLAG_ZSTD
from slimwheel.inspect.report import report_to_json
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.postbuild.slim import slim
from testkit.binsynth import FLAG_64BIT_LINUX, cubin, elf, fatbin, fatbin_entry, pad8, ptx
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"
EMPTY_75 = cubin(75, text=None)


def _sass(sm: int, *, code: bool = True) -> bytes:
    return fatbin_entry(sm=sm, payload=pad8(cubin(sm, text=b"\xaa" * 64 if code else None)))


def _ptx(sm: int, *, code: bool = True) -> bytes:
    return fatbin_entry(kind="ptx", sm=sm, payload=pad8(ptx(sm, entry="_Z1kv" if code else None)), ptx_isa=(8, 5))


def _lib(*containers: list[bytes], needed: tuple[str, ...] = ("libcudart.so.12",)) -> bytes:
    return elf(sections={".nv_fatbin": b"".join(pad8(fatbin(c)) for c in containers)}, needed=needed)


def _kernels(*containers: list[bytes]) -> list[bool]:
    return [fb.kernels for fb in read_elf(_lib(*containers), "lib.so").fatbins]


def test_a_module_is_judged_by_the_functions_it_defines() -> None:
    assert _kernels([_sass(75, code=False)], [_sass(75)], [_ptx(52, code=False)], [_ptx(52)]) == [
        False,
        True,
        False,
        True,
    ]
    # the kernel's symbol alone (no .text.<name> section) is a function too
    with_symbol = fatbin_entry(sm=80, payload=pad8(cubin(80, text=None, functions=("_Z1kv",))))
    # mixed: an empty sm_75 cubin beside sm_90 code (kernels under `#if __CUDA_ARCH__ >= 900`) is a module with code
    assert _kernels(
        [with_symbol], [_sass(75, code=False), _sass(90)], [_sass(52, code=False), _ptx(52, code=False)]
    ) == [
        True,
        True,
        False,
    ]


def test_only_what_is_proven_empty_is_no_kernels() -> None:
    # bytes that are neither PTX text nor a cubin prove nothing: judged as code, as before
    assert _kernels(
        [fatbin_entry(kind="ptx", sm=80, payload=b"\0" * 64)], [fatbin_entry(sm=80, payload=b"\1" * 64)]
    ) == [
        True,
        True,
    ]
    # LTO-IR alone is no loadable code: not "no kernels" either (it is simply not judged)
    assert _kernels([fatbin_entry(kind="lto-ir", sm=80)]) == [True]


def _compressed(kind: str, sm: int, raw: bytes, how: str) -> bytes:
    packed = lz4.block.compress(raw, store_size=False) if how == "lz4" else zstandard.ZstdCompressor().compress(raw)
    flag = FLAG_LZ4 if how == "lz4" else FLAG_ZSTD
    return fatbin_entry(
        kind=kind,
        sm=sm,
        flags=FLAG_64BIT_LINUX | flag,
        payload=pad8(packed),
        compressed_size=len(packed),
        uncompressed_size=len(raw),
        ptx_isa=(8, 5),
    )


@pytest.mark.parametrize("how", ["lz4", "zstd"])
def test_compressed_members_are_inflated_to_tell(how: str) -> None:
    empty = [_compressed("sass", 75, EMPTY_75, how), _compressed("ptx", 75, ptx(75, entry=None), how)]
    code = [_compressed("sass", 75, EMPTY_75, how), _compressed("ptx", 75, ptx(75), how)]
    assert _kernels(empty, code) == [False, True]
    # a payload that does not inflate proves nothing
    broken = fatbin_entry(
        kind="ptx",
        sm=75,
        flags=FLAG_64BIT_LINUX | (FLAG_LZ4 if how == "lz4" else FLAG_ZSTD),
        payload=b"\xff" * 16,
        compressed_size=16,
        uncompressed_size=4000,
    )
    assert _kernels([broken]) == [True]


def test_standalone_cubin_files_too() -> None:
    assert read_elf(EMPTY_75, "k.cubin").fatbins[0].kernels is False
    assert read_elf(cubin(75), "k.cubin").fatbins[0].kernels is True


def _ok(path: Path, spec: str) -> bool:
    """The coverage verdict for `spec`; a wheel left with no device code fails it (--strict-device-code): slim with
    --allow-unserved can drop all of a wheel's code, which is no wheel that compiles its kernels at run time."""
    r = inspect_wheel(path)
    return check_wheel(
        r, make_policy(r, require_arch=parse_require_arch(spec), dependencies=False, strict_device_code=True)
    ).ok


# nvidia-npp 13.2.0.93: two libraries hold one container each, one empty 1,888-byte sm_75 cubin; the others SASS 7.5
# to 12.1 (10.1 and 11.0 among nvcc's numbers).
NPP_SMS = (75, 80, 86, 89, 90, 100, 103, 110, 120, 121)


def _npp(tmp_path: Path) -> Path:
    code = _lib(*[[_sass(sm) for sm in NPP_SMS] for _ in range(3)], needed=("libcudart.so.13",))
    return make_wheel(
        tmp_path,
        name="nvidia-npp",
        version="13.2.0.93",
        tag="py3-none-manylinux_2_27_x86_64",
        files={
            "nvidia/cu13/lib/libnppc.so.13": _lib([_sass(75, code=False)], needed=("libcudart.so.13",)),
            "nvidia/cu13/lib/libnppial.so.13": code,
            "nvidia/cu13/lib/libnppicc.so.13": _lib([_sass(75, code=False)], needed=("libcudart.so.13",)),
        },
        requires=("nvidia-cuda-runtime==13.*",),
    )


def test_npp_passes_the_gpus_its_code_serves(tmp_path: Path) -> None:
    w = _npp(tmp_path)
    assert _ok(w, "7.5-12.0")
    r = inspect_wheel(w)
    assert r.kernelless == (("nvidia/cu13/lib/libnppc.so.13", 1), ("nvidia/cu13/lib/libnppicc.so.13", 1))
    js = report_to_json(r)
    assert js["cuda"]["no_kernel_modules"] == 2
    assert [fb["kernels"] for e in js["elfs"] for fb in e["fatbins"]] == [False, True, True, True, False]
    out = tmp_path / "report.json"
    assert main(["-q", "size-report", "--format", "json", "-o", str(out), str(w)]) == 0
    assert json.loads(out.read_text())["wheels"][0]["cuda"]["no_kernel_modules"] == 2


def test_npp_table_says_no_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size-report", "--entries", str(_npp(tmp_path))]) == 0
    text = capsys.readouterr().out
    assert "no kernels: 2 of 5 CUDA modules define no function" in text
    assert text.count(", no kernels") == 2


def test_spconv_empty_modules_are_not_ptx_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """spconv-cu126 2.3.8: 243 of 606 modules hold an empty sm_52 cubin and PTX 5.2 without .entry (or empty SASS
    for every target); every module with a kernel has SASS 6.0-9.0 and PTX 9.0."""
    sms = (60, 70, 75, 80, 86, 89, 90)
    lib = _lib(
        *[[_sass(52, code=False), _ptx(52, code=False)] for _ in range(4)],
        *[[*(_sass(sm) for sm in sms), _ptx(90)] for _ in range(3)],
        [*(_sass(sm, code=False) for sm in (50, *sms)), _ptx(90, code=False)],
        needed=("libcudart.so.12",),
    )
    w = make_wheel(
        tmp_path,
        name="spconv-cu126",
        files={"spconv/core_cc.so": lib},
        tag=TAG,
        requires=("nvidia-cuda-runtime-cu12",),
    )
    r = inspect_wheel(w)
    assert r.coverage.ptx_only == tuple(cc for cc in KNOWN_CCS if cc >= CC(10, 0))
    assert CC(6, 0) in r.coverage.native and CC(9, 0) in r.coverage.native
    assert (
        main(["-q", "check", "--offline", "--no-dependencies", "--require-arch", "6.0-9.0", "--format", "json", str(w)])
        == 0
    )
    notes = json.loads(capsys.readouterr().out)["verdicts"][0]["notes"]
    assert not any("only through PTX JIT" in n for n in notes), notes


def test_empty_modules_set_no_driver_floor(tmp_path: Path) -> None:
    # PTX ISA 9.1 in an empty module only: no PTX floor from it
    empty_new = fatbin_entry(kind="ptx", sm=90, payload=pad8(ptx(90, entry=None, isa=(9, 1))), ptx_isa=(9, 1))
    w = make_wheel(tmp_path, name="pkg", files={"pkg/_ext.so": _lib([_sass(80), _ptx(80)], [empty_new])}, tag=TAG)
    r = inspect_wheel(w)
    assert r.ptx_release is not None and str(r.ptx_release) != "13.1"
    assert CC(9, 0) not in {t.cc for t in r.targets if t.kind.value == "ptx"}


def test_slim_keeps_modules_with_no_kernels_as_they_are(tmp_path: Path) -> None:
    res = slim(_npp(tmp_path / "in"), tmp_path / "out", archs=parse_require_arch("9.0"), allow_unserved=True)
    after = res.after
    assert after.kernelless == (("nvidia/cu13/lib/libnppc.so.13", 1), ("nvidia/cu13/lib/libnppicc.so.13", 1))
    kept = [[e.arch for e in fb.entries] for e in after.elfs for fb in e.fatbins if not fb.kernels]
    assert kept == [["75"], ["75"]]


# Monotone: slim removes code, so a GPU the input fails must stay failed. Wheels of mixed, empty and PTX-only
# containers in one or two files, slimmed to several requests.
_GPUS = tuple(cc for cc in KNOWN_CCS if counted(cc, exclude_integrated=True) and cc >= CC(5, 0))
_SMS = (52, 60, 70, 75, 80, 86, 89, 90, 100, 120)


Member = tuple[str, int, bool]  # kind, sm, whether it defines a kernel


@st.composite
def _containers(draw: st.DrawFn) -> list[Member]:
    entries: list[Member] = [
        ("sass", sm, draw(st.booleans()))
        for sm in draw(st.lists(st.sampled_from(_SMS), min_size=1, max_size=4, unique=True))
    ]
    if draw(st.booleans()):
        entries.append(("ptx", draw(st.sampled_from(_SMS)), draw(st.booleans())))
    if draw(st.booleans()):  # PTX only
        entries = [("ptx", draw(st.sampled_from(_SMS)), draw(st.booleans()))]
    return entries


def _member(m: Member) -> bytes:
    kind, sm, code = m
    return _sass(sm, code=code) if kind == "sass" else _ptx(sm, code=code)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(_containers(), min_size=1, max_size=3), min_size=1, max_size=2),
    archs=st.sampled_from(["7.5", "8.0", "9.0", "8.0-9.0", "12.0", "7.5+"]),
)
def test_slim_never_turns_a_failing_gpu_into_a_passing_one(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[list[Member]]], archs: str
) -> None:
    tmp = tmp_path_factory.mktemp("mono")
    w = make_wheel(
        tmp / "in",
        name="pkg",
        files={f"pkg/_m{i}.so": _lib(*[[_member(m) for m in c] for c in cs]) for i, cs in enumerate(files)},
        tag=TAG,
    )
    before = {cc: _ok(w, str(cc)) for cc in _GPUS}
    if not inspect_wheel(w).code_entries:
        # no module defines a kernel: nothing to slim, refused before anything is written
        with pytest.raises(BadInputError, match="nothing to slim"):
            slim(w, tmp / "out", archs=parse_require_arch(archs), allow_unserved=True)
        assert not (tmp / "out").exists() or not list((tmp / "out").iterdir())
        return
    res = slim(w, tmp / "out", archs=parse_require_arch(archs), allow_unserved=True)
    after = {cc: _ok(res.rewritten.wheel, str(cc)) for cc in _GPUS}
    flipped = [str(cc) for cc in _GPUS if not before[cc] and after[cc]]
    assert not flipped, f"slim --archs {archs} made {flipped} pass"
