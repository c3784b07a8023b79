"""The faiss build profiles: the same faiss tree, built the way upstream does and the way slimwheel plans it.

Pure data and pure functions (no I/O): scripts/faiss-profiles.py builds and measures them, the integration tests
configure them, and `slimwheel build faiss` reaches the same CMake defines through its own plan.

- upstream: what upstream faiss-gpu (1.15.1, CUDA 12) ships, moved to CUDA 13: SASS 75, 80, 86, 89, 90 + PTX 90,
  faiss's own `-Xfatbin=-compress-all`, OpenBLAS linked from the system and vendored by the repair step.
- slim: slimwheel's plan for every GPU from 7.5 to 12.x (one cubin per major by binary compatibility + PTX of the
  newest), `--compress-mode=size`, slimwheel's tuned compile and link, BLAS from the scipy-openblas32 wheel.
- slim-jit: slim, except the 15 files that serve only k > 256 (40% of the device code), which ship as PTX for 7.5
  only and are JIT-compiled by the driver at their first use: what reaching ~35 MB costs (docs/faiss.md).
- probe90: one target (90-real) of the slim profile, to learn build time and per-object sizes quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slimwheel.cuda.arch import ArchPlan, Coverage, explicit_plan, parse_cc_set, plan
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    arch: ArchPlan
    compression: str
    """SLIMWHEEL_COMPRESSION; with tuned_link off faiss's own -Xfatbin=-compress-all applies instead."""
    blas: str
    """FAISS_BLAS: system (vendored on repair) or scipy-openblas32 (a dependency)."""
    tuned_link: bool
    why: str
    large_k_architectures: str = ""
    """FAISS_LARGE_K_ARCHITECTURES: other CUDA architectures for the k > 256 files (empty: the plan's)."""
    builds_in: str = ""
    """Build in this other profile's folder: only the files whose flags differ recompile (empty: a folder of its own)."""

    @property
    def coverage(self) -> Coverage:
        return self.arch.coverage

    def cmake_defines(self) -> dict[str, str]:
        defines = {
            "SLIMWHEEL_CUDA_ARCHITECTURES": self.arch.cmake_architectures,
            "SLIMWHEEL_COMPRESSION": self.compression,
            "SLIMWHEEL_LINK": "dynamic",
            "SLIMWHEEL_CUDA_MAJOR": "13",
            "FAISS_BLAS": self.blas,
            "FAISS_TUNED_LINK": "ON" if self.tuned_link else "OFF",
        }
        if self.large_k_architectures:  # only then, so that the other profiles' configure lines stay as they were
            defines["FAISS_LARGE_K_ARCHITECTURES"] = self.large_k_architectures
        return defines


# Upstream faiss-gpu 1.15.1's list (shared/cuda-facts.md, section 3) without 70, which CUDA 13 cannot target.
UPSTREAM_ARCHITECTURES = "75-real;80-real;86-real;89-real;90"
SLIM_COVERAGE = "7.5-12.9"
PROFILE_NAMES = ("upstream", "slim", "slim-jit", "probe90")


CUDA_13_0 = CudaVersion(13, 0)


def make_profile(name: str, cuda: CudaVersion = CUDA_13_0) -> Profile:
    supported = supported_archs(cuda)
    if name == "upstream":
        return Profile(
            name=name,
            arch=explicit_plan(UPSTREAM_ARCHITECTURES, supported=supported),
            compression="default",
            blas="system",
            tuned_link=False,
            why="upstream faiss-gpu's targets and flags on CUDA 13, OpenBLAS vendored",
        )
    if name == "slim":
        return Profile(
            name=name,
            arch=plan(parse_cc_set(SLIM_COVERAGE, supported=supported), supported=supported),
            compression="size",
            blas="scipy-openblas32",
            tuned_link=True,
            why="every CC from 7.5 natively by binary compatibility, PTX for newer, size compression, BLAS as a dependency",
        )
    if name == "slim-jit":
        return replace(
            make_profile("slim", cuda),
            name=name,
            large_k_architectures="75-virtual",
            # In slim's folder, only the 15 files recompile; in a folder of its own every CUDA file would (ccache
            # missed every CUDA object of a second folder here, though their compile lines matched up to the folder).
            builds_in="slim",
            why="slim, but the k > 256 kernels as PTX 7.5 only, JIT-compiled at first use (size against first-use time)",
        )
    if name == "probe90":
        return Profile(
            name=name,
            arch=explicit_plan("90-real", supported=supported),
            compression="size",
            blas="scipy-openblas32",
            tuned_link=True,
            why="one target, to measure build time and per-object fatbin sizes",
        )
    raise BadInputError(f"unknown faiss profile {name!r}", hint="one of: " + ", ".join(PROFILE_NAMES))
