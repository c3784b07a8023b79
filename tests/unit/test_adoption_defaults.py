"""Issue 38 item 5, defaults a user would choose: exit codes in --help from ExitCode, suggestions for command typos,
a quiet -q, doctor's hints with the wheel's own requirement, debug info in size-report as a column of its own."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from slimwheel import doctor, render
from slimwheel.cli import cli, main
from slimwheel.errors import ExitCode, exit_codes
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.runtime import driver as drv
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel


def _helps() -> dict[str, str]:
    # the group's own context settings: click caches the help option per command, so a context without them would
    # change what every later --help shows (-h)
    ctx = click.Context(cli, info_name="slimwheel", terminal_width=400, max_content_width=400, **cli.context_settings)
    out = {"": cli.get_help(ctx)}
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        out[name] = cmd.get_help(click.Context(cmd, info_name=name, parent=ctx, terminal_width=400))
    return out


def test_every_exit_code_a_help_text_names_is_an_exit_code_with_that_meaning() -> None:
    labels = {int(c): c.label for c in ExitCode}
    for name, text in _helps().items():
        flat = " ".join(text.split())
        for m in re.finditer(r"\b[Ee]xits? (?:with status )?(\d+)\b", flat):
            assert int(m.group(1)) in labels, f"slimwheel {name} --help: exit {m.group(1)} is no ExitCode"
        # lists of codes are `errors.exit_codes` texts: each number with its enum's label
        for listing in re.findall(r"Exit codes: ([^.]*)\.", flat):
            for code, label in re.findall(r"(\d+) ([^,]+)", listing):
                assert labels[int(code)] == label.strip(), f"slimwheel {name} --help: {code} {label}"


def test_doctor_help_names_the_code_doctor_exits_with() -> None:
    text = " ".join(_helps()["doctor"].split())
    assert f"Exits {int(ExitCode.DOCTOR_PROBLEMS)} when" in text and "Exits 14" not in text
    top = " ".join(_helps()[""].split())
    assert exit_codes() in top and "16 debug info left in" in top


@pytest.mark.parametrize(("typo", "meant"), [("chek", "check"), ("sizereport", "size-report"), ("repiar", "repair")])
def test_a_mistyped_command_gets_a_suggestion(typo: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([typo, "x"]) == ExitCode.USAGE
    assert f"Did you mean '{meant}'?" in capsys.readouterr().err


def test_an_unknown_command_far_from_every_name_gets_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zzzz"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "No such command 'zzzz'" in err and "Did you mean" not in err


@pytest.fixture
def cuda_wheel(tmp_path: Path) -> Path:
    so = elf(
        sections={".nv_fatbin": fatbin([fatbin_entry(sm=80)])},
        needed=("libcudart.so.12", "libc.so.6"),
        runpath="$ORIGIN/../nvidia/cuda_runtime/lib",
    )
    return Path(
        make_wheel(tmp_path, name="pkg", files={"pkg/_ext.abi3.so": so}, requires=("nvidia-cuda-runtime-cu12",))
    )


def test_quiet_check_prints_the_verdict_without_the_notes(cuda_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(cuda_wheel), "--require-arch", "8.0", "--release-total"]) == 0
    loud = capsys.readouterr()
    assert "served" in loud.out and "release total" in loud.err
    for argv in (["-q", "check"], ["check", "-q"]):
        assert main([*argv, str(cuda_wheel), "--require-arch", "8.0", "--release-total"]) == 0
        quiet = capsys.readouterr()
        assert quiet.out.strip() == f"PASS {cuda_wheel.name}" and quiet.err == ""
    # a failure still says what failed
    assert main(["-q", "check", str(cuda_wheel), "--require-arch", "9.0"]) == ExitCode.MISSING_COVERAGE
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {cuda_wheel.name}") and "coverage (exit 11)" in out


class _NoGpu:
    def version(self) -> int:
        return 13000

    def gpus(self) -> list[drv.Gpu]:
        return []


@pytest.mark.parametrize(
    ("requires", "hint"),
    [
        # the wheel's own requirement, marker dropped
        (("nvidia-cuda-runtime>=13.0.2,<14; sys_platform == 'linux'",), "'nvidia-cuda-runtime<14,>=13.0.2'"),
        # through CUDA's metapackage: that requirement, with its extras
        (("cuda-toolkit[cudart]==13.*",), "'cuda-toolkit[cudart]==13.*'"),
        # none at all: what repair would require, never a bare name
        ((), "'nvidia-cuda-runtime>=13.0,<14'"),
    ],
)
def test_doctor_tells_to_install_the_wheels_own_requirement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, requires: tuple[str, ...], hint: str
) -> None:
    monkeypatch.setattr(drv.Nvml, "open", classmethod(lambda cls: None))
    monkeypatch.setattr(drv.CudaDriver, "open", classmethod(lambda cls: _NoGpu()))
    monkeypatch.setattr(doctor, "system_search", lambda sonames: dict.fromkeys(sonames))
    monkeypatch.setattr("sys.path", [str(tmp_path / "empty")])  # no nvidia-* wheel anywhere
    so = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)])}, needed=("libcudart.so.13", "libc.so.6"))
    w = make_wheel(
        tmp_path, name="pkg", files={"pkg/_ext.abi3.so": so}, requires=requires, tag="cp312-abi3-manylinux_2_28_x86_64"
    )
    report = doctor.run_doctor(str(w), env={})
    assert report.problems == (f"libcudart.so.13 not found where the loader looks: pip install {hint}",)


def test_size_report_shows_debug_info_in_a_column_of_its_own(tmp_path: Path) -> None:
    files = {
        "pkg/clean.so": elf(sections={".text": b"\x90" * 64}),
        "pkg/debug.so": elf(sections={".text": b"\x90" * 64, ".debug_info": b"d" * 5000, ".comment": b"c" * 100}),
    }
    r = inspect_wheel(Path(make_wheel(tmp_path, name="pkg", files=files)))
    text = render.report_text(r, width=300, color=False)
    header = next(line for line in text.splitlines() if "debug info" in line and "other" in line)
    row = next(line for line in text.splitlines() if "pkg/debug.so" in line and "4.9 KiB" in line)
    cells = [c.strip() for c in row.strip(" │|").split("│")] if "│" in row else row.split()
    assert "4.9 KiB" in cells  # the 5000 bytes of .debug_info, apart from "other"
    assert header.index("debug info") < header.index("other")
    assert "debug info: 4.9 KiB installed in 1 ELF file not stripped" in text and "repair --strip" in text
    md = render.render_markdown([r])
    assert "debug info: 4.9 KiB installed in 1 ELF file" in md
    clean = inspect_wheel(Path(make_wheel(tmp_path / "c", name="pkg", files={"pkg/clean.so": files["pkg/clean.so"]})))
    assert "debug info" not in render.report_text(clean, width=300, color=False)


def test_strip_touches_only_what_the_debug_check_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slimwheel import strip
    from slimwheel.errors import ToolError

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "clean.so").write_bytes(elf(sections={".text": b"\x90" * 64}))
    (tmp_path / "pkg" / "few.so").write_bytes(elf(sections={".symtab": b"s" * 4096, ".strtab": b"t" * 4096}))
    # nothing to strip: no strip program is looked for or run (a subprocess here would fail the test)
    monkeypatch.setattr("slimwheel.strip.shutil.which", lambda name: None)
    assert strip.strip_members(tmp_path, ["pkg/clean.so", "pkg/few.so"]) == ()
    (tmp_path / "pkg" / "debug.so").write_bytes(elf(sections={".debug_info": b"d" * 100}))
    with pytest.raises(ToolError, match="strip not found") as e:
        strip.strip_members(tmp_path, ["pkg/clean.so", "pkg/debug.so"])
    assert "binutils" in str(e.value)
