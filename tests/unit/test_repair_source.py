"""Issue 36: `repair` reads its input once. Members are hashed while they inflate (RECORD verified from those hashes),
each ELF file is parsed once per wheel it is in (the input, auditwheel's output, the packed output that check's
reader judges), and what is asked later comes from that read."""

from __future__ import annotations

import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slimwheel import wheelfile
from slimwheel.errors import BadRecordError
from slimwheel.inspect import elf as elf_reader
from slimwheel.inspect.zipread import ZipReader
from slimwheel.repair import repair_wheel
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel


def test_unpack_digested_hashes_what_it_writes(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, files={"demo/a.so": elf(needed=("libc.so.6",)), "demo/__init__.py": b"x = 1\n"})
    names, digests = wheelfile.unpack_digested(w, tmp_path / "x")
    assert sorted(digests) == sorted(names)
    assert digests == wheelfile.digest_tree(tmp_path / "x")  # the same digests as reading the files back


def test_a_member_changed_after_the_build_is_refused_from_the_inflating_hashes(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, files={"demo/a.so": elf(needed=("libc.so.6",))})
    tampered = tmp_path / "t" / w.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(w) as src, zipfile.ZipFile(tampered, "w") as dst:
        for i in src.infolist():
            data = src.read(i)
            dst.writestr(i, data + b"\0" if i.filename == "demo/a.so" else data)
    with pytest.raises(BadRecordError, match="demo/a.so has the wrong hash"):
        repair_wheel(tampered, tmp_path / "out")


def _fake_auditwheel(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(wheel: Path, out_dir: Path, **_: object) -> Path:
        with zipfile.ZipFile(wheel) as z:
            files = {n: z.read(n) for n in z.namelist() if ".dist-info/" not in n}
        return make_wheel(out_dir, files=files, tag="cp311-cp311-manylinux_2_28_x86_64")

    monkeypatch.setattr("slimwheel.repair.run_auditwheel", run)


def test_repair_inflates_and_parses_each_member_once_per_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_auditwheel(monkeypatch)
    w = make_wheel(
        tmp_path,
        files={"demo/a.so": elf(needed=("libc.so.6",)), "demo/b.so": elf(needed=("libm.so.6",))},
        tag="cp311-cp311-linux_x86_64",
    )
    inflated: Counter[tuple[str, str]] = Counter()
    parsed: Counter[str] = Counter()

    def counting(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: ZipReader, m: Any, *args: Any, **kwargs: Any) -> Any:
            inflated[(self.path.name, m.name)] += 1
            return method(self, m, *args, **kwargs)

        return wrapper

    for name in ("stream", "open", "read"):
        monkeypatch.setattr(ZipReader, name, counting(getattr(ZipReader, name)))
    opened: Counter[str] = Counter()
    init = ZipReader.__init__

    def opening(self: ZipReader, path: Path, *args: Any, **kwargs: Any) -> None:
        opened[Path(path).name] += 1
        init(self, path, *args, **kwargs)

    monkeypatch.setattr(ZipReader, "__init__", opening)
    read_elf = elf_reader.read_elf

    def parse(data: Any, name: str, **kwargs: Any) -> Any:
        parsed[name] += 1
        return read_elf(data, name, **kwargs)

    monkeypatch.setattr(elf_reader, "read_elf", parse)
    res = repair_wheel(w, tmp_path / "out")
    assert res.wheel.is_file()
    # the input: its directory read once, every member (metadata too) inflated once, unpacked and hashed in one pass
    assert opened[w.name] == 1, opened
    with zipfile.ZipFile(w) as z:
        members = z.namelist()
    assert {m: inflated[(w.name, m)] for m in members} == dict.fromkeys(members, 1), inflated
    for member in ("demo/a.so", "demo/b.so"):
        # once in the input, once in auditwheel's output, once in the packed output (check's reader judges it)
        assert parsed[member] == 3, parsed
