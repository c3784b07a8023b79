"""Top-k selection per row on NVIDIA GPUs: the precompiled build of slimwheel's examples/topk-nvrtc."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# The compiled extension has no type stubs.
from topk_precompiled._topk import KS, MAX_K, bench, describe, init, prepare  # type: ignore[import-not-found]
from topk_precompiled._topk import select as _select

__all__ = ["KS", "MAX_K", "bench", "describe", "init", "prepare", "topk"]


def topk(x: npt.ArrayLike, k: int) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.int32]]:
    """The k smallest values of each row of a 2-D float32/float64 array and their column indices (int32), sorted;
    equal values are ordered by index. 1 <= k <= min(MAX_K, number of columns)."""
    a = np.ascontiguousarray(x)
    if a.ndim != 2 or a.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must be a 2-D float32 or float64 array, got {a.dtype} with shape {a.shape}")
    if not 1 <= k <= min(MAX_K, a.shape[1]):
        raise ValueError(f"k must be between 1 and min({MAX_K}, {a.shape[1]} columns), got {k}")
    values, indices = _select(a, int(k))
    return values[:, :k], indices[:, :k]
