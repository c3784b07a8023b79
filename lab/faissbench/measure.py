"""Measuring a faiss wheel and its build folder, the same way here (lab/faiss/faiss-profiles.py) and on the GPU machine
(lab/gpu/faiss_check.py), so that a profile built there and one built here land in one table with one meaning.

Reads files only (wheel, object files); no builds, no printing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from slimwheel.check import check_wheel, make_policy, verdict_to_json
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.inspect.report import report_to_json
from slimwheel.inspect.scan import inspect_binary, inspect_wheel
from slimwheel.units import parse_size

BUDGET = "60MiB"
# Every CC the CUDA 13 toolkit targets from 7.5 on, up to the newest it knows (12.x): what "full coverage" means here.
REQUIRED_ARCH = "7.5-12.0"


def measure_wheel(wheel: Path, *, budget: str = BUDGET, require_arch: str = REQUIRED_ARCH) -> dict[str, Any]:
    """Size, coverage and `slimwheel check` verdict of one wheel, plus the full size report."""
    report = inspect_wheel(wheel)
    verdict = check_wheel(
        report,
        make_policy(report, budget=parse_size(budget, what="budget"), require_arch=parse_require_arch(require_arch)),
    )
    return {
        "wheel": wheel.name,
        "wheel_size": report.size,
        "installed_size": report.installed_size,
        "files": sorted(
            (
                {"name": f.name, "compressed": f.compressed, "uncompressed": f.uncompressed}
                for f in report.files
                if f.uncompressed > 256 * 1024
            ),
            key=lambda f: -f["compressed"],
        ),
        "requires_dist": list(report.requires_dist),
        "targets": [str(t) for t in report.targets],  # SASS by CC, then PTX
        "coverage": {
            "native": [str(c) for c in report.coverage.native],
            "ptx_only": [str(c) for c in report.coverage.ptx_only],
            "none": [str(c) for c in report.coverage.none],
        },
        "compression": list(report.compression),
        "driver_floor": report.driver_floor,
        "check": verdict_to_json(verdict),
        "size_report": report_to_json(report),
    }


def _group(name: str) -> str:
    if "WarpSelect" in name or "BlockSelect" in name:
        return "warpselect/blockselect (k-selection)"
    if name.startswith("template_"):  # faiss >= 1.15 generates one IVF-Flat scan file per (codec, metric, k bucket)
        return "IVF-Flat scan (generated template_*)"
    if name.startswith("PQ") or "IVFPQ" in name:
        return "PQ scan"
    return "other"


# The files that serve only k > 256: the same rule as faiss/CMakeLists.txt's FAISS_LARGE_K_ARCHITECTURES (k-selection
# buckets 512, 1024, 2048 and the IVF-Flat scan files generated for warp queues 512, 1024 and 2048).
_LARGE_K = re.compile(r"(Block|Warp)SelectFloat[FT](512|1024|2048)\.cu$|_(128_512_8|128_1024_8|64_2048_8)\.cu$")


def serves_only_large_k(object_name: str) -> bool:
    """Whether a CUDA object (`name.cu` or `name.cu.o`) holds kernels used only for k > 256."""
    return _LARGE_K.search(object_name.removesuffix(".o")) is not None


def _linked_objects(build_dir: Path) -> set[Path] | None:
    """The objects build.ninja archives into libfaiss.a or links into libfaiss.so (None when it cannot tell)."""
    ninja = build_dir / "build.ninja"
    if not ninja.is_file():
        return None
    for line in ninja.read_text(errors="replace").splitlines():
        output = line.split(" ", 2)[1] if line.startswith("build ") and line.count(" ") >= 2 else ""
        if output.endswith(("libfaiss.a:", "libfaiss.so:")) and "phony" not in line:
            inputs = line.split(":", 1)[1].split("||", 1)[0].split()[1:]  # after the rule name
            return {(build_dir / i).resolve() if not Path(i).is_absolute() else Path(i) for i in inputs}
    return None


def object_fatbins(build_dir: Path, top: int = 25) -> dict[str, Any]:
    """.nv_fatbin per compiled CUDA object of the faiss library: where the device code comes from."""
    rows: list[dict[str, Any]] = []
    linked = _linked_objects(build_dir)
    for o in sorted(p.resolve() for p in build_dir.rglob("*.cu.o")):
        if linked is not None and o not in linked:  # left over from another profile built in this folder
            continue
        r = inspect_binary(o)
        entries = [e for fb in r.fatbins for e in fb.entries]
        per_target: dict[str, int] = {}
        for e in entries:
            key = f"{'sm' if e.kind == 'sass' else 'compute' if e.kind == 'ptx' else e.kind}_{e.arch}"
            per_target[key] = per_target.get(key, 0) + e.stored_size
        rows.append(
            {
                "object": o.name.removesuffix(".o"),
                "nv_fatbin": r.sections.get(".nv_fatbin", 0),
                "stored": sum(e.stored_size for e in entries),
                "uncompressed": sum(e.uncompressed_size for e in entries),
                "entries": len(entries),
                "per_target": per_target,
            }
        )
    rows.sort(key=lambda x: -int(x["nv_fatbin"]))
    groups: dict[str, int] = {}
    by_target: dict[str, int] = {}
    large_k: dict[str, Any] = {"objects": 0, "nv_fatbin": 0, "stored": 0, "uncompressed": 0, "per_target": {}}
    for x in rows:
        groups[_group(x["object"])] = groups.get(_group(x["object"]), 0) + x["nv_fatbin"]
        for k, v in x["per_target"].items():
            by_target[k] = by_target.get(k, 0) + v
        if serves_only_large_k(x["object"]):
            large_k["objects"] += 1
            for key in ("nv_fatbin", "stored", "uncompressed"):
                large_k[key] += x[key]
            for k, v in x["per_target"].items():
                large_k["per_target"][k] = large_k["per_target"].get(k, 0) + v
    return {
        "objects": len(rows),
        "total_nv_fatbin": sum(x["nv_fatbin"] for x in rows),
        "groups": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "by_target": by_target,
        "large_k_only": large_k,
        "top": rows[:top],
        # every object, smallest fields only: where the bytes go per module (issue 11's 40 MiB analysis)
        "all": [
            {
                "object": x["object"],
                "stored": x["stored"],
                "uncompressed": x["uncompressed"],
                "per_target": x["per_target"],
            }
            for x in rows
        ],
    }


def ninja_seconds(build_dir: Path) -> dict[str, Any]:
    """Step times from ninja's log (the last build of each output): the CUDA objects' sum and the longest step.
    Steps run side by side and may share cores, so the sum is not CPU time; it says where a build's time goes."""
    log = build_dir / ".ninja_log"
    if not log.is_file():
        return {}
    last: dict[str, int] = {}
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if line.startswith("#") or len(parts) < 4:
            continue
        start, end, _mtime, out = parts[:4]
        if out.endswith(".cu.o"):
            last[out] = int(end) - int(start)  # a later line for the same output replaces an earlier build of it
    if not last:
        return {}
    longest = max(last, key=last.__getitem__)
    return {
        "cuda_steps": len(last),
        "sum_of_step_seconds": round(sum(last.values()) / 1000, 1),
        "longest_step": Path(longest).name,
        "longest_step_seconds": round(last[longest] / 1000, 1),
    }
