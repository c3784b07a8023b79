"""docs/corpus.md's tables are renderings of lab/results/corpus.json (lab/bench/corpus.py, issue 22 item 8) and of
lab/results/repair-agreement.json (lab/bench/repair_agreement.py)."""

from __future__ import annotations

import json

from lab.scriptload import REPO, load_script


def test_corpus_table_is_current() -> None:
    mod = load_script("lab/bench/corpus.py")
    data = json.loads((REPO / "lab/results/corpus.json").read_text(encoding="utf-8"))
    text = (REPO / "docs/corpus.md").read_text(encoding="utf-8")
    assert mod.render_doc(text, data) == text, "run: .venv/bin/python lab/bench/corpus.py --docs"
    assert len(data["wheels"]) >= 9 and all(w["sampled"] or not w["containers"] for w in data["wheels"])


def test_repair_agreement_table_is_current() -> None:
    mod = load_script("lab/bench/repair_agreement.py")
    data = json.loads((REPO / "lab/results/repair-agreement.json").read_text(encoding="utf-8"))
    text = (REPO / "docs/corpus.md").read_text(encoding="utf-8")
    assert mod.BEGIN in text and mod.render_doc(text, data) == text, (
        "run: .venv/bin/python lab/bench/repair_agreement.py --docs"
    )
    # every row's verdict is the one `agrees` gives its facts
    assert data["wheels"] and all(r["agrees"] == mod.agrees(r) for r in data["wheels"])
