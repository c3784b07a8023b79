"""Fuzzing the fatbin and ELF readers: arbitrary and mutated inputs end in a result or a BadInputError, nothing else."""

from __future__ import annotations

import itertools
import struct

import pytest
from helpers.fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import parse_fatbins
from testkit.binsynth import cubin, elf, fatbin, fatbin_entry

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
FUZZ = fuzz(1500)


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


@fuzz(500)
@given(st.binary(max_size=512))
def test_fatbin_reader_on_random_bytes(data: bytes) -> None:
    _parse_fatbins(b"\x50\xed\x55\xba" + data)


@FUZZ
@given(mutated(ELF))
def test_elf_reader_on_mutated_files(data: bytes) -> None:
    _read_elf(data)


@fuzz(500)
@given(st.binary(max_size=256))
def test_elf_reader_on_random_bytes_after_the_magic(data: bytes) -> None:
    _read_elf(b"\x7fELF" + data)


# ---------------------------------------------------------------- the zip reader


def _wheel_bytes() -> bytes:
    import tempfile
    from pathlib import Path

    from testkit.wheelmaker import make_wheel

    with tempfile.TemporaryDirectory() as tmp:
        return make_wheel(Path(tmp), files={"demo/_ext.so": ELF, "demo/__init__.py": b"x = 1\n" * 40}).read_bytes()


WHEEL = _wheel_bytes()


@fuzz(120)
@given(mutated(WHEEL))
def test_zip_reader_on_mutated_wheels(data: bytes) -> None:
    """Any corruption of a wheel ends in a report or one BadInputError naming the wheel, never another exception."""
    import tempfile
    from pathlib import Path

    from slimwheel.inspect.scan import inspect_wheel
    from slimwheel.inspect.zipread import extract

    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp) / "w.whl"
        w.write_bytes(data)
        for read in (lambda: inspect_wheel(w), lambda: extract(w, Path(tmp) / "out")):
            try:
                read()
            except BadInputError as e:
                assert e.message.startswith(f"{w}: "), e.message


# ---------------------------------------------------------------- slim_elf and overlapping containers (issue 24 item 2)


def _slim_elf(data: bytes) -> None:
    """slim_elf either refuses with the reader's clean error, or gives a file of the same length that reads back with
    the same containers in the same places, only kept entries in them."""
    from slimwheel.cuda.arch import CC
    from slimwheel.postbuild.fatbin_edit import SlimRequest, slim_elf

    try:
        out = slim_elf(data, "fuzz.so", SlimRequest(ccs=(CC(9, 0),)))
    except BadInputError as e:
        assert str(e).startswith("fuzz.so")
        return
    assert len(out.data) == len(data)
    before, after = read_elf(data, "fuzz.so"), read_elf(out.data, "fuzz.so")
    assert [fb.offset for fb in after.fatbins] == [fb.offset for fb in before.fatbins]
    kept = [(e.kind, e.arch) for fb in after.fatbins for e in fb.entries]
    assert kept == list(out.kept)


# Containers in .data among other bytes, in .nv_fatbin, and one a wrapper registers in .rodata: every route to a
# container, so that mutations make them overlap, nest and run across sections.
DATA_ELF = elf(
    sections={
        ".rodata": b"\x01" * 8 + FB,
        ".nv_fatbin": FB,
        ".data": b"\x33" * 16 + FB + b"\x44" * 8 + FB,
        ".nvFatBinSegment": b"",
    },
    needed=("libcudart.so.13",),
    load_segment=True,
)


@FUZZ
@given(mutated(ELF))
def test_slim_elf_on_mutated_files(data: bytes) -> None:
    _slim_elf(data)


@FUZZ
@given(mutated(DATA_ELF))
def test_slim_elf_on_mutated_containers_in_several_sections(data: bytes) -> None:
    _read_elf(data)
    _slim_elf(data)


