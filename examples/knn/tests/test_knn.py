"""Tests of the installed knn wheel. GPU tests compare with NumPy; without a GPU the clear RuntimeError is checked."""

from __future__ import annotations

import knn
import numpy as np
import pytest
from reference import mismatches

HAS_GPU = knn.device_count() > 0
gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")


def data(n: int, m: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d), dtype=np.float32), rng.standard_normal((m, d), dtype=np.float32)


def test_runtime_info_names_the_runtime() -> None:
    assert knn.runtime_info().startswith("CUDA runtime ")
    assert knn.device_count() >= 0


@pytest.mark.parametrize("k", [0, -1, knn.MAX_K + 1])
def test_k_out_of_range_is_a_value_error(k: int) -> None:
    db, q = data(500, 3, 8)
    with pytest.raises(ValueError, match="k must be"):
        knn.search(db, q, k)


def test_k_larger_than_database_is_a_value_error() -> None:
    db, q = data(5, 2, 8)
    with pytest.raises(ValueError, match="k must be"):
        knn.search(db, q, 6)


def test_dimension_mismatch_is_a_value_error() -> None:
    db, _ = data(50, 2, 8)
    with pytest.raises(ValueError, match="same number of columns"):
        knn.search(db, np.zeros((2, 7), np.float32), 3)


def test_nan_is_a_value_error() -> None:
    db, q = data(50, 2, 8)
    q[1, 3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        knn.search(db, q, 3)


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a usable GPU")
def test_without_gpu_search_raises_runtime_error_with_cuda_text() -> None:
    db, q = data(100, 4, 16)
    with pytest.raises(RuntimeError, match=r"CUDA error in \w+: cuda\w+: "):
        knn.search(db, q, 8)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("k", [1, 5, 8, 32, 50, 64, 128])
def test_matches_numpy(k: int) -> None:
    db, q = data(3000, 40, 48, seed=k)
    dist, idx = knn.search(db, q, k)
    assert mismatches(db, q, k, dist, idx) == []


@pytest.mark.gpu
@gpu
def test_ties_come_in_index_order() -> None:
    rng = np.random.default_rng(7)
    base = rng.integers(-3, 4, size=(200, 16)).astype(np.float32)  # small integers: exact float arithmetic
    db = np.concatenate([base, base, base])  # every row three times: equal distances
    q = rng.integers(-3, 4, size=(20, 16)).astype(np.float32)
    dist, idx = knn.search(db, q, 32)
    assert mismatches(db, q, 32, dist, idx) == []


@pytest.mark.gpu
@gpu
def test_many_queries_are_processed_in_chunks() -> None:
    db, q = data(200_000, 350, 16, seed=3)  # the distance block exceeds one chunk (64 Mi floats)
    dist, idx = knn.search(db, q, 8)
    assert mismatches(db, q[:20], 8, dist[:20], idx[:20]) == []
    assert mismatches(db, q[-20:], 8, dist[-20:], idx[-20:]) == []


def test_no_queries_needs_no_gpu() -> None:
    db, _ = data(100, 1, 8)
    dist, idx = knn.search(db, np.zeros((0, 8), np.float32), 4)
    assert dist.shape == (0, 4) and idx.shape == (0, 4)


@pytest.mark.gpu
@gpu
def test_bad_device_is_a_value_error() -> None:
    db, q = data(100, 2, 8)
    with pytest.raises(ValueError, match="does not exist"):
        knn.search(db, q, 4, device=knn.device_count())
