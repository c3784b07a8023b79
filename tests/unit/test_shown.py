"""Issue 24 item 1: names from a wheel attack the reader no more. Hostile member names, SONAMEs and search paths are
generated here and sent through the real CLI output paths (size-report table/Markdown/HTML, check Markdown, diff
table/Markdown, slim's table, error messages); the Markdown is parsed back with markdown-it-py (GFM tables) as the
independent judge of what a job summary would render."""

from __future__ import annotations

import random
import re
import unicodedata
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from slimwheel import shown
from slimwheel.cli import main
from testkit.binsynth import elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel

HIDDEN = ("Cc", "Cf", "Cs", "Zl", "Zp")
HOSTILE = [
    "\x1b[2J\x1b[Hcleared",  # CSI: clears the screen
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8: a hidden link
    "\x1b]0;owned title\x07",  # OSC 0: the window title
    "\x9b31mred",  # C1 CSI
    "row\nsplit | fake | cells |",
    "pipe|cell",
    "tick`**bold**`end",
    "[x](javascript:alert(1))",
    "<img src=x onerror=alert(1)>&amp;",
    "~~struck~~ $x^2$ _em_",
    "\u202eexe.txt",  # right-to-left override
    "lib:thumbs_up:x",  # a rich emoji code: shown as written, not as an emoji
]
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
LIVE = {
    "strong_open",
    "em_open",
    "link_open",
    "image",
    "html_inline",
    "html_block",
    "s_open",
    "heading_open",
    "blockquote_open",
    "bullet_list_open",
    "ordered_list_open",
    "hr",
    "code_block",
    "fence",
}


def _raw(text: str) -> list[str]:
    """The characters a terminal would act on, in text printed without colour (newlines are ours)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in HIDDEN]


@given(st.text())
def test_terminal_leaves_no_control_format_or_separator_character(text: str) -> None:
    out = shown.terminal(text)
    assert not [c for c in out if unicodedata.category(c) in HIDDEN]
    assert out == text or not text.isprintable()


@given(st.text())
def test_markdown_code_spans_and_text_render_as_the_escaped_text(text: str) -> None:
    want = shown.terminal(text)
    for body in (shown.md_code(text, table=True), shown.md_text(text), shown.md_text(text, line_start=True)):
        tokens = MD.parse(f"| h |\n| --- |\n| {body} |\n")
        cells = [t for t in tokens if t.type == "inline"]
        assert len(cells) == 2  # the header cell and one body cell: nothing split the row or added cells
        kids = cells[1].children or []
        assert not {k.type for k in kids} & LIVE
        rendered = "".join(k.content for k in kids if k.type in ("text", "code_inline"))
        assert rendered.split() == want.split()  # the same text, up to the whitespace a cell trims


def _lib(sass: tuple[int, ...] = (80, 90), evil: int = 64) -> bytes:
    fat = pad8(fatbin([fatbin_entry(sm=sm, payload=bytes(range(1, 200))) for sm in sass]))
    return elf(
        sections={".nv_fatbin": fat, "\x1b[31m.evil\x1b[0m": b"\x90" * evil},
        needed=("libcudart.so.13", "libc.so.6", "lib\x1b]0;x\x07.so"),
        soname="\x1b[2Jsoname|x",
        runpath="$ORIGIN/\x1b[1m`|`",
    )


def _hostile_wheel(folder: Path, version: str = "1.0") -> Path:
    rng = random.Random(24)  # incompressible members, larger than the metadata: all of them are in the top 12
    files = {f"pkg/{name}.txt": rng.randbytes(4000 + 100 * i) for i, name in enumerate(HOSTILE)}
    files["pkg/\x1b]0;t\x07_ext|`*x*`.abi3.so"] = _lib(evil=64 if version == "1.0" else 4096)
    return make_wheel(folder, name="pkg", version=version, files=files, requires=("nvidia-cuda-runtime>=13.0,<14",))


OURS_STRONG = re.compile(r"check: (passed|FAILED)|[\d.]+ MB \([\d.]+ MiB\)|[+-][\d.]+ (B|KiB|MiB|GiB)|Over the limit:")


def _no_live_markdown(text: str) -> None:
    """Nothing but our own bold, headings and lists; tables whose rows have their header's cell count."""
    assert not _raw(text)
    tokens = MD.parse(text)
    assert any(t.type == "table_open" for t in tokens)
    for t in tokens:
        assert t.type not in LIVE - {"heading_open", "bullet_list_open"}, t
        kids = t.children or []
        for i, k in enumerate(kids):
            assert k.type not in LIVE - {"strong_open", "em_open"}, (k.type, k.content)
            if k.type == "em_open":  # diff's own footnote
                assert kids[i + 1].content.startswith("Sizes: KiB/MiB = 2**10/2**20 bytes; files:"), kids[i + 1].content
            if k.type == "strong_open":
                assert OURS_STRONG.fullmatch(kids[i + 1].content), kids[i + 1].content
    cells: list[int] = []
    for t in tokens:
        if t.type == "tr_open":
            cells.append(0)
        elif t.type in ("td_open", "th_open"):
            cells[-1] += 1
        elif t.type == "table_close":
            assert len(set(cells)) == 1, cells  # markdown-it pads short rows: count the source rows instead
            cells = []
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for r in rows:
        unescaped = r.replace("\\|", "")
        assert unescaped.endswith("|"), r  # one source line per row: no newline split it


