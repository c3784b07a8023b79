"""Building and repairing one faiss profile the same way here (lab/faiss/faiss-profiles.py) and on the GPU machine
(lab/gpu/faiss_check.py): the scikit-build-core settings come from slimwheel.build.config_settings over the profile's plan,
the repair from slimwheel.repair with the recipe's `external-libs` (so a slim wheel built anywhere leaves
libscipy_openblas.so to its wheel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from slimwheel.build import config_settings
from slimwheel.cuda.versions import CudaVersion
from slimwheel.external import parse_externals
from slimwheel.repair import RepairResult, repair_wheel
from slimwheel.toolkit.model import Toolkit
from testkit.faiss_profiles import Profile

RECIPE_TABLE = "faiss/pyproject.toml [tool.slimwheel]"


def build_settings(
    profile: Profile,
    *,
    source: Path,
    toolkit: Toolkit | None,
    build_dir: Path,
    extra_defines: Mapping[str, str] | None = None,
) -> list[str]:
    """The `-C` settings of one profile's PEP 517 build: slimwheel's (plan, toolkit, CMake package, build folder),
    the recipe's own options, the tree, and what the caller adds (compiler launchers, a machine's own toolkit paths)."""
    settings = config_settings(profile.plan(toolkit), toolkit, build_dir=build_dir)
    defines = {**profile.recipe_defines(), "FAISS_SOURCE_DIR": str(source), **(extra_defines or {})}
    return settings + [f"cmake.define.{k}={v}" for k, v in defines.items()]


def repair_profile(
    profile: Profile, raw: Path, out_dir: Path, *, cuda: CudaVersion, library_dirs: Sequence[Path] = ()
) -> RepairResult:
    """slimwheel's repair with the profile's loader setting and the recipe's external libraries (ignored for wheels
    that do not link them: the upstream profile vendors its OpenBLAS). `library_dirs`: a sysroot's, searched first
    for what is bundled (as `slimwheel build` passes them)."""
    externals = parse_externals(profile.config.external_libs, where=f"{RECIPE_TABLE} external-libs")
    return repair_wheel(
        raw, out_dir, cuda=cuda, loader=profile.config.loader, externals=externals, library_dirs=library_dirs
    )
