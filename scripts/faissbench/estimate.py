"""Estimating a full faiss CUDA build from a compiled sample (scripts/faiss-sample-compile.py): the classes of
faiss's CUDA objects whose compile cost is alike, and the scaling. Pure: reads build.ninja, runs nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Classes of faiss's CUDA objects whose compile cost is alike: the IVF-Flat scan kernels generated per k bucket
# (threads_warpQ_threadQ in the file name), the k-selection files by bucket size, and everything else.
CLASSES: tuple[tuple[str, str], ...] = (
    ("ivf-scan k<=128", r"template_.*_128_(1|32|64|128)_\d+\.cu\.o$"),
    ("ivf-scan k=256", r"template_.*_128_256_4\.cu\.o$"),
    ("ivf-scan k=512,1024", r"template_.*_128_(512|1024)_8\.cu\.o$"),
    ("ivf-scan k=2048", r"template_.*_64_2048_8\.cu\.o$"),
    ("select k>256", r"(Block|Warp)SelectFloat[FT](512|1024|2048)\.cu\.o$"),
    ("select k<=256", r"(Block|Warp)SelectFloat(1|32|64|128|256)\.cu\.o$"),
    ("other", r".*"),
)
DEFAULT_SAMPLE = (
    "template_faissgpuCodec01_faissgpuL2Distance_128_64_3.cu.o",
    "template_faissgpuCodec01_faissgpuL2Distance_128_256_4.cu.o",
    "template_faissgpuCodec01_faissgpuL2Distance_128_1024_8.cu.o",
    "template_faissgpuCodec01_faissgpuL2Distance_64_2048_8.cu.o",
    "WarpSelectFloatT1024.cu.o",
    "BlockSelectFloat128.cu.o",
    "VectorResidual.cu.o",
    "L2Norm.cu.o",
)


@dataclass(frozen=True, kw_only=True)
class CudaObject:
    output: str  # as build.ninja names it, relative to the build folder
    klass: str


def cuda_objects(build_dir: Path) -> list[CudaObject]:
    ninja = (build_dir / "build.ninja").read_text()
    outs = re.findall(r"^build (\S+\.cu\.o): CUDA_COMPILER", ninja, flags=re.MULTILINE)
    return [CudaObject(output=o, klass=next(name for name, rx in CLASSES if re.search(rx, o))) for o in outs]


def estimate(objects: list[CudaObject], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per class: files, mean sampled CPU seconds, their product; classes without a sample take the mean of all."""
    ok = [s for s in samples if s["rc"] == 0]
    by_class: dict[str, list[float]] = {}
    for s in ok:
        by_class.setdefault(s["class"], []).append(s["cpu_s"])
    overall = sum(s["cpu_s"] for s in ok) / len(ok) if ok else None
    rows: list[dict[str, Any]] = []
    total = 0.0
    for name, _ in CLASSES:
        n = sum(1 for o in objects if o.klass == name)
        if n == 0:
            continue
        sampled = by_class.get(name)
        mean = sum(sampled) / len(sampled) if sampled else overall
        est = None if mean is None else mean * n
        total += est or 0.0
        rows.append({"class": name, "files": n, "sampled": len(sampled or []),
                     "mean_cpu_s": None if mean is None else round(mean, 1),
                     "estimated_cpu_s": None if est is None else round(est)})
    return {"classes": rows, "cuda_objects": len(objects), "estimated_cuda_cpu_s": round(total)}


