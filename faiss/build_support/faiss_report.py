"""The faiss side-by-side tables of the README, made from the results JSON files alone (no measuring here).

    results/faiss-profiles.json   profiles built on the dev machine (scripts/faiss-profiles.py)
    results/h200/faiss_h200.json  profiles built on the GPU machine, faiss's GPU tests and the benchmark there
                                  (gpu/faiss_check.py via gpu/faiss_h200.sh)

`python3 scripts/faiss-report.py --write` puts the tables between the README's faiss-table markers; a unit test
fails when the README and the JSON files disagree.
"""

from __future__ import annotations

import statistics
from typing import Any

MIB = 1024 * 1024
START = "<!-- faiss-table:start (scripts/faiss-report.py --write; do not edit by hand) -->"
END = "<!-- faiss-table:end -->"
# Integrated aarch64 GPUs: never run an x86_64 wheel, so "not served" leaves them out.
INTEGRATED = {"5.3", "6.2", "7.2", "8.7", "11.0", "12.1"}
ORDER = ("upstream", "slim", "slim-jit", "probe90")


def _wheel_entry(name: str, built_here: dict, h200: dict) -> tuple[dict | None, dict, str]:
    """(measured wheel, build record, where built) for one profile: the dev machine's build if there is one,
    else the GPU machine's."""
    here = built_here.get("profiles", {}).get(name)
    if here and here.get("repaired"):
        b = here.get("build", {})
        return here["repaired"], {**b, "compile_work": here.get("compile_work", {})}, "dev machine"
    there = h200.get("profiles", {}).get(name, {}).get("build")
    if there and there.get("repaired"):
        return there["repaired"], there, "H200 machine"
    return None, {}, "-"


def _median(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def bench_summary(entry: dict) -> dict[str, Any]:
    """Medians over the benchmark's fresh processes (failed runs left out, and counted)."""
    runs = [b for b in entry.get("bench", []) if "error" not in b and not b.get("timed_out")]

    def med(*path: str) -> float | None:
        vals = []
        for b in runs:
            v: Any = b
            for key in path:
                v = v.get(key) if isinstance(v, dict) else None
            vals.append(v)
        return _median(vals)

    def nvml_delta(point: str) -> float | None:
        return _median([
            (b["mem"][point]["nvml_used_mib"] - b["mem"]["before_import"]["nvml_used_mib"])
            if b["mem"].get(point, {}).get("nvml_used_mib") is not None
            and b["mem"]["before_import"].get("nvml_used_mib") is not None else None
            for b in runs
        ])

    return {
        "runs": len(runs), "failed_runs": len(entry.get("bench", [])) - len(runs),
        "import_s": med("import_s"), "first_search_s": med("first_search_s"),
        "flat_qps": med("flat", "qps_median"), "ivf_qps": med("ivf", "qps_median"),
        "flat_agree": med("flat", "agree_with_cpu"),
        "flat_k1024_first_s": med("flat_k1024", "first_s"), "flat_k1024_second_s": med("flat_k1024", "second_s"),
        "ivf_k1024_first_s": med("ivf_k1024", "first_s"), "ivf_k1024_second_s": med("ivf_k1024", "second_s"),
        "mem_import_mib": nvml_delta("after_import"),
        "mem_first_search_mib": med("mem", "after_first_search", "cu_used_mib"),
    }


def _tests(entry: dict) -> str:
    t = entry.get("tests")
    if not t:
        return "-"
    passed = t["tests"] - t["failures"] - t["errors"] - t["skipped"]
    return f"{passed} passed, {t['failures'] + t['errors']} failed, {t['skipped']} skipped"


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def render(built_here: dict, h200: dict) -> str:
    names = [n for n in ORDER if n in built_here.get("profiles", {}) or n in h200.get("profiles", {})]
    names += sorted((set(built_here.get("profiles", {})) | set(h200.get("profiles", {}))) - set(names))
    size_rows, gpu_rows = [], []
    summaries: dict[str, dict] = {}
    for name in names:
        wheel, build, where = _wheel_entry(name, built_here, h200)
        if wheel is not None:
            cov = wheel["coverage"]
            none = [c for c in cov["none"] if c not in INTEGRATED]
            secs = build.get("seconds")
            built = f"{secs / 60:.0f} min, {build.get('cpus')} cores, {where}" if secs else where
            size_rows.append(
                f"| `{name}` | {' '.join(wheel['targets'])} | {wheel['wheel_size'] / MIB:.1f} | "
                f"{wheel['installed_size'] / MIB:.1f} | {', '.join(cov['native']) or '-'} | "
                f"{', '.join(cov['ptx_only']) or '-'} | {', '.join(none) or '-'} | "
                f"{'passes' if wheel['check']['ok'] else 'fails'} | {built} |")
        entry = h200.get("profiles", {}).get(name)
        if entry and (entry.get("bench") or entry.get("tests")):
            s = summaries[name] = bench_summary(entry)
            gpu_rows.append(
                f"| `{name}` | {_tests(entry)} | {_f(s['import_s'], '.2f')} | {_f(s['mem_import_mib'], '.0f')} | "
                f"{_f(s['first_search_s'], '.3f')} | {_f(s['mem_first_search_mib'], '.0f')} | "
                f"{_f(s['flat_qps'] and s['flat_qps'] / 1000, '.1f')} | {_f(s['ivf_qps'] and s['ivf_qps'] / 1000, '.0f')} | "
                f"{_f(s['flat_k1024_first_s'], '.2f')} / {_f(s['flat_k1024_second_s'], '.3f')} | "
                f"{_f(s['ivf_k1024_first_s'], '.2f')} / {_f(s['ivf_k1024_second_s'], '.3f')} |")
    out = []
    if size_rows:
        out += ["| profile | targets | wheel MiB | installed MiB | CCs native | CCs by PTX JIT only | CCs not served "
                "(x86_64) | `check` 60 MiB + 7.5-12.0 | build (wall) |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *size_rows, ""]
    if gpu_rows:
        m = h200.get("machine", {})
        p = h200.get("params", {})
        out += [f"On the H200 ({m.get('gpu', '?')}; Python {m.get('python', '?')}; medians of {p.get('runs', '?')} fresh "
                f"processes per profile; {p.get('n', 0):,} x 128 vectors, {p.get('nq', 0):,} queries, k = {p.get('k')}):",
                "",
                "| profile | faiss GPU tests | import s | GPU MiB after import | first search s | GPU MiB after first "
                "search | flat kQPS | IVF kQPS | k=1024 flat first / second s | k=1024 IVF first / second s |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *gpu_rows, ""]
    base = summaries.get("upstream")
    if base:
        for name, s in summaries.items():
            if name == "upstream":
                continue
            w, _, _ = _wheel_entry(name, built_here, h200)
            wu, _, _ = _wheel_entry("upstream", built_here, h200)
            parts = []
            if w and wu:
                parts.append(f"wheel {w['wheel_size'] / wu['wheel_size']:.2f}x, installed "
                             f"{w['installed_size'] / wu['installed_size']:.2f}x")
            for key, label in (("import_s", "import"), ("first_search_s", "first search"), ("flat_qps", "flat QPS"),
                               ("ivf_qps", "IVF QPS")):
                if s.get(key) and base.get(key):
                    parts.append(f"{label} {s[key] / base[key]:.2f}x")
            out.append(f"`{name}` / `upstream`: " + ", ".join(parts) + ".")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def replace_block(readme: str, table: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"the README has no {START!r} ... {END!r} block")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"