@fuzz(300)
@given(st.data())
def test_no_byte_belongs_to_two_containers(draw: st.DataObject) -> None:
    """Section headers moved over each other's bytes and wrappers pointed anywhere: whatever the reader accepts, its
    containers never share a byte, and slim_elf either refuses or succeeds."""
    import struct

    n_wrappers = draw.draw(st.integers(0, 3))
    wrappers = b"".join(
        struct.pack("<IIQQ", 0x466243B1, 1, draw.draw(st.integers(0, len(DATA_ELF))), 0) for _ in range(n_wrappers)
    )
    data = bytearray(
        elf(
            sections={
                ".rodata": b"\x01" * 8 + FB,
                ".nv_fatbin": FB,
                ".data": b"\x33" * 16 + FB + b"\x44" * 8 + FB,
                ".nvFatBinSegment": wrappers,
            },
            needed=("libcudart.so.13",),
            load_segment=True,
        )
    )
    shoff, shnum = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3C)[0]
    for _ in range(draw.draw(st.integers(1, 3))):
        i = draw.draw(st.integers(1, shnum - 1))
        off = draw.draw(st.integers(0, len(data)))
        size = draw.draw(st.integers(0, len(data) - off))
        struct.pack_into("<QQ", data, shoff + i * 64 + 0x18, off, size)
    try:
        r = read_elf(bytes(data), "fuzz.so")
    except BadInputError as e:
        assert str(e).startswith("fuzz.so")
        return
    spans = sorted((fb.offset, fb.offset + fb.size) for fb in r.fatbins)
    assert all(a_end <= b_start for (_a, a_end), (b_start, _b) in itertools.pairwise(spans))
    _slim_elf(bytes(data))


def test_a_fatbin_section_over_another_sections_container_is_refused() -> None:
    """Found by test_no_byte_belongs_to_two_containers, built here directly: a strict .nv_fatbin section lying over
    zero bytes of the container .data holds read fine, and slim's edit of that container then made a file no reader
    accepted. The reader refuses it, so slim never writes it."""
    import struct

    data = bytearray(
        elf(sections={".nv_fatbin": FB, ".data": b"\x33" * 16 + FB}, needed=("libcudart.so.13",), load_segment=True)
    )
    clean = read_elf(bytes(data), "fuzz.so")
    inner = next(fb for fb in clean.fatbins if fb.section == ".data")
    zeros = bytes(data).find(b"\0" * 8, inner.offset + 16, inner.offset + inner.size)
    assert zeros > 0
    shoff, shnum = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3C)[0]
    moved = next(i for i in range(1, shnum) if read_section_name(bytes(data), shoff, i) == ".nv_fatbin")
    struct.pack_into("<QQ", data, shoff + moved * 64 + 0x18, zeros, 8)
    with pytest.raises(BadInputError, match="lies over the fatbin"):
        read_elf(bytes(data), "fuzz.so")


def read_section_name(data: bytes, shoff: int, i: int) -> str:
    import struct

    shstrndx = struct.unpack_from("<H", data, 0x3E)[0]
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * 64 + 0x18)[0]
    name_off = struct.unpack_from("<I", data, shoff + i * 64)[0]
    end = data.index(b"\0", str_off + name_off)
    return data[str_off + name_off : end].decode()


def test_a_structure_section_inside_a_container_is_refused() -> None:
    """Found by test_no_byte_belongs_to_two_containers (section 1, .dynstr, moved to 3 bytes inside the first
    container): its strings read, and slim's edit of the container left one without its end, a file no reader
    accepted. The reader refuses the input, so slim never writes such a file."""
    import struct

    data = bytearray(DATA_ELF)  # the fuzz test's file with no wrapper
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    assert read_elf(bytes(data), "fuzz.so").fatbins  # the file as built reads
    base = bytes(data)
    struct.pack_into("<QQ", data, shoff + 1 * 64 + 0x18, 239, 3)
    with pytest.raises(BadInputError, match=r"fuzz.so: section \.dynstr .* lies over the fatbin"):
        read_elf(bytes(data), "fuzz.so")
    # The section-name table (section 7) moved into a container's bytes: every name reads as garbage, the container's
    # section name equals the table's own, and a check by name let it through (hypothesis, 852 and 61/62 bytes).
    for size in (61, 62):
        moved = bytearray(base)
        struct.pack_into("<QQ", moved, shoff + 7 * 64 + 0x18, 852, size)
        with pytest.raises(BadInputError, match=r"lies over the fatbin"):
            read_elf(bytes(moved), "fuzz.so")


