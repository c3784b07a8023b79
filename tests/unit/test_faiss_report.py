"""The README's faiss tables come from the results JSON files (faiss/build_support/faiss_report.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "faiss" / "build_support"))

import faiss_measure
import faiss_report


def _wheel(size: int, native: list[str], ptx: list[str], none: list[str], ok: bool) -> dict:
    return {"wheel_size": size, "installed_size": 2 * size, "targets": ["sm_90"],
            "coverage": {"native": native, "ptx_only": ptx, "none": none}, "check": {"ok": ok}}


def _bench(import_s: float, first: float, flat_qps: float, before: float = 600.0) -> dict:
    mem = {"before_import": {"nvml_used_mib": before, "cu_used_mib": None},
           "after_import": {"nvml_used_mib": before + 2, "cu_used_mib": None},
           "after_first_search": {"nvml_used_mib": before + 3000, "cu_used_mib": 2600.0}}
    return {"import_s": import_s, "first_search_s": first, "flat": {"qps_median": flat_qps, "agree_with_cpu": 1.0},
            "ivf": {"qps_median": 10 * flat_qps}, "mem": mem,
            "flat_k1024": {"first_s": 0.5, "second_s": 0.01}, "ivf_k1024": {"first_s": 0.4, "second_s": 0.01}}


HERE = {"profiles": {"slim": {"repaired": _wheel(40 * faiss_report.MIB, ["7.5", "8.0"], [], ["12.1"], True),
                              "build": {"seconds": 3600, "cpus": 2}}}}
H200 = {"machine": {"gpu": "NVIDIA H200", "python": "3.12.3"}, "params": {"runs": 2, "n": 1000, "nq": 10, "k": 10},
        "profiles": {
            "upstream": {"build": {"repaired": _wheel(80 * faiss_report.MIB, ["7.5"], ["12.0"], ["5.0"], False),
                                   "seconds": 600, "cpus": 16},
                         "tests": {"tests": 48, "failures": 0, "errors": 0, "skipped": 1},
                         "bench": [_bench(0.4, 0.2, 100.0), _bench(0.6, 0.4, 100.0)]},
            "slim": {"tests": {"tests": 48, "failures": 1, "errors": 0, "skipped": 1},
                     "bench": [_bench(0.3, 0.1, 110.0), {"run": 1, "error": "boom"}]}}}


def test_tables_say_where_each_number_comes_from() -> None:
    out = faiss_report.render(HERE, H200)
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    # upstream before slim, size table first, then the GPU table
    assert rows[0].startswith("| `upstream` | sm_90 | 80.0 | 160.0 | 7.5 | 12.0 | 5.0 | fails | 10 min, 16 cores, H200 machine |")
    assert rows[1].startswith("| `slim` | sm_90 | 40.0 | 80.0 | 7.5, 8.0 | - | - | passes | 60 min, 2 cores, dev machine |")
    assert "12.1" not in rows[1], "integrated GPUs are not 'not served' for an x86_64 wheel"
    gpu = {r.split("|")[1].strip(): r for r in rows[2:]}
    assert "46 passed, 1 failed, 1 skipped" in gpu["`slim`"]
    assert "| 0.50 | 2 |" in gpu["`upstream`"]  # median import of two runs; NVML delta after import
    # the failed benchmark run is left out of the medians, not counted as zero
    assert "wheel 0.50x, installed 0.50x, import 0.60x, first search 0.33x, flat QPS 1.10x" in out


def test_a_test_rerun_replaces_the_tests_and_says_so() -> None:
    rerun = {"profiles": {"slim": {"tests": {"tests": 48, "failures": 0, "errors": 0, "skipped": 1}}}}
    out = faiss_report.render(HERE, H200, [("results/h200/rerun.json", rerun)])
    slim = next(line for line in out.splitlines() if line.startswith("| `slim` | 47 passed"))
    assert "re-run: `results/h200/rerun.json`" in slim
    jit = {"gpu": "H200", "modules": [
        {"ptx": "A.0.sm_75.ptx", "ptx_bytes": 2_000_000, "cold": {"load_s": 6.2}, "cached": {"load_s": 0.0066}},
        {"ptx": "B.0.sm_75.ptx", "ptx_bytes": 27_000_000, "cold": {"error": "x", "timeout_s": 130}, "cached": {}}]}
    text = faiss_report.render(HERE, H200, [], jit)
    assert "| A | 2.0 | 6.2 | 0.007 |" in text and "| B | 27.0 | > 130 (stopped) | - |" in text


def test_readme_block_is_replaced_whole() -> None:
    readme = f"intro\n{faiss_report.START}\nold\n{faiss_report.END}\nrest\n"
    assert faiss_report.replace_block(readme, "new\n") == f"intro\n{faiss_report.START}\nnew\n{faiss_report.END}\nrest\n"
    with pytest.raises(ValueError, match="faiss-table"):
        faiss_report.replace_block("no markers", "x")


def test_readme_matches_the_results_files() -> None:
    """Drift: regenerate with `python3 scripts/faiss-report.py --write` after new results."""
    def load(name: str) -> dict:
        return json.loads((REPO / name).read_text()) if (REPO / name).is_file() else {}

    here = load("results/faiss-profiles.json")
    reruns = [(name, load(name)) for name in faiss_report.TEST_RERUNS]
    table = faiss_report.render(here, load(faiss_report.MAIN_H200), reruns, load(faiss_report.JIT))
    readme = (REPO / "README.md").read_text()
    assert faiss_report.START in readme, "README.md lacks the faiss table block"
    block = readme.split(faiss_report.START, 1)[1].split(faiss_report.END, 1)[0]
    assert block.strip() == table.strip()


def test_ninja_log_keeps_the_last_build_of_each_cuda_object(tmp_path: Path) -> None:
    (tmp_path / ".ninja_log").write_text(
        "# ninja log v5\n"
        "0\t1000\t1\tfaiss.dir/a.cu.o\tx\n"
        "0\t500\t1\tfaiss.dir/b.cpp.o\tx\n"
        "0\t9000\t1\tfaiss.dir/c.cu.o\tx\n"
        "100\t300\t2\tfaiss.dir/a.cu.o\ty\n")
    r = faiss_measure.ninja_seconds(tmp_path)
    assert r == {"cuda_steps": 2, "sum_of_step_seconds": 9.2, "longest_step": "c.cu.o", "longest_step_seconds": 9.0}
    assert faiss_measure.ninja_seconds(tmp_path / "missing") == {}
