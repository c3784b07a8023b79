"""scikit-build-core metadata provider: the wheel's runtime dependencies, which depend on the BLAS choice.

With FAISS_BLAS=scipy-openblas32 the extension links libscipy_openblas.so from the scipy-openblas32 wheel instead of
vendoring a BLAS, so that wheel becomes a requirement; with FAISS_BLAS=system the repair step vendors OpenBLAS.
The CUDA runtime requirements (nvidia-cuda-runtime, nvidia-cublas) are added by slimwheel's repair step, which owns
the SONAME -> package table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

BLAS_CHOICES = ("system", "scipy-openblas32")

# The scipy-openblas32 line whose symbol prefix (scipy_) and Fortran-name ABI (32-bit integers) the recipe maps to.
SCIPY_OPENBLAS32 = "scipy-openblas32>=0.3.28,<0.4"


def blas_choice(env: Mapping[str, str]) -> str:
    choice = env.get("FAISS_BLAS", "") or "scipy-openblas32"
    if choice not in BLAS_CHOICES:
        raise ValueError(f"FAISS_BLAS={choice!r}: expected one of {', '.join(BLAS_CHOICES)}")
    return choice


def requirements(env: Mapping[str, str]) -> list[str]:
    # faiss's loader.py imports packaging (upstream's faiss-gpu requires it too).
    reqs = ["numpy>=1.25", "packaging"]
    if blas_choice(env) == "scipy-openblas32":
        reqs.append(SCIPY_OPENBLAS32)
    return reqs


def dynamic_metadata(
    field: str, settings: Mapping[str, Any] | None = None, project: Mapping[str, Any] | None = None
) -> list[str]:
    if field != "dependencies":
        raise ValueError(f"faiss_requires only provides 'dependencies', not {field!r}")
    if settings:
        raise ValueError(f"faiss_requires takes no settings, got {sorted(settings)}")
    return requirements(os.environ)
