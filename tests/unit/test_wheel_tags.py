"""A wheel's tags come from its file name in the file name's order: packaging's frozenset changed order from run to
run with string hashing, and with it size-report's JSON (cuFFT's two tags swapped between two runs)."""

from __future__ import annotations

from slimwheel.inspect.wheel import file_tags

NAME = "nvidia_cufft-12.5.0.14-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


def test_tags_in_the_file_names_order() -> None:
    assert file_tags(NAME) == ("py3-none-manylinux2014_x86_64", "py3-none-manylinux_2_17_x86_64")
    assert file_tags("x-1.0-cp311.cp312-abi3-manylinux_2_28_x86_64.whl") == (
        "cp311-abi3-manylinux_2_28_x86_64",
        "cp312-abi3-manylinux_2_28_x86_64",
    )
    assert file_tags("not a wheel") == ()
