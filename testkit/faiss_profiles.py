"""The faiss build profiles: the same faiss tree, built the way upstream does and the way slimwheel plans it.

Pure data and pure functions over the recipe's `[tool.slimwheel]` table (no I/O): lab/faiss/faiss-profiles.py builds and
measures them, lab/gpu/faiss_check.py builds them on the GPU machine, the product's integration test of the recipe
(tests/integration/test_faiss_recipe.py) configures them: both trees use them, so they live here. The plan
(targets, compression, CMake's SLIMWHEEL_* variables) comes from slimwheel.plan, as for `slimwheel build faiss`; a
profile adds only the recipe's own options (faiss/CMakeLists.txt: FAISS_*).

- upstream: upstream's pyproject-gpu.toml (faiss-gpu 1.15.1, CUDA 12) moved to CUDA 13: SASS 75, 80, 86, 89, 90 +
  PTX 90, faiss's own `-Xfatbin=-compress-all`, LTO, libfaiss.so beside the SWIG module, OpenBLAS from the system
  vendored by the repair step.
- slim: the recipe's own `[tool.slimwheel]` (what `slimwheel build faiss` builds): every GPU from 7.5 to 12.x by SASS
  (one cubin per major by binary compatibility), no PTX (it cost 9.6 MB and the 60 MiB budget, measured on the H200),
  `--compress-mode=size`, slimwheel's tuned compile and link into one module, BLAS from the scipy-openblas32 wheel.
- slim-jit: slim, except the files that serve only k > 256, which ship as PTX for 7.5 only and are JIT-compiled by the
  driver at their first use.
- probe90: one target (90-real) of the slim profile, to learn build time and per-object sizes quickly.
- upstream90: one target (90-real) of the upstream profile: with probe90, the runtime comparison on a Hopper GPU when
  a full-coverage upstream build does not fit the GPU machine's time (issue 11).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from slimwheel.config import Config, resolve
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.plan import BuildPlan, cmake_defines, make_plan, make_plan_for_release
from slimwheel.toolkit.model import Toolkit

ProfileName = Literal["upstream", "slim", "slim-jit", "probe90", "upstream90"]
PROFILE_NAMES: tuple[ProfileName, ...] = get_args(ProfileName)
Blas = Literal["system", "scipy-openblas32"]

# Upstream faiss-gpu 1.15.1's list (its pyproject-gpu.toml) without 70, which CUDA 13 cannot target.
UPSTREAM_TARGETS = "75-real;80-real;86-real;89-real;90"
# The recipe builds with CUDA 13.0 (its [tool.slimwheel] cuda); plans without a toolkit use that release's table.
CUDA_13_0 = CudaVersion(13, 0)


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: ProfileName
    config: Config
    """slimwheel's settings for this profile: the recipe's [tool.slimwheel] with the profile's changes."""
    blas: Blas
    """FAISS_BLAS: system (vendored on repair) or scipy-openblas32 (a dependency)."""
    tuned_link: bool
    """FAISS_TUNED_LINK: slimwheel_cuda_target's flags (and the plan's compression); off: upstream's flags."""
    shared_lib: bool
    """FAISS_SHARED_LIB: libfaiss.so beside the SWIG module (upstream's layout) instead of linked into it."""
    lto: bool
    """FAISS_USE_LTO: faiss's host-code link-time optimisation (upstream's wheel: on)."""
    why: str
    large_k_architectures: str = ""
    """FAISS_LARGE_K_ARCHITECTURES: other CUDA architectures for the k > 256 files (empty: the plan's)."""
    builds_in: str = ""
    """Build in this other profile's folder: only the files whose flags differ recompile (empty: a folder of its own)."""

    def plan(self, toolkit: Toolkit | None = None) -> BuildPlan:
        """slimwheel's plan: for this toolkit (its nvcc's target list), or from the release table without one."""
        if toolkit is not None:
            return make_plan(self.config, toolkit)
        return make_plan_for_release(self.config, CUDA_13_0)

    def recipe_defines(self) -> dict[str, str]:
        """The recipe's own cache variables (faiss/CMakeLists.txt), beside the plan's SLIMWHEEL_* ones."""
        defines = {
            "FAISS_BLAS": self.blas,
            "FAISS_TUNED_LINK": "ON" if self.tuned_link else "OFF",
            "FAISS_SHARED_LIB": "ON" if self.shared_lib else "OFF",
            "FAISS_USE_LTO": "ON" if self.lto else "OFF",
        }
        if self.large_k_architectures:  # only then, so that the other profiles' configure lines stay as they were
            defines["FAISS_LARGE_K_ARCHITECTURES"] = self.large_k_architectures
        return defines

    def cmake_defines(self, toolkit: Toolkit | None = None) -> dict[str, str]:
        """The plan's variables through slimwheel's one `cmake_defines` (no compiler or package folder: the callers'
        builds pass those through `slimwheel.build.config_settings`), and the recipe's."""
        return {**cmake_defines(self.plan(toolkit), package_dir=None), **self.recipe_defines()}


def make_profile(profile: str, recipe_table: Mapping[str, Any]) -> Profile:
    """One profile from the recipe's [tool.slimwheel] table (faiss/pyproject.toml)."""
    if profile not in PROFILE_NAMES:
        raise BadInputError(f"unknown faiss profile {profile!r}", hint="one of: " + ", ".join(PROFILE_NAMES))
    name: ProfileName = profile
    where = "faiss/pyproject.toml"

    def config(**changes: str) -> Config:
        return resolve(recipe_table, {}, changes, file_name=where)

    if name == "upstream":
        return Profile(
            name=name,
            # faiss's -Xfatbin=-compress-all is fatbinary's default mode; the plan says so (the recipe keeps faiss's
            # flag with FAISS_TUNED_LINK=OFF).
            config=config(targets=UPSTREAM_TARGETS, compression="default"),
            blas="system",
            tuned_link=False,
            shared_lib=True,
            lto=True,
            why="upstream faiss-gpu's pyproject-gpu.toml on CUDA 13: its targets and flags, LTO, shared libfaiss, "
            "OpenBLAS vendored",
        )
    if name == "slim":
        return Profile(
            name=name,
            config=config(),
            blas="scipy-openblas32",
            tuned_link=True,
            shared_lib=False,
            lto=False,
            why="the recipe's plan: every CC from 7.5 natively by binary compatibility, PTX for newer, size "
            "compression, one module, BLAS as a dependency",
        )
    if name == "slim-jit":
        return replace(
            make_profile("slim", recipe_table),
            name=name,
            large_k_architectures="75-virtual",
            # In slim's folder only the moved files recompile; in a folder of its own every CUDA file would.
            builds_in="slim",
            why="slim, but the k > 256 kernels as PTX 7.5 only, JIT-compiled at first use (size against first-use time)",
        )
    if name == "probe90":
        return replace(
            make_profile("slim", recipe_table),
            name=name,
            config=config(targets="90-real"),
            why="one target, to measure build time and per-object fatbin sizes",
        )
    if name == "upstream90":
        return replace(
            make_profile("upstream", recipe_table),
            name=name,
            config=config(targets="90-real", compression="default"),
            why="upstream's flags and layout for one target, to compare run time with probe90 on a Hopper GPU",
        )
    raise AssertionError(f"profile {name!r} is in PROFILE_NAMES but has no definition")
