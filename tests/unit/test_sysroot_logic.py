"""The sysroot's pure parts (wrapper, symbolic links, loader output, names) and build's note on a host above the
target floor. Assembling and using it: tests/integration/test_sysroot_knn.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slimwheel.build import host_floor_note
from slimwheel.config import Config
from slimwheel.errors import BadInputError
from slimwheel.toolkit.sysroot import SPECS, load_problems, relative_symlinks, spec_for, wrapper_script


def test_wrapper_runs_the_roots_driver_with_its_sysroot_relative_to_itself(tmp_path: Path) -> None:
    text = wrapper_script(tmp_path, "g++", SPECS["debian11"])
    assert text.startswith("#!/bin/sh\n")
    assert 'root="$(cd "$(dirname "$0")/.." && pwd)"' in text
    assert 'exec "$root/usr/bin/x86_64-linux-gnu-g++-10" --sysroot="$root" "$@"' in text
    assert str(tmp_path) not in text  # the root can move


def test_absolute_links_become_relative_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib" / "x86_64-linux-gnu" / "ld-2.31.so").write_bytes(b"x")
    (root / "lib64").mkdir()
    (root / "lib64" / "ld-linux-x86-64.so.2").symlink_to("/lib/x86_64-linux-gnu/ld-2.31.so")
    (root / "lib64" / "rel").symlink_to("ld-linux-x86-64.so.2")
    assert relative_symlinks(root) == 1
    assert os.readlink(root / "lib64" / "ld-linux-x86-64.so.2") == "../lib/x86_64-linux-gnu/ld-2.31.so"
    assert (root / "lib64" / "ld-linux-x86-64.so.2").read_bytes() == b"x"
    assert os.readlink(root / "lib64" / "rel") == "ld-linux-x86-64.so.2"


def test_loader_complaints() -> None:
    out = (
        "\tlibc.so.6 => /r/lib/x86_64-linux-gnu/libc.so.6 (0x1)\n"
        "./m.so: /r/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by ./m.so)\n"
        "\tlibcublas.so.13 => not found\n"
    )
    assert load_problems(out) == [
        "./m.so: /r/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by ./m.so)",
        "libcublas.so.13 => not found",
    ]


def test_names() -> None:
    assert spec_for(" Debian11 ").policy == "manylinux_2_31"
    with pytest.raises(BadInputError, match="not one slimwheel assembles"):
        spec_for("centos7")


@pytest.mark.parametrize(
    "glibc,target,sysroot,says",
    [
        ("2.36", "2_28", "", True),  # Debian 12 host, manylinux_2_28 target: the note
        ("2.39", "2_31", "", True),
        ("2.36", "2_28", "debian11", False),  # the sysroot decides the floor, not the host
        ("2.28", "2_28", "", False),  # the host is the target's level
        ("2.36", "", "", False),  # no target
    ],
)
def test_build_says_when_the_host_is_above_the_target(glibc: str, target: str, sysroot: str, says: bool) -> None:
    note = host_floor_note(Config(manylinux=target, sysroot=sysroot), host_glibc=glibc)
    assert (note is not None) == says
    if note:
        assert f"glibc {glibc}" in note and 'sysroot = "debian11"' in note and "slimwheel container" in note
