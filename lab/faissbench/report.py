"""The faiss side-by-side tables of docs/results.md, made from the results JSON files alone (no measuring here).

    lab/results/faiss-gpu-1.15.1-pypi.json  PyPI's faiss-gpu 1.15.1: `slimwheel check --format json` (verdict and size
                                  report) of the downloaded wheel
    lab/results/faiss-profiles.json   profiles built on the dev machine (lab/faiss/faiss-profiles.py)
    lab/results/h200/faiss_h200.json  profiles built on the GPU machine, faiss's GPU tests and the benchmark there
                                  (lab/gpu/faiss_check.py via lab/gpu/faiss_h200.sh)
    lab/results/h200/faiss_jit_cost.json  the driver's JIT time of PTX-only modules (lab/gpu/jit_cost.py), when measured
    lab/results/h200/faiss_h200_ptx120.json  the previous H200 run, whose slim build planned PTX 12.0: the PTX cut's
                                  "before"
    lab/results/faiss-dlto-probe.json device LTO on the k-selection files (3c1c548:scripts/faiss-dlto-probe.py, this machine)

Every wheel row is read from slimwheel's own JSON (the size report and the check verdict), whoever built the wheel.
`python3 lab/faiss/faiss-report.py --write` puts the tables between docs/results.md's faiss-table markers; a unit test
fails when the page and the JSON files disagree.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from lab.blocks import replace_between

MIB = 1024 * 1024
START = "<!-- faiss-table:start (lab/faiss/faiss-report.py --write; do not edit by hand) -->"
END = "<!-- faiss-table:end -->"
VARIANTS_START = "<!-- faiss-variants:start (lab/faiss/faiss-report.py --write; do not edit by hand) -->"
VARIANTS_END = "<!-- faiss-variants:end -->"
# Integrated aarch64 GPUs: never run an x86_64 wheel, so "not served" leaves them out.
INTEGRATED = {"5.3", "6.2", "7.2", "8.7", "11.0", "12.1"}
ORDER = ("upstream", "slim", "slim-jit", "upstream90", "probe90")
PYPI = "lab/results/faiss-gpu-1.15.1-pypi.json"
PROFILES_HERE = "lab/results/faiss-profiles.json"
MAIN_H200 = "lab/results/h200/faiss_h200.json"
# Later runs of faiss's GPU tests alone (`--runs 0`): their results replace the main run's for the profiles they
# cover, and the table says so. None yet for faiss 1.15.
TEST_RERUNS: tuple[str, ...] = ()
JIT = "lab/results/h200/faiss_jit_cost.json"
PTX_RUN = "lab/results/h200/faiss_h200_ptx120.json"
DLTO = "lab/results/faiss-dlto-probe.json"
TARGET_MIB = 40
# Each profile's runtime is compared with the upstream-style build of the same scope, else with the sm_90-only one
# (on a Hopper GPU both run sm_90 cubins).
RATIO_BASE = {"slim": ("upstream", "upstream90"), "slim-jit": ("upstream", "upstream90"), "probe90": ("upstream90",)}


def coverage(size_report: dict[str, Any]) -> dict[str, list[str]]:
    """CCs served natively, only by PTX JIT, or not at all, by the wheel's weakest fatbin for each CC (a CC one
    module serves only through PTX is PTX-only for the wheel)."""
    out: dict[str, list[str]] = {"native": [], "ptx_only": [], "none": []}
    for row in size_report["coverage"]:
        how = (row.get("weakest") or {}).get("served_by") or row["served_by"]
        out[{"sass": "native", "ptx": "ptx_only"}.get(how, "none")].append(row["cc"])
    return out


def pythons(tags: Iterable[str]) -> str:
    """The CPython versions one wheel serves, from its tags: cp310-abi3 -> 3.10+, cp312-cp312 -> 3.12."""
    served: set[str] = set()
    for tag in tags:
        py, abi, _ = tag.split("-", 2)
        version = f"{py[2]}.{py[3:]}" if py.startswith("cp") and len(py) > 3 else py
        served.add(f"{version}+" if abi == "abi3" else version)
    return ", ".join(sorted(served)) or "-"


def _h200_build(h200: dict[str, Any], name: str) -> dict[str, Any]:
    build: dict[str, Any] = h200.get("profiles", {}).get(name, {}).get("build") or {}
    return build


def wheel_rows(pypi: dict[str, Any], here: dict[str, Any], h200: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per wheel: PyPI's, then each profile built here or (else) on the GPU machine."""
    rows: list[dict[str, Any]] = []
    if pypi.get("wheels"):
        rows.append(
            {
                "name": "PyPI faiss-gpu 1.15.1",
                "size_report": pypi["wheels"][0],
                "check": pypi["verdicts"][0],
                "built": "upstream's release (CUDA 12)",
                "label": "PyPI `faiss-gpu` 1.15.1",
            }
        )
    names = [n for n in ORDER if n in here.get("profiles", {}) or n in h200.get("profiles", {})]
    names += sorted((set(here.get("profiles", {})) | set(h200.get("profiles", {}))) - set(names))
    for name in names:
        entry = here.get("profiles", {}).get(name, {})
        wheel, build, where = entry.get("repaired"), entry.get("build", {}), "dev machine"
        if not wheel:
            build = _h200_build(h200, name)
            wheel, where = build.get("repaired"), "H200 machine"
        if not wheel:
            continue
        secs = build.get("seconds")
        built = f"{secs / 60:.0f} min, {build.get('cpus')} cores, {where}" if secs else where
        if build.get("cxx"):
            built += f", {build['cxx']}"
        rows.append(
            {
                "name": name,
                "size_report": wheel["size_report"],
                "check": wheel["check"],
                "built": built,
                "label": f"`{name}`",
            }
        )
    return rows


