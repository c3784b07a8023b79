"""Fuzzing the fatbin and ELF readers: arbitrary and mutated inputs end in a result or a BadInputError, nothing else."""

from __future__ import annotations

from helpers.binsynth import elf, fatbin, fatbin_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import parse_fatbins

FB = fatbin(
    [
        fatbin_entry(sm=75, payload=b"\x11" * 40),
        fatbin_entry(
            kind="ptx",
            sm=90,
            flags=0x8011,
            compressed_size=24,
            uncompressed_size=99,
            payload=b"\x22" * 24,
            header_size=80,
        ),
    ]
)
ELF = elf(
    sections={".text": b"\x90" * 64, ".nv_fatbin": FB + b"\0" * 8 + FB},
    needed=("libcudart.so.13",),
    soname="libf.so",
    runpath="$ORIGIN",
)
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "word", "cut", "insert"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word" and len(data) >= 8:
            pos = min(pos, len(data) - 8)
            data[pos : pos + 8] = draw(st.binary(min_size=8, max_size=8))
        elif op == "cut":
            del data[pos:]
        else:
            data[pos:pos] = draw(st.binary(max_size=16))
    return bytes(data)


def _parse_fatbins(data: bytes) -> None:
    try:
        for fb in parse_fatbins(data, where="fuzz"):
            assert fb.size >= 16
            for e in fb.entries:
                assert e.stored_size >= 0 and e.uncompressed_size >= 0
    except BadInputError as e:
        assert str(e).startswith("fuzz")


def _read_elf(data: bytes) -> None:
    try:
        read_elf(data, "fuzz.so")
    except BadInputError as e:
        assert str(e).startswith("fuzz.so")


@FUZZ
@given(mutated(FB + b"\0" * 8 + FB))
def test_fatbin_reader_on_mutated_containers(data: bytes) -> None:
    _parse_fatbins(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_fatbin_reader_on_random_bytes(data: bytes) -> None:
    _parse_fatbins(b"\x50\xed\x55\xba" + data)


@FUZZ
@given(mutated(ELF))
def test_elf_reader_on_mutated_files(data: bytes) -> None:
    _read_elf(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=256))
def test_elf_reader_on_random_bytes_after_the_magic(data: bytes) -> None:
    _read_elf(b"\x7fELF" + data)


# ---------------------------------------------------------------- the zip reader


def _wheel_bytes() -> bytes:
    import tempfile
    from pathlib import Path

    from helpers.wheelmaker import make_wheel

    with tempfile.TemporaryDirectory() as tmp:
        return make_wheel(Path(tmp), files={"demo/_ext.so": ELF, "demo/__init__.py": b"x = 1\n" * 40}).read_bytes()


WHEEL = _wheel_bytes()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(WHEEL))
def test_zip_reader_on_mutated_wheels(data: bytes) -> None:
    """Any corruption of a wheel ends in a report or one BadInputError naming the wheel, never another exception."""
    import tempfile
    from pathlib import Path

    from slimwheel.inspect.report import inspect_wheel
    from slimwheel.inspect.zipread import extract

    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp) / "w.whl"
        w.write_bytes(data)
        for read in (lambda: inspect_wheel(w), lambda: extract(w, Path(tmp) / "out")):
            try:
                read()
            except BadInputError as e:
                assert e.message.startswith(f"{w}: "), e.message
