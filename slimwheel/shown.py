"""Text from a wheel (member names, SONAMEs, search paths, requirements, messages that quote them), escaped for where
it is shown: a terminal or CI log, rich markup, Markdown (a CI job summary), HTML. The one home of that rule: every
renderer calls it.

- Terminal: control characters (C0 with ESC, so CSI and OSC sequences, and newlines; DEL; C1), format characters
  (bidirectional overrides and isolates, zero-width ones) and line/paragraph separators are shown as Python escapes
  (`\\x1b`, `\\n`, `\\u202e`), so a name can neither drive the terminal nor split or reorder a line.
- Markdown: the terminal rule, then the characters that make Markdown syntax. Code spans get a backtick fence longer
  than any run inside (and `\\|` in a table cell, which GFM reads before the span); plain text gets a backslash
  before each ASCII punctuation character that starts a construct (emphasis, links, images, raw HTML, entities, code,
  strikethrough, math, table cells) and before one that would start a block at the beginning of the text.
- HTML: the terminal rule (a bidi override reorders a name on a page too), then `html.escape`.
"""

from __future__ import annotations

import html as _html
import re
import unicodedata
from collections.abc import Iterable

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HIDDEN = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _escape_char(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def terminal(text: str) -> str:
    """`text` safe to write to a terminal or a log: every control, format or separator character as an escape."""
    if text.isprintable():  # the common case, and one C loop: printable text has none of those characters
        return text
    return "".join(_escape_char(c) if unicodedata.category(c) in _HIDDEN else c for c in text)


def markup(text: str) -> str:
    """`terminal`, then escaped for rich markup (a `[bold]` in a name stays text)."""
    # Imported here: the CLI's log formatter calls `terminal` on every run, and a command that prints no table (or
    # prints it after reading the wheel) should not wait for rich at start-up.
    from rich.markup import escape

    return escape(terminal(text))


def md_code(text: str, *, table: bool = False) -> str:
    """A Markdown code span showing `text` literally (`table`: inside a GFM table cell)."""
    body = terminal(text)
    if not body:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    if body.startswith(("`", " ")) or body.endswith(("`", " ")):
        body = f" {body} "  # CommonMark strips one space on each side when both are there
    if table:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"


_INLINE = re.compile(r"([\\`*_\[\]<>&|~$!])")
_BLOCK_START = re.compile(r"^(\s*)([#>+=-]|\d+(?=[.)]))")


def md_text(text: str, *, line_start: bool = False) -> str:
    """`text` as plain Markdown text that renders as itself: no emphasis, link, image, HTML, entity, code span,
    strikethrough, math or table cell comes out of it (safe in a table cell); `line_start`: the text begins a line
    or a list item, so no heading, quote, list or rule either."""
    body = _INLINE.sub(r"\\\1", terminal(text))
    m = _BLOCK_START.match(body) if line_start else None
    if m:
        if m.group(2)[0].isdigit():  # "1." or "1)" starts an ordered list: escape the punctuation after the number
            end = m.end()
            body = body[:end] + "\\" + body[end:]
        else:
            body = body[: m.start(2)] + "\\" + body[m.start(2) :]
    return body


def html(text: str) -> str:
    """`terminal`, then `html.escape` (quotes included, for attributes)."""
    return _html.escape(terminal(text))


def abbreviated(items: Iterable[object], limit: int = 3) -> str:
    """The first `limit` items, comma-separated, and how many more there are: "a, b, c and 4 more"."""
    shown = list(items)
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(map(str, shown[:limit])) + more
