"""footprint refuses bad input before it starts any process."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimwheel.cli import main


def test_a_missing_interpreter_is_bad_input_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["footprint", "json", "--python", str(tmp_path / "no-python")]) == 3
    assert "no such interpreter" in capsys.readouterr().err


def test_a_module_name_with_odd_characters_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["footprint", "os; rm"]) == 3
    assert "is not a module name" in capsys.readouterr().err
