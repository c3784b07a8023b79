"""The fatbin reader on synthetic bytes: layout, flags, sizes, and every malformation as a BadInputError."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimwheel.cuda.arch import CC, Kind, Target, Variant
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import MAX_RECORDS, parse_fatbin, parse_fatbins
from slimwheel.inspect.files import mapped_file
from testkit.binsynth import elf, fatbin, fatbin_entry, pad8


def test_uncompressed_sass_entry_reports_padded_size_as_both_sizes() -> None:
    fb = parse_fatbin(fatbin([fatbin_entry(sm=75, payload=b"\x01" * 128)]), where="t")
    (e,) = fb.entries
    assert (e.kind, e.arch, e.compression, e.stored_size, e.uncompressed_size) == ("sass", "75", "none", 128, 128)
    assert e.target == Target(CC(7, 5), Kind.SASS)
    assert not e.compressed and e.ptx_isa is None
    assert fb.size == 16 + 64 + 128 and fb.offset == 0


@pytest.mark.parametrize(("flag", "name"), [(0x2000, "lz4"), (0x8000, "zstd")])
def test_compressed_entry_sizes_come_from_the_header(flag: int, name: str) -> None:
    entry = fatbin_entry(sm=90, flags=0x11 | flag, payload=b"\x02" * 104, compressed_size=100, uncompressed_size=4000)
    (e,) = parse_fatbin(fatbin([entry]), where="t").entries
    assert (e.compression, e.stored_size, e.uncompressed_size, e.compressed) == (name, 100, 4000, True)


@pytest.mark.parametrize(
    ("flags", "kind", "arch", "variant"),
    [
        (0x100011, "sass", "90a", Variant.ARCH),
        (0x1200011, "sass", "100f", Variant.FAMILY),
        (0x102011, "ptx", "120a", Variant.ARCH),
        (0x202011, "ptx", "103f", Variant.FAMILY),
    ],
)
def test_arch_and_family_variants(flags: int, kind: str, arch: str, variant: Variant) -> None:
    sm = int(arch[:-1])
    (e,) = parse_fatbin(fatbin([fatbin_entry(kind=kind, sm=sm, flags=flags)]), where="t").entries
    assert e.arch == arch and e.target is not None and e.target.variant is variant
    assert e.target.kind is (Kind.SASS if kind == "sass" else Kind.PTX)


def test_ptx_isa_version_and_lto_and_unknown_kinds() -> None:
    fb = parse_fatbin(
        fatbin(
            [
                fatbin_entry(kind="ptx", sm=90, ptx_isa=(8, 5)),
                fatbin_entry(kind="lto-ir", sm=90, header_size=120),
                fatbin_entry(kind=5, sm=80),
            ]
        ),
        where="t",
    )
    ptx, lto, unknown = fb.entries
    assert ptx.ptx_isa == (8, 5) and ptx.target == Target(CC(9, 0), Kind.PTX)
    assert lto.kind == "lto-ir" and lto.target is None and lto.arch == "90"
    assert unknown.kind == "unknown-5" and unknown.target is None


def test_several_containers_with_zero_padding_and_base_offset() -> None:
    one = pad8(fatbin([fatbin_entry(sm=70, payload=b"\x03" * 60)]))
    two = fatbin([fatbin_entry(sm=80), fatbin_entry(kind="ptx", sm=80)])
    fbs = parse_fatbins(one + b"\0" * 8 + two + b"\0" * 16, where="t", base=0x1000)
    assert [len(f.entries) for f in fbs] == [1, 2]
    assert fbs[0].offset == 0x1000 and fbs[1].offset == 0x1000 + len(one) + 8


def test_sizes_past_the_end_name_the_file_and_the_problem() -> None:
    data = fatbin([fatbin_entry()], fat_size=10_000)
    with pytest.raises(BadInputError, match=r"lib\.so \[\.nv_fatbin\]: fatbin at offset 0x0: .*run past the end"):
        parse_fatbins(data, where="lib.so [.nv_fatbin]")


def test_entry_payload_past_the_container_end() -> None:
    entry = fatbin_entry(payload=b"\0" * 64, padded_size=1 << 40)
    with pytest.raises(BadInputError, match="payload bytes, which run past the container's end"):
        parse_fatbin(fatbin([entry], fat_size=128), where="t")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x50\xed\x55\xba\x01\x00", "header needs 16 bytes"),
        (b"\x01\x02\x03\x04" + b"\0" * 60, "neither a fatbin header nor zero padding"),
        (fatbin([fatbin_entry(header_size=64)])[:16] + b"\0" * 4, "run past the end"),
        (fatbin([fatbin_entry(header_size=32, payload=b"")], fat_size=64), "header size 32"),
    ],
)
def test_malformed_containers(data: bytes, problem: str) -> None:
    with pytest.raises(BadInputError, match=problem):
        parse_fatbins(data, where="t")


def test_bad_magic_in_parse_fatbin() -> None:
    with pytest.raises(BadInputError, match="bad magic"):
        parse_fatbin(b"\0" * 32, where="t")


def test_empty_and_all_zero_sections_hold_no_fatbin() -> None:
    assert parse_fatbins(b"", where="t") == ()
    assert parse_fatbins(b"\0" * 24, where="t") == ()


# ---------------------------------------------------------------- issue 12 item 9: linear time, bounded memory, lies


def test_zero_padding_is_skipped_without_a_python_byte_loop(tmp_path: Path) -> None:
    """256 MiB of padding took 16 s byte by byte. A sparse file, mapped: the test costs no memory."""
    import time

    one = pad8(fatbin([fatbin_entry(sm=80)]))
    path = tmp_path / "k.fatbin"
    with path.open("wb") as fh:
        fh.write(one)
        fh.truncate(len(one) + (256 << 20))
        fh.seek(0, 2)
        fh.write(one)
    with mapped_file(path) as data:
        t = time.perf_counter()
        fbs = parse_fatbins(data, where="k.fatbin")
        took = time.perf_counter() - t
    assert [fb.offset for fb in fbs] == [0, len(one) + (256 << 20)]
    assert took < 5.0, f"256 MiB of padding took {took:.1f} s"  # about 0.15 s on a loaded 2-core machine


def test_padding_that_turns_non_zero_off_the_8_byte_grid_is_refused() -> None:
    data = pad8(fatbin([fatbin_entry()])) + b"\0" * (3 << 20) + b"\0\0\0\x07" + b"\0" * 4
    with pytest.raises(BadInputError, match="neither a fatbin header nor zero padding"):
        parse_fatbins(data, where="t")


def test_many_empty_entries_are_refused_by_the_record_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """1M empty entries (64 MB) used 521 MB of memory; the file-wide bound (MAX_RECORDS, 262,144; 5,000 here)
    stops them."""
    assert MAX_RECORDS == 1 << 18
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 5000)
    data = fatbin([fatbin_entry(payload=b"")] * 20_000)
    with pytest.raises(BadInputError, match=r"^t: fatbin at offset 0x4e1d0: more than 5000 fatbin containers"):
        parse_fatbins(data, where="t")


def test_identical_entry_headers_share_one_object() -> None:
    (fb,) = parse_fatbins(fatbin([fatbin_entry(payload=b"")] * 5000), where="t")
    assert len(fb.entries) == 5000 and len({id(e) for e in fb.entries}) == 1


def test_the_record_bound_spans_every_section_of_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 10)
    six = fatbin([fatbin_entry()] * 5)  # one container and five entries: six records
    read_elf(elf(sections={".nv_fatbin": six}), "ok.so")
    with pytest.raises(BadInputError, match=r"^x\.so: fatbin at offset .*more than 10 fatbin containers"):
        read_elf(elf(sections={".nv_fatbin": six, "__nv_relfatbin": six}), "x.so")


def test_a_compressed_size_larger_than_its_payload_is_a_lie() -> None:
    """A 201 KB file was shown as 'stored 4.00 GiB': sizes are now bounded by the payload that holds them."""
    entry = fatbin_entry(flags=0x8011, payload=b"\0" * 64, compressed_size=0xFFFFFFFF, uncompressed_size=1 << 32)
    with pytest.raises(BadInputError, match=r"entry at 0x10 says 4294967295 compressed bytes in a payload of 64"):
        parse_fatbins(fatbin([entry]), where="t")


def test_tile_ir_entries_are_named_and_count_as_no_loadable_target() -> None:
    # the header CUDA 13.5's fatbinary writes for cuda-tile bytecode (tests/data/tileir-fatbin.json): kind 0x80, an
    # 80-byte header, zstd-compressed payload, sm 100
    entry = fatbin_entry(kind=0x80, sm=100, header_size=80, flags=0x8011, compressed_size=64, uncompressed_size=647)
    (tile,) = parse_fatbin(fatbin([entry, fatbin_entry(kind="sass", sm=100)]), where="t").entries[:1]
    assert tile.kind == "tile-ir" and tile.arch == "100" and tile.target is None
    assert tile.compression == "zstd" and (tile.stored_size, tile.uncompressed_size) == (64, 647)


def test_the_measured_tile_ir_fatbin_parses_as_measured() -> None:
    """The bytes of the one real Tile IR fatbin (hex in tests/data/tileir-fatbin.json) read back as cuobjdump saw them."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[2] / "tests" / "data" / "tileir-fatbin.json").read_text())
    (fb,) = parse_fatbins(bytes.fromhex(doc["fatbin_hex"]), where="tileir")
    (e,) = fb.entries
    assert (e.kind, e.arch, e.compression) == ("tile-ir", doc["cuobjdump"]["arch"].removeprefix("sm_"), "zstd")
    assert doc["entry_kind"] == 0x80


