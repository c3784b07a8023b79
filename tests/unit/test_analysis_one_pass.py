"""`check`'s analysis reads a wheel once (issue 36 item 1): every member inflates one time for the report, its RECORD
hash, the Python sources the import rules read and the torch symbols of the extensions that link torch. It gets
what the separate reads got before (`analyze` given a report reads them on its own: slim and variants): the same
RECORD problems, the same torch use, the same answers about guarded imports."""

from __future__ import annotations

import collections
import zipfile
from pathlib import Path

import pytest

from slimwheel import analysis, torchext
from slimwheel.errors import BadInputError
from slimwheel.inspect import scan, zipread
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.pyimports import MAX_SOURCE, MAX_SOURCES, PythonImports
from slimwheel.inspect.wheel import WheelArchive
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

OPTIONAL = b"try:\n    from pkg import _nccl\nexcept ImportError:\n    _nccl = None\n"
TORCH_SYMBOLS = ["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs", "aoti_torch_get_device"]


def _wheel(out: Path, *, extra: dict[str, bytes] | None = None) -> Path:
    files = {
        "pkg/__init__.py": OPTIONAL,
        "pkg/_nccl.cpython-311-x86_64-linux-gnu.so": elf(needed=["libnccl.so.2", "libc.so.6"]),
        # links torch and imports its symbols, and is bigger than a batch of small members: hashed beside its parse
        "pkg/_ops.cpython-311-x86_64-linux-gnu.so": elf(
            needed=["libc10.so", "libtorch.so", "libc.so.6"],
            undefined=TORCH_SYMBOLS,
            sections={".rodata": bytes(range(256)) * (scan._BATCH // 256 + 16)},
        ),
        # many small members, hashed in batches
        **{f"pkg/data/f{i}.txt": b"x%d\n" % i for i in range(300)},
        **(extra or {}),
    }
    return make_wheel(out, name="pkg", files=files, tag="cp311-cp311-manylinux_2_28_x86_64")


def _counting(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many times each member is inflated, by whatever reader of the bounded zip reader."""
    counts: collections.Counter[str] = collections.Counter()
    in_memory, stream = zipread.ZipReader._in_memory, zipread.ZipReader.stream

    def counted_in_memory(self: zipread.ZipReader, m: zipread.Member) -> bytes:
        counts[m.name] += 1
        return in_memory(self, m)

    def counted_stream(self: zipread.ZipReader, m: zipread.Member, sink: object) -> None:
        counts[m.name] += 1
        stream(self, m, sink)  # type: ignore[arg-type]

    monkeypatch.setattr(zipread.ZipReader, "_in_memory", counted_in_memory)
    monkeypatch.setattr(zipread.ZipReader, "stream", counted_stream)
    return counts


def test_every_member_inflates_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _wheel(tmp_path)
    counts = _counting(monkeypatch)
    a = analysis.analyze(wheel)
    # the questions the rules ask of the sources and of torch use, answered from what the one pass kept
    assert a.imports is not None
    assert a.imports.optional("pkg/_nccl.cpython-311-x86_64-linux-gnu.so") is not None
    assert a.torch is not None and set(a.torch.stable) | set(a.torch.unstable) == set(TORCH_SYMBOLS)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert set(counts) == set(names)
    assert max(counts.values()) == 1, {n: c for n, c in counts.items() if c > 1}


def test_the_one_pass_gets_what_the_separate_reads_get(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    one = analysis.analyze(wheel)
    separate = analysis.analyze(wheel, report=scan.inspect_wheel(wheel))  # reads RECORD, torch and sources itself
    assert one.report == separate.report
    assert one.record == separate.record
    assert one.torch == separate.torch
    assert one.imports is not None and separate.imports is not None
    for module in ("pkg._nccl", "pkg._ops", "pkg"):
        assert one.imports.sites_of(module) == separate.imports.sites_of(module)


def test_a_tampered_member_is_found_in_the_one_pass(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    tampered = tmp_path / "t" / wheel.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "pkg/data/f7.txt":
                data = b"changed\n"
            dst.writestr(info, data)
    problems = analysis.analyze(tampered).record
    assert problems and all("pkg/data/f7.txt has the wrong" in p.message for p in problems), problems
    assert analysis.analyze(tampered, report=scan.inspect_wheel(tampered)).record == problems


def test_sources_past_the_readers_cap_are_read_from_the_wheel_when_asked(tmp_path: Path) -> None:
    """Past MAX_SOURCES the one pass keeps no source (memory stays bounded); the reader then reads them from the
    wheel if a rule asks, with the answers it always gave past the cap (nothing known: every import required)."""
    line = b"x = 1\n"
    per = MAX_SOURCE // len(line)
    big = {f"pkg/gen{i}.py": line * per for i in range(MAX_SOURCES // (per * len(line)) + 2)}
    wheel = _wheel(tmp_path, extra=big)
    with WheelArchive(wheel) as archive:
        assert analysis._Sources().keep(archive.members) == frozenset()
    with WheelArchive(_wheel(tmp_path / "small")) as archive:
        assert "pkg/__init__.py" in analysis._Sources().keep(archive.members)
    a = analysis.analyze(wheel)
    assert a.imports is not None
    ext = "pkg/_nccl.cpython-311-x86_64-linux-gnu.so"
    assert a.imports.optional(ext) == PythonImports.from_wheel(wheel).optional(ext)


def test_member_symbols_only_for_members_that_need_torch() -> None:
    data = elf(needed=["libc.so.6"], undefined=TORCH_SYMBOLS)
    assert torchext.member_symbols("a.so", data, read_elf(data, "a.so")) is None
    linked = elf(needed=["libtorch.so"], undefined=[*TORCH_SYMBOLS, "malloc"])
    assert torchext.member_symbols("b.so", linked, read_elf(linked, "b.so")) == frozenset(TORCH_SYMBOLS)


@pytest.mark.parametrize("member", ["pkg/data/f7.txt", "pkg/_ops.cpython-311-x86_64-linux-gnu.so"])
def test_a_corrupt_member_is_one_clear_error_from_either_reader(tmp_path: Path, member: str) -> None:
    """A member whose deflate data is damaged, read by a batch of small members or by the ELF reader while another
    thread hashes it: a BadInputError naming the wheel and the member, whichever thread met it, and nothing hangs."""
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        info = z.getinfo(member)
    data = bytearray(wheel.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start, start + min(info.compress_size, 64)):
        data[i] ^= 0xFF
    broken = tmp_path / "broken" / wheel.name
    broken.parent.mkdir()
    broken.write_bytes(bytes(data))
    with pytest.raises(BadInputError) as e:
        analysis.analyze(broken)
    assert str(broken) in e.value.message and member in e.value.message
