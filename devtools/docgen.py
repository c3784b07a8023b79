"""The README's generated parts: the CLI reference and the configuration table.

`python -m devtools.docgen` (from the repository root) rewrites them in README.md between their markers; a unit test fails when they drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from slimwheel import config as cfgmod
from slimwheel.cli import cli
from slimwheel.fsutil import write_text_atomic

MARKERS = {
    "cli": ("<!-- cli-reference:start -->", "<!-- cli-reference:end -->"),
    "config": ("<!-- config-reference:start -->", "<!-- config-reference:end -->"),
}


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


def render(readme: str) -> str:
    for kind, body in (("cli", cli_reference()), ("config", config_reference())):
        start, end = MARKERS[kind]
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(readme):
            raise SystemExit(f"README.md: markers {start} ... {end} are missing")
        readme = pattern.sub(lambda _m, s=start, e=end, b=body: f"{s}\n{b}\n{e}", readme)
    return readme


def main() -> int:
    path = Path(__file__).resolve().parent.parent / "README.md"
    text = path.read_text(encoding="utf-8")
    new = render(text)
    if new != text:
        write_text_atomic(path, new)
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
