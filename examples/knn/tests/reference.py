"""NumPy reference for knn.search and a ties-aware comparison (shared by tests/test_knn.py and lab/gpu/knn_check.py)."""

from __future__ import annotations

import numpy as np


def exact_sq_l2(database: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """All squared L2 distances in float64, computed directly (no ||q||^2 + ||x||^2 - 2 q.x cancellation)."""
    db = database.astype(np.float64)
    q = queries.astype(np.float64)
    return ((q[:, None, :] - db[None, :, :]) ** 2).sum(axis=2)


def mismatches(database: np.ndarray, queries: np.ndarray, k: int, dist: np.ndarray, idx: np.ndarray) -> list[str]:
    """Problems with a search result, [] when it is a correct k-NN answer.

    Ties-aware: neighbours whose exact distance lies within the float32 tolerance of the k-th exact distance may be
    swapped for each other, so the check is: the returned distances are the exact distances of the returned indices,
    ascending, every returned neighbour is no farther than the k-th reference distance, and every database row that is
    clearly nearer than the k-th reference distance is returned. Equal returned distances must come in index order.
    """
    problems: list[str] = []
    m = len(queries)
    if dist.shape != (m, k) or idx.shape != (m, k):
        return [f"shapes {dist.shape} / {idx.shape}, expected {(m, k)}"]
    if dist.dtype != np.float32 or idx.dtype != np.int64:
        return [f"dtypes {dist.dtype} / {idx.dtype}, expected float32 / int64"]
    if idx.min(initial=0) < 0 or idx.max(initial=0) >= len(database):
        return ["indices out of range"]
    scale = float(np.abs(database).max() ** 2 + np.abs(queries).max() ** 2) * database.shape[1]
    tol = 1e-5 * scale + 1e-6
    for i in range(m):
        ref = exact_sq_l2(database, queries[i : i + 1])[0]
        kth = np.partition(ref, k - 1)[k - 1]
        mine = ref[idx[i]]
        where = f"query {i}"
        if len(set(idx[i].tolist())) != k:
            problems.append(f"{where}: repeated indices {idx[i].tolist()}")
        if not np.allclose(dist[i], mine, rtol=1e-4, atol=tol):
            problems.append(f"{where}: returned distances differ from the exact ones by {np.abs(dist[i] - mine).max()}")
        if np.any(np.diff(dist[i]) < 0):
            problems.append(f"{where}: distances not ascending")
        ties = (np.diff(dist[i]) == 0) & (np.diff(idx[i]) < 0)
        if ties.any():
            problems.append(f"{where}: equal distances not in index order")
        if np.any(mine > kth + tol):
            problems.append(f"{where}: a returned neighbour is farther ({mine.max()}) than the k-th ({kth})")
        clearly_nearer = np.flatnonzero(ref < kth - tol)
        missing = np.setdiff1d(clearly_nearer, idx[i])
        if missing.size:
            problems.append(f"{where}: missing nearer neighbours {missing[:5].tolist()}")
    return problems
