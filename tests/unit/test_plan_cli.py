"""`slimwheel plan` without any toolkit on the machine: the release table is used, and the output says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimwheel.cli import main


@pytest.fixture
def no_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No nvcc on PATH, no CUDA_HOME, an empty slimwheel cache, and a project folder without pyproject.toml."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("SLIMWHEEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_plan_json_from_the_release_table(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--cuda", "12.4", "--archs", "7.0+", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["cuda"] == "12.4"
    assert data["archs_from"] == "slimwheel's release table"
    assert "no CUDA 12.4 toolkit installed" in data["origin"]
    assert data["sass"] == ["70", "80", "90"] and data["ptx"] == ["90"]
    assert data["compression"] == "legacy"
    assert not (no_toolkit / "cache" / "toolkits" / "cuda-12.4").exists()  # plan never downloads


def test_plan_cmake_format(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--archs", "7.5,8.0,9.0", "--format", "cmake"]) == 0
    out = capsys.readouterr().out
    assert 'set(SLIMWHEEL_CUDA_ARCHITECTURES "75-real;80-real;90" CACHE STRING' in out
    assert 'set(SLIMWHEEL_COMPRESSION "size" CACHE STRING' in out
    assert 'set(SLIMWHEEL_CUDA_MAJOR "13" CACHE STRING' in out


def test_plan_table_says_where_the_targets_came_from(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "75-real;80-real;90-real;100-real;120" in out
    assert "no CUDA 13.0 toolkit installed" in out
    assert "580.65.06" in out


def test_plan_reads_the_project_table(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (no_toolkit / "pyproject.toml").write_text('[tool.slimwheel]\narchs = "8.6"\nptx = "none"\n')
    assert main(["plan", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sass"] == ["86"] and data["ptx"] == []
    # the command line wins over the file
    assert main(["plan", "--archs", "9.0", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["sass"] == ["90"]


def test_bad_arch_string_exit_3(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--archs", "7.5,abc"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "slimwheel: error: command line: archs = '7.5,abc': 'abc' is not a compute capability"


def test_unknown_key_in_project_is_reported(no_toolkit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (no_toolkit / "pyproject.toml").write_text('[tool.slimwheel]\narch = "8.6"\n')
    assert main(["plan"]) == 3
    assert 'did you mean "archs"' in capsys.readouterr().err
