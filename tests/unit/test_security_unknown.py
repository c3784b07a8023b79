"""Issue 41 item 4 (S12) everywhere: a verdict that depends on what could not be learned (offline, the index down) is
never a pass, in every command that judges: `check`, `slim`, `variants` and cibuildwheel's audit fail it with exit 19
unless the user chose `note` (`--unknown`, config key `unknown`, SLIMWHEEL_UNKNOWN); `repair`, which gives no verdict,
says it and still writes its wheel. Each test fails when the setting is ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimwheel import config as cfgmod
from slimwheel.check import PolicySettings
from slimwheel.cli import main
from slimwheel.container import audit_commands
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.errors import ExitCode
from slimwheel.postbuild.slim import slim
from slimwheel.postbuild.variants import make_variants
from slimwheel.repair import RepairResult
from slimwheel.repair.output import final_judgement
from slimwheel.repair.source import read_input
from testkit.binsynth import elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"
# The extension finds libscipy_openblas.so through an RPATH entry into scipy-openblas32's folder: whether that
# requirement installs it there only its wheel's file list (the index) tells.
BLAS = "libscipy_openblas.so"


def _lib() -> bytes:
    fat = pad8(fatbin([fatbin_entry(sm=sm, payload=bytes(range(1, 256)) * 2) for sm in (80, 90)]))
    return elf(
        sections={".text": b"\xc3" * 256, ".nv_fatbin": fat},
        needed=("libcudart.so.13", BLAS, "libc.so.6"),
        runpath="$ORIGIN/../nvidia/cu13/lib:$ORIGIN/../scipy_openblas32/lib",
        soname="_ext.abi3.so",
    )


def _wheel(tmp_path: Path) -> Path:
    return make_wheel(
        tmp_path / "in",
        name="pkg",
        version="1.2.0",
        tag=TAG,
        files={"pkg/_ext.abi3.so": _lib(), "pkg/__init__.py": b"from ._ext import *\n"},
        requires=("nvidia-cuda-runtime>=13.0,<14", "scipy-openblas32"),
    )


@pytest.fixture(autouse=True)
def _no_setting_from_outside(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml of this repository's
    monkeypatch.delenv("SLIMWHEEL_UNKNOWN", raising=False)
    monkeypatch.setenv("SLIMWHEEL_OFFLINE", "1")


def _unknown_failures(messages: list[tuple[str, ExitCode]]) -> list[str]:
    return [m for m, code in messages if code is ExitCode.UNKNOWN]


def test_slim_fails_what_it_could_not_learn_unless_told_to_note_it(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    failed = slim(src, tmp_path / "a", archs=parse_require_arch("9.0"), settings=PolicySettings(unknown="fail")).verdict
    assert not failed.ok
    (why,) = _unknown_failures([(f.message, f.exit_code) for f in failed.failures])
    assert f"needs {BLAS}" in why and "offline" in why
    noted = slim(src, tmp_path / "b", archs=parse_require_arch("9.0"), settings=PolicySettings(unknown="note")).verdict
    assert noted.ok and any(f"needs {BLAS}" in n for n in noted.notes)


def test_variants_fail_what_they_could_not_learn_unless_told_to_note_it(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    failed = make_variants(src, tmp_path / "a", settings=PolicySettings(unknown="fail"))
    assert failed.variants and all(not v.verdict.ok for v in failed.variants)
    assert all(_unknown_failures([(f.message, f.exit_code) for f in v.verdict.failures]) for v in failed.variants)
    noted = make_variants(src, tmp_path / "b", settings=PolicySettings(unknown="note"))
    assert noted.variants and all(v.verdict.ok for v in noted.variants)


@pytest.mark.parametrize("command", ["check", "slim", "variants"])
def test_every_judging_command_reads_the_same_option_config_key_and_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    src = _wheel(tmp_path)
    out = iter(range(10))

    def run(*extra: str) -> int:
        args = {"check": ["check", "--require-arch", "9.0"], "slim": ["slim", "--archs", "9.0"]}.get(command, [command])
        if command != "check":
            args += ["-o", str(tmp_path / f"out{next(out)}")]
        return main(["-q", *args, "--offline", *extra, str(src)])

    assert run() == ExitCode.UNKNOWN
    assert run("--unknown", "note") == 0
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nunknown = "note"\n', encoding="utf-8")
    assert run() == 0
    assert run("--unknown", "fail") == ExitCode.UNKNOWN  # the flag beats the config
    (tmp_path / "pyproject.toml").unlink()
    monkeypatch.setenv("SLIMWHEEL_UNKNOWN", "note")
    assert run() == 0


def test_the_container_audit_carries_the_projects_setting() -> None:
    for mode in cfgmod.UNKNOWN_MODES:
        (audit, _) = audit_commands(cfgmod.resolve({"unknown": mode}), ())
        assert f" --unknown {mode} " in audit


def test_repair_says_what_it_could_not_learn_and_writes_its_wheel(tmp_path: Path) -> None:
    src_wheel = _wheel(tmp_path)
    src = read_input(src_wheel, tmp_path / "unpacked", rewrite_record=False)
    # the output's verdict, as repair judges it before renaming it into place: not a failure, but said
    (why,) = final_judgement(src_wheel, src_wheel, src)
    assert f"needs {BLAS}" in why and "the index was not read: `slimwheel check` without --offline reads it" in why


def test_repair_prints_and_reports_what_it_could_not_learn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    why = f"pkg/_ext.abi3.so needs {BLAS}: ... not known (the index was not read: `slimwheel check` without --offline reads it)"
    made = RepairResult(wheel=tmp_path / "pkg.whl", excluded=(), requires=(), bundled=(), unknown=(why,))
    monkeypatch.setattr("slimwheel.commands.repair.repair_wheel", lambda *a, **k: made)
    assert main(["repair", "-w", str(tmp_path), str(tmp_path / "in.whl")]) == 0
    assert f"  unknown:    {why}" in capsys.readouterr().out
    assert main(["repair", "--format", "json", "-w", str(tmp_path), str(tmp_path / "in.whl")]) == 0
    assert json.loads(capsys.readouterr().out)["unknown"] == [why]
