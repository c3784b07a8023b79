"""doctor judges a wheel for the local GPUs as check does: each kernel runs only if its own module serves the GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimwheel import doctor
from slimwheel.cli import main
from slimwheel.errors import ExitCode
from slimwheel.runtime import driver as drv
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel


class _FakeDriver:
    def version(self) -> int:
        return 13000

    def gpus(self) -> list[drv.Gpu]:
        return [drv.Gpu(index=0, name="H200", cc="9.0", memory_total=None, memory_used=None)]


@pytest.fixture
def one_hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drv.Nvml, "open", classmethod(lambda cls: None))
    monkeypatch.setattr(drv.CudaDriver, "open", classmethod(lambda cls: _FakeDriver()))


def test_a_module_without_code_for_the_gpu_fails_doctor_even_if_another_has_it(
    tmp_path: Path, one_hopper: None
) -> None:
    # libold has Ampere SASS only (no PTX): its kernels cannot run on Hopper, though libnew's sm_90 can.
    old = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=80)])}, needed=("libc.so.6",))
    new = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)])}, needed=("libc.so.6",))
    w = make_wheel(
        tmp_path,
        name="pkg",
        files={"pkg/libold.so": old, "pkg/libnew.so": new},
        requires=(),
        tag="cp312-abi3-manylinux_2_28_x86_64",
    )
    report = doctor.run_doctor(str(w), env={})
    (gpu,) = report.gpus
    assert not gpu.ok and gpu.served_by.startswith("none") and "pkg/libold.so" in gpu.served_by
    assert not report.ok
    good = make_wheel(
        tmp_path / "g", name="pkg", files={"pkg/libnew.so": new}, requires=(), tag="cp312-abi3-manylinux_2_28_x86_64"
    )
    (gpu,) = doctor.run_doctor(str(good), env={}).gpus
    assert gpu.ok and gpu.served_by == "sass sm_90"


def test_doctor_exits_15_when_it_finds_problems(
    tmp_path: Path, one_hopper: None, capsys: pytest.CaptureFixture[str]
) -> None:
    ampere = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=80)])}, needed=("libc.so.6",))
    hopper = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)])}, needed=("libc.so.6",))
    bad = make_wheel(
        tmp_path / "b", name="pkg", files={"pkg/lib.so": ampere}, requires=(), tag="cp312-abi3-manylinux_2_28_x86_64"
    )
    good = make_wheel(
        tmp_path / "g", name="pkg", files={"pkg/lib.so": hopper}, requires=(), tag="cp312-abi3-manylinux_2_28_x86_64"
    )
    assert int(ExitCode.DOCTOR_PROBLEMS) == 15
    assert main(["doctor", str(bad), "--format", "json"]) == 15
    out, err = capsys.readouterr()
    report = json.loads(out)  # the report still comes out whole, on stdout
    assert report["ok"] is False and report["problems"] == [
        f"GPU 0 H200 (CC 9.0): served by {report['gpus'][0]['served_by']}"
    ]
    assert "doctor: 1 problem(s):" in err and "GPU 0 H200 (CC 9.0): served by none" in err
    assert main(["doctor", str(bad)]) == 15
    assert main(["doctor", str(good)]) == 0
    capsys.readouterr()
    assert main(["doctor", str(good), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["problems"] == []


def test_doctor_rejects_a_non_boolean_use_system_cuda(
    tmp_path: Path, one_hopper: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLIMWHEEL_USE_SYSTEM_CUDA", "nope")
    assert main(["doctor"]) == 3
    assert "SLIMWHEEL_USE_SYSTEM_CUDA='nope' is not a boolean" in capsys.readouterr().err


def test_doctor_refuses_what_the_loader_refuses(tmp_path: Path) -> None:
    # the symlink attack of issue 12 item 2, seen by doctor: same search, same refusal, same words
    from slimwheel.cuda import libs as cudalibs
    from slimwheel.runtime import loader

    decoy = tmp_path / "decoy" / "nvidia" / "cu13" / "lib"
    decoy.mkdir(parents=True)
    (decoy / "libcudart.so.13").write_bytes(b"\x7fELF fake")
    ww = tmp_path / "ww"
    ww.mkdir()
    (ww / "nvidia").symlink_to(tmp_path / "decoy" / "nvidia")
    ww.chmod(0o777)
    check = doctor.resolve_library(
        cudalibs.lookup("cudart", 13), loader.search_roots(None, [str(ww)], cwd="/"), use_system=False, system={}
    )
    assert check.via == "missing" and check.found is None
    assert (
        check.tried[0] == f"{ww}/nvidia/cu13/lib: refused: {ww}: folder writable by everyone (mode 0777, no sticky bit)"
    )
