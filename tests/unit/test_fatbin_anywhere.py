"""Fatbin containers wherever they live (issue 22 item 1) and the bytes no two containers may share (issue 24 items 2
and 8): containers among other data in any allocated section, each bounded by its section and reported with it;
overlapping, nested and lying containers refused."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from slimwheel.cuda.arch import parse_require_arch
from slimwheel.errors import BadInputError, ExitCode
from slimwheel.inspect.elf import read_elf
from testkit.binsynth import elf, fatbin, fatbin_entry

SM75 = fatbin([fatbin_entry(sm=75, payload=b"\1" * 64)])
SM90 = fatbin([fatbin_entry(sm=90, payload=b"\2" * 64), fatbin_entry(kind="ptx", sm=90, payload=b"\3" * 32)])


def _section(data: bytes, name: str) -> tuple[int, int, int]:
    """(index, file offset, size) of a section."""
    f = ELFFile(io.BytesIO(data))
    for i, s in enumerate(f.iter_sections()):
        if s.name == name:
            return i, s["sh_offset"], s["sh_size"]
    raise KeyError(name)


def _move_section(data: bytes, name: str, offset: int, size: int) -> bytes:
    """`data` with one section header pointing at other bytes (ELF64 little-endian, as binsynth writes)."""
    i, _off, _size = _section(data, name)
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    out = bytearray(data)
    struct.pack_into("<QQ", out, shoff + i * 64 + 0x18, offset, size)
    return bytes(out)


def test_containers_among_other_data_are_found_with_their_section() -> None:
    """libcufft.so.12 keeps 18,215 containers in .data between other data, 12 more in .ldata, and no .nv_fatbin."""
    data_sec = b"\x07" * 40 + SM75 + b"\x09" * 24 + SM90 + b"\x05" * 8
    r = read_elf(elf(sections={".data": data_sec, ".ldata": SM90}), "libcufft.so.12")
    assert [fb.section for fb in r.fatbins] == [".data", ".data", ".ldata"]
    assert [[e.arch for e in fb.entries] for fb in r.fatbins] == [["75"], ["90", "90"], ["90", "90"]]
    _i, off, _n = _section(elf(sections={".data": data_sec, ".ldata": SM90}), ".data")
    assert r.fatbins[0].offset == off + 40 and r.fatbins[1].offset == off + 40 + len(SM75) + 24


def test_a_bare_magic_number_is_not_a_container() -> None:
    """libcudart compares with the magic: the number alone, without a container's header, is other data."""
    rodata = struct.pack("<IHHQ", 0xBA55ED50, 0, 0, 0) + struct.pack("<I", 0xBA55ED50) + b"\0" * 12
    assert read_elf(elf(sections={".rodata": rodata}), "libcudart.so.13").fatbins == ()


def test_a_container_in_data_is_bounded_by_its_section() -> None:
    """A .rodata container whose entries run on into the next section is refused, not read across it."""
    cut = SM90[:-16]
    with pytest.raises(BadInputError, match=r"x\.so \[\.rodata\]: fatbin at .*run past the end") as e:
        read_elf(elf(sections={".rodata": cut, ".data": b"\0" * 64}), "x.so")
    assert e.value.exit_code is ExitCode.BAD_INPUT


def test_two_sections_over_the_same_bytes_are_refused() -> None:
    """The same container seen through .nv_fatbin and a .rodata header laid over it would count twice."""
    base = elf(sections={".nv_fatbin": SM90, ".rodata": b"\0" * len(SM90)})
    _i, off, size = _section(base, ".nv_fatbin")
    with pytest.raises(BadInputError, match="is the same container as the fatbin at .*no byte may belong to two"):
        read_elf(_move_section(base, ".rodata", off, size), "x.so")


def test_a_section_spanning_another_sections_container_is_refused() -> None:
    """A .rodata header whose bytes cover .nv_fatbin: the container lies in both sections."""
    base = elf(sections={".rodata": b"\x01" * 8, ".nv_fatbin": SM90})
    _i, ro, _s = _section(base, ".rodata")
    _j, nv, nv_size = _section(base, ".nv_fatbin")
    with pytest.raises(BadInputError, match="no byte may belong to two CUDA modules"):
        read_elf(_move_section(base, ".rodata", ro, nv + nv_size - ro), "x.so")