@pytest.fixture()
def wheels(tmp_path: Path) -> tuple[Path, Path]:
    return _hostile_wheel(tmp_path / "a"), _hostile_wheel(tmp_path / "b", version="1.1")


def test_size_report_table_escapes_names(wheels: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = wheels
    assert main(["size-report", "--entries", str(a)]) == 0
    out = capsys.readouterr().out
    assert not _raw(out), _raw(out)
    for name in HOSTILE:
        assert shown.terminal(name) in out, name  # rich markup escapes show as the text itself
    assert "row\\nsplit" in out  # one row: the newline is shown, not obeyed


def test_size_report_and_check_markdown_render_no_live_syntax(
    wheels: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = wheels
    assert main(["size-report", "--format", "markdown", "--entries", str(a)]) == 0
    md = capsys.readouterr().out
    _no_live_markdown(md)
    codes = [k.content for t in MD.parse(md) for k in t.children or [] if k.type == "code_inline"]
    for name in HOSTILE:
        assert shown.terminal(f"pkg/{name}.txt") in codes, name
    main(["check", "--format", "markdown", "--require-arch", "9.0", str(a)])
    _no_live_markdown(capsys.readouterr().out)


def test_size_report_html_escapes_names(
    wheels: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = wheels
    assert main(["size-report", "--format", "html", "-o", str(tmp_path / "t.html"), str(a)]) == 0
    page = (tmp_path / "t.html").read_text()
    assert not _raw(page.replace("\t", "")) and "<img src=x" not in page and "&lt;img src=x" in page


def test_diff_table_and_markdown_escape_names(wheels: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = wheels
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert not _raw(out) and "\\x1b[31m.evil\\x1b[0m" in out
    assert main(["diff", "--format", "markdown", str(a), str(b)]) == 0
    _no_live_markdown(capsys.readouterr().out)


def test_slim_table_escapes_names(
    wheels: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = wheels
    # the test wheels' RECORD cannot hold the name with a newline: --rewrite-record, whose warnings name members too
    main(["slim", "--archs", "9.0", "--rewrite-record", "-o", str(tmp_path / "out"), str(a)])
    captured = capsys.readouterr()
    assert "row\\nsplit" in captured.err
    assert not _raw(captured.out) and not _raw(captured.err) and "\\x1b]0;t\\x07_ext" in captured.out


def test_error_messages_that_name_members_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = make_wheel(tmp_path, files={"pkg/\x1b]0;owned\x07\x1b[2J.so": b"\x7fELF" + b"\xff" * 60})
    assert main(["size-report", str(w)]) == 3
    err = capsys.readouterr().err
    assert "\\x1b]0;owned\\x07\\x1b[2J.so" in err and not _raw(err)
    with zipfile.ZipFile(w) as z:
        assert any("\x1b" in n for n in z.namelist())  # the wheel really holds the raw name
