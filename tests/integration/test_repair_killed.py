"""A `repair` killed while auditwheel runs leaves nothing behind for good (issue 41): auditwheel's temporary folders
(430-660 MB for a CUDA wheel) lie inside repair's own work folder, which the next repair removes as an orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.wheels_repair import build_extension, build_fake_lib, clean_env, ext_suffix, make_wheel

pytestmark = pytest.mark.integration

INIT = b'"""A test package."""\n'


def _wheel(tmp: Path, version: str) -> Path:
    helper = tmp / "helper"
    build_fake_lib(helper / "libhelper.so.1", "libhelper.so.1", tag="helper", version=1)
    (helper / "libhelper.so").symlink_to("libhelper.so.1")
    ext = build_extension(
        tmp / f"_ext{ext_suffix()}", "_ext", lib_dirs=[helper], libs=["helper"], runpath=[str(helper)]
    )
    # Incompressible bytes: auditwheel takes seconds to unpack and pack them, time enough to kill it meanwhile.
    return make_wheel(
        tmp / "dist",
        name="killme",
        version=version,
        files={"killme/__init__.py": INIT, f"killme/_ext{ext_suffix()}": ext, "killme/blob.bin": os.urandom(48 << 20)},
    )


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*")) if folder.exists() else []


def _start_and_wait_for_auditwheel(
    cmd: list[str], env: dict[str, str], work: Path, tmpdir: Path
) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own and wait (bounded) until auditwheel has made its temporary folder,
    wherever it makes it."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if [p for p in _entries(work) if p.parent.name == "auditwheel-tmp"] + _entries(tmpdir):
            return proc
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    raise AssertionError(f"auditwheel's temporary folder never appeared (exit {proc.returncode})")


def _setup(tmp_path: Path, version: str) -> tuple[list[str], dict[str, str], Path, Path, Path]:
    wheel = _wheel(tmp_path, version)
    tmpdir, cache, out = tmp_path / "tmpdir", tmp_path / "cache", tmp_path / "out"
    tmpdir.mkdir()
    env = clean_env(TMPDIR=str(tmpdir), SLIMWHEEL_CACHE=str(cache))
    # the helper's folder is outside the wheel: named, so that auditwheel may bundle from it (issue 41 S1)
    named = ["--library-dir", str(tmp_path / "helper")]
    cmd = [sys.executable, "-m", "slimwheel", "repair", "-w", str(out), *named, str(wheel)]
    return cmd, env, cache / "work", tmpdir, out


def test_a_killed_repair_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    cmd, env, work, tmpdir, out = _setup(tmp_path, "0.1")
    proc = _start_and_wait_for_auditwheel(cmd, env, work, tmpdir)
    # The whole process group at once, as CI's hard cancel or the OOM killer does: no clean-up code runs.
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert _entries(tmpdir) == [], "auditwheel's temporary files went to $TMPDIR, where no run ever removes them"
    assert any(p.name == "auditwheel-tmp" for p in _entries(work))  # the kill came while auditwheel ran

    # The killed run's folder, as the next run finds it an hour later (orphans younger than a minute are spared).
    hour_ago = time.time() - 3600
    for orphan in work.iterdir():
        os.utime(orphan, (hour_ago, hour_ago))
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert second.returncode == 0, second.stderr
    assert sorted(out.glob("*.whl")), "the second run made no wheel"
    assert _entries(work) == [], f"left behind: {_entries(work)[:5]}"
    assert _entries(tmpdir) == []


def test_an_interrupted_repair_leaves_nothing(tmp_path: Path) -> None:
    # SIGTERM (CI's cancel) to slimwheel alone: it stops auditwheel, which has no time to clean up after itself,
    # and removes its own work folder, auditwheel's temporary folders inside it.
    cmd, env, work, tmpdir, out = _setup(tmp_path, "0.2")
    proc = _start_and_wait_for_auditwheel(cmd, env, work, tmpdir)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130
    assert _entries(work) == [] and _entries(tmpdir) == [] and _entries(out) == []
