"""ELF files read as the loader reads them (issue 41, item 2): the dynamic segment is the truth, and a file whose
section view disagrees with it, or that has none, is refused naming the file in size-report, check and repair.

The attack files are built here from synthesized libraries (testkit.binsynth) with a PT_LOAD and a PT_DYNAMIC as a
linker writes them; pyelftools' segment API, an independent reader, says what a loader sees in each."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from slimwheel.cli import main
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.repair import repair_wheel
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

CU13 = "nvidia-cuda-runtime>=13.0,<14"
NEEDED = ("libcudart.so.13", "libc.so.6")


def lib(**kw: object) -> bytes:
    kw.setdefault("needed", NEEDED)
    kw.setdefault("dynamic_segment", True)
    return elf(**kw)  # type: ignore[arg-type]


def loader_sees(data: bytes) -> tuple[list[str], str | None]:
    """(NEEDED, RUNPATH) from the PT_DYNAMIC segment, by pyelftools (which maps DT_STRTAB through the segments)."""
    f = ELFFile(io.BytesIO(data))
    (seg,) = [s for s in f.iter_segments() if s["p_type"] == "PT_DYNAMIC"]
    tags = list(seg.iter_tags())  # type: ignore[attr-defined]  # a DynamicSegment: pyelftools' stubs say Segment
    needed = [str(t.needed) for t in tags if t.entry.d_tag == "DT_NEEDED"]
    runpath = [str(t.runpath) for t in tags if t.entry.d_tag == "DT_RUNPATH"]
    return needed, (runpath[-1] if runpath else None)


def _shdr(data: bytes | bytearray, name: str) -> int:
    """The file offset of the section header named `name` (ELF64 little-endian)."""
    shoff: int = struct.unpack_from("<Q", data, 0x28)[0]
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    names: int = struct.unpack_from("<Q", data, shoff + shstrndx * 64 + 0x18)[0]
    for i in range(shnum):
        at = names + struct.unpack_from("<I", data, shoff + i * 64)[0]
        if bytes(data[at : data.index(b"\0", at)]).decode() == name:
            return shoff + i * 64
    raise AssertionError(name)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"soname": "libx.so.1", "runpath": "$ORIGIN/../nvidia/cu13/lib"},
        {"rpath": "$ORIGIN", "symbols": ["PyInit__x"]},
        {"imports": {"libm.so.6": [("exp", "GLIBC_2.29")]}, "undefined": ["dlopen"]},
    ],
)
def test_a_file_with_a_dynamic_segment_reads_as_its_sections_say(kw: dict[str, object]) -> None:
    """The loader's view and the section view of a well-formed file are the same facts, and the same as those of the
    file without program headers (the unit tests' other files)."""
    with_segment, sections_only = read_elf(lib(**kw), "x.so"), read_elf(lib(dynamic_segment=False, **kw), "x.so")
    for field in ("needed", "soname", "rpath", "runpath", "version_needs", "fatbins", "exports_cxx_runtime"):
        assert getattr(with_segment, field) == getattr(sections_only, field), field
    assert with_segment.sections.keys() == sections_only.sections.keys()  # .dynamic holds the table tags too
    needed, runpath = loader_sees(lib(**kw))
    assert list(with_segment.needed) == needed and with_segment.runpath == runpath


def _zeroed_section_table(data: bytes) -> bytes:
    """S2 of issue 41: e_shoff, e_shnum and e_shstrndx zeroed. The loader reads program headers only: it still
    loads NEEDED and honours RUNPATH."""
    out = bytearray(data)
    struct.pack_into("<Q", out, 0x28, 0)
    struct.pack_into("<HH", out, 0x3C, 0, 0)
    return bytes(out)


def test_a_zeroed_section_header_table_is_refused() -> None:
    data = _zeroed_section_table(lib(needed=("/tmp/x/libevil.so",), runpath="$ORIGIN/../../.."))
    assert loader_sees(data) == (["/tmp/x/libevil.so"], "$ORIGIN/../../..")  # what the loader still acts on
    with pytest.raises(BadInputError, match=r"^pkg/_x.so: it has a dynamic segment, .* and no section headers"):
        read_elf(data, "pkg/_x.so")
    # Without a dynamic segment the loader reads no dependency either: nothing is hidden, the file reads.
    plain = read_elf(_zeroed_section_table(lib(dynamic_segment=False)), "pkg/_x.so")
    assert plain.needed == () and plain.sections == {}


def test_a_section_table_without_names_is_refused() -> None:
    data = bytearray(lib())
    struct.pack_into("<H", data, 0x3E, 0)  # e_shstrndx: no section-name table
    with pytest.raises(BadInputError, match="no section names"):
        read_elf(bytes(data), "x.so")


def test_a_dynamic_section_cut_short_to_hide_a_needed_library_is_refused() -> None:
    data = bytearray(lib(needed=("libc.so.6", "libevil.so")))
    struct.pack_into("<Q", data, _shdr(data, ".dynamic") + 0x20, 16)  # sh_size: the first entry only
    assert loader_sees(bytes(data))[0] == ["libc.so.6", "libevil.so"]
    with pytest.raises(BadInputError, match=r"x.so: its section headers disagree .* NEEDED libc.so.6 in the sections"):
        read_elf(bytes(data), "x.so")


def test_a_dynamic_section_retyped_to_hide_a_runpath_is_refused() -> None:
    data = bytearray(lib(runpath="/tmp/x"))
    struct.pack_into("<I", data, _shdr(data, ".dynamic") + 4, 1)  # SHT_PROGBITS: the section view has no dynamic
    with pytest.raises(BadInputError, match="NEEDED none in the sections, libcudart.so.13, libc.so.6 in the segment"):
        read_elf(bytes(data), "x.so")


def test_a_dynamic_section_reading_another_string_table_is_refused() -> None:
    """sh_link of .dynamic moved to .shstrtab: the sections would name other libraries than DT_STRTAB does."""
    data = bytearray(lib(needed=("libc.so.6",)))
    shnum = struct.unpack_from("<H", data, 0x3C)[0]
    struct.pack_into("<I", data, _shdr(data, ".dynamic") + 0x28, shnum - 1)
    with pytest.raises(BadInputError, match="disagree|string table"):
        read_elf(bytes(data), "x.so")


def test_a_symbol_table_elsewhere_than_the_loader_reads_it_is_refused() -> None:
    data = bytearray(lib(symbols=["PyInit__x"]))
    at = _shdr(data, ".dynsym") + 0x18
    struct.pack_into("<Q", data, at, struct.unpack_from("<Q", data, at)[0] + 24)  # sh_offset one symbol on
    struct.pack_into("<Q", data, at + 8, 24)
    with pytest.raises(BadInputError, match=r"no section of type 0xb holds the table dynamic tag 0x6"):
        read_elf(bytes(data), "x.so")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: struct.pack_into("<Q", d, 64 + 56 + 0x10, 1 << 40), "the dynamic array .* lies in no PT_LOAD"),
        (lambda d: d.extend(b""), None),  # control: the file as built
        (lambda d: struct.pack_into("<I", d, 64, 2), "2 PT_DYNAMIC segments"),
        # found by the edge-value fuzzer: a PT_LOAD at address 1 moved the array the loader reads off the one by
        # offset (glibc refuses such a segment), and with .dynamic emptied both views read nothing
        (lambda d: struct.pack_into("<Q", d, 64 + 0x10, 1), "differ within a page"),
        (lambda d: struct.pack_into("<Q", d, 64 + 56 + 0x8, 8), "maps to offset"),
    ],
)
def test_a_dynamic_segment_the_loader_cannot_map_is_refused(edit, match) -> None:  # type: ignore[no-untyped-def]
    data = bytearray(lib())
    edit(data)
    if match is None:
        assert read_elf(bytes(data), "x.so").needed == NEEDED
        return
    with pytest.raises(BadInputError, match=match):
        read_elf(bytes(data), "x.so")


