"""size-report's plain-text tables (slimwheel.textable): widths, folding, justification, colour."""

from __future__ import annotations

import random
import re

import pytest

from slimwheel.textable import Cell, Column, Style, styled, table, width_of, wrap

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain(lines: list[str]) -> list[str]:
    return [ANSI.sub("", line) for line in lines]


def test_a_table_that_fits_keeps_every_cell_whole_and_justified() -> None:
    lines = table(
        "Sizes",
        (Column("file"), Column("bytes", right=True)),
        [("a.so", "12"), ("long.so", "3456")],
        width=80,
        color=False,
    )
    assert lines == [
        "Sizes",
        "┏━━━━━━━━━┳━━━━━━━┓",
        "┃ file    ┃ bytes ┃",
        "┡━━━━━━━━━╇━━━━━━━┩",
        "│ a.so    │    12 │",
        "│ long.so │  3456 │",
        "└─────────┴───────┘",
    ]


def test_folding_columns_narrow_until_the_table_fits_and_lose_no_character() -> None:
    rpath = ":".join(["$ORIGIN/../../nvidia/cu13/lib"] * 6)
    needed = ", ".join(f"libx{i}.so.{i}" for i in range(20))
    cols = (Column("file", fold=True), Column("RPATH", fold=True), Column("NEEDED", fold=True))
    lines = table("", cols, [("pkg/_ext.so", f"RPATH {rpath}", needed)], width=80, color=False)
    assert max(width_of(line) for line in lines) <= 80
    body = [line for line in lines if line.startswith("│")]
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in body]
    assert "".join(c[1] for c in cells).replace("RPATH", "", 1) == rpath  # folded anywhere, nothing lost
    # NEEDED wraps at spaces: every library name stays whole on one line
    assert all(re.fullmatch(r"(libx\d+\.so\.\d+,? ?)*", c[2]) for c in cells)
    assert sorted(re.findall(r"libx\d+\.so\.\d+", " ".join(c[2] for c in cells))) == sorted(needed.split(", "))


def test_cells_of_several_lines_and_wide_characters_stay_aligned() -> None:
    lines = table("", (Column("name"), Column("paths")), [("名前.so", "RPATH a\nRUNPATH b")], width=80, color=False)
    body = lines[3:-1]  # no title: the top rule, the head and its rule come first
    assert body[0].startswith("│ 名前.so │ RPATH a") and len(body) == 2
    assert len({width_of(line) for line in lines}) == 1


def test_colour_only_when_asked_and_never_in_the_layout() -> None:
    rows = [("8.0", Cell("SASS", Style.GREEN)), ("7.5", Cell("not at all", Style.RED))]
    cols = (Column("CC"), Column("runs by"))
    plain = table("GPU coverage", cols, rows, width=80, color=False)
    coloured = table("GPU coverage", cols, rows, width=80, color=True)
    assert not any("\x1b" in line for line in plain)
    assert "\x1b[32mSASS\x1b[0m" in "".join(coloured) and _plain(coloured) == plain
    assert styled("x", Style.BOLD, color=False) == "x"


@pytest.mark.parametrize("seed", range(20))
def test_random_tables_fit_when_they_can(seed: int) -> None:
    rnd = random.Random(seed)
    words = ["lib", "cuda", "$ORIGIN/../lib", "x" * 40, "名", "a b c", ""]
    ncol = rnd.randint(1, 5)
    cols = tuple(Column(f"h{i}", right=rnd.random() < 0.3, fold=rnd.random() < 0.7) for i in range(ncol))
    rows = [tuple(" ".join(rnd.choices(words, k=rnd.randint(0, 6))) for _ in cols) for _ in range(rnd.randint(0, 5))]
    width = rnd.randint(30, 120)
    lines = table("t", cols, rows, width=width, color=False)
    fixed = sum(max([width_of(c.header)] + [width_of(r[i]) for r in rows]) for i, c in enumerate(cols) if not c.fold)
    floor = fixed + sum(max(10, width_of(c.header)) for c in cols if c.fold) + 3 * ncol + 1
    if floor <= width:
        assert max(width_of(line) for line in lines[1:]) <= width
    assert len({width_of(line) for line in lines[1:]}) == 1  # every rule and row as wide as the others


def test_wrap_breaks_at_spaces_else_anywhere() -> None:
    assert wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert wrap("", 4) == [""]
