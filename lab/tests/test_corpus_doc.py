"""docs/corpus.md's table is a rendering of lab/results/corpus.json (lab/bench/corpus.py, issue 22 item 8)."""

from __future__ import annotations

import json

from lab.scriptload import REPO, load_script


def test_corpus_table_is_current() -> None:
    mod = load_script("lab/bench/corpus.py")
    data = json.loads((REPO / "lab/results/corpus.json").read_text(encoding="utf-8"))
    text = (REPO / "docs/corpus.md").read_text(encoding="utf-8")
    assert mod.render_doc(text, data) == text, "run: .venv/bin/python lab/bench/corpus.py --docs"
    assert len(data["wheels"]) >= 9 and all(w["sampled"] or not w["containers"] for w in data["wheels"])