def test_a_dynamic_array_without_its_end_is_refused() -> None:
    data = bytearray(lib())
    dyn = struct.unpack_from("<Q", data, _shdr(data, ".dynamic") + 0x18)[0]
    size = struct.unpack_from("<Q", data, _shdr(data, ".dynamic") + 0x20)[0]
    struct.pack_into("<qQ", data, dyn + size - 16, 0x7FFFFFFF, 1)  # DT_NULL overwritten
    # the rest of the file is not a run of DT_NULL either: fill to the end with another tag
    tail = dyn + size
    data[tail:] = struct.pack("<qQ", 0x7FFFFFFF, 1) * ((len(data) - tail) // 16) + b"\1" * ((len(data) - tail) % 16)
    with pytest.raises(BadInputError, match="without DT_NULL|disagree|truncated|malformed"):
        read_elf(bytes(data), "x.so")


# ------------------------------------------------------------------------------ the commands that judge such a file


def test_size_report_check_and_repair_refuse_the_hidden_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = _zeroed_section_table(lib(needed=("libcudart.so.13", "/tmp/x/libevil.so")))
    w = make_wheel(tmp_path, files={"pkg/_x.abi3.so": evil}, requires=[CU13])
    for argv in (["size-report", str(w)], ["check", str(w)]):
        capsys.readouterr()
        assert main(["-q", *argv]) == 3, argv
        err = capsys.readouterr().err
        assert "pkg/_x.abi3.so" in err and "no section headers" in err and "Traceback" not in err
    with pytest.raises(BadInputError, match=r"pkg/_x.abi3.so: it has a dynamic segment"):
        repair_wheel(w, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ------------------------------------------------------------- issue 41: a section header with a huge offset


@pytest.mark.parametrize("offset", [1 << 62, 1 << 63, (1 << 64) - 1])
def test_an_inactive_rodata_header_with_a_huge_offset_reads(tmp_path: Path, offset: int) -> None:
    """A `.rodata` header of type SHT_NULL (inactive: its offset is no file position) with an offset past what a C
    size holds was an OverflowError, an internal error, in size-report, check and repair (their ELF read)."""
    from slimwheel.inspect.dynamic import read_dynamic

    data = bytearray(lib(sections={".rodata": b"libcublas.so.12\0"}, undefined=["dlopen"]))
    at = _shdr(data, ".rodata")
    struct.pack_into("<I", data, at + 4, 0)  # SHT_NULL
    struct.pack_into("<Q", data, at + 0x18, offset)
    r = read_elf(bytes(data), "pkg/_x.so")
    assert r.needed == NEEDED and r.opens == ()
    w = make_wheel(tmp_path, files={"pkg/_x.abi3.so": bytes(data)}, requires=[CU13])
    assert main(["-q", "size-report", str(w)]) == 0
    assert main(["-q", "check", "--offline", str(w)]) in (0, 12)  # a verdict, not an internal error (exit 1)
    (tmp_path / "x.so").write_bytes(bytes(data))
    info = read_dynamic(tmp_path / "x.so", "pkg/_x.so")  # what repair reads of each unpacked file
    assert info is not None and info.needed == NEEDED
