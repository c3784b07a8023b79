"""The bounded zip-member reader (issue 12 item 1): hostile zips written byte by byte, refused with exit 3 and one
message naming the wheel and the member; honest big members read in bounded steps or refused by a stated limit."""

from __future__ import annotations

import mmap
import os
import stat
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.cli import main
from slimwheel.errors import BadInputError
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.inspect.zipread import STEP, ZipLimits, ZipReader, extract, ratio_problem
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.zipraw import RawMember, local_entry, raw_zip, wheel_members, zeros_stream

MiB = 1 << 20
ELF_HEAD = b"\x7fELF" + b"\0" * 60  # enough for size-report and check to take the member for an ELF file


def wheel(tmp_path: Path, *extra: RawMember, name: str = "demo-1.0-py3-none-any.whl") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return raw_zip(tmp_path / name, [*wheel_members(), *extra])


def lying(tmp_path: Path, *, inflates: int = 64 * MiB, declares: int = 16) -> Path:
    """A member whose headers declare `declares` bytes while its deflate stream yields `inflates` (64 KiB of zip)."""
    payload, crc, _size = zeros_stream(ELF_HEAD, inflates, b"")
    return wheel(tmp_path, RawMember(name="demo/_ext.so", payload=payload, crc=crc, declared=declares))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["-q", *args])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("cmd", ["size-report", "check"])
def test_a_lying_size_is_refused_one_byte_past_the_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: str
) -> None:
    w = lying(tmp_path)
    code, err = run(capsys, cmd, str(w))
    assert code == 3
    assert err == (
        f"slimwheel: error: {w}: member 'demo/_ext.so' inflates past its declared 16 bytes (a lying zip header); "
        "refusing to read on"
    )


def test_extract_writes_no_byte_past_a_lying_claim(tmp_path: Path) -> None:
    w = lying(tmp_path / "in", declares=3 * STEP + 5)
    with pytest.raises(BadInputError, match=r"'demo/_ext\.so' inflates past its declared 3145733 bytes"):
        extract(w, tmp_path / "out")
    # Output stops before the step that crosses the claim: nothing past the declared size reaches the disk.
    assert 3 * STEP <= (tmp_path / "out" / "demo" / "_ext.so").stat().st_size <= 3 * STEP + 5


def test_a_stream_that_ends_short_or_fails_its_crc_is_refused(tmp_path: Path) -> None:
    payload, crc, size = zeros_stream(ELF_HEAD, 2 * MiB, b"tail")
    short = wheel(tmp_path / "s", RawMember(name="demo/_ext.so", payload=payload, crc=crc, declared=size + 1))
    with pytest.raises(BadInputError, match=rf"'demo/_ext\.so' inflates to {size} bytes, not its declared {size + 1}"):
        inspect_wheel(short)
    bad_crc = wheel(tmp_path / "c", RawMember(name="demo/_ext.so", payload=payload, crc=crc ^ 1, declared=size))
    with pytest.raises(BadInputError, match=r"demo/_ext\.so: corrupt member \(CRC does not match"):
        inspect_wheel(bad_crc)
    cut = wheel(tmp_path / "t", RawMember(name="demo/_ext.so", payload=payload[:-3], crc=crc, declared=size))
    with pytest.raises(BadInputError, match=r"demo/_ext\.so: corrupt member: the deflate stream is cut off"):
        inspect_wheel(cut)


def _limits_cases(tmp_path: Path) -> dict[str, tuple[Path, ZipLimits, str]]:
    payload, crc, size = zeros_stream(elf(needed=("libc.so.6",)), 4 * MiB, b"")  # an ELF file, then zeros
    honest = wheel(tmp_path, RawMember(name="demo/_ext.so", payload=payload, crc=crc, declared=size))
    return {
        "member": (honest, ZipLimits(member_bytes=MiB), f"declares {size} bytes, over the per-member limit of {MiB}"),
        "total": (honest, ZipLimits(total_bytes=2 * MiB), f"members declare more than {2 * MiB} bytes in all"),
        "directory": (honest, ZipLimits(directory_bytes=64), "zip directory of "),
    }


@pytest.mark.parametrize("limit", ["member", "total", "directory"])
def test_declared_sizes_over_a_limit_are_refused_before_reading(tmp_path: Path, limit: str) -> None:
    w, limits, problem = _limits_cases(tmp_path)[limit]
    with pytest.raises(BadInputError, match=f"^{w}: .*over the|^{w}: .*in all") as e:
        inspect_wheel(w, limits)
    assert problem in e.value.message
    assert inspect_wheel(w).files  # the same honest wheel under the default limits


