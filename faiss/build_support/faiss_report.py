"""The faiss side-by-side tables of the README, made from the results JSON files alone (no measuring here).

    results/faiss-profiles.json   profiles built on the dev machine (scripts/faiss-profiles.py)
    results/h200/faiss_h200.json  profiles built on the GPU machine, faiss's GPU tests and the benchmark there
                                  (gpu/faiss_check.py via gpu/faiss_h200.sh)
    results/h200/faiss_h200_*tests*.json  later runs of faiss's GPU tests alone (`--runs 0`): their results replace
                                  the main run's for the profiles they cover, and the table says so
    results/h200/jit_cost_h200.json  the driver's JIT time of PTX-only modules (gpu/jit_cost.py)

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
MAIN_H200 = "results/h200/faiss_h200.json"
TEST_RERUNS = ("results/h200/faiss_h200_slim_tests.json",)
JIT = "results/h200/jit_cost_h200.json"


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
    files = t.get("files", {})
    crashed = [f for f, x in files.items() if x.get("crashed")]
    timed_out = [f for f, x in files.items() if x.get("timed_out")]
    # A file that crashed or timed out counts once in errors, however many tests it holds: name it instead.
    failed = t["failures"] + t["errors"] - len(crashed) - len(timed_out)
    passed = t["tests"] - t["failures"] - (t["errors"] - len(crashed) - len(timed_out)) - t["skipped"]
    text = f"{passed} passed, {failed} failed, {t['skipped']} skipped"
    if crashed:
        text += "; crashed: " + ", ".join(f"`{f}`" for f in crashed)
    if timed_out:
        text += "; timed out: " + ", ".join(f"`{f}`" for f in timed_out)
    return text


def _target_key(t: str) -> tuple[int, int]:
    kind, _, arch = t.partition("_")
    digits = "".join(ch for ch in arch if ch.isdigit())
    return (kind == "compute", int(digits or 0))


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _with_reruns(h200: dict, reruns: list[tuple[str, dict]]) -> tuple[dict, dict[str, str]]:
    """The main run with the tests of later test-only runs put in for the profiles they cover."""
    merged = {**h200, "profiles": {k: dict(v) for k, v in h200.get("profiles", {}).items()}}
    source: dict[str, str] = {}
    for label, run in reruns:
        for name, entry in run.get("profiles", {}).items():
            if entry.get("tests") and name in merged["profiles"]:
                merged["profiles"][name]["tests"] = entry["tests"]
                source[name] = label
    return merged, source


def render_jit(jit: dict) -> str:
    if not jit.get("modules"):
        return ""
    rows = ["| PTX module (k > 256) | PTX MB | first load, JIT s | from the JIT cache s |", "| --- | --- | --- | --- |"]
    for m in jit["modules"]:
        cold = m["cold"].get("load_s")
        cached = m["cached"].get("load_s")
        cold_text = f"{cold:.1f}" if cold is not None else f"> {m['cold'].get('timeout_s', '?')} (stopped)"
        rows.append(f"| {m['ptx'].split('.')[0]} | {m['ptx_bytes'] / 1e6:.1f} | {cold_text} | "
                    f"{'-' if cached is None else f'{cached:.3f}'} |")
    return "\n".join(rows) + "\n"


def render(built_here: dict, h200: dict, reruns: list[tuple[str, dict]] | None = None, jit: dict | None = None) -> str:
    h200, rerun_source = _with_reruns(h200, reruns or [])
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
            if build.get("wall_note"):
                built += f" ({build['wall_note']})"
            size_rows.append(
                f"| `{name}` | {' '.join(sorted(wheel['targets'], key=_target_key))} | {wheel['wheel_size'] / MIB:.1f} | "
                f"{wheel['installed_size'] / MIB:.1f} | {', '.join(cov['native']) or '-'} | "
                f"{', '.join(cov['ptx_only']) or '-'} | {', '.join(none) or '-'} | "
                f"{'passes' if wheel['check']['ok'] else 'fails'} | {built} |")
        entry = h200.get("profiles", {}).get(name)
        if entry and (entry.get("bench") or entry.get("tests")):
            s = summaries[name] = bench_summary(entry)
            tests = _tests(entry) + (f" (re-run: `{rerun_source[name]}`)" if name in rerun_source else "")
            gpu_rows.append(
                f"| `{name}` | {tests} | {_f(s['import_s'], '.2f')} | {_f(s['mem_import_mib'], '.0f')} | "
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
    if jit and jit.get("modules"):
        out += [f"The driver's JIT of the `slim-jit` profile's PTX-only k > 256 modules ({jit.get('gpu', '?')}; "
                "one fresh process per load):", "", render_jit(jit)]
    return "\n".join(out).rstrip() + "\n"


def replace_block(readme: str, table: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"the README has no {START!r} ... {END!r} block")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"
