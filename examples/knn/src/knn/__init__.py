"""Exact k-nearest-neighbour search on NVIDIA GPUs: squared L2 distances by cuBLAS, top-k by CUDA kernels.

    >>> import numpy as np, knn
    >>> dist, idx = knn.search(np.random.rand(10000, 64), np.random.rand(5, 64), k=8)

Without a usable GPU, `search` raises RuntimeError with the CUDA error text; `device_count()` is then 0.
"""

from __future__ import annotations

import numpy as np

from knn._knn import MAX_K, device_count, runtime_info
from knn._knn import search as _search

__all__ = ["MAX_K", "device_count", "runtime_info", "search"]
__version__ = "0.1.0"


def search(database, queries, k: int, *, device: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest rows of `database` for each row of `queries` (exact, squared L2).

    Returns (distances float32, indices int64), both of shape (len(queries), k), nearest first; equal distances
    are ordered by index. 1 <= k <= min(len(database), MAX_K).
    """
    db = np.ascontiguousarray(database, dtype=np.float32)
    q = np.ascontiguousarray(queries, dtype=np.float32)
    if db.ndim != 2 or q.ndim != 2:
        raise ValueError(f"database and queries must be 2-D arrays, got shapes {db.shape} and {q.shape}")
    if not (np.isfinite(db).all() and np.isfinite(q).all()):
        raise ValueError("database and queries must be finite (no NaN or infinity)")
    return _search(db, q, int(k), int(device))
