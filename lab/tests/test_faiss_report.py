"""The faiss tables of docs/results.md come from the results JSON files (lab/faiss/faissbench/report.py), every wheel row from
slimwheel's own size report and check verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.faissbench import measure as faiss_measure
from lab.faissbench import report as faiss_report

REPO = Path(__file__).resolve().parents[2]
MIB = faiss_report.MIB


def _size_report(size: int, native: list[str], ptx: list[str], none: list[str], tags: list[str]) -> dict[str, Any]:
    cov = (
        [{"cc": c, "served_by": "sass"} for c in native]
        + [{"cc": c, "served_by": "ptx"} for c in ptx]
        + [{"cc": c, "served_by": "none"} for c in none]
    )
    return {
        "wheel": {"bytes": size, "installed_bytes": 2 * size, "tags": tags},
        "targets": ["compute_90", "sm_90"],
        "coverage": cov,
    }


def _wheel(size: int, native: list[str], ptx: list[str], none: list[str], ok: bool) -> dict[str, Any]:
    return {
        "size_report": _size_report(size, native, ptx, none, ["cp310-abi3-manylinux_2_28_x86_64"]),
        "check": {"ok": ok},
    }


def _bench(import_s: float, first: float, flat_qps: float, before: float = 600.0) -> dict[str, Any]:
    mem = {
        "before_import": {"nvml_used_mib": before, "cu_used_mib": None},
        "after_import": {"nvml_used_mib": before + 2, "cu_used_mib": None},
        "after_first_search": {"nvml_used_mib": before + 3000, "cu_used_mib": 2600.0},
    }
    return {
        "import_s": import_s,
        "first_search_s": first,
        "flat": {"qps_median": flat_qps, "agree_with_cpu": 1.0},
        "ivf": {"qps_median": 10 * flat_qps},
        "ivfpq": {"qps_median": 20 * flat_qps},
        "mem": mem,
        "flat_k1024": {"first_s": 0.5, "second_s": 0.01},
        "ivf_k1024": {"first_s": 0.4, "second_s": 0.01},
        "flat_kmax": {"k": 2048, "first_s": 0.7, "second_s": 0.02},
    }


PYPI = {
    "wheels": [_size_report(129 * MIB, ["7.0", "9.0"], ["12.0"], ["6.1"], ["cp310-abi3-manylinux_2_28_x86_64"])],
    "verdicts": [{"ok": False}],
}
HERE = {
    "profiles": {
        "slim": {
            "repaired": _wheel(40 * MIB, ["7.5", "8.0"], [], ["12.1"], True),
            "build": {"seconds": 3600, "cpus": 2},
        }
    }
}
H200 = {
    "machine": {"gpu": "NVIDIA H200", "python": "3.12.3"},
    "params": {"runs": 2, "n": 1000, "nq": 10, "k": 10, "k_max": 2048},
    "profiles": {
        "upstream": {
            "build": {
                "repaired": _wheel(80 * MIB, ["7.5"], ["12.0"], ["5.0"], False),
                "seconds": 600,
                "cpus": 16,
                "cxx": "c++ (Ubuntu 13.3.0) 13.3.0",
            },
            "tests": {"tests": 48, "failures": 0, "errors": 0, "skipped": 1},
            "bench": [_bench(0.4, 0.2, 100.0), _bench(0.6, 0.4, 100.0)],
        },
        "slim": {
            "tests": {"tests": 48, "failures": 1, "errors": 0, "skipped": 1},
            "bench": [_bench(0.3, 0.1, 110.0), {"run": 1, "error": "boom"}],
        },
    },
}


def test_tables_say_where_each_number_comes_from() -> None:
    out = faiss_report.render(PYPI, HERE, H200)
    rows = [line for line in out.splitlines() if line.startswith("| `") or line.startswith("| PyPI")]
    # PyPI first, then upstream before slim; the size table first, then the GPU table
    assert rows[0].startswith(
        "| PyPI `faiss-gpu` 1.15.1 | sm_90 compute_90 | 129.0 | 258.0 | 3.10+ | 7.0, 9.0 | 12.0 | 6.1 | fails |"
    )
    assert rows[1].startswith(
        "| `upstream` | sm_90 compute_90 | 80.0 | 160.0 | 3.10+ | 7.5 | 12.0 | 5.0 | fails | "
        "10 min, 16 cores, H200 machine, c++ (Ubuntu 13.3.0) 13.3.0 |"
    )
    assert rows[2].startswith(
        "| `slim` | sm_90 compute_90 | 40.0 | 80.0 | 3.10+ | 7.5, 8.0 | - | - | passes | 60 min, 2 cores, dev machine |"
    )
    assert "12.1" not in rows[2], "integrated GPUs are not 'not served' for an x86_64 wheel"
    gpu = {r.split("|")[1].strip(): r for r in rows[3:]}
    assert "46 passed, 1 failed, 1 skipped" in gpu["`slim`"]
    assert "| 0.50 | 2 |" in gpu["`upstream`"]  # median import of two runs; NVML delta after import
    assert "| 2 | 0.50 / 0.010 | 0.70 / 0.020 |" in gpu["`upstream`"]  # IVFPQ kQPS; k = 1024; largest k
    assert "largest k = 2048" in out
    # the failed benchmark run is left out of the medians, not counted as zero
    assert "wheel 0.50x, installed 0.50x, import 0.60x, first search 0.33x, Flat QPS 1.10x" in out


def test_a_module_served_only_by_ptx_makes_its_cc_ptx_only() -> None:
    sr = {
        "coverage": [
            {"cc": "9.0", "served_by": "sass", "weakest": {"served_by": "ptx"}},
            {"cc": "8.0", "served_by": "sass", "weakest": None},
            {"cc": "7.0", "served_by": "sass", "weakest": {"served_by": "none"}},
        ]
    }
    assert faiss_report.coverage(sr) == {"native": ["8.0"], "ptx_only": ["9.0"], "none": ["7.0"]}


@given(st.lists(st.sampled_from(["cp310-abi3", "cp311-cp311", "cp312-cp312", "cp313-abi3"]), min_size=1))
def test_python_versions_from_any_tags(tags: list[str]) -> None:
    text = faiss_report.pythons(f"{t}-manylinux_2_28_x86_64" for t in tags)
    for t in set(tags):
        py, abi = t.split("-")
        version = f"3.{py[3:]}"
        assert (f"{version}+" if abi == "abi3" else version) in text.split(", ")


def test_a_test_rerun_replaces_the_tests_and_says_so() -> None:
    rerun = {"profiles": {"slim": {"tests": {"tests": 48, "failures": 0, "errors": 0, "skipped": 1}}}}
    out = faiss_report.render({}, HERE, H200, [("lab/results/h200/rerun.json", rerun)])
    slim = next(line for line in out.splitlines() if line.startswith("| `slim` | 47 passed"))
    assert "re-run: `lab/results/h200/rerun.json`" in slim
    jit = {
        "gpu": "H200",
        "modules": [
            {"ptx": "A.0.sm_75.ptx", "ptx_bytes": 2_000_000, "cold": {"load_s": 6.2}, "cached": {"load_s": 0.0066}},
            {"ptx": "B.0.sm_75.ptx", "ptx_bytes": 27_000_000, "cold": {"error": "x", "timeout_s": 130}, "cached": {}},
        ],
    }
    text = faiss_report.render({}, HERE, H200, [], jit)
    assert "| A | 2.0 | 6.2 | 0.007 |" in text and "| B | 27.0 | > 130 (stopped) | - |" in text


def test_readme_block_is_replaced_whole() -> None:
    readme = f"intro\n{faiss_report.START}\nold\n{faiss_report.END}\nrest\n"
    assert (
        faiss_report.replace_block(readme, "new\n") == f"intro\n{faiss_report.START}\nnew\n{faiss_report.END}\nrest\n"
    )
    with pytest.raises(ValueError, match="faiss-table"):
        faiss_report.replace_block("no markers", "x")


def test_readme_matches_the_results_files() -> None:
    """Drift: regenerate with `python3 lab/faiss/faiss-report.py --write` after new results."""

    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((REPO / name).read_text()) if (REPO / name).is_file() else {}
        return data

    reruns = [(name, load(name)) for name in faiss_report.TEST_RERUNS]
    h200 = load(faiss_report.MAIN_H200)
    table = faiss_report.render(
        load(faiss_report.PYPI),
        load(faiss_report.PROFILES_HERE),
        h200,
        reruns,
        load(faiss_report.JIT),
        load(faiss_report.PTX_RUN),
        load(faiss_report.DLTO),
    )
    assert "PyPI `faiss-gpu` 1.15.1" in table, "the PyPI anchor's results file is missing"
    readme = (REPO / "docs" / "results.md").read_text()
    for start, end, text in (
        (faiss_report.START, faiss_report.END, table),
        (faiss_report.VARIANTS_START, faiss_report.VARIANTS_END, faiss_report.render_variants(h200)),
    ):
        assert start in readme, f"docs/results.md lacks the block {start}"
        block = readme.split(start, 1)[1].split(end, 1)[0]
        assert block.strip() == text.strip()


def test_cuts_are_measured_pairs_and_leave_out_what_is_missing() -> None:
    """Each cut row comes from two measurements; without the earlier run there is no PTX row, never an estimate."""
    mib = faiss_report.MIB
    slim = {
        "repaired": {
            "wheel_size": 57 * mib,
            "targets": ["sm_90"],
            "files": [{"name": "x.libs/libgomp-1.so.1", "compressed": mib}],
        },
        "objects": {"by_target": {"sm_90": 10 * mib}},
    }
    h200 = {"profiles": {"slim": {"build": slim}}}
    earlier = {
        "profiles": {"slim": {"build": {"repaired": {"wheel_size": 67 * mib, "targets": ["sm_90", "compute_120"]}}}}
    }
    here = {
        "profiles": {
            "upstream90": {
                "objects": {"by_target": {"sm_90": 13 * mib}},
                "repaired": {
                    "files": [
                        {"name": "x.libs/libopenblasp-r0.so", "compressed": 11 * mib},
                        {"name": "faiss/libfaiss.so", "compressed": mib},
                    ]
                },
            }
        }
    }
    text = faiss_report.render_cuts(h200, earlier, here)
    assert "57.0 MiB, 17.0 MiB from the 40 MiB target" in text
    assert "| 67.0 | 57.0 | 10.0 |" in text  # PTX
    assert "| 13.0 | 10.0 | 3.0 |" in text  # compression, per target
    assert "| 11.0 | 1.0 | 10.0 |" in text  # vendored BLAS (libgomp stays)
    assert "PTX 12.0" not in faiss_report.render_cuts(h200, {}, here)
    dlto = {"files": ["a.cu", "b.cu"], "arch": "sm_90", "per_object": {"bytes": 4 * mib}, "dlto": {"bytes": 3 * mib}}
    assert "| the 2 k-selection files, sm_90 SASS before compression" in faiss_report.render_cuts(
        h200, earlier, here, dlto
    )
    assert "| 4.0 | 3.0 | 1.0 (25.0%) |" in faiss_report.render_cuts(h200, earlier, here, dlto)
    assert faiss_report.render_cuts({}, earlier, here) == ""


def test_ninja_log_keeps_the_last_build_of_each_cuda_object(tmp_path: Path) -> None:
    (tmp_path / ".ninja_log").write_text(
        "# ninja log v5\n"
        "0\t1000\t1\tfaiss.dir/a.cu.o\tx\n"
        "0\t500\t1\tfaiss.dir/b.cpp.o\tx\n"
        "0\t9000\t1\tfaiss.dir/c.cu.o\tx\n"
        "100\t300\t2\tfaiss.dir/a.cu.o\ty\n"
    )
    r = faiss_measure.ninja_seconds(tmp_path)
    assert r == {"cuda_steps": 2, "sum_of_step_seconds": 9.2, "longest_step": "c.cu.o", "longest_step_seconds": 9.0}
    assert faiss_measure.ninja_seconds(tmp_path / "missing") == {}


def test_one_target_builds_are_compared_with_each_other() -> None:
    h200 = {
        "params": {},
        "profiles": {
            "upstream90": {"bench": [_bench(0.5, 0.2, 100.0)]},
            "probe90": {"bench": [_bench(0.25, 0.1, 50.0)]},
            "slim": {"bench": [_bench(1.0, 0.4, 200.0)]},
        },
    }
    out = faiss_report.render({}, {}, h200)
    assert "`probe90` / `upstream90`: import 0.50x, first search 0.50x, Flat QPS 0.50x" in out
    # no full-coverage upstream run: slim is compared with the sm_90-only upstream build
    assert "`slim` / `upstream90`: import 2.00x, first search 2.00x, Flat QPS 2.00x" in out
    assert "/ `upstream`:" not in out


def test_skip_reasons_are_shown_when_recorded() -> None:
    entry = {
        "tests": {
            "tests": 5,
            "failures": 0,
            "errors": 0,
            "skipped": 3,
            "files": {
                "a.py": {"skip_reasons": {"only if CUVS is compiled in": 2}},
                "b.py": {"skip_reasons": {"multiple GPU only test": 1}},
            },
        }
    }
    assert faiss_report._tests(entry) == (
        "2 passed, 0 failed, 3 skipped (2: only if CUVS is compiled in; 1: multiple GPU only test)"
    )