def test_pages_read_from_a_mapped_file_are_given_back_and_stay_readable(tmp_path: Path) -> None:
    """files.release drops the pages of a mapped range once read (the reader's resident memory stays bounded while it
    scans zeroed containers or data sections); the map stays valid and reads the same bytes again."""
    import mmap

    from slimwheel.inspect.fatbin import RecordBudget as Budget
    from slimwheel.inspect.fatbin import scan_fatbins, skip_zeros
    from slimwheel.inspect.files import mapped_file, release

    blob = bytes(3 << 20) + b"\x01tail"
    path = tmp_path / "f.bin"
    path.write_bytes(blob)
    with mapped_file(path) as mm:
        assert isinstance(mm, mmap.mmap)
        assert skip_zeros(mm, 0, len(mm)) == 3 << 20
        assert scan_fatbins(mm, where="f", start=0, end=len(mm), budget=Budget("f"), section=".data") == []
        release(mm, 5, len(mm))  # unaligned start: from its page
        assert mm[:] == blob
    data = bytearray(b"abc")
    release(data, 0, 3)  # bytes in memory: left alone
    assert data == b"abc"


@pytest.mark.parametrize("at", [56, 61, 62, 63, 64, 65])
def test_the_windowed_search_finds_a_container_across_a_window_edge(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    import slimwheel.inspect.fatbin as fatbin_mod

    monkeypatch.setattr(fatbin_mod, "_SCAN_WINDOW", 64)
    container = fatbin([fatbin_entry(sm=90, payload=b"\x22" * 64)])
    data = b"\x07" * at + container + b"\x09" * 100
    found = fatbin_mod.scan_fatbins(
        data, where="f", start=0, end=len(data), budget=fatbin_mod.RecordBudget("f"), section=".data"
    )
    assert [(fb.offset, fb.size) for fb in found] == [(at, len(container))]