def _target_key(t: str) -> tuple[bool, int]:
    kind, _, arch = t.partition("_")
    digits = "".join(ch for ch in arch if ch.isdigit())
    return (kind == "compute", int(digits or 0))


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def bench_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """Medians over the benchmark's fresh processes (failed runs left out, and counted)."""
    runs = [b for b in entry.get("bench", []) if "error" not in b and not b.get("timed_out")]

    def med(*path: str) -> float | None:
        vals: list[float | None] = []
        for b in runs:
            v: Any = b
            for key in path:
                v = v.get(key) if isinstance(v, dict) else None
            vals.append(v)
        return _median(vals)

    def nvml_delta(point: str) -> float | None:
        return _median(
            [
                (b["mem"][point]["nvml_used_mib"] - b["mem"]["before_import"]["nvml_used_mib"])
                if b["mem"].get(point, {}).get("nvml_used_mib") is not None
                and b["mem"]["before_import"].get("nvml_used_mib") is not None
                else None
                for b in runs
            ]
        )

    return {
        "runs": len(runs),
        "failed_runs": len(entry.get("bench", [])) - len(runs),
        "import_s": med("import_s"),
        "first_search_s": med("first_search_s"),
        "flat_qps": med("flat", "qps_median"),
        "ivf_qps": med("ivf", "qps_median"),
        "ivfpq_qps": med("ivfpq", "qps_median"),
        "flat_agree": med("flat", "agree_with_cpu"),
        "flat_k1024_first_s": med("flat_k1024", "first_s"),
        "flat_k1024_second_s": med("flat_k1024", "second_s"),
        "ivf_k1024_first_s": med("ivf_k1024", "first_s"),
        "ivf_k1024_second_s": med("ivf_k1024", "second_s"),
        "flat_kmax_first_s": med("flat_kmax", "first_s"),
        "flat_kmax_second_s": med("flat_kmax", "second_s"),
        "mem_import_mib": nvml_delta("after_import"),
        "mem_first_search_mib": med("mem", "after_first_search", "cu_used_mib"),
    }


def _verdict(check: dict[str, Any] | None) -> str:
    """A `slimwheel check` verdict (its JSON) in a table cell."""
    return "passes" if (check or {}).get("ok") else "fails"


