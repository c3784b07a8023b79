"""`slimwheel diff` on a planted regression: one CUDA module of NEW grows; the Markdown block, the JSON and the exit
code of --fail-over say which file, section, architecture and module, and by how much."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.diffwheels import grown_wheel

from slimwheel.cli import main
from slimwheel.errors import BadInputError
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.postbuild.diff import diff_reports, parse_threshold


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return grown_wheel(tmp_path / "old", "1.0"), grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)


def test_markdown_block_names_the_grown_module_and_fails_over_the_limit(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = pair
    rc = main(["diff", str(old), str(new), "--format", "markdown", "--fail-over", "10%"])
    out = capsys.readouterr()
    assert rc == 10
    assert "more than --fail-over 10%" in out.err
    md = out.out
    assert md.startswith("### ❌ slimwheel diff: `pkg-1.0-")
    assert "**Over the limit:**" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows[0] == "| level | file | what | old | new | change | % |"
    # the largest changes first: the module, its arch, the section and the file all grew by the same 64 KiB
    top = rows[2:6]
    assert any(
        r.startswith("| module | `pkg/_ext.abi3.so` | module #1 (sm_80,sm_90) | ") and "+64.0 KiB" in r for r in top
    )
    assert any(r.startswith("| arch | `pkg/_ext.abi3.so` | sass 90 | 12.0 KiB | 76.0 KiB | +64.0 KiB |") for r in top)
    assert any(r.startswith("| section | `pkg/_ext.abi3.so` | `.nv_fatbin` | ") and "+64.0 KiB" in r for r in top)
    assert any(r.startswith("| file | `pkg/_ext.abi3.so` | ") for r in top)
    # the modules that did not change are not listed; the dist-info folders are matched across versions
    assert "module #0" not in md and "module #2" not in md
    assert "`*.dist-info/METADATA`" in md


def test_within_the_limit_exits_zero(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = pair
    assert main(["diff", str(old), str(new), "--format", "markdown", "--fail-over", "1MiB"]) == 0
    assert "Within --fail-over 1MiB." in capsys.readouterr().out
    assert main(["diff", str(old), str(new)]) == 0  # no threshold: a report, never a failure


def test_json_lists_every_level(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = pair
    assert main(["diff", str(old), str(new), "--format", "json", "--fail-over", "1MiB"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["over"] is None
    assert data["growth_bytes"] == inspect_wheel(new).size - inspect_wheel(old).size > 60 * 1024
    by_level = {c["level"]: c for c in data["changes"]}
    assert set(by_level) == {"wheel", "file", "section", "arch", "module"}
    mod = next(c for c in data["changes"] if c["level"] == "module")
    assert mod["what"].startswith("module #1") and mod["delta_bytes"] == 64 * 1024


def test_shrinking_never_fails(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = pair
    assert main(["diff", str(new), str(old), "--fail-over", "0%"]) == 0
    assert "-64.0 KiB" in capsys.readouterr().out


def test_identical_wheels_show_no_change(tmp_path: Path) -> None:
    a = grown_wheel(tmp_path / "a", "1.0")
    d = diff_reports(inspect_wheel(a), inspect_wheel(a))
    assert [c.level for c in d.changes] == ["wheel"] and d.growth == 0


@pytest.mark.parametrize(
    ("text", "ok"), [("5%", True), ("1MiB", True), ("4096", True), ("-3%", False), ("five", False), ("%", False)]
)
def test_threshold_parsing(text: str, ok: bool) -> None:
    if ok:
        t = parse_threshold(text)
        assert (t.bytes is None) != (t.percent is None)
    else:
        with pytest.raises(BadInputError):
            parse_threshold(text)


def test_missing_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = grown_wheel(tmp_path / "a", "1.0")
    assert main(["diff", str(a), str(tmp_path / "nope.whl")]) == 3
    assert "nope.whl" in capsys.readouterr().err