def test_the_ratio_limit_counts_non_zero_bytes_as_they_stream(tmp_path: Path) -> None:
    """A slimmed library is mostly zeros and inflates far past 100:1; repetitive non-zero data over the ratio is
    refused while it streams (issue 24 item 5: slim's own outputs stay readable, bombs of data do not)."""
    limits = ZipLimits(ratio=50, ratio_floor=MiB)
    payload, crc, size = zeros_stream(elf(needed=("libc.so.6",)), 4 * MiB, b"")
    zeros = wheel(tmp_path / "z", RawMember(name="demo/_ext.so", payload=payload, crc=crc, declared=size))
    assert size > 50 * len(payload)
    assert inspect_wheel(zeros, limits).files
    extract(zeros, tmp_path / "out", limits)
    unpacked = tmp_path / "out" / "demo" / "_ext.so"
    assert unpacked.stat().st_size == size and unpacked.stat().st_blocks * 512 < 2 * MiB  # 3 MiB of holes
    dense = elf(needed=("libc.so.6",)) + b"\x5a" * (4 * MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = c.compress(dense) + c.flush()
    bomb = wheel(
        tmp_path / "d", RawMember(name="demo/_ext.so", payload=packed, crc=zlib.crc32(dense), declared=len(dense))
    )
    with pytest.raises(BadInputError, match=rf"'demo/_ext\.so' inflates {len(packed)} bytes to more than .* non-zero"):
        inspect_wheel(bomb, limits)
    assert ratio_problem(len(dense), len(dense), len(packed), limits) is not None
    assert ratio_problem(size, size - 4 * MiB, len(payload), limits) is None


def test_a_big_member_is_spooled_and_mapped_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over `in_memory_bytes`, a member lands in an unnamed temporary file and is read through an mmap."""
    fb = fatbin([fatbin_entry(sm=90, payload=b"\1" * 64)])
    so = elf(sections={".nv_fatbin": fb, ".text": bytes(3 * MiB)}, needed=("libcudart.so.13",))
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    member = RawMember(name="demo/_ext.so", payload=c.compress(so) + c.flush(), crc=zlib.crc32(so), declared=len(so))
    w = wheel(tmp_path / "w", member)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    small = ZipLimits(in_memory_bytes=MiB)
    with ZipReader(w, small) as z:
        (m,) = [m for m in z.members if m.name == "demo/_ext.so"]
        with z.open(m) as data:
            assert isinstance(data, mmap.mmap) and data[:] == so
        assert list(spool.iterdir()) == []  # nothing left behind, named or not
    spooled, in_memory = inspect_wheel(w, small), inspect_wheel(w)
    assert spooled.elfs == in_memory.elfs and [str(t) for t in spooled.targets] == ["sm_90"]


def test_stream_feeds_a_sink_in_bounded_steps(tmp_path: Path) -> None:
    """What RECORD checks need: a member's bytes hashed as they inflate, never more than STEP at once."""
    import hashlib

    payload, crc, size = zeros_stream(b"head", 5 * MiB, b"tail")
    w = wheel(tmp_path, RawMember(name="demo/big.bin", payload=payload, crc=crc, declared=size))
    h = hashlib.sha256()
    steps: list[int] = []

    def sink(b: bytes) -> None:
        steps.append(len(b))
        h.update(b)

    with ZipReader(w) as z:
        (m,) = [m for m in z.members if m.name == "demo/big.bin"]
        z.stream(m, sink)
    assert h.digest() == hashlib.sha256(b"head" + bytes(5 * MiB) + b"tail").digest()
    assert sum(steps) == size and max(steps) <= STEP


def test_members_open_at_once_share_the_in_memory_budget(tmp_path: Path) -> None:
    """Worker threads together hold at most `in_memory_bytes`: a member that would pass it is spooled instead."""
    a, b = bytes(range(256)) * 2048, bytes(range(255, -1, -1)) * 2048  # 512 KiB each
    w = wheel(tmp_path, RawMember.deflated("demo/a.so", a), RawMember.deflated("demo/b.so", b))
    with ZipReader(w, ZipLimits(in_memory_bytes=768 << 10)) as z:
        ma, mb = (m for m in z.members if m.name.startswith("demo/"))
        with z.open(ma) as da, z.open(mb) as db:
            assert isinstance(da, bytes) and isinstance(db, mmap.mmap) and (bytes(da), db[:]) == (a, b)
        with z.open(mb) as db:
            assert isinstance(db, bytes)  # the budget was given back


def _name_cases() -> dict[str, tuple[list[RawMember], str]]:
    one = RawMember.deflated
    return {
        "duplicate": ([one("demo/a.so", b"x"), one("demo/a.so", b"y")], "'demo/a.so' appears twice"),
        "file and folder": ([one("demo/a", b"x"), one("demo/a/b", b"y")], "'demo/a' is both a file and a folder"),
        "folder then file": ([one("demo/a/b", b"x"), one("demo/a", b"y")], "'demo/a' is both a file and a folder"),
        "symlink": ([one("demo/a.so", b"/etc/passwd", mode=stat.S_IFLNK | 0o777)], "'demo/a.so' is a symbolic link"),
        "fifo": ([one("demo/p", b"", mode=stat.S_IFIFO | 0o644)], "'demo/p' is a special file"),
        "absolute": ([one("/etc/x.so", b"x")], "'/etc/x.so' has an absolute path"),
        "dot-dot": ([one("demo/../../x.so", b"x")], "escapes the wheel's folder"),
        "local name differs": (
            [one("demo/a.py", b"x", local_name="demo/b.py")],
            "'demo/a.py' is named 'demo/b.py' in its local header",
        ),
        "bzip2": ([RawMember(name="demo/a", payload=b"BZh", crc=0, declared=3, method=12)], "method 12"),
    }


@pytest.mark.parametrize("case", list(_name_cases()))
@pytest.mark.parametrize("cmd", ["size-report", "check"])
def test_directory_lies_are_one_message_naming_wheel_and_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, cmd: str
) -> None:
    members, problem = _name_cases()[case]
    w = wheel(tmp_path, *members)
    code, err = run(capsys, cmd, str(w))
    assert code == 3 and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(f"slimwheel: error: {w}: member ") and problem in line
    with pytest.raises(BadInputError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        extract(w, tmp_path / "out")


def test_overlapping_members_are_refused(tmp_path: Path) -> None:
    """A member whose data holds another member's local header and data: the same bytes counted twice, the way
    overlapping zip bombs declare many times their size."""
    inner = RawMember.deflated("demo/b.txt", b"b" * 1000)
    outer = RawMember.stored("demo/a.txt", local_entry(inner))
    at = len(local_entry(wheel_members()[0])) + len(local_entry(wheel_members()[1]))  # where demo/a.txt starts
    w = raw_zip(tmp_path / "w.whl", [*wheel_members(), outer], aliases=[(inner, at + 30 + len("demo/a.txt"))])
    with pytest.raises(BadInputError, match=r"member 'demo/b\.txt' overlaps member 'demo/a\.txt'"):
        inspect_wheel(w)


NAMES = ["pkg/a.so", "pkg/b.py", "pkg/sub/c.so", "pkg/sub/deep/d.so", "e.py", "pkg.libs/libx.so.1"]


def test_a_directory_offset_that_puts_members_before_the_file_is_refused(tmp_path: Path) -> None:
    w = wheel(tmp_path, RawMember.deflated("demo/a.py", b"x = 1\n"))
    data = bytearray(w.read_bytes())
    eocd = data.rfind(b"PK\x05\x06")
    data[eocd + 16 : eocd + 20] = (int.from_bytes(data[eocd + 16 : eocd + 20], "little") + 1000).to_bytes(4, "little")
    w.write_bytes(bytes(data))
    with pytest.raises(BadInputError, match=rf"^{w}: member '.*' has its local header at -1000, outside the file"):
        inspect_wheel(w)


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(st.sampled_from(NAMES), st.tuples(st.binary(max_size=3000), st.booleans()), min_size=1, max_size=6)
)
def test_extract_round_trips_files_and_modes(files: dict[str, tuple[bytes, bool]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        members = [RawMember.deflated(n, d, mode=0o100755 if x else 0o100644) for n, (d, x) in files.items()]
        w = raw_zip(Path(tmp) / "w.whl", members)
        got = extract(w, Path(tmp) / "out")
        assert got == list(files)
        for n, (d, x) in files.items():
            p = Path(tmp) / "out" / n
            assert p.read_bytes() == d and stat.S_IMODE(p.stat().st_mode) == (0o755 if x else 0o644)


@pytest.mark.parametrize("cmd", ["size-report", "check"])
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_non_regular_inputs_are_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cmd: str, kind: str
) -> None:
    """Issue 12 item 11: /dev/zero was read until MemoryError, a FIFO waited for a writer for ever."""
    import signal

    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "w.whl", "folder": tmp_path / "d.whl"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()

    def hung(*_: object) -> None:
        raise AssertionError(f"{cmd} {path} still runs after 5 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    try:
        code, err = run(capsys, cmd, str(path))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert code == 3
    want = "is a folder" if kind == "folder" else "not a regular file"
    assert err.startswith(f"slimwheel: error: {path}: {want}")


def test_a_member_is_read_where_the_file_cannot_be_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some file systems refuse mmap: the in-memory read falls back to reading the compressed bytes."""
    data = bytes(range(256)) * 64
    w = wheel(tmp_path, RawMember.deflated("demo/a.so", data))

    def refuse(*_a: object, **_k: object) -> None:
        raise OSError(19, "No such device")

    monkeypatch.setattr("slimwheel.inspect.zipread.mmap.mmap", refuse)
    with ZipReader(w) as z:
        (m,) = (m for m in z.members if m.name == "demo/a.so")
        with z.open(m) as got:
            assert bytes(got) == data
