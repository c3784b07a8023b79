"""The generated parts of the docs: the CLI reference and the configuration table (docs/reference.md) and the exit
codes (README.md), each from the code that defines it.

`python -m devtools.docgen` (from the repository root) rewrites them between their markers; a unit test fails when
they drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from slimwheel import config as cfgmod
from slimwheel.cli import cli
from slimwheel.errors import ExitCode
from slimwheel.fsutil import write_text_atomic

REPO = Path(__file__).resolve().parent.parent
MARKERS = {
    "cli": ("<!-- cli-reference:start -->", "<!-- cli-reference:end -->"),
    "config": ("<!-- config-reference:start -->", "<!-- config-reference:end -->"),
    "exit-codes": ("<!-- exit-codes:start -->", "<!-- exit-codes:end -->"),
}
# Which generated parts each page holds.
PAGES = {"README.md": ("exit-codes",), "docs/reference.md": ("cli", "config")}


def cli_reference() -> str:
    ctx = click.Context(cli, info_name="slimwheel", terminal_width=100, max_content_width=100, **cli.context_settings)
    parts = ["```", cli.get_help(ctx), "```"]
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        # With the group as parent, every command shows the group's "-h, --help" (click caches the help option per
        # command, so a parentless context would make the text depend on what ran before).
        sub = click.Context(cmd, info_name=name, parent=ctx, terminal_width=100, max_content_width=100)
        parts += ["", f"### `slimwheel {name}`", "", "```", cmd.get_help(sub), "```"]
    return "\n".join(parts)


def config_reference() -> str:
    rows = [
        "| key (`[tool.slimwheel]`) | environment | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for key, f in cfgmod.FIELDS.items():
        default = "auto" if f.metadata.get("kind") == "cuda" else f.default
        shown = (
            "{}"
            if f.metadata.get("kind") == "table" and not default
            else "[" + ", ".join(f'"{v}"' for v in default) + "]"
            if isinstance(default, tuple)
            else str(default).lower()
            if isinstance(default, bool)
            else f'"{default}"'
        )
        env = cfgmod.ENV_PREFIX + key.replace("-", "_").upper()
        rows.append(f"| `{key}` | `{env}` | `{shown}` | {f.metadata['doc'].replace('|', '/')} |")
    return "\n".join(rows)


def exit_codes() -> str:
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [f"| {code.value} | {code.reason} |" for code in ExitCode]
    return "\n".join(rows)


GENERATORS = {"cli": cli_reference, "config": config_reference, "exit-codes": exit_codes}


def render(page: str, text: str) -> str:
    """`text` (the page named `page`, relative to the repository) with its generated parts made current."""
    for kind in PAGES[page]:
        start, end = MARKERS[kind]
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{page}: markers {start} ... {end} are missing")
        body = GENERATORS[kind]()
        text = pattern.sub(lambda _m, s=start, e=end, b=body: f"{s}\n{b}\n{e}", text)
    return text


def main() -> int:
    for page in PAGES:
        path = REPO / page
        text = path.read_text(encoding="utf-8")
        new = render(page, text)
        if new != text:
            write_text_atomic(path, new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
