"""Top-k selection per row on NVIDIA GPUs: the precompiled build of slimwheel's examples/topk-nvrtc."""

from __future__ import annotations

import numpy as np

from topk_precompiled._topk import KS, MAX_K, bench, describe, init, prepare
from topk_precompiled._topk import select as _select

__all__ = ["KS", "MAX_K", "bench", "describe", "init", "prepare", "topk"]


def topk(x, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k smallest values of each row of a 2-D float32/float64 array and their column indices (int32), sorted;
    equal values are ordered by index. 1 <= k <= MAX_K."""
    a = np.ascontiguousarray(x)
    if a.ndim != 2 or a.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must be a 2-D float32 or float64 array, got {a.dtype} with shape {a.shape}")
    values, indices = _select(a, int(k))
    return values[:, :k], indices[:, :k]
