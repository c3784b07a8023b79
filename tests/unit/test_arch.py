"""slimwheel.cuda.arch: binary compatibility, the plan's minimality, a/f variants, parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.cuda.arch import (
    CC,
    KNOWN_CCS,
    Coverage,
    Kind,
    Target,
    Variant,
    counted,
    explicit_plan,
    parse_cc_set,
    parse_ptx,
    parse_targets,
    plan,
    served_by,
)
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError

CUDA13 = supported_archs(CudaVersion(13, 0))


def T(text: str) -> Target:
    return Target.parse(text)


@pytest.mark.parametrize(
    ("target", "runs", "not_runs"),
    [
        ("sm_70", ["7.0", "7.2", "7.5"], ["8.0", "6.1", "9.0"]),
        ("sm_80", ["8.0", "8.6", "8.7", "8.9"], ["7.5", "9.0", "10.0"]),
        ("sm_86", ["8.6", "8.9"], ["8.0"]),
        ("sm_90", ["9.0"], ["8.9", "10.0", "12.0"]),
        ("sm_90a", ["9.0"], ["8.9", "10.0"]),
        ("sm_100a", ["10.0"], ["10.3", "12.0"]),
        ("sm_100f", ["10.0", "10.3"], ["12.0", "9.0"]),
        ("compute_90", ["9.0", "10.0", "12.0", "12.1"], ["8.9", "7.5"]),
        ("compute_90a", ["9.0"], ["10.0", "12.0"]),
        ("compute_120f", ["12.0", "12.1"], ["10.0"]),
    ],
)
def test_binary_compatibility(target: str, runs: list[str], not_runs: list[str]) -> None:
    t = T(target)
    assert all(t.runs_on(CC.parse(c)) for c in runs)
    assert not any(t.runs_on(CC.parse(c)) for c in not_runs)


def test_served_by_prefers_the_highest_compatible_cubin_then_ptx() -> None:
    ts = [T("sm_80"), T("sm_86"), T("compute_90")]
    assert served_by(CC(8, 9), ts) == ("sass", T("sm_86"))
    assert served_by(CC(8, 0), ts) == ("sass", T("sm_80"))
    assert served_by(CC(12, 0), ts) == ("ptx", T("compute_90"))
    assert served_by(CC(7, 5), ts) == ("none", None)
    cov = Coverage.of(ts)
    assert CC(8, 6) in cov.native and CC(10, 0) in cov.ptx_only and CC(7, 0) in cov.none


def test_default_cuda13_plan_is_five_cubins_and_ptx_of_the_newest() -> None:
    p = plan(CUDA13, supported=CUDA13)
    assert [t.arch for t in p.sass] == ["75", "80", "90", "100", "120"]
    assert [str(t) for t in p.ptx] == ["compute_120"]
    assert p.cmake_architectures == "75-real;80-real;90-real;100-real;120"
    assert "-gencode=arch=compute_120,code=compute_120" in p.nvcc_gencode
    skipped = dict(p.skipped)
    assert set(skipped) == {CC(8, 7), CC(8, 8), CC(11, 0), CC(12, 1)} and "aarch64" in skipped[CC(12, 1)]
    assert "no GPU" in skipped[CC(8, 8)]  # nvcc 13 accepts compute_88; no product has it
    assert all(served_by(c, p.targets)[0] == "sass" for c in p.wanted)
    # the coverage line counts what the plan counts: no skipped GPU is listed as served
    assert set(p.coverage.native) == set(p.wanted)


@pytest.mark.parametrize("spec", ["all", "7.5-12.1", "8.0+", "8.6,8.8,9.0", "7.5-9.0,12.0"])
@pytest.mark.parametrize("exclude_integrated", [True, False])
def test_plan_wanted_and_coverage_agree_with_the_counting_rule(spec: str, exclude_integrated: bool) -> None:
    """The build summary's "all N required", the plan's native line and check's required set are one rule."""
    asked = parse_cc_set(spec, supported=CUDA13)
    p = plan(asked, supported=CUDA13, exclude_integrated=exclude_integrated)
    rule = {c for c in asked if counted(c, exclude_integrated=exclude_integrated)}
    assert set(p.wanted) == rule
    assert rule <= set(p.coverage.native)
    listed = set(p.coverage.native) | set(p.coverage.ptx_only) | set(p.coverage.none)
    assert all(counted(c, exclude_integrated=exclude_integrated) for c in listed)
    assert {c for c, _ in p.skipped} == set(asked) - rule


