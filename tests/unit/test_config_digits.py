"""Issue 41: settings written with digits other than ASCII (Arabic-Indic, fullwidth) and numbers no GPU, CUDA
release or file can have ("1.0-999999.0", a 5,000-digit size) are refused with a ConfigError naming the key, never
read as a value or turned into a crash (int()'s digit limit, float's infinity)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.config import resolve
from slimwheel.cuda.arch import CC, parse_cc_request
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ConfigError
from slimwheel.units import MAX_SIZE, parse_size

# Every decimal digit of Unicode that is not ASCII (Arabic-Indic, Devanagari, fullwidth, mathematical bold ...):
# int() and the regular expression `\d` take them all.
_FOREIGN_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())


def _foreign(text: str, digit: str) -> str:
    """`text` with each ASCII digit replaced by the digit of the same value in `digit`'s script."""
    zero = ord(digit) - unicodedata.digit(digit)
    return "".join(chr(zero + int(c)) if c.isascii() and c.isdigit() else c for c in text)


@settings(max_examples=200, deadline=None)
@given(
    digit=_FOREIGN_DIGITS,
    key_value=st.sampled_from(
        [
            ("budget", "60MiB"),
            ("installed-budget", "100 MB"),
            ("archs", "7.5-12.0"),
            ("archs", "86"),
            ("require-arch", "8.6,9.0"),
            ("ptx", "12.0"),
            ("cuda", "12.4"),
            ("targets", "sm_90"),
        ]
    ),
)
def test_non_ascii_digits_are_refused_naming_the_key(digit: str, key_value: tuple[str, str]) -> None:
    key, value = key_value
    resolve({key: value}, {}, {})  # the ASCII spelling is a good value: the digits alone make it bad
    with pytest.raises(ConfigError) as e:
        resolve({key: _foreign(value, digit)}, {}, {}, file_name="p/pyproject.toml")
    assert len(e.value.problems) == 1
    assert e.value.problems[0].startswith(f"p/pyproject.toml [tool.slimwheel]: {key}")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("require-arch", "1.0-999999.0"),
        ("archs", "7.5-100.0"),
        ("archs", "9" * 4000 + ".0"),
        ("require-arch", "1.0-" + "9" * 4000 + ".0"),
        ("budget", "9" * 4000),
        ("budget", "99999999999999999999GiB"),
        ("budget", "1e400"),
        ("installed-budget", "16EiB"),
        ("cuda", "12." + "4" * 4000),
    ],
)
def test_huge_numbers_are_a_config_error_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve({}, {f"SLIMWHEEL_{key.upper().replace('-', '_')}": value}, {})
    assert len(e.value.problems) == 1
    assert e.value.problems[0].startswith(f"environment SLIMWHEEL_*: {key}"), e.value.problems


def test_size_edges() -> None:
    assert parse_size("1.1MB") == 1_100_000  # exact: a float made it 1099999 bytes
    assert parse_size(str(MAX_SIZE)) == MAX_SIZE
    for bad in (str(MAX_SIZE + 1), "8388608TiB", "1.", ".5MiB", "1.0000000001GiB"):
        with pytest.raises(BadInputError):
            parse_size(bad)


def test_compute_capabilities_keep_their_spellings() -> None:
    assert [CC.parse(t) for t in ("8.6", "86", "sm_86", "compute_121", "12.1", "99.9")] == [
        CC(8, 6),
        CC(8, 6),
        CC(8, 6),
        CC(12, 1),
        CC(12, 1),
        CC(99, 9),
    ]
    assert parse_cc_request("1.0-99.9").resolve() == parse_cc_request("all").resolve()
    for bad in ("100.0", "1234", "8.10", "8.", ".6"):
        with pytest.raises(BadInputError):
            CC.parse(bad)


def test_cuda_versions_keep_their_spellings() -> None:
    assert [CudaVersion.parse(t) for t in ("13", "12.4", "12.4.131")] == [
        CudaVersion(13, 0),
        CudaVersion(12, 4),
        CudaVersion(12, 4),
    ]
    for bad in ("+12", "1_2", "12.", "12.4.1.1", " "):
        with pytest.raises(BadInputError):
            CudaVersion.parse(bad)
