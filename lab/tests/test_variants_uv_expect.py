"""lab/gpu/variants_uv.py's expectation (which variant the NVIDIA provider's rules give a GPU and driver) agrees with
what uv 0.13.8 chose with the GPU forced (tests/integration/test_variants_uv.py, docs/slim.md's table)."""

from __future__ import annotations

import pytest

from lab.scriptload import load_script

# nvidia_curand_cu12-10.3.10.19-variants.json as `slimwheel variants` writes it (three of its seven families)
VARIANTS = {
    "sm8x": {"nvidia": {"cuda_version_lower_bound": ["12.0"], "sm_arch": ["80_real", "86_real", "89_real"]}},
    "sm9x": {"nvidia": {"cuda_version_lower_bound": ["12.0"], "sm_arch": ["90_real"]}},
    "sm12x": {"nvidia": {"cuda_version_lower_bound": ["12.9"], "sm_arch": ["120_real", "121_virtual"]}},
}


@pytest.mark.parametrize(
    ("cc", "driver", "label"),
    [
        ("9.0", "13.0", "sm9x"),
        ("8.6", "12.0", "sm8x"),  # the bound is inclusive
        ("8.7", "12.9", "sm8x"),  # 87_real is not among sm8x's values, but 80_real is offered to 8.7
        ("12.0", "12.9", "sm12x"),
        ("12.1", "12.9", "sm12x"),
        ("12.0", "12.8", None),  # a driver older than the PTX's release
        ("9.0", "11.8", None),
        ("9.0", None, None),  # no driver: nothing a bound can be compared with
        ("13.0", "13.0", None),  # a newer major is offered 130_virtual, not 121_virtual
        ("7.5", "12.9", None),  # no variant of that family in this folder
    ],
)
def test_expected_variant(cc: str, driver: str | None, label: str | None) -> None:
    mod = load_script("lab/gpu/variants_uv.py")
    assert mod.expected(VARIANTS, cc, driver) == label


def test_overlapping_variants_are_refused() -> None:
    mod = load_script("lab/gpu/variants_uv.py")
    both = {**VARIANTS, "any9": {"nvidia": {"sm_arch": ["90_real"]}}}
    with pytest.raises(SystemExit, match="several variants"):
        mod.expected(both, "9.0", "13.0")
