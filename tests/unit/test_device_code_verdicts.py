"""Verdicts on device code (issue 37 items 2 and 7, issue 40 item 4): a wheel with no device code, code for GPUs
newer than any it names (--require-arch 7.5+), and per-file GPU intent from [tool.slimwheel]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimwheel.cli import main
from testkit.binsynth import cubin, elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    code = main(["-q", "check", "--offline", "--format", "json", *args])
    verdict = json.loads(capsys.readouterr().out)["verdicts"][0]
    return code, verdict["notes"], [f["message"] for f in verdict["failures"]]


def _nvrtc_wheel(tmp_path: Path) -> Path:
    lib = elf(sections={".text": b"\xc3" * 64}, needed=("libnvrtc.so.12", "libcudart.so.12", "libc.so.6"))
    return make_wheel(
        tmp_path,
        name="jitpkg",
        files={"jitpkg/_ext.abi3.so": lib},
        requires=("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12"),
        tag=TAG,
    )


def test_a_wheel_that_compiles_at_run_time_passes_require_arch_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _nvrtc_wheel(tmp_path)
    code, notes, failures = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0 and not failures
    said = "no device code: kernels, if any, are built at run time (jitpkg/_ext.abi3.so loads libnvrtc.so.12)"
    assert any(n.startswith(said) and "--strict-device-code fails it" in n for n in notes), notes
    code, _notes, failures = _check(capsys, "--require-arch", "7.5-12.0", "--strict-device-code", str(w))
    assert code == 11 and "no device code" in failures[0]
    monkeypatch.setenv("SLIMWHEEL_STRICT_DEVICE_CODE", "true")
    assert _check(capsys, "--require-arch", "7.5-12.0", str(w))[0] == 11
    assert _check(capsys, "--require-arch", "7.5-12.0", "--no-strict-device-code", str(w))[0] == 0


def test_a_wheel_with_no_device_code_at_all_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # torch-memory-saver: allocation hooks, no kernels and no runtime compiler
    lib = elf(sections={".text": b"\xc3" * 64}, needed=("libcudart.so.12", "libc.so.6"))
    w = make_wheel(tmp_path, name="hooks", files={"hooks/_h.so": lib}, requires=("nvidia-cuda-runtime-cu12",), tag=TAG)
    code, notes, _f = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0 and any(n.startswith("no device code: --require-arch 7.5-12.0 passes") for n in notes), notes


def test_modules_with_no_kernels_only_are_no_device_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # cuda-cccl 1.2.1: every module empty, its kernels compiled at run time through CUDA Python
    empty = pad8(fatbin([fatbin_entry(sm=75, payload=pad8(cubin(75, text=None)))]))
    lib = elf(sections={".nv_fatbin": empty}, needed=("libcudart.so.12",))
    w = make_wheel(
        tmp_path,
        name="cccl",
        files={"cuda/compute/_bindings.so": lib},
        requires=("cuda-bindings>=12", "nvidia-cuda-runtime-cu12"),
        tag=TAG,
    )
    code, notes, _f = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0
    assert any(
        "no device code: kernels, if any, are built at run time (it requires cuda-bindings>=12)" in n for n in notes
    )
    assert main(["size-report", str(w)]) == 0
    assert "no device code: kernels, if any, are built at run time" in capsys.readouterr().out