def test_explicit_plans_count_the_same_way() -> None:
    p = explicit_plan(
        "75-real 80-real 86-real 90a-real 100f-real 120a-real 120", supported=CUDA13, exclude_integrated=True
    )
    assert CC(8, 7) not in p.wanted and CC(12, 1) not in p.coverage.native
    assert {CC(9, 0), CC(10, 0), CC(10, 3), CC(12, 0)} <= set(p.coverage.native)
    kept = explicit_plan("80-real", supported=CUDA13)
    assert CC(8, 7) in kept.wanted  # an aarch64 wheel's plan keeps Orin


@settings(max_examples=300, deadline=None)
@given(st.sets(st.sampled_from([c for c in CUDA13 if counted(c, exclude_integrated=True)]), min_size=1))
def test_plan_serves_every_wanted_cc_natively_with_one_cubin_per_major(wanted: set[CC]) -> None:
    p = plan(wanted, supported=CUDA13, ptx="none")
    assert all(served_by(c, p.targets)[0] == "sass" for c in wanted)
    # No cubin crosses a major, so one per wanted major is the minimum; the plan must reach it.
    assert len(p.sass) == len({c.major for c in wanted}) and not p.ptx
    for t in p.sass:
        assert t.cc == min(c for c in wanted if c.major == t.cc.major)


def test_extra_sass_and_ptx_lists() -> None:
    p = plan([CC(8, 0), CC(9, 0)], supported=CUDA13, extra_sass=[T("86"), T("90a")], ptx=parse_ptx("8.0,9.0"))
    assert [str(t) for t in p.targets] == ["sm_80", "sm_86", "sm_90", "sm_90a", "compute_80", "compute_90"]
    with pytest.raises(BadInputError, match="beyond this toolkit"):
        plan([CC(8, 0)], supported=CUDA13, extra_sass=[T("70")])
    with pytest.raises(BadInputError, match="is PTX"):
        plan([CC(8, 0)], supported=CUDA13, extra_sass=[T("compute_90")])


def test_plan_keeps_integrated_gpus_when_asked_and_rejects_empty_requests() -> None:
    p = plan([CC(8, 7), CC(11, 0)], supported=CUDA13, exclude_integrated=False)
    assert [t.arch for t in p.sass] == ["87", "110"]
    with pytest.raises(BadInputError, match="leaves no compute capability"):
        plan([CC(6, 1)], supported=CUDA13)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9.0", CC(9, 0)),
        ("90", CC(9, 0)),
        ("sm_86", CC(8, 6)),
        ("compute_120", CC(12, 0)),
        ("12.1", CC(12, 1)),
        ("100", CC(10, 0)),
    ],
)
def test_cc_parse(text: str, expected: CC) -> None:
    assert CC.parse(text) == expected


@pytest.mark.parametrize("bad", ["", "9", "abc", "sm_", "1000", "9.x", "8.10"])
def test_cc_parse_errors(bad: str) -> None:
    with pytest.raises(BadInputError, match="is not a compute capability"):
        CC.parse(bad)


def test_target_parse_variants_and_errors() -> None:
    assert T("90a") == Target(CC(9, 0), Kind.SASS, Variant.ARCH)
    assert T("compute_100f") == Target(CC(10, 0), Kind.PTX, Variant.FAMILY)
    assert str(T("sm_120a")) == "sm_120a" and T("100f").cmake == "100f-real"
    for bad in ("sm_9x", "compute_", "zz", ""):
        with pytest.raises(BadInputError, match="is not a GPU target"):
            T(bad)


def test_parse_targets_cmake_style() -> None:
    assert [str(t) for t in parse_targets("75-real;80-real;90")] == ["sm_75", "sm_80", "sm_90", "compute_90"]
    assert [str(t) for t in parse_targets("sm_80,compute_90 100a-virtual")] == ["sm_80", "compute_90", "compute_100a"]
    p = explicit_plan("80-real;90", supported=CUDA13)
    assert CC(12, 0) in p.wanted and CC(7, 5) not in p.wanted
    with pytest.raises(BadInputError, match="beyond this toolkit"):
        explicit_plan("70-real", supported=CUDA13)


def test_parse_cc_set_forms_and_errors() -> None:
    assert parse_cc_set("7.5-9.0", supported=CUDA13) == (
        CC(7, 5),
        CC(8, 0),
        CC(8, 6),
        CC(8, 7),
        CC(8, 8),
        CC(8, 9),
        CC(9, 0),
    )
    assert parse_cc_set("12.0+", supported=CUDA13) == (CC(12, 0), CC(12, 1))
    assert parse_cc_set("all") == tuple(sorted(KNOWN_CCS))
    assert parse_cc_set("8.6, 9.0") == (CC(8, 6), CC(9, 0))
    with pytest.raises(BadInputError, match="runs backwards"):
        parse_cc_set("12.0-7.5")
    with pytest.raises(BadInputError, match="names no compute capability"):
        parse_cc_set("5.0-6.1", supported=CUDA13)


