"""`slimwheel size-report`: what takes the space in a wheel, which GPUs it runs on, which driver it needs."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from slimwheel.commands._options import format_option
from slimwheel.errors import BadInputError
from slimwheel.inspect.scan import inspect_file

FORMATS = ("table", "json", "markdown")


def emit(text: str, output: Path | None) -> None:
    if output is not None and output.suffix.lower() == ".whl":
        # `-o dist/*.whl` takes the first wheel as the output file and would replace it with the report.
        raise BadInputError(f"-o {output}: a report is never a wheel; refusing to overwrite a .whl file")
    if output is None:
        click.echo(
            text, nl=False, color=True
        )  # colour was decided by render.color_wanted; click would strip it off a tty
    else:
        from slimwheel import fsutil

        fsutil.write_text_atomic(output, text)


def preload(*modules: str) -> Callable[[], None]:
    """What a command imports while its first wheel's members inflate (`inspect_file`'s `meanwhile`)."""

    def load() -> None:
        for module in modules:
            with contextlib.suppress(ImportError):  # the main thread's own import reports it
                importlib.import_module(module)

    return load


@click.command("size-report")
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=Path))
@format_option(
    (*FORMATS, "html"),
    "table",
    help='table: for a terminal; json: versioned ({"schema": 1}), sizes in bytes; markdown: a CI job summary; '
    "html: a self-contained treemap page (files, sections, architectures, modules; no network needed).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to FILE (atomically) instead of standard output.",
)
@click.option("--entries", is_flag=True, help="Table/Markdown: list every fatbin entry, not only totals per arch.")
def command(wheels: tuple[Path, ...], fmt: str, output: Path | None, entries: bool) -> None:
    """Sizes per file, ELF section and fatbin entry; GPU coverage (SASS, PTX JIT, none) and the driver needed.

    WHEELS may also be loose binaries (a built extension, an object file, a .fatbin), reported as a wheel of one
    file: to see where the device code comes from before anything is packaged.

    Sizes: MiB = 2**20 bytes, MB = 10**6 bytes.
    """
    # The renderer (rich, for the table: tens of ms) is imported while the first wheel's members inflate, by this
    # thread (see scan.inspect_wheel on why not by another).
    renderer = "slimwheel.render" if fmt != "html" else "slimwheel.postbuild.treemap"
    reports = [inspect_file(w, meanwhile=preload(renderer) if not i else None) for i, w in enumerate(wheels)]
    from slimwheel import render  # imported above; an import that failed there fails here, as it would have

    if fmt == "json":
        text = render.render_json(reports)
    elif fmt == "markdown":
        text = render.render_markdown(reports, entries=entries)
    elif fmt == "html":
        from slimwheel.postbuild import treemap

        text = treemap.render_html(reports)
    else:
        color = output is None and render.color_wanted(os.environ, tty=sys.stdout.isatty())
        text = render.reports_text(reports, color=color, entries=entries)
    emit(text, output)
