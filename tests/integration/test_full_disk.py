"""A real full disk (a 1 MiB tmpfs): `repair` exits with NO_SPACE, names what it could not write and leaves nothing
on the full disk (issue 41: it was "bad input", exit 3). Needs root, for mount(8); skipped, saying so, without it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.wheels_repair import build_extension, ext_suffix, make_wheel

from slimwheel.cli import main
from slimwheel.errors import ExitCode

pytestmark = pytest.mark.integration


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)], check=True, timeout=30)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)


@pytest.fixture
def big_wheel(tmp_path: Path) -> Path:
    ext = build_extension(tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[], libs=[])
    return make_wheel(
        tmp_path / "dist",
        name="bigone",
        version="0.1",
        # incompressible, so the repaired wheel is larger than the 1 MiB disk
        files={"bigone/__init__.py": b"", f"bigone/_ext{ext_suffix()}": ext, "bigone/blob.bin": os.urandom(3 << 20)},
    )


def test_repair_onto_a_full_disk(
    full_disk: Path,
    big_wheel: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLIMWHEEL_CACHE", str(tmp_path / "cache"))
    out = full_disk / "dist"
    assert main(["repair", "-w", str(out), str(big_wheel)]) == ExitCode.NO_SPACE
    err = capsys.readouterr().err
    assert "No space left on device" in err and str(out) in err and "internal error" not in err
    assert [p for p in full_disk.rglob("*") if p.is_file()] == []  # no half-written wheel, no temp file


def test_repair_with_its_work_folder_on_a_full_disk(
    full_disk: Path,
    big_wheel: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLIMWHEEL_CACHE", str(full_disk / "cache"))
    assert main(["repair", "-w", str(tmp_path / "out"), str(big_wheel)]) == ExitCode.NO_SPACE
    err = capsys.readouterr().err
    assert "No space left on device" in err and "internal error" not in err
    assert [p for p in full_disk.rglob("*") if p.is_file()] == []
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
