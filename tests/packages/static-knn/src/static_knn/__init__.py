"""ctypes bindings of _static_knn.so: a GEMM and a 1-nearest-neighbour search on the GPU through cuBLAS.

Plain sequences in and lists out (row-major, float32 on the device), so the package needs nothing but Python.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

_LIB = ctypes.CDLL(str(Path(__file__).with_name("_static_knn.so")))
_F = ctypes.POINTER(ctypes.c_float)
_I = ctypes.POINTER(ctypes.c_int)
_LIB.sk_sgemm.argtypes = [_F, _F, _F, ctypes.c_int, ctypes.c_int, ctypes.c_int]
_LIB.sk_knn1.argtypes = [_F, ctypes.c_int, _F, ctypes.c_int, ctypes.c_int, _I, _F]
_LIB.sk_versions.argtypes = [_I, _I]


class CudaError(RuntimeError):
    """A CUDA (1000 + cudaError_t) or cuBLAS (2000 + cublasStatus_t) failure."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise CudaError(f"{what} failed with status {rc}")


def _floats(values: Sequence[float], n: int, what: str) -> ctypes.Array:
    if len(values) != n:
        raise ValueError(f"{what}: expected {n} values, got {len(values)}")
    return (ctypes.c_float * n)(*values)


def sgemm(a: Sequence[float], b: Sequence[float], m: int, n: int, k: int) -> list[float]:
    """C = A @ B for row-major A (m x k) and B (k x n); returns C (m x n) row-major."""
    c = (ctypes.c_float * (m * n))()
    _check(_LIB.sk_sgemm(_floats(a, m * k, "a"), _floats(b, k * n, "b"), c, m, n, k), "sk_sgemm")
    return list(c)


def knn1(x: Sequence[float], n: int, q: Sequence[float], m: int, d: int) -> tuple[list[int], list[float]]:
    """For each of m queries (m x d), the index of the nearest of n points (n x d) and its squared L2 distance."""
    idx = (ctypes.c_int * m)()
    dist = (ctypes.c_float * m)()
    _check(_LIB.sk_knn1(_floats(x, n * d, "x"), n, _floats(q, m * d, "q"), m, d, idx, dist), "sk_knn1")
    return list(idx), list(dist)


def versions() -> tuple[int, int]:
    """(CUDA runtime version, cuBLAS version) the library runs with, e.g. (11080, 111103)."""
    rt, cb = ctypes.c_int(), ctypes.c_int()
    _check(_LIB.sk_versions(ctypes.byref(rt), ctypes.byref(cb)), "sk_versions")
    return rt.value, cb.value
