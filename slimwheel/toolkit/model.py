"""What slimwheel knows about a CUDA toolkit once it is found or assembled."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    """A usable CUDA toolkit: nvcc and the headers/libraries a build links against.

    `root` holds bin/nvcc; `include_dirs`/`lib_dirs` are where CUDA headers and libraries are (for toolkits assembled
    from PyPI wheels or Debian packages these are not under root). `source` says how it was obtained:
    "system" (CUDA_HOME / PATH / a given prefix), "pypi" (assembled from nvidia-* wheels), "debian" (Debian packages).
    """

    root: Path
    nvcc: Path
    version: CudaVersion
    source: str
    supported: tuple[CC, ...]
    include_dirs: tuple[Path, ...] = ()
    lib_dirs: tuple[Path, ...] = ()
    components: tuple[str, ...] = ()  # e.g. ("nvcc", "cudart", "cublas", "cudart_static", "cublas_static", "nvprune")
    nvprune: Path | None = None
    cuobjdump: Path | None = None
    host_compiler: Path | None = None  # e.g. g++-11 for CUDA 11.8
    static_libs: dict[str, Path] = field(default_factory=dict)  # component -> libX_static.a
    env: dict[str, str] = field(default_factory=dict)  # extra environment a build needs (PATH entries, CUDA_HOME)

    @property
    def major(self) -> int:
        return self.version.major