# ------------------------------------------------------------------------- issue 41: the loader's view, cubins

# A library as a linker writes it: PT_LOAD, PT_DYNAMIC and the table tags, symbols and versions, device code.
DYN_ELF = elf(
    sections={".text": b"\x90" * 32, ".nv_fatbin": FB},
    needed=("libcudart.so.13", "libc.so.6"),
    soname="libf.so",
    runpath="$ORIGIN",
    symbols=("PyInit__f",),
    imports={"libm.so.6": [("exp", "GLIBC_2.29")]},
    dynamic_segment=True,
)
CUBIN = cubin(100, arch_specific=True, compat=True)


def _loader_view_agrees(data: bytes) -> None:
    """Whatever the reader accepts from a file with a dynamic segment is what pyelftools reads from that segment,
    where pyelftools reads it to its DT_NULL (it stops at p_filesz; glibc reads the array to DT_NULL)."""
    import io

    from elftools.elf.elffile import ELFFile

    try:
        r = read_elf(data, "fuzz.so")
    except BadInputError as e:
        assert str(e).startswith("fuzz.so")
        return
    try:
        segs = [s for s in ELFFile(io.BytesIO(data)).iter_segments() if s["p_type"] == "PT_DYNAMIC"]
        tags = list(segs[0].iter_tags()) if len(segs) == 1 else []  # type: ignore[attr-defined]
    except Exception:  # pyelftools gives up on files it cannot read in many ways: no oracle for those
        return
    # A mutation to e_machine EM_CUDA makes a cubin, which the host loader refuses to load (long runs found it).
    if r.kind in ("shared", "executable") and tags and tags[-1].entry.d_tag == "DT_NULL":
        assert list(r.needed) == [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]


@fuzz(400)
@given(mutated(DYN_ELF))
def test_elf_reader_on_mutated_files_with_a_dynamic_segment(data: bytes) -> None:
    _loader_view_agrees(data)


# Values that break arithmetic: past a C ssize_t, past 32 bits, the file's own length, small and zero.
EDGES = [0, 1, 8, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


@fuzz(400)
@given(st.data())
def test_elf_reader_on_header_fields_set_to_edge_values(draw: st.DataObject) -> None:
    """An OverflowError came from a .rodata header's offset past 2**63 (issue 41): every 8-byte field of the file
    header, program headers and section headers set to values at the edges."""
    data = bytearray(draw.draw(st.sampled_from([DYN_ELF, DATA_ELF, CUBIN, ELF])))
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phnum, shnum = struct.unpack_from("<H", data, 0x38)[0], struct.unpack_from("<H", data, 0x3C)[0]
    fields = [0x18, 0x20, 0x28]
    fields += [phoff + i * 56 + f for i in range(phnum) for f in (0x8, 0x10, 0x20, 0x28)]
    fields += [shoff + i * 64 + f for i in range(shnum) for f in (0x8, 0x18, 0x20, 0x38)]
    for _ in range(draw.draw(st.integers(1, 3))):
        at = draw.draw(st.sampled_from(fields))
        value = draw.draw(st.sampled_from([*EDGES, len(data)]) | st.integers(0, (1 << 64) - 1))
        struct.pack_into("<Q", data, at, value)
    if draw.draw(st.booleans()) and shnum:  # and a section's type: inactive (NULL), NOBITS or PROGBITS
        i = draw.draw(st.integers(1, shnum - 1))
        struct.pack_into("<I", data, shoff + i * 64 + 4, draw.draw(st.sampled_from([0, 1, 8])))
    _loader_view_agrees(bytes(data))


@fuzz(400)
@given(mutated(CUBIN))
def test_cubin_reader_on_mutated_cubins(data: bytes) -> None:
    _read_elf(data)


@fuzz(300)
@given(st.binary(max_size=2048))
def test_nv_compat_records_are_read_or_refused(records: bytes) -> None:
    from slimwheel.inspect.fatbin import compat_arch_specific

    try:
        assert compat_arch_specific(records, where="k.cubin") in (True, False)
    except BadInputError as e:
        assert str(e).startswith("k.cubin: its .nv.compat section")
