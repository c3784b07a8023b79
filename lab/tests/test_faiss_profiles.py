"""The faiss profiles (testkit/faiss_profiles.py) are the recipe's [tool.slimwheel] planned by slimwheel.plan:
no -D list of their own beside the plan's."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimwheel.config import load, read_pyproject
from slimwheel.cuda.arch import CC, Kind, generation, parse_targets, served_by
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError
from slimwheel.plan import cmake_defines, make_plan_for_release
from testkit.faiss_profiles import PROFILE_NAMES, UPSTREAM_TARGETS, make_profile

RECIPE = Path(__file__).resolve().parents[2] / "faiss"
TABLE = read_pyproject(RECIPE)[1]


def test_slim_is_what_slimwheel_build_faiss_plans() -> None:
    slim = make_profile("slim", TABLE)
    assert slim.config == load(RECIPE, {}, {})
    assert slim.plan().plan_defines == make_plan_for_release(load(RECIPE, {}, {}), CudaVersion(13, 0)).plan_defines


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_defines_are_the_plans_plus_the_recipes_options(name: str) -> None:
    p = make_profile(name, TABLE)
    defines = p.cmake_defines()
    plan = cmake_defines(p.plan(), package_dir=None)
    assert {k: defines[k] for k in plan} == plan
    assert set(defines) - set(plan) == set(p.recipe_defines())
    assert all(k.startswith("FAISS_") for k in p.recipe_defines())
    assert p.config.external_libs == load(RECIPE, {}, {}).external_libs  # every profile repairs with them


def test_profiles_plan_what_the_issue_asks() -> None:
    slim = make_profile("slim", TABLE)
    targets = slim.plan().arch.targets
    assert {t.cc for t in targets if t.kind is Kind.SASS} == {CC(7, 5), CC(8, 0), CC(9, 0), CC(10, 0), CC(12, 0)}
    assert not [t for t in targets if t.kind is Kind.PTX]  # the recipe's ptx = "none": PTX 12.0 broke the budget
    # Every discrete GPU CUDA 13.0 can target, 7.5 up, runs a cubin: nothing left to PTX JIT or unserved.
    discrete = [c for c in supported_archs(CudaVersion(13, 0)) if not ((g := generation(c)) and g.integrated)]
    assert all(served_by(c, targets)[0] == "sass" for c in discrete)
    assert slim.plan().compression == "size"
    upstream = make_profile("upstream", TABLE)
    assert set(upstream.plan().arch.targets) == set(parse_targets(UPSTREAM_TARGETS))
    assert CC(7, 0) not in {t.cc for t in upstream.plan().arch.targets}  # CUDA 13 cannot target Volta
    assert CC(12, 0) in upstream.plan().arch.coverage.ptx_only  # Blackwell only through PTX 9.0 in upstream's list
    assert (upstream.shared_lib, upstream.lto, upstream.blas, upstream.tuned_link) == (True, True, "system", False)
    assert (slim.shared_lib, slim.blas, slim.tuned_link) == (False, "scipy-openblas32", True)
    assert make_profile("slim-jit", TABLE).recipe_defines()["FAISS_LARGE_K_ARCHITECTURES"] == "75-virtual"


def test_an_unknown_profile_is_refused_with_the_known_ones() -> None:
    with pytest.raises(BadInputError, match="unknown faiss profile 'fast'") as e:
        make_profile("fast", TABLE)
    assert e.value.hint and "upstream" in e.value.hint