def _tests(entry: dict[str, Any]) -> str:
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
    reasons: Counter[str] = Counter()
    for x in files.values():  # recorded by lab/gpu/faiss_check.py since the fifth session
        reasons.update(x.get("skip_reasons", {}))
    if reasons:
        text += " (" + "; ".join(f"{n}: {why}" for why, n in reasons.most_common()) + ")"
    if crashed:
        text += "; crashed: " + ", ".join(f"`{f}`" for f in crashed)
    if timed_out:
        text += "; timed out: " + ", ".join(f"`{f}`" for f in timed_out)
    return text


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _with_reruns(
    h200: dict[str, Any], reruns: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The main run with the tests of later test-only runs put in for the profiles they cover."""
    merged = {**h200, "profiles": {k: dict(v) for k, v in h200.get("profiles", {}).items()}}
    source: dict[str, str] = {}
    for label, run in reruns:
        for name, entry in run.get("profiles", {}).items():
            if entry.get("tests") and name in merged["profiles"]:
                merged["profiles"][name]["tests"] = entry["tests"]
                source[name] = label
    return merged, source


def render_jit(jit: dict[str, Any]) -> str:
    if not jit.get("modules"):
        return ""
    rows = ["| PTX module (k > 256) | PTX MB | first load, JIT s | from the JIT cache s |", "| --- | --- | --- | --- |"]
    for m in jit["modules"]:
        cold = m["cold"].get("load_s")
        cached = m["cached"].get("load_s")
        cold_text = f"{cold:.1f}" if cold is not None else f"> {m['cold'].get('timeout_s', '?')} (stopped)"
        rows.append(
            f"| {m['ptx'].split('.')[0]} | {m['ptx_bytes'] / 1e6:.1f} | {cold_text} | "
            f"{'-' if cached is None else f'{cached:.3f}'} |"
        )
    return "\n".join(rows) + "\n"


def _target_order(t: str) -> tuple[bool, int]:
    return _target_key(t)


def render_bytes(h200: dict[str, Any], profile: str = "slim") -> str:
    """Where a built wheel's device code goes (per CUDA object, as compressed in the wheel) and what the cuts measured
    on it saved: issue 11's road to 40 MiB. Only what the H200 run measured; nothing estimated is shown as measured."""
    build = h200.get("profiles", {}).get(profile, {}).get("build", {})
    objs, repaired = build.get("objects"), build.get("repaired")
    if not objs or not repaired or "all" not in objs:
        return ""
    stored = sum(x["stored"] for x in objs["all"])
    raw = sum(x["uncompressed"] for x in objs["all"])
    wheel = repaired["wheel_size"]
    out = [
        f"Where the `{profile}` wheel's {wheel / MIB:.1f} MiB go (H200 build): the device code of its "
        f"{objs['objects']} CUDA objects, {stored / MIB:.1f} MiB compressed ({raw / MIB:.1f} MiB uncompressed), "
        "before the link into the module:",
        "",
        "| part | MiB (objects, compressed) | share of device code |",
        "| --- | ---: | ---: |",
    ]
    for target, n in sorted(objs["by_target"].items(), key=lambda kv: _target_order(kv[0])):
        out.append(f"| `{target}` | {n / MIB:.1f} | {n / stored:.0%} |")
    for group, n in objs["groups"].items():
        out.append(f"| {group} | {n / MIB:.1f} | {n / stored:.0%} |")
    lk = objs.get("large_k_only", {})
    if lk.get("objects"):
        out.append(
            f"| the {lk['objects']} files that serve only k > 256 | {lk['stored'] / MIB:.1f} | "
            f"{lk['stored'] / stored:.0%} |"
        )
    top = sorted(objs["all"], key=lambda x: -x["stored"])[:4]
    out.append(
        "| largest: "
        + ", ".join(f"{x['object']}" for x in top)
        + " | "
        + ", ".join(f"{x['stored'] / MIB:.1f}" for x in top)
        + " | |"
    )
    out.append("")
    return "\n".join(out)


def _stored(files: list[dict[str, Any]], prefixes: tuple[str, ...]) -> int:
    return sum(f["compressed"] for f in files if f["name"].split("/")[-1].startswith(prefixes))


def render_cuts(
    h200: dict[str, Any], ptx_run: dict[str, Any], here: dict[str, Any], dlto: dict[str, Any] | None = None
) -> str:
    """Issue 11's road to 40 MiB: each change measured (two builds, or the same part of two builds), what it saved,
    and the parts not cut yet with their measured size. Rows whose data is missing are left out, never estimated."""
    slim = _h200_build(h200, "slim")
    wheel = (slim.get("repaired") or {}).get("wheel_size")
    if not wheel:
        return ""
    rows: list[str] = []
    before = _h200_build(ptx_run, "slim").get("repaired") or {}
    if before.get("wheel_size") and "compute_120" in before.get("targets", []):
        rows.append(
            f'| PTX 12.0 out of the plan (`ptx = "none"`) | the `slim` wheel, built on the H200 with and '
            f"without it | {before['wheel_size'] / MIB:.1f} | {wheel / MIB:.1f} | "
            f"{(before['wheel_size'] - wheel) / MIB:.1f} |"
        )
    up = here.get("profiles", {}).get("upstream90", {})
    up_sm90 = (up.get("objects") or {}).get("by_target", {}).get("sm_90")
    slim_sm90 = (slim.get("objects") or {}).get("by_target", {}).get("sm_90")
    if up_sm90 and slim_sm90:
        rows.append(
            f"| `size` compression for upstream's `-Xfatbin=-compress-all` | the sm_90 device code of the "
            f"same 182 objects (`upstream90` here, `slim` on the H200), per SASS target | "
            f"{up_sm90 / MIB:.1f} | {slim_sm90 / MIB:.1f} | {(up_sm90 - slim_sm90) / MIB:.1f} |"
        )
    up_files = (up.get("repaired") or {}).get("files", [])
    slim_files = (slim.get("repaired") or {}).get("files", [])
    vendored = ("libopenblas", "libgfortran", "libquadmath", "libgomp")
    if up_files and slim_files:
        a, b = _stored(up_files, vendored), _stored(slim_files, vendored)
        rows.append(
            f"| BLAS from the `scipy-openblas32` wheel, not vendored | the vendored OpenBLAS, gfortran, "
            f"quadmath and gomp (`upstream90`) vs gomp alone (`slim`), stored | {a / MIB:.1f} | "
            f"{b / MIB:.1f} | {(a - b) / MIB:.1f} |"
        )
    if dlto and dlto.get("per_object", {}).get("bytes") and dlto.get("dlto", {}).get("bytes"):
        b, c = dlto["per_object"]["bytes"], dlto["dlto"]["bytes"]
        rows.append(
            f"| device LTO (`-rdc=true -dlto`), did not pay | the {len(dlto['files'])} k-selection files, "
            f"{dlto['arch']} SASS before compression (`3c1c548:scripts/faiss-dlto-probe.py`) | {b / MIB:.1f} | "
            f"{c / MIB:.1f} | {(b - c) / MIB:.1f} ({(b - c) / b:.1%}) |"
        )
    out = [
        f"What each measured change saved, and what is left: the `slim` wheel is {wheel / MIB:.1f} MiB, "
        f"{wheel / MIB - TARGET_MIB:.1f} MiB from the {TARGET_MIB} MiB target.",
        "",
        "| change | measured on | before MiB | after MiB | saved MiB |",
        "| --- | --- | ---: | ---: | ---: |",
        *rows,
    ]
    derived = h200.get("derived", {}).get("slim-sm90", {}).get("report", {})
    dropped = sorted(
        (d for f in derived.get("files", []) for d in f.get("dropped", []) if d["kind"] == "sass"),
        key=lambda d: int(d["arch"]),
    )
    kept = derived.get("sizes", {}).get("after_fatbin_bytes")
    if dropped:
        costs = ", ".join(f"{d['arch']} {d['bytes'] / MIB:.1f}" for d in dropped)
        out += [
            "",
            "Not cut, measured: each SASS target costs (stored bytes `slimwheel slim` dropped from the real "
            f"wheel) {costs}" + (f", and 90 (what the 9.0 wheel kept) {kept / MIB:.1f}" if kept else "") + " MiB.",
        ]
    lk = (slim.get("objects") or {}).get("large_k_only", {})
    if lk.get("objects"):
        out += [
            f"The {lk['objects']} files that serve only k > 256 hold {lk['stored'] / MIB:.1f} MiB of the objects' "
            "device code (table above): the cut that could reach the target (runtime compilation of those "
            "kernels, `docs/nvrtc.md`), not built yet."
        ]
    return "\n".join(out) + "\n"


def render_variants(h200: dict[str, Any], profile: str = "slim") -> str:
    """The built wheel, slimmed to 9.0 and split per GPU family on the H200 (issue 16's proof), with the faiss GPU
    tests of the ones that GPU can run."""
    derived = h200.get("derived", {})
    var = derived.get("variants", {}).get("report", {})
    sm90 = derived.get("slim-sm90", {}).get("report", {})
    if not var.get("universal"):
        return ""
    profiles = h200.get("profiles", {})
    uni = var["universal"]

    def row(label: str, targets: list[str], size: int, check: dict[str, Any] | None, tests: str) -> str:
        return (
            f"| {label} | {' '.join(targets)} | {size / MIB:.1f} | {size / uni['bytes']:.2f}x | "
            f"{_verdict(check)} | {tests} |"
        )

    rows = [
        "| wheel | targets | zip MiB | vs universal | `check` (its GPUs required) | faiss GPU tests (H200) |",
        "| --- | --- | ---: | ---: | --- | --- |",
        row(
            f"universal (`{profile}`)",
            uni["targets"],
            uni["bytes"],
            (_h200_build(h200, profile).get("repaired") or {}).get("check"),
            _tests(profiles.get(profile, {})),
        ),
    ]
    if sm90.get("sizes"):
        rows.append(
            row(
                "slimmed to 9.0 (`slimwheel slim --archs 9.0`)",
                sm90["targets_after"],
                sm90["sizes"]["after_bytes"],
                sm90.get("check"),
                _tests(profiles.get("slim-sm90", {})),
            )
        )
    for v in var.get("variants", []):
        label = f"variant-{v['label']}"
        tests = _tests(profiles[label]) if label in profiles else "not run (another GPU family)"
        rows.append(
            row(
                f"variant `{v['label']}` ({', '.join(v['gpus'])})",
                v["targets"],
                v["sizes"]["after_bytes"],
                v.get("check"),
                tests,
            )
        )
    return "\n".join(rows) + "\n"


def render(
    pypi: dict[str, Any],
    built_here: dict[str, Any],
    h200: dict[str, Any],
    reruns: list[tuple[str, dict[str, Any]]] | None = None,
    jit: dict[str, Any] | None = None,
    ptx_run: dict[str, Any] | None = None,
    dlto: dict[str, Any] | None = None,
) -> str:
    h200, rerun_source = _with_reruns(h200, reruns or [])
    rows = wheel_rows(pypi, built_here, h200)
    out: list[str] = []
    if rows:
        out += [
            "| wheel | targets | wheel MiB | installed MiB | Python | CCs native | CCs by PTX JIT only | CCs not "
            "served (x86_64) | `check` 60 MiB + 7.5-12.0 | built |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            sr = r["size_report"]
            cov = coverage(sr)
            none = [c for c in cov["none"] if c not in INTEGRATED]
            out.append(
                f"| {r['label']} | {' '.join(sorted(sr['targets'], key=_target_key))} | "
                f"{sr['wheel']['bytes'] / MIB:.1f} | {sr['wheel']['installed_bytes'] / MIB:.1f} | "
                f"{pythons(sr['wheel']['tags'])} | {', '.join(cov['native']) or '-'} | "
                f"{', '.join(cov['ptx_only']) or '-'} | {', '.join(none) or '-'} | "
                f"{_verdict(r['check'])} | {r['built']} |"
            )
        out.append("")
    gpu_rows: list[str] = []
    summaries: dict[str, dict[str, Any]] = {}
    for name, entry in h200.get("profiles", {}).items():
        if not (entry.get("bench") or entry.get("tests")):
            continue
        s = summaries[name] = bench_summary(entry)
        tests = _tests(entry) + (f" (re-run: `{rerun_source[name]}`)" if name in rerun_source else "")
        gpu_rows.append(
            f"| `{name}` | {tests} | {_f(s['import_s'], '.2f')} | {_f(s['mem_import_mib'], '.0f')} | "
            f"{_f(s['first_search_s'], '.3f')} | {_f(s['mem_first_search_mib'], '.0f')} | "
            f"{_f(s['flat_qps'] and s['flat_qps'] / 1000, '.1f')} | {_f(s['ivf_qps'] and s['ivf_qps'] / 1000, '.0f')} | "
            f"{_f(s['ivfpq_qps'] and s['ivfpq_qps'] / 1000, '.0f')} | "
            f"{_f(s['flat_k1024_first_s'], '.2f')} / {_f(s['flat_k1024_second_s'], '.3f')} | "
            f"{_f(s['flat_kmax_first_s'], '.2f')} / {_f(s['flat_kmax_second_s'], '.3f')} |"
        )
    if gpu_rows:
        m = h200.get("machine", {})
        p = h200.get("params", {})
        out += [
            f"On the H200 ({m.get('gpu', '?')}; Python {m.get('python', '?')}; medians of {p.get('runs', '?')} fresh "
            f"processes per profile; {p.get('n', 0):,} x 128 vectors, {p.get('nq', 0):,} queries, k = {p.get('k')}; "
            f"largest k = {p.get('k_max', '?')}):",
            "",
            "| profile | faiss GPU tests | import s | GPU MiB after import | first search s | GPU MiB after first "
            "search | Flat kQPS | IVFFlat kQPS | IVFPQ kQPS | k=1024 Flat first / second s | largest k Flat first / "
            "second s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *gpu_rows,
            "",
        ]
    sizes = {r["name"]: r["size_report"]["wheel"] for r in rows}
    ratios = []
    for name, s in summaries.items():
        base_name = next((b for b in RATIO_BASE.get(name, ()) if b in summaries), None)
        if base_name is None:
            continue
        base = summaries[base_name]
        parts = []
        if name in sizes and base_name in sizes:
            parts.append(
                f"wheel {sizes[name]['bytes'] / sizes[base_name]['bytes']:.2f}x, installed "
                f"{sizes[name]['installed_bytes'] / sizes[base_name]['installed_bytes']:.2f}x"
            )
        for key, label in (
            ("import_s", "import"),
            ("first_search_s", "first search"),
            ("flat_qps", "Flat QPS"),
            ("ivf_qps", "IVFFlat QPS"),
            ("ivfpq_qps", "IVFPQ QPS"),
        ):
            if s.get(key) and base.get(key):
                parts.append(f"{label} {s[key] / base[key]:.2f}x")
        ratios.append(f"`{name}` / `{base_name}`: " + ", ".join(parts) + ".")
    if ratios:
        out += [*ratios, ""]
    bytes_table = render_bytes(h200)
    if bytes_table:
        out += [bytes_table]
    cuts = render_cuts(h200, ptx_run or {}, built_here, dlto)
    if cuts:
        out += [cuts]
    if jit and jit.get("modules"):
        out += [
            f"The driver's JIT of the `slim-jit` profile's PTX-only k > 256 modules ({jit.get('gpu', '?')}; "
            "one fresh process per load):",
            "",
            render_jit(jit),
        ]
    return "\n".join(out).rstrip() + "\n"


def replace_block(readme: str, table: str, start: str = START, end: str = END) -> str:
    try:
        return replace_between(readme, start, end, table)
    except ValueError:
        raise ValueError(f"the page has no {start!r} ... {end!r} block") from None
