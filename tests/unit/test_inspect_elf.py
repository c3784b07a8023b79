"""The ELF reader on synthetic files: dynamic tags, section sizes, fatbin sections, wrappers, truncation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf, read_elf_file
from slimwheel.inspect.elffile import ElfFile
from slimwheel.inspect.elfsyms import defines
from testkit.binsynth import elf, fatbin, fatbin_entry

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

    section = ELFFile(io.BytesIO(data)).get_section_by_name(name)
    assert section is not None
    return int(section["sh_offset"])


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


# ---------------------------------------------------------------- issue 12 item 9: linear time, bounded memory, lies


def _wrapped(n: int) -> bytes:
    """An ELF whose .nvFatBinSegment holds `n` wrappers, each pointing at its own fatbin in .rodata."""
    fb = fatbin([fatbin_entry(sm=75, payload=b"\1" * 8)])
    rodata = fb * n
    blank = struct.pack("<IIQQ", 0x466243B1, 1, 0, 0) * n
    at = _section_offset(elf(sections={".rodata": rodata, ".nvFatBinSegment": blank}, load_segment=True), ".rodata")
    wrappers = b"".join(struct.pack("<IIQQ", 0x466243B1, 1, at + i * len(fb), 0) for i in range(n))
    return elf(sections={".rodata": rodata, ".nvFatBinSegment": wrappers}, load_segment=True)


def test_many_wrappers_take_linear_time() -> None:
    """10k/20k/40k wrappers took 3/12/40 s (a scan of every fatbin found so far per wrapper)."""
    import time

    data = _wrapped(20_000)
    t = time.perf_counter()
    r = read_elf(data, "x.so")
    took = time.perf_counter() - t
    assert r.modules == 20_000 and len(r.fatbins) == 20_000
    assert len({fb.offset for fb in r.fatbins}) == 20_000
    assert took < 5.0, f"20k wrappers took {took:.1f} s"  # 12 s before; about 0.7 s now on a loaded 2-core machine


def test_wrappers_into_a_fatbin_found_before_or_into_a_section_add_nothing() -> None:
    fb = fatbin([fatbin_entry(sm=75, payload=b"\1" * 64)])
    blank = struct.pack("<IIQQ", 0x466243B1, 1, 0, 0) * 3
    first = elf(sections={".rodata": fb, ".nv_fatbin": fb, ".nvFatBinSegment": blank}, load_segment=True)
    ro, nv = _section_offset(first, ".rodata"), _section_offset(first, ".nv_fatbin")
    wrappers = b"".join(struct.pack("<IIQQ", 0x466243B1, 1, a, 0) for a in (ro, ro + 16, nv + 16))
    r = read_elf(elf(sections={".rodata": fb, ".nv_fatbin": fb, ".nvFatBinSegment": wrappers}, load_segment=True), "x")
    assert r.modules == 3 and sorted(f.offset for f in r.fatbins) == [ro, nv]


def test_too_many_wrappers_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("slimwheel.inspect.elf.MAX_WRAPPERS", 100)
    with pytest.raises(BadInputError, match=r"^x\.so: more than 100 CUDA module wrappers"):
        read_elf(_wrapped(101), "x.so")


def test_section_headers_past_the_end_through_extended_numbering() -> None:
    """e_shnum 0 means 'the count is in section 0's sh_size': a huge one there must not be believed."""
    data = bytearray(elf(sections={".text": b"\x90" * 64}))
    shoff = struct.unpack_from("<Q", data, 40)[0]
    struct.pack_into("<H", data, 60, 0)  # e_shnum
    struct.pack_into("<Q", data, shoff + 32, 1 << 40)  # section 0's sh_size
    with pytest.raises(BadInputError, match=r"^x\.so: truncated ELF file: section headers end past"):
        read_elf(bytes(data), "x.so")


def test_dynamic_strings_are_bounded() -> None:
    long = elf(needed=("lib" + "x" * 5000 + ".so",))
    with pytest.raises(BadInputError, match=r"does not end inside its string table or 4096 bytes"):
        read_elf(long, "x.so")
    # a search path is a list of folders: tensorflow 2.20's RUNPATH is 21,581 bytes, read whole; 1 MiB is the bound
    runpath = ":".join(f"$ORIGIN/../nvidia/lib{i:05}/lib" for i in range(900))
    assert read_elf(elf(needed=("libc.so.6",), runpath=runpath), "x.so").runpath == runpath
    with pytest.raises(BadInputError, match=r"a search path does not end inside its string table or 1048576 bytes"):
        read_elf(elf(runpath="x" * (1 << 20)), "x.so")
    many = elf(needed=[f"lib{i}.so" for i in range(4097)])
    with pytest.raises(BadInputError, match=r"more than 4096 DT_NEEDED/SONAME/RPATH/RUNPATH entries"):
        read_elf(many, "x.so")


def test_a_string_offset_past_its_table_is_bad_input() -> None:
    data = bytearray(elf(needed=("libc.so.6",)))
    at = data.find(struct.pack("<qQ", 1, 1))  # DT_NEEDED -> offset 1 of .dynstr
    struct.pack_into("<Q", data, at + 8, 1 << 33)
    with pytest.raises(BadInputError, match=r"^x\.so: malformed ELF file: a dynamic string starts at 8589934592"):
        read_elf(bytes(data), "x.so")


# ---------------------------------------------------------------- the API repair's ELF reading moves onto