def test_a_container_starting_inside_another_ones_entry_is_refused() -> None:
    """A wrapper that registers bytes inside another container's payload (slim and variants died in struct.error)."""
    inner = fatbin([fatbin_entry(sm=80, payload=b"\4" * 8)])
    outer = fatbin([fatbin_entry(sm=75, payload=inner + b"\0" * (-len(inner) % 8))])
    blank = struct.pack("<IIQQ", 0x466243B1, 1, 0, 0) * 2
    first = elf(sections={".nv_fatbin": outer, ".nvFatBinSegment": blank}, load_segment=True)
    _i, nv, _s = _section(first, ".nv_fatbin")
    inner_at = nv + 16 + 64
    wrappers = struct.pack("<IIQQ", 0x466243B1, 1, nv, 0) + struct.pack("<IIQQ", 0x466243B1, 1, inner_at, 0)
    data = elf(sections={".nv_fatbin": outer, ".nvFatBinSegment": wrappers}, load_segment=True)
    with pytest.raises(BadInputError, match=rf"points at a fatbin at {inner_at:#x}, inside the fatbin at {nv:#x}"):
        read_elf(data, "x.so")


def test_an_inflated_size_the_format_cannot_reach_is_refused() -> None:
    """An uncompressed size of 2**64-1 for a 64-byte payload was shown as 17 billion GiB and passed."""
    lie = fatbin(
        [fatbin_entry(sm=90, flags=0x8011, compressed_size=64, uncompressed_size=2**64 - 1, payload=b"\5" * 64)]
    )
    with pytest.raises(BadInputError, match="inflate to 18446744073709551615, more than zstd can make"):
        read_elf(elf(sections={".nv_fatbin": lie}), "x.so")
    honest = fatbin([fatbin_entry(sm=90, flags=0x2011, compressed_size=64, uncompressed_size=640, payload=b"\5" * 64)])
    (fb,) = read_elf(elf(sections={".nv_fatbin": honest}), "x.so").fatbins
    assert fb.entries[0].uncompressed_size == 640 and fb.entries[0].compression == "lz4"


def test_scanning_a_large_data_section_is_one_search_per_container() -> None:
    """48 MiB of .data with containers spread through it: found by a C-level search, not a Python loop per byte."""
    import time

    filler = b"\x11" * (1 << 20)
    body = b"".join(filler + SM75 for _ in range(48))
    data = elf(sections={".data": body})
    t = time.perf_counter()
    r = read_elf(data, "big.so")
    took = time.perf_counter() - t
    assert len(r.fatbins) == 48 and {fb.section for fb in r.fatbins} == {".data"}
    assert took < 5.0, f"scanning {len(body) >> 20} MiB took {took:.1f} s"  # about 0.05 s on the 2-core machine


def test_ccs_only_a_few_modules_have_code_for_are_said_with_the_count(tmp_path: Path) -> None:
    # cuSPARSELt 0.8.1's shape: 993 modules for 8.0 and newer, 2 with PTX for 5.2; here 10 and 1
    from slimwheel.check import check_wheel, make_policy
    from slimwheel.inspect.scan import inspect_wheel
    from testkit.wheelmaker import make_wheel

    mods = [fatbin([fatbin_entry(sm=80), fatbin_entry(sm=90)]) for _ in range(10)]
    mods.append(fatbin([fatbin_entry(kind="ptx", sm=52)]))
    lib = elf(sections={".nv_fatbin": b"".join(m + b"\0" * (-len(m) % 8) for m in mods)})
    r = inspect_wheel(
        make_wheel(tmp_path, name="lt", files={"lt/liblt.so.0": lib}, tag="py3-none-manylinux_2_28_x86_64")
    )
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("6.0-8.0")))
    assert v.ok, v.failures
    (served,) = [n for n in v.notes if n.startswith("all ")]
    assert "6.0, 6.1, 7.0, 7.5: only 1 of 11 modules carry code for them, the others for other GPUs only" in served
