#!/usr/bin/env python3
"""PyPI's torchvision 0.26.0 against the same wheel after `slimwheel repair` (its vendored libcudart and libnvjpeg
replaced by the nvidia-* wheels), on a GPU beside the machine's torch 2.11: the same results, and which CUDA
libraries each process maps. Run on the GPU machine:

    python3 lab/gpu/torchvision_check.py --original ORIG.whl --repaired REPAIRED.whl --nvjpeg NVJPEG.whl --out $OUT

Each wheel is installed with `pip install --no-deps --target` into its own folder; the repaired one finds
libcudart.so.13 and libnvjpeg.so.13 in that folder's nvidia/cu13/lib (the nvjpeg wheel installed there, the machine's
libcudart linked in), as in a site-packages holding both. Every case runs in a fresh process per wheel: nms and
roi_align on CUDA against the CPU, and decode_jpeg on the GPU against the CPU decoder; the digests of the GPU results
are compared between the wheels. Writes torchvision_check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROBE = r"""
import hashlib, json, sys
import torch, torchvision
from torchvision.ops import nms, roi_align
from torchvision.io import decode_jpeg, encode_jpeg

def digest(t):
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]

out = {"torchvision": torchvision.__file__, "torch": torch.__version__, "cases": {}}
g = torch.Generator().manual_seed(0)
xy = torch.rand(4000, 2, generator=g) * 500
boxes = torch.cat([xy, xy + torch.rand(4000, 2, generator=g) * 60 + 1], dim=1)
scores = torch.rand(4000, generator=g)
keep_cpu, keep_gpu = nms(boxes, scores, 0.5), nms(boxes.cuda(), scores.cuda(), 0.5)
out["cases"]["nms"] = {"equal_to_cpu": bool(torch.equal(keep_cpu, keep_gpu.cpu())), "gpu": digest(keep_gpu)}
feat = torch.rand(2, 16, 64, 64, generator=g)
rois = torch.cat([torch.randint(0, 2, (300, 1), generator=g).float(), boxes[:300] / 10], dim=1)
ra_cpu = roi_align(feat, rois, (7, 7), 0.5, 2)
ra_gpu = roi_align(feat.cuda(), rois.cuda(), (7, 7), 0.5, 2)
out["cases"]["roi_align"] = {
    "max_abs_diff_to_cpu": float((ra_cpu - ra_gpu.cpu()).abs().max()), "gpu": digest(ra_gpu)}
img = (torch.rand(3, 480, 640, generator=g) * 255).to(torch.uint8)
data = encode_jpeg(img, quality=90)
dec_cpu, dec_gpu = decode_jpeg(data), decode_jpeg(data, device="cuda")
out["cases"]["decode_jpeg"] = {
    "device": str(dec_gpu.device), "max_abs_diff_to_cpu": int((dec_cpu.int() - dec_gpu.cpu().int()).abs().max()),
    "gpu": digest(dec_gpu)}
torch.cuda.synchronize()
maps = set()
for line in open("/proc/self/maps"):
    path = line.split()[-1] if "/" in line else ""
    name = path.rsplit("/", 1)[-1]
    if name.startswith(("libcudart", "libnvjpeg")):
        maps.add(path)
out["mapped"] = sorted(maps)
print(json.dumps(out))
"""


def install(wheel: Path, extra: list[Path], target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
        ]
        + [str(wheel)]
        + [str(e) for e in extra],
        check=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--original", type=Path, required=True)
    ap.add_argument("--repaired", type=Path, required=True)
    ap.add_argument("--nvjpeg", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    a = ap.parse_args()
    import torch  # type: ignore[import-not-found]  # the GPU machine's (not installed here): where its libcudart.so.13 lies

    cudart = next(Path(p) for p in sys.path if (Path(p) / "nvidia/cu13/lib/libcudart.so.13").is_file())
    work = Path(tempfile.mkdtemp(prefix="tv-check-"))
    results: dict[str, Any] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "wheels": {}}
    for label, wheel, extra in (("original", a.original, []), ("repaired", a.repaired, [a.nvjpeg])):
        target = work / label
        install(wheel, extra, target)
        if label == "repaired":
            lib = target / "nvidia" / "cu13" / "lib"
            (lib / "libcudart.so.13").symlink_to(cudart / "nvidia/cu13/lib/libcudart.so.13")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=False)
        entry: dict[str, Any] = {"wheel": wheel.name, "rc": proc.returncode}
        if proc.returncode == 0:
            entry.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        else:
            entry["stderr"] = proc.stderr[-3000:]
        results["wheels"][label] = entry
    w = results["wheels"]
    if all(w[k]["rc"] == 0 for k in w):
        results["same_gpu_results"] = {
            case: w["original"]["cases"][case]["gpu"] == w["repaired"]["cases"][case]["gpu"]
            for case in w["original"]["cases"]
        }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "torchvision_check.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0 if all(w[k]["rc"] == 0 for k in w) else 1


if __name__ == "__main__":
    raise SystemExit(main())
