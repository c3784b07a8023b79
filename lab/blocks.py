"""One way to put generated text between two marker lines of a document (README.md, docs/nvrtc.md): used by
devtools/results_tables.py, lab/bench/nvrtc-report.py and lab/faiss/faissbench/report.py."""

from __future__ import annotations


def replace_between(text: str, start: str, end: str, body: str) -> str:
    """`text` with what lies between the `start` and `end` markers replaced by `body` (which ends with a newline).
    ValueError when either marker is missing."""
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}{end}{tail}"
