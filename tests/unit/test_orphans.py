"""Temp files and folders of killed runs (issue 12 item 13): removed on failure, and by the next run that writes the
same target, never while a live run holds them. Real files and folders in tmp_path; flock held from this process
through a second open file description, as another process would hold it."""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slimwheel import fsutil
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import ToolError
from slimwheel.toolkit import pypi13

OLD = time.time() - 3600


def orphan(path: Path, *, directory: bool = False, mtime: float = OLD) -> Path:
    if directory:
        (path / "site" / "nvidia").mkdir(parents=True)
        (path / "site" / "nvidia" / "libcublasLt.so.13").write_bytes(b"x" * 1000)
    else:
        path.write_bytes(b"PK half a wheel")
    os.utime(path, (mtime, mtime))
    return path


def test_killed_writers_temp_files_go_with_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "dist" / "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    target.parent.mkdir()
    dead = orphan(target.parent / f".{target.name}.k3x_9qzz.tmp")
    dead_dir = orphan(target.parent / f".{target.name}.abcdefgh.tmp", directory=True)
    young = orphan(target.parent / f".{target.name}.youngone.tmp", mtime=time.time())
    held = orphan(target.parent / f".{target.name}.heldheld.tmp")
    others = [
        target.parent / n
        for n in (
            f".{target.name}.lock",
            f".{target.name}.abcdefg.tmp",
            ".other.whl.abcdefgh.tmp",
            f"{target.name}.abcdefgh.tmp",
        )
    ]
    for p in others:
        orphan(p)
    link = target.parent / f".{target.name}.linklink.tmp"
    link.symlink_to(dead_dir)
    with open(held, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # a live run's temp file
        fsutil.write_text_atomic(target, "wheel")
        assert held.exists()
    assert target.read_text() == "wheel"
    assert not dead.exists() and not dead_dir.exists()
    assert young.exists() and all(p.exists() for p in others) and link.is_symlink()
    # nothing of the write itself stays behind
    assert sorted(p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")) == sorted(
        [young.name, held.name, link.name, *(p.name for p in others if p.name.endswith(".tmp"))]
    )


def test_a_failed_write_leaves_neither_temp_nor_target(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    with pytest.raises(RuntimeError), fsutil.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed halfway")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), fsutil.temp_sibling(tmp_path / "tk", directory=True) as work:
        (work / "big").write_bytes(b"x" * 100)
        raise RuntimeError("pip failed")
    assert list(tmp_path.iterdir()) == []


def test_a_live_temp_sibling_is_never_taken_for_an_orphan(tmp_path: Path) -> None:
    target = tmp_path / "cuda-13.0"
    with fsutil.temp_sibling(target, directory=True) as work:
        os.utime(work, (OLD, OLD))  # old enough, but its owner is alive and holds the flock
        assert fsutil.remove_stale_temps(target, min_age_s=0) == []
        assert work.is_dir()
    assert not work.exists()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(
        st.one_of(
            st.text(alphabet="abcz_09.-tmpxwhl", min_size=1, max_size=24),
            st.from_regex(r"\.x\.whl\.[a-z0-9_]{7,9}\.tmp", fullmatch=True),
        ),
        max_size=12,
        unique=True,
    )
)
def test_only_our_own_temp_names_are_touched(tmp_path_factory: pytest.TempPathFactory, names: list[str]) -> None:
    folder = tmp_path_factory.mktemp("out")
    target = folder / "x.whl"
    ours = re.compile(r"\.x\.whl\.[a-z0-9_]{8}\.tmp")
    made = []
    for n in names:
        if n in (".", "..", "x.whl"):
            continue
        made.append(orphan(folder / n))
    removed = fsutil.remove_stale_temps(target)
    assert sorted(p.name for p in removed) == sorted(p.name for p in made if ours.fullmatch(p.name))
    assert all(p.exists() == (not ours.fullmatch(p.name)) for p in made)


def test_toolkit_orphans_are_removed_under_the_toolkit_lock_even_if_this_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what a killed `slimwheel toolkit --cuda 13.0` left: slimwheel 0.1's names and the current ones (~1 GB each)
    toolkits = tmp_path / "toolkits"
    toolkits.mkdir()
    left = [
        orphan(toolkits / ".cuda-13.0.tmp-q1w2e3r4", directory=True),
        orphan(toolkits / ".cuda-13.0.stale-abcdefgh", directory=True),
        orphan(toolkits / ".cuda-13.0.zzzzzzzz.tmp", directory=True, mtime=time.time()),
    ]
    other_release = orphan(toolkits / ".cuda-13.1.tmp-q1w2e3r4", directory=True)
    seen: list[Path] = []

    def pip_fails(site: Path, reqs: tuple[str, ...]) -> None:
        seen.append(site)
        site.mkdir()
        (site / "partial.whl").write_bytes(b"x")
        raise ToolError("pip install failed: network down")

    monkeypatch.setattr(pypi13, "_pip_install", pip_fails)
    with pytest.raises(ToolError, match="network down"):
        pypi13.assemble(CudaVersion(13, 0), tmp_path)
    assert not any(p.exists() for p in left)  # under the lock even a young one is an orphan
    assert seen and not seen[0].parent.exists()  # this run's own temp folder went with the failure
    assert other_release.exists()  # another release's lock, another run's business
    assert sorted(p.name for p in toolkits.iterdir()) == [".cuda-13.0.lock", other_release.name]
