"""The ELF reader on synthetic files: dynamic tags, section sizes, fatbin sections, wrappers, truncation."""

from __future__ import annotations

import struct

import pytest
from helpers.binsynth import elf, fatbin, fatbin_entry

from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf

FB = fatbin(
    [fatbin_entry(sm=75), fatbin_entry(kind="ptx", sm=90, flags=0x8011, compressed_size=8, uncompressed_size=100)]
)


def test_dynamic_tags_and_sections() -> None:
    data = elf(
        sections={".text": b"\x90" * 300, ".nv_fatbin": FB},
        needed=("libcudart.so.13", "libc.so.6"),
        soname="libdemo.so",
        rpath="$ORIGIN/a",
        runpath="$ORIGIN/../nvidia/cu13/lib",
    )
    r = read_elf(data, "demo/libdemo.so")
    assert r.kind == "shared" and r.machine == "EM_X86_64" and r.size == len(data)
    assert r.needed == ("libcudart.so.13", "libc.so.6") and r.soname == "libdemo.so"
    assert (r.rpath, r.runpath) == ("$ORIGIN/a", "$ORIGIN/../nvidia/cu13/lib")
    assert r.sections[".text"] == 300 and r.sections[".nv_fatbin"] == len(FB)
    (fb,) = r.fatbins
    assert [e.arch for e in fb.entries] == ["75", "90"] and r.fatbin_bytes == len(FB)


def test_relocatable_object_with_relfatbin() -> None:
    r = read_elf(elf(sections={"__nv_relfatbin": FB}, e_type=1), "k.o")
    assert r.kind == "relocatable" and len(r.fatbins) == 1 and r.needed == ()


def test_wrapper_in_nvfatbinsegment_leads_to_a_fatbin_outside_the_fatbin_sections() -> None:
    rodata = b"\0" * 8 + FB
    wrapper = struct.pack("<IIQQ", 0x466243B1, 1, 0, 0)
    first = elf(sections={".rodata": rodata, ".nvFatBinSegment": wrapper}, load_segment=True)
    rodata_off = _section_offset(first, ".rodata")
    wrapper = struct.pack("<IIQQ", 0x466243B1, 1, rodata_off + 8, 0)  # PT_LOAD maps address == file offset
    r = read_elf(elf(sections={".rodata": rodata, ".nvFatBinSegment": wrapper}, load_segment=True), "x.so")
    assert r.modules == 1 and len(r.fatbins) == 1 and r.fatbins[0].offset == rodata_off + 8


def _section_offset(data: bytes, name: str) -> int:
    import io

    from elftools.elf.elffile import ELFFile

    return ELFFile(io.BytesIO(data)).get_section_by_name(name)["sh_offset"]


def test_bare_fatbin_file() -> None:
    r = read_elf(FB, "kernels.fatbin")
    assert r.kind == "fatbin" and len(r.fatbins) == 1


@pytest.mark.parametrize("cut", [10, 63, 200, -1])
def test_truncated_elf_is_bad_input_naming_the_file(cut: int) -> None:
    data = elf(sections={".text": b"\x90" * 300, ".nv_fatbin": FB}, needed=("libc.so.6",))
    with pytest.raises(BadInputError, match=r"^lib/x\.so: .*(truncated|malformed)"):
        read_elf(data[:cut], "lib/x.so")


def test_not_an_elf() -> None:
    with pytest.raises(BadInputError, match=r"x\.txt: not an ELF file"):
        read_elf(b"hello world", "x.txt")


def test_fatbin_sizes_past_section_end_inside_an_elf() -> None:
    bad = fatbin([fatbin_entry()], fat_size=5000)
    with pytest.raises(BadInputError, match=r"x\.so \[\.nv_fatbin\]: fatbin at offset .*run past the end"):
        read_elf(elf(sections={".nv_fatbin": bad}), "x.so")


def test_version_2_wrapper_marks_the_device_link_container() -> None:
    """nvcc's device-link step registers its container through a version-2 wrapper; it is no kernel module."""
    dlink = fatbin([fatbin_entry(sm=75)])
    module = fatbin([fatbin_entry(sm=75), fatbin_entry(kind="ptx", sm=120)])
    section = dlink + module
    wrappers = struct.pack("<IIQQ", 0x466243B1, 2, 0, 0) + struct.pack("<IIQQ", 0x466243B1, 1, 0, 0)
    first = elf(sections={".nv_fatbin": section, ".nvFatBinSegment": wrappers}, load_segment=True)
    off = _section_offset(first, ".nv_fatbin")
    wrappers = struct.pack("<IIQQ", 0x466243B1, 2, off, 123) + struct.pack("<IIQQ", 0x466243B1, 1, off + len(dlink), 0)
    r = read_elf(elf(sections={".nv_fatbin": section, ".nvFatBinSegment": wrappers}, load_segment=True), "x.so")
    assert [fb.device_link for fb in r.fatbins] == [True, False] and r.modules == 2