def test_read_elf_file_gives_the_dynamic_facts_repair_needs(tmp_path: Path) -> None:
    """Without fatbins: no fatbin section is parsed (a bad one cannot stop repair's scan), the dynamic facts stay."""
    bad_fatbin = fatbin([fatbin_entry()], fat_size=5000)
    data = elf(
        sections={".nv_fatbin": bad_fatbin},
        needed=("libcudart.so.13", "libc.so.6"),
        soname="libd.so",
        rpath="$ORIGIN/a::/b",
        runpath="$ORIGIN",
    )
    (tmp_path / "libd.so").write_bytes(data)
    (tmp_path / "notes.txt").write_text("hello")
    r = read_elf_file(tmp_path / "libd.so", "pkg/libd.so", fatbins=False)
    assert r is not None and (r.name, r.soname) == ("pkg/libd.so", "libd.so")
    assert r.needed == ("libcudart.so.13", "libc.so.6")
    assert (r.rpath, r.runpath, r.fatbins, r.modules) == ("$ORIGIN/a::/b", "$ORIGIN", (), 0)
    assert read_elf_file(tmp_path / "notes.txt", "notes.txt") is None
    with pytest.raises(BadInputError, match=r"^pkg/libd\.so \[\.nv_fatbin\]: fatbin at offset"):
        read_elf_file(tmp_path / "libd.so", "pkg/libd.so")
    (tmp_path / "bad.so").write_bytes(data[:100])
    with pytest.raises(BadInputError, match=r"^pkg/bad\.so: truncated ELF file"):
        read_elf_file(tmp_path / "bad.so", "pkg/bad.so", fatbins=False)


def test_the_last_search_path_tag_counts_as_for_the_loader() -> None:
    """glibc keeps the last DT_RUNPATH (and DT_RPATH) of a dynamic section; so does the reader."""
    data = bytearray(elf(runpath="/first", rpath="/second"))
    at = data.find(struct.pack("<q", 15))  # DT_RPATH -> DT_RUNPATH: two RUNPATH tags
    struct.pack_into("<q", data, at, 29)
    assert read_elf(bytes(data), "x.so").runpath == "/first"


def test_defines_symbol_sees_defined_dynamic_symbols_only(tmp_path: Path) -> None:
    def defines_symbol(data: bytes, symbol: str, name: str) -> bool:
        return defines(ElfFile(data, name), symbol)

    data = elf(symbols=("PyInit__ext", "helper"))
    assert defines_symbol(data, "PyInit__ext", "m.so") and defines_symbol(data, "helper", "m.so")
    assert not defines_symbol(data, "PyInit__ex", "m.so") and not defines_symbol(data, "PyInit__extra", "m.so")
    assert not defines_symbol(elf(), "PyInit__ext", "m.so")
    undefined = bytearray(data)
    sym = undefined.find(struct.pack("<BBH", 0x12, 0, 1))  # the first defined symbol's info, other, shndx
    struct.pack_into("<H", undefined, sym + 2, 0)  # SHN_UNDEF: imported, not defined
    assert not defines_symbol(bytes(undefined), "PyInit__ext", "m.so")
    # a file on disk, mapped: its PyInit_<module> is in its report
    (tmp_path / "_ext.so").write_bytes(data)
    report = read_elf_file(tmp_path / "_ext.so", "_ext.so")
    assert report is not None and report.python_module


def _tiny_elf(is64: bool, order: str, needed: tuple[str, ...], soname: str) -> bytes:
    """A shared library of either class and byte order: .dynstr, .dynamic, .shstrtab and their headers."""
    dynstr = b"\0"
    tags = []
    for tag, text in [*((1, n) for n in needed), (14, soname)]:
        tags.append((tag, len(dynstr)))
        dynstr += text.encode() + b"\0"
    dyn_fmt, sh_fmt, eh_fmt = (
        (order + "qQ", order + "IIQQQQIIQQ", order + "HHIQQQIHHHHHH")
        if is64
        else (order + "iI", order + "IIIIIIIIII", order + "HHIIIIIHHHHHH")
    )
    dynamic = b"".join(struct.pack(dyn_fmt, t, v) for t, v in [*tags, (0, 0)])
    shstrtab = b"\0.dynstr\0.dynamic\0.shstrtab\0"
    ehsize = 64 if is64 else 52
    body = [dynstr, dynamic, shstrtab]
    offsets, at = [], ehsize
    for part in body:
        offsets.append(at)
        at += len(part)
    shoff = at
    shentsize = struct.calcsize(sh_fmt)
    headers = b"\0" * shentsize
    for (name, typ, link, ent), off, part in zip(
        [(1, 3, 0, 0), (9, 6, 1, struct.calcsize(dyn_fmt)), (18, 3, 0, 0)], offsets, body, strict=True
    ):
        headers += struct.pack(sh_fmt, name, typ, 0, 0, off, len(part), link, 0, 1, ent)
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if order == "<" else 2, 1, 0]) + b"\0" * 8
    eh = struct.pack(eh_fmt, 3, 62 if is64 else 3, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize, 4, 3)
    return ident + eh + b"".join(body) + headers


@pytest.mark.parametrize(("is64", "order"), [(True, "<"), (True, ">"), (False, "<"), (False, ">")])
def test_both_classes_and_byte_orders_agree_with_pyelftools(is64: bool, order: str) -> None:
    import io

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    data = _tiny_elf(is64, order, ("libc.so.6", "libm.so.6"), "libt.so.1")
    r = read_elf(data, "t.so")
    ref = ELFFile(io.BytesIO(data))
    dyn = next(s for s in ref.iter_sections() if isinstance(s, DynamicSection))
    # pyelftools sets `needed` on DT_NEEDED tags at run time; its type stubs do not declare it
    assert r.needed == tuple(str(t.needed) for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED")  # type: ignore[attr-defined]
    assert r.soname == "libt.so.1" and r.kind == "shared" and r.machine == ref["e_machine"]
    assert r.sections == {s.name: s["sh_size"] for s in ref.iter_sections() if s.name}
