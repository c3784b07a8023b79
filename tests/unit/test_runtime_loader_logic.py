"""The shipped loader's decisions that need no real library: safe folders, search order, messages, major checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from slimwheel.runtime import loader

ROW = {
    "component": "cudart",
    "cuda_major": 13,
    "soname": "libcudart.so.13",
    "folder": "nvidia/cu13/lib",
    "package": "nvidia-cuda-runtime",
    "requirement": "nvidia-cuda-runtime>=13.0,<14",
    "needed": True,
}


def plant(root: Path, soname: str = "libcudart.so.13") -> Path:
    lib = root / "nvidia" / "cu13" / "lib" / soname
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_bytes(b"\x7fELF not really")
    return lib


@pytest.fixture()
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a folder that is not under the test's folders, so 'current directory' does not interfere."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


def test_relative_and_current_directory_are_refused(elsewhere: Path) -> None:
    assert loader.unsafe_reason("nvidia/cu13/lib") == "relative path"
    assert loader.unsafe_reason(os.getcwd()) == "the current directory"
    lib = Path.cwd() / "libcudart.so.13"
    lib.write_bytes(b"x")
    assert loader.unsafe_reason(str(lib)) == "the current directory"
    # below the current directory is fine: a venv in ~/project/.venv while working in ~/project
    deeper = plant(Path.cwd() / ".venv")
    assert loader.unsafe_reason(str(deeper)) is None


def test_world_writable_folder_refused_sticky_allowed(elsewhere: Path) -> None:
    ww = elsewhere / "ww"
    lib = plant(ww)
    ww.chmod(0o777)
    assert loader.unsafe_reason(str(lib)) == f"{ww} is writable by everyone"
    ww.chmod(0o1777)  # like /tmp: others cannot replace what they do not own
    assert loader.unsafe_reason(str(lib)) is None
    ww.chmod(0o755)
    lib.chmod(0o666)
    assert loader.unsafe_reason(str(lib)) == f"{lib} is writable by everyone"


def test_own_site_packages_first_then_absolute_sys_path(elsewhere: Path) -> None:
    site = elsewhere / "site"
    pkg = site / "demo"
    pkg.mkdir(parents=True)
    other = elsewhere / "other"
    other.mkdir()
    roots = loader.search_roots({"depth": 1}, str(pkg / "_slimwheel_loader.py"),
                                path=["", "relative/dir", str(other), str(site), "/does/not/exist"])  # fmt: skip
    assert roots == [str(site), str(other)]


def test_wheel_folder_found_and_unsafe_copies_skipped(elsewhere: Path) -> None:
    bad = elsewhere / "bad"
    plant(bad)
    bad.chmod(0o777)
    good = elsewhere / "good"
    lib = plant(good)
    missing = elsewhere / "missing"
    missing.mkdir()
    found, tried = loader.find_in_wheels(ROW, [str(missing), str(bad), str(good)])
    assert found == str(lib.resolve())
    assert tried == [
        (str(missing / "nvidia" / "cu13" / "lib"), "not there"),
        (str(bad / "nvidia" / "cu13" / "lib"), f"refused: {bad} is writable by everyone"),
        (str(good / "nvidia" / "cu13" / "lib"), "found"),
    ]


def test_current_directory_copy_is_never_found(elsewhere: Path) -> None:
    plant(Path.cwd())
    found, tried = loader.find_in_wheels(ROW, [os.getcwd()])
    assert found is None
    assert tried == [(str(Path.cwd() / "nvidia" / "cu13" / "lib"), "refused: under the current directory")]


def test_missing_library_message(elsewhere: Path) -> None:
    site = elsewhere / "site"
    (site / "demo").mkdir(parents=True)
    cfg = {"dist": "demo", "depth": 1, "driver": None, "libs": [ROW]}
    with pytest.raises(ImportError) as e:
        loader.ensure_loaded(cfg, env={}, loader_file=str(site / "demo" / "_slimwheel_loader.py"), path=[])
    assert str(e.value) == (
        "demo needs libcudart.so.13 (CUDA 13 cudart), which could not be loaded.\n"
        "  looked in:\n"
        "    - already-loaded libraries of this process: not loaded\n"
        f"    - {site / 'nvidia' / 'cu13' / 'lib'}: not there\n"
        "  fix: pip install 'nvidia-cuda-runtime>=13.0,<14'\n"
        "  (or set SLIMWHEEL_USE_SYSTEM_CUDA=1 to load a system CUDA installation by SONAME)"
    )


def test_optional_dependency_rows_may_be_absent(elsewhere: Path) -> None:
    site = elsewhere / "site"
    (site / "demo").mkdir(parents=True)
    cfg = {"dist": "demo", "depth": 1, "driver": None,
           "libs": [dict(ROW, component="nvJitLink", soname="libnvJitLink.so.13", needed=False)]}  # fmt: skip
    state = loader.ensure_loaded(cfg, env={}, loader_file=str(site / "demo" / "_slimwheel_loader.py"), path=[])
    assert state["libraries"] == []


def test_other_major_already_mapped_is_detected() -> None:
    maps = ["/x/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", "/usr/lib/libc.so.6",
            "/opt/cuda/lib64/libcudart.so.13.0.96"]  # fmt: skip
    assert loader.other_majors_loaded("libcudart.so.13", maps) == [maps[0]]
    assert loader.other_majors_loaded("libcublas.so.13", maps) == []
    assert loader.other_majors_loaded("libcudart.so.12", maps) == [maps[2]]


def test_maps_parsing_and_soname_major() -> None:
    text = (
        "7f00-7f01 r-xp 00000000 08:01 123 /opt/lib/libcudart.so.13\n"
        "7f01-7f02 r--p 00001000 08:01 123 /opt/lib/libcudart.so.13\n"
        "7f02-7f03 rw-p 00000000 00:00 0 [heap]\n"
        "7f03-7f04 r-xp 00000000 08:01 9 /usr/bin/python3.11\n"
    )
    assert loader.mapped_libraries(text) == ["/opt/lib/libcudart.so.13"]
    assert loader.soname_major("libcudart.so.12.8.90") == 12
    assert loader.soname_major("libfoo.so") is None


def test_this_process_maps_are_readable() -> None:
    # the libc of this very interpreter is mapped; the parser must see it
    assert any(os.path.basename(p).startswith("libc.so") for p in loader.mapped_libraries()) or sys.platform != "linux"