def test_an_empty_plan_says_why_each_wanted_cc_was_dropped() -> None:
    # "--archs 8.7" left nothing, and the hint listed 8.7 as supported: the message must say Jetson is left out.
    with pytest.raises(BadInputError, match=r"8\.7: Jetson Orin is an integrated aarch64 GPU"):
        plan([CC(8, 7)], supported=CUDA13)
    with pytest.raises(BadInputError, match=r"6\.1: the toolkit cannot target it"):
        plan([CC(6, 1)], supported=CUDA13)


def test_driver_for_a_release_newer_than_the_table_is_unknown_not_the_last_known() -> None:
    from slimwheel.cuda.versions import CudaVersion, driver_for_release

    assert driver_for_release(CudaVersion(13, 0)) == "580.65.06"
    assert driver_for_release(CudaVersion(12, 7)) == "560.28.03"  # no 12.7 release: 12.6's driver
    assert driver_for_release(CudaVersion(13, 1)) == "590.44.01"  # the release notes' 13.1 GA row
    assert driver_for_release(CudaVersion(13, 4)) is None  # no row read yet: unknown, not 13.3's 610
    # PTX of CUDA 11.1-11.7 (on PyPI in old wheels) needs its release's driver, not CUDA 11's first (450.80.02).
    assert driver_for_release(CudaVersion(11, 1)) == "455.23"
    assert driver_for_release(CudaVersion(11, 7)) == "515.43.04"


def test_cuda13_tables_agree_with_the_measured_nvcc_lists() -> None:
    """tests/data/cuda13-archs.json is what lab/bench/cuda13-archs.py measured from each release's nvcc wheel."""
    import json
    from pathlib import Path

    from slimwheel.cuda.versions import CUDA13_RELEASES, PTX_ISA_RELEASE

    measured = json.loads((Path(__file__).resolve().parents[2] / "tests" / "data" / "cuda13-archs.json").read_text())
    rows = {r["release"]: r for r in measured["releases"]}
    assert set(rows) == {str(v) for v in CUDA13_RELEASES}
    for v in CUDA13_RELEASES:
        assert [c.sm for c in supported_archs(v)] == rows[str(v)]["compute"], v
        if rows[str(v)]["ptx_isa"]:
            major, minor = map(int, rows[str(v)]["ptx_isa"].split("."))
            assert PTX_ISA_RELEASE[(major, minor)] == (v.major, v.minor)


def test_family_and_thor_targets_in_plans() -> None:
    """RAPIDS' CUDA 13 list (shared/cuda-facts.md section 3) and an aarch64 plan with Thor (11.0)."""
    rapids = explicit_plan(
        "75-real 80-real 86-real 90a-real 100f-real 120a-real 120", supported=CUDA13, exclude_integrated=True
    )
    cov = rapids.coverage
    assert {CC(10, 0), CC(10, 3)} <= set(cov.native)  # 100f: the whole 10.x family
    assert served_by(CC(10, 3), rapids.targets) == ("sass", T("100f"))
    assert served_by(CC(12, 0), rapids.targets)[0] == "sass"
    assert "100f-real" in rapids.cmake_architectures.split(";")
    fam = plan([CC(10, 0), CC(12, 0)], supported=CUDA13, extra_sass=[T("100f"), T("120f")], ptx="none")
    assert [t.arch for t in fam.sass] == ["100", "100f", "120", "120f"]
    arm = plan(parse_cc_set("all", supported=CUDA13), supported=CUDA13, exclude_integrated=False)
    assert CC(11, 0) in arm.wanted and "110" in [t.arch for t in arm.sass]  # Thor's own cubin
    assert CC(11, 0) in arm.coverage.native and CC(11, 0) not in plan(arm.wanted, supported=CUDA13).coverage.native


def test_the_plan_json_native_line_is_the_plans_own_coverage() -> None:
    from slimwheel import config as cfgmod
    from slimwheel.plan import make_plan_for_release, plan_to_json

    p = make_plan_for_release(cfgmod.resolve({"archs": "all"}), CudaVersion(13, 0))
    native = plan_to_json(p)["coverage"]["native"]
    assert native == [str(c) for c in p.arch.coverage.native]
    assert "8.7" not in native and "12.1" not in native


def test_driver_versions_compare_as_numbers() -> None:
    from slimwheel.cuda.versions import driver_key

    assert driver_key("580.65.06") > driver_key("550.54.14") > driver_key("525.60.13")
    assert driver_key("1000.1") > driver_key("999.99.99")  # not as text
    assert max(["450.80.02", "580.65.06", "525.60.13"], key=driver_key) == "580.65.06"
    with pytest.raises(BadInputError):
        driver_key("580.x")
