"""Option values parsed once at the edge (issue 36 item 4): bad values are one message naming the option (or file)
and the value, typed values pass through the click types unchanged, and the defaults have one home."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from slimwheel.check import CheckPolicy, PolicySettings, make_policy
from slimwheel.cli import main
from slimwheel.commands._options import CUDA_REQUEST, CUDA_VERSION, PTX_KEEP, REQUIRE_ARCH
from slimwheel.config import DEFAULT_BUDGET_BYTES, DEFAULT_DEBUG_SYMBOLS, Config, resolve
from slimwheel.cuda.arch import CC, CCRequest, parse_cc_request
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ExitCode
from slimwheel.postbuild.slim import PtxKeep, slim
from slimwheel.postbuild.variants import make_variants


@pytest.mark.parametrize(
    ("args", "named", "bad"),
    [
        (["slim", "{w}", "--archs", "9.x"], "--archs", "9.x"),
        (["slim", "{w}", "--archs", "8.0-"], "--archs", "8.0-"),
        (["slim", "{w}", "--archs", "9.0", "--ptx", "sm_zz"], "--ptx", "sm_zz"),
        (["slim", "{w}", "--archs", "9.0", "--budget", "12 parsecs"], "budget", "12 parsecs"),
        (["variants", "{w}", "--budget", "-5MB"], "budget", "-5MB"),
        (["check", "{w}", "--budget", "1e9"], "budget", "1e9"),
        (["check", "{w}", "--require-arch", "x.y"], "require-arch", "x.y"),
        (["check", "{w}", "--manylinux", "2_99x"], "manylinux", "2_99x"),
        (["check", "{w}", "--installed-budget", "lots"], "installed-budget", "lots"),
        (["toolkit", "--cuda", "14.0"], "--cuda", "14.0"),
        (["repair", "{w}", "--cuda", "x13"], "--cuda", "x13"),
    ],
)
def test_a_bad_option_value_is_one_message_naming_option_and_value(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    named: str,
    bad: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml of this repository read as the project's
    for var in ("SLIMWHEEL_BUDGET", "SLIMWHEEL_REQUIRE_ARCH", "SLIMWHEEL_MANYLINUX", "SLIMWHEEL_INSTALLED_BUDGET"):
        monkeypatch.delenv(var, raising=False)
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"  # never read: the value is refused first
    assert main([a.format(w=wheel) for a in args]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert named in err and repr(bad) in err, err
    assert "Traceback" not in err and err.count("slimwheel: error:") == 1


def test_a_bad_value_in_pyproject_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nbudget = "huge"\nmanylinux = "2_1"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLIMWHEEL_BUDGET", raising=False)
    monkeypatch.delenv("SLIMWHEEL_MANYLINUX", raising=False)
    assert main(["check", str(tmp_path / "pkg-1.0-py3-none-any.whl")]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert str(tmp_path / "pyproject.toml") in err and "'huge'" in err and "'2_1'" in err, err
    assert "Traceback" not in err


def test_the_click_types_parse_text_and_pass_typed_values_through() -> None:
    typed = parse_cc_request("8.0+")
    assert REQUIRE_ARCH.convert(typed, None, None) is typed
    req = REQUIRE_ARCH.convert("8.0+", None, None)
    assert isinstance(req, CCRequest) and CC(9, 0) in req.resolve() and CC(7, 5) not in req.resolve()
    assert REQUIRE_ARCH.convert(" Toolkit ", None, None) == "toolkit"
    assert CUDA_REQUEST.convert("auto", None, None) is None
    assert CUDA_REQUEST.convert("12", None, None) == CudaVersion(12, 0)
    assert CUDA_VERSION.convert("12.4.131", None, None) == CudaVersion(12, 4)
    assert PTX_KEEP.convert("newest", None, None) == PtxKeep(mode="newest", text="newest")
    assert PTX_KEEP.convert("9.0,12.0", None, None).ccs == (CC(9, 0), CC(12, 0))
    with pytest.raises(BadInputError, match=r"^require-arch '9\.x': "):
        REQUIRE_ARCH.convert("9.x", None, None)


def test_config_parses_the_platform_floor_once() -> None:
    floor = resolve({"manylinux": "2_28"}).parsed.manylinux
    assert floor is not None and floor.name == "manylinux_2_28"
    assert resolve().parsed.manylinux is None


def _default(fn: Callable[..., object], name: str) -> object:
    return inspect.signature(fn).parameters[name].default


def test_debug_symbols_and_budget_have_one_default() -> None:
    """CheckPolicy and the library entry points said debug_symbols=False while every command said True (the config
    key's default): a wheel judged by `slim_wheel()` and by `slimwheel check` got different verdicts."""
    assert DEFAULT_DEBUG_SYMBOLS is True
    assert Config().debug_symbols is DEFAULT_DEBUG_SYMBOLS
    assert CheckPolicy().debug_symbols is DEFAULT_DEBUG_SYMBOLS
    assert _default(make_policy, "debug_symbols") is DEFAULT_DEBUG_SYMBOLS
    assert Config().budget_bytes == CheckPolicy().budget_bytes == DEFAULT_BUDGET_BYTES == 60 * 2**20
    assert _default(make_policy, "budget") == DEFAULT_BUDGET_BYTES
    # slim() and make_variants() take their settings whole: the defaults' own, as the commands' defaults are
    for fn in (slim, make_variants):
        settings = _default(fn, "settings")
        assert settings == PolicySettings() == PolicySettings.of(Config(), read_index=False), fn
        assert settings.debug_symbols is DEFAULT_DEBUG_SYMBOLS and settings.budget == DEFAULT_BUDGET_BYTES, fn


def test_the_shared_options_module_is_not_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert "check" in listed and "options" not in listed
    assert main(["_options"]) != 0


@pytest.mark.parametrize("flag", ["-o", "--out-dir", "-w", "--wheel-dir"])
def test_repair_names_its_output_folder_as_the_other_commands_do(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """build, slim and variants take -o/--out-dir; repair took only auditwheel's -w/--wheel-dir (a usage error,
    exit 2, for the name every other command uses). The option is read: a pure Python wheel gets repair's own
    refusal (exit 3), not click's."""
    from testkit.wheelmaker import make_wheel

    w = make_wheel(tmp_path, files={"demo/__init__.py": b"x = 1\n"})
    code = main(["repair", "--offline", flag, str(tmp_path / "out"), str(w)])
    assert code == 3 and "nothing to repair" in capsys.readouterr().err
