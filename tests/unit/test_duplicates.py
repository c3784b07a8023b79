"""Byte-identical files: found from the zip directory's size and CRC-32, confirmed by SHA-256, worded by check and
size-report. Wheels are generated here (testkit.wheelmaker), never committed."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.analysis import analyze
from slimwheel.check import CheckPolicy, judge
from slimwheel.check import duplicates as dup_check
from slimwheel.inspect.duplicates import MIN_BYTES, duplicate_groups, twins
from slimwheel.inspect.report import report_to_json
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.inspect.zipread import Member
from slimwheel.render import report_text
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel


def _lib(soname: str, size: int = 64 * 1024) -> bytes:
    # random bytes in a section: the copies must not deflate to nothing, so that wasted compressed bytes are real
    return elf(soname=soname, sections={".text": os.urandom(size)})


def _member(name: str, data: bytes, *, crc: int | None = None, compressed: int | None = None) -> Member:
    return Member(
        name=name,
        compressed=len(data) if compressed is None else compressed,
        uncompressed=len(data),
        method="stored",
        crc=zlib.crc32(data) if crc is None else crc,
        header_offset=0,
        data_offset=0,
        executable=False,
    )


def test_a_soname_chain_of_full_copies_is_named_with_its_fix(tmp_path: Path) -> None:
    lib = _lib("libfoo.so.1")
    other = os.urandom(8192)
    wheel = make_wheel(
        tmp_path,
        name="pkg",
        files={
            "pkg/lib/libfoo.so": lib,
            "pkg/lib/libfoo.so.1": lib,
            "pkg/lib/libfoo.so.1.2.3": lib,
            "pkg/data/a.bin": other,
            "pkg/data/b.bin": other,
            "pkg/unique.bin": os.urandom(8192),
        },
    )
    report = inspect_wheel(wheel)
    chain, copies = report.duplicates  # largest first: the three 64 KiB copies before the two 8 KiB ones
    assert chain.names == ("pkg/lib/libfoo.so", "pkg/lib/libfoo.so.1", "pkg/lib/libfoo.so.1.2.3")
    assert chain.soname_chain and chain.keep == "pkg/lib/libfoo.so.1"
    sizes = {f.name: f for f in report.files}
    assert chain.wasted_uncompressed == 2 * len(lib)
    assert (
        chain.wasted_compressed == sizes["pkg/lib/libfoo.so"].compressed + sizes["pkg/lib/libfoo.so.1.2.3"].compressed
    )
    assert copies.names == ("pkg/data/a.bin", "pkg/data/b.bin") and not copies.soname_chain
    assert copies.wasted_uncompressed == len(other)
    assert report.duplicate_waste == (
        chain.wasted_compressed + copies.wasted_compressed,
        chain.wasted_uncompressed + copies.wasted_uncompressed,
    )

    verdict = judge(analyze(wheel), CheckPolicy())
    assert verdict.ok  # a note: the budget is the one size gate
    notes = [n for n in verdict.notes if "byte-identical" in n or "libfoo" in n or "a.bin" in n]
    assert notes[0].startswith("byte-identical files: 2 group(s) waste ")
    assert "ship only libfoo.so.1 " in notes[1] and "symlinks" in notes[1]
    assert "pkg/data/a.bin, pkg/data/b.bin" in notes[2]

    doc = report_to_json(report)["duplicates"]
    assert [d["keep"] for d in doc] == ["pkg/lib/libfoo.so.1", "pkg/data/a.bin"]
    assert doc[0]["soname_chain"] is True and doc[0]["wasted_uncompressed_bytes"] == 2 * len(lib)
    json.dumps(doc)
    text = report_text(report, width=160, color=False)
    assert "Byte-identical files:" in text and "ship only libfoo.so.1" in text


def test_empty_and_tiny_files_are_not_reported(tmp_path: Path) -> None:
    init = b"# package\n"
    wheel = make_wheel(
        tmp_path,
        name="pkg",
        files={
            "pkg/__init__.py": init,
            "pkg/sub/__init__.py": init,
            "pkg/a/empty.txt": b"",
            "pkg/b/empty.txt": b"",
            "pkg/c/small.bin": b"x" * (MIN_BYTES - 1),
            "pkg/d/small.bin": b"x" * (MIN_BYTES - 1),
        },
    )
    report = inspect_wheel(wheel)
    assert report.duplicates == ()
    assert dup_check.findings(analyze(wheel), CheckPolicy()).notes == ()
    assert report_to_json(report)["duplicates"] == []
    assert "Byte-identical" not in report_text(report, width=120, color=False)


def test_a_crc_collision_is_not_called_a_copy() -> None:
    a, b = b"a" * MIN_BYTES, b"b" * MIN_BYTES
    members = [_member("x/a", a, crc=7), _member("x/b", b, crc=7)]
    # the zip directory says the two may be copies: only hashing can tell
    assert twins(members) == {"x/a", "x/b"}
    sha = {"x/a": hashlib.sha256(a).digest(), "x/b": hashlib.sha256(b).digest()}
    assert duplicate_groups(members, sha) == ()


def test_check_and_size_report_find_the_same_groups(tmp_path: Path) -> None:
    # check hashes every member for RECORD, size-report only the twins: the groups must agree
    blob = os.urandom(10_000)
    lib = _lib("libbar.so.2", 8192)
    wheel = make_wheel(
        tmp_path,
        name="pkg",
        files={"pkg/x.dat": blob, "pkg/y/x.dat": blob, "pkg/libbar.so.2": lib, "other/libbar.so.2": lib},
    )
    assert analyze(wheel).report.duplicates == inspect_wheel(wheel).duplicates
    (lib_group, blob_group) = sorted(inspect_wheel(wheel).duplicates, key=lambda g: g.size)
    # the same SONAME in two folders is not a chain: the loader finds each by its own search path
    assert not lib_group.soname_chain and not blob_group.soname_chain


def test_many_groups_make_a_bounded_note(tmp_path: Path) -> None:
    files: dict[str, bytes] = {}
    for i in range(dup_check.SHOWN_GROUPS + 3):
        data = os.urandom(MIN_BYTES + i)
        files[f"pkg/{i}/one.bin"] = data
        files[f"pkg/{i}/two.bin"] = data
    notes = dup_check.findings(analyze(make_wheel(tmp_path, name="pkg", files=files)), CheckPolicy()).notes
    assert len(notes) == 1 + dup_check.SHOWN_GROUPS + 1
    assert notes[-1].startswith("  and 3 more group(s): ")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c/d", "lib/libz.so", "lib/libz.so.1"]), st.integers(0, 3)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    )
)
def test_groups_partition_exactly_the_identical_members(picks: list[tuple[str, int]]) -> None:
    contents = [bytes([k]) * (MIN_BYTES + 1) for k in range(4)]
    members = [_member(name, contents[k]) for name, k in picks]
    sha = {m.name: hashlib.sha256(contents[k]).digest() for m, (_, k) in zip(members, picks, strict=True)}
    groups = duplicate_groups(members, sha)
    grouped = sorted(n for g in groups for n in g.names)
    expected = sorted(name for name, k in picks if sum(1 for _, j in picks if j == k) > 1)
    assert grouped == expected
    for g in groups:
        assert g.keep in g.names
        assert g.wasted_uncompressed == g.size * (len(g.names) - 1)


def test_a_wheel_read_from_its_unpacked_files_has_the_same_groups(tmp_path: Path) -> None:
    # slim and repair read their input unpacked (`inspect_unpacked`): the same copies, hashed from the files
    from slimwheel.inspect.scan import inspect_unpacked
    from slimwheel.wheelfile import unpack

    lib = _lib("libqux.so.3", 8192)
    wheel = make_wheel(
        tmp_path / "w", name="pkg", files={"pkg/libqux.so": lib, "pkg/libqux.so.3": lib, "pkg/x": os.urandom(5000)}
    )
    names = unpack(wheel, tmp_path / "root")
    unpacked = inspect_unpacked(wheel, tmp_path / "root", names)
    assert unpacked.duplicates == inspect_wheel(wheel).duplicates
    (chain,) = unpacked.duplicates
    assert chain.soname_chain and chain.keep == "pkg/libqux.so.3"
