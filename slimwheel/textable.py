"""Plain-text tables for size-report: the look of rich's tables, at a small part of their cost.

Why not rich here (it draws every other command's tables): size-report on a small wheel is mostly start-up, and it
must cost at most half of `unzip` + `cuobjdump` (issue 22). rich took 25 ms to import and 35 ms to lay out the
jax-cuda13-plugin report (151 lines), a quarter of the whole run; this module takes about 2 ms for it. It does only
what size-report's tables use: a title, a heavy head, left or right justified cells, cells of several lines, cells
that fold to fit the width, and a few colours on a terminal.

Cells are text from wheels too: callers pass them through `slimwheel.shown.terminal` first (no markup to escape).
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass


class Style(enum.Enum):
    PLAIN = ""
    BOLD = "1"
    DIM = "2"
    ITALIC = "3"
    RED = "31"
    GREEN = "32"
    YELLOW = "33"


def styled(text: str, style: Style, *, color: bool) -> str:
    """`text` in `style` (ANSI SGR) when `color`, else as it is."""
    if not color or style is Style.PLAIN or not text:
        return text
    return f"\x1b[{style.value}m{text}\x1b[0m"


@dataclass(frozen=True)
class Cell:
    """A cell with a style (the plain ones are strings)."""

    text: str
    style: Style = Style.PLAIN


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # justified to the right (numbers)
    fold: bool = False  # may be narrowed to fit the width: its lines wrap at spaces, else anywhere


_MIN_FOLD = 10  # the narrowest a folding column gets


def width_of(text: str) -> int:
    """Terminal cells `text` takes: 2 for East Asian wide and full-width characters, 0 for combining marks."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text
    )


def _cut(text: str, width: int) -> int:
    """How many characters of `text` fit in `width` cells (at least one)."""
    if text.isascii():
        return max(1, width)
    used = 0
    for i, c in enumerate(text):
        used += width_of(c)
        if used > width:
            return max(1, i)
    return len(text)


def wrap(line: str, width: int) -> list[str]:
    """`line` in pieces of at most `width` cells: broken after the last space that fits, else where it must."""
    out: list[str] = []
    while width_of(line) > width:
        n = _cut(line, width)
        space = line.rfind(" ", 0, n + 1)
        if space > 0:
            out.append(line[:space].rstrip())
            line = line[space + 1 :].lstrip()
        else:
            out.append(line[:n])
            line = line[n:]
    out.append(line)
    return out


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    natural = [
        max([width_of(c.header)] + [width_of(line) for row in rows for line in row[i].split("\n")])
        for i, c in enumerate(columns)
    ]
    widths = list(natural)
    over = sum(widths) + 3 * len(widths) + 1 - width
    while over > 0:
        foldable = [i for i, c in enumerate(columns) if c.fold and widths[i] > max(_MIN_FOLD, width_of(c.header))]
        if not foldable:
            break  # wider than the terminal: lines run on, as a terminal shows them
        widest = max(foldable, key=lambda i: widths[i])
        others = [widths[i] for i in foldable if i != widest]
        floor = max(_MIN_FOLD, width_of(columns[widest].header), max(others, default=0))
        cut = min(over, max(1, widths[widest] - floor))
        widths[widest] -= cut
        over -= cut
    return widths


def table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Cell]],
    *,
    width: int,
    color: bool,
) -> list[str]:
    """The lines of a table no wider than `width` where its folding columns allow."""
    texts = [[c.text if isinstance(c, Cell) else c for c in row] for row in rows]
    widths = _widths(columns, texts, width)

    def rule(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def line(cells: Sequence[str], styles: Sequence[Style], bar: str) -> list[str]:
        pieces = [
            [piece for part in text.split("\n") for piece in wrap(part, w)]
            for text, w in zip(cells, widths, strict=True)
        ]
        out = []
        for k in range(max(len(p) for p in pieces)):
            parts = []
            for i, p in enumerate(pieces):
                text = p[k] if k < len(p) else ""
                pad = " " * (widths[i] - width_of(text))
                shown = styled(text, styles[i], color=color)
                parts.append(pad + shown if columns[i].right else shown + pad)
            out.append(bar + " " + f" {bar} ".join(parts) + " " + bar)
        return out

    out = [styled(title, Style.ITALIC, color=color)] if title else []
    out.append(rule("┏", "┳", "┓", "━"))
    out.extend(line([c.header for c in columns], [Style.BOLD] * len(columns), "┃"))
    out.append(rule("┡", "╇", "┩", "━"))
    for row in rows:
        cells = [c.text if isinstance(c, Cell) else c for c in row]
        styles = [c.style if isinstance(c, Cell) else Style.PLAIN for c in row]
        out.extend(line(cells, styles, "│"))
    out.append(rule("└", "┴", "┘", "─"))
    return out
