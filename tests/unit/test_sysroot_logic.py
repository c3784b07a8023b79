"""The sysroot's pure parts (wrapper, symbolic links, loader output, names) and build's note on a host above the
target floor. Assembling and using it: tests/integration/test_sysroot_knn.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slimwheel.build import host_floor_note
from slimwheel.config import Config
from slimwheel.errors import BadInputError
from slimwheel.toolkit.sysroot import (
    COMPAT_HEADER,
    GLIBCXX_SHIM_SYMBOLS,
    SPECS,
    compat_header,
    glibcxx_shim_source,
    link_host_python_includes,
    load_problems,
    relative_symlinks,
    shim_versions,
    spec_for,
    wrapper_script,
    write_wrappers,
)
from slimwheel.toolkit.sysroot_wrappers import _GCC11_INTRINSICS


def test_wrapper_runs_the_roots_driver_with_its_sysroot_relative_to_itself(tmp_path: Path) -> None:
    text = wrapper_script(tmp_path, "g++", SPECS["debian11"])
    assert text.startswith("#!/bin/sh\n")
    assert 'root="$(cd "$(dirname "$0")/.." && pwd)"' in text
    assert (
        'exec "$root/usr/bin/x86_64-linux-gnu-g++-10" --sysroot="$root" -include "$root/bin/slimwheel-gcc-compat.h" '
        '-idirafter "$root/host-python-include" "$@"' in text
    )
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


def test_plan_cap_pins_only_same_abi_symbols_with_an_allowed_version() -> None:
    from slimwheel.inspect.elf import VersionDef
    from slimwheel.toolkit.sysroot import cap_header, plan_cap, spec_for

    def v(sym: str, ver: str, default: bool) -> VersionDef:
        return VersionDef(symbol=sym, version=ver, default=default)

    allowed = frozenset({"2.2.5", "2.17", "2.25", "2.28"})
    defs = {
        "libm.so.6": [
            v("pow", "GLIBC_2.29", True),
            v("pow", "GLIBC_2.2.5", False),
            v("totalorder", "GLIBC_2.31", True),  # arguments changed: never pinned
            v("totalorder", "GLIBC_2.25", False),
            v("sqrt", "GLIBC_2.2.5", True),  # already allowed
            v("GLIBC_2.29", "GLIBC_2.29", True),  # the version node's own symbol
        ],
        "libc.so.6": [v("gettid", "GLIBC_2.30", True)],  # nothing older
    }
    pinned, beyond = plan_cap(defs, allowed)
    assert [(p.symbol, p.pinned, p.default) for p in pinned] == [("pow", "GLIBC_2.2.5", "GLIBC_2.29")]
    assert sorted(b[1] for b in beyond) == ["gettid", "totalorder"]
    header = cap_header("manylinux_2_28", spec_for("debian11"), pinned)
    assert '__asm__(".symver pow,pow@GLIBC_2.2.5");' in header
    assert "!defined(__CUDA_ARCH__)" in header and "!defined(__ASSEMBLER__)" in header
    # nothing allowed is pinned; a policy that allows the default version pins nothing
    assert plan_cap(defs, allowed | {"2.29", "2.30", "2.31"}) == ((), ())


def test_plan_cap_picks_newest_allowed_and_skips_clashes() -> None:
    from slimwheel.inspect.elf import VersionDef
    from slimwheel.toolkit.sysroot import plan_cap

    defs = {
        "libc.so.6": [
            VersionDef(symbol="memcpy", version="GLIBC_2.14", default=True),
            VersionDef(symbol="memcpy", version="GLIBC_2.2.5", default=False),
        ],
    }
    (pin,), _ = plan_cap(defs, frozenset({"2.2.5", "2.3", "2.12"}))
    assert pin.pinned == "GLIBC_2.2.5"
    clash = {
        "liba.so": [
            VersionDef(symbol="pow", version="GLIBC_2.29", default=True),
            VersionDef(symbol="pow", version="GLIBC_2.2.5", default=False),
        ],
        "libb.so": [
            VersionDef(symbol="pow", version="GLIBC_2.29", default=True),
            VersionDef(symbol="pow", version="GLIBC_2.17", default=False),
        ],
    }
    assert plan_cap(clash, frozenset({"2.2.5", "2.17"}))[0] == ()


def test_compat_header_defines_each_missing_intrinsic_once_behind_guards() -> None:
    text = compat_header(SPECS["debian11"])
    lines = text.splitlines()
    guard = lines.index(next(ln for ln in lines if ln.startswith("#if ")))
    assert "__GNUC__ < 11" in lines[guard] and "__clang__" in lines[guard]
    assert "__ASSEMBLER__" in lines[guard + 1] and "__CUDA_ARCH__" in lines[guard + 1]
    assert lines[-1] == "#endif"
    for call, body in _GCC11_INTRINSICS:
        name = call.split("(", 1)[0]
        assert text.count(f"#define {name}(") == 1 and f"#ifndef {name}\n#define {call} {body}\n#endif" in text
    assert "_mm256_loadu_epi8" in text and "_mm512_loadu_epi16" in text  # what faiss 1.15 uses


def test_wrappers_are_rewritten_when_stale(tmp_path: Path) -> None:
    spec = SPECS["debian11"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "g++").write_text('#!/bin/sh\nexec old-g++ "$@"\n')
    write_wrappers(tmp_path, spec)
    for prog in ("gcc", "g++"):
        w = tmp_path / "bin" / prog
        assert w.read_text() == wrapper_script(tmp_path, prog, spec) and os.access(w, os.X_OK)
        assert f'-include "$root/bin/{COMPAT_HEADER}"' in w.read_text()
    assert (tmp_path / "bin" / COMPAT_HEADER).read_text() == compat_header(spec)


def test_host_python_headers_are_linked_and_stale_links_go(tmp_path: Path) -> None:
    host, root = tmp_path / "usr-include", tmp_path / "root"
    for v in ("python3.11", "python3.12"):
        (host / "x86_64-linux-gnu" / v).mkdir(parents=True)
    (host / "x86_64-linux-gnu" / "openssl").mkdir()  # not a Python: never linked
    assert link_host_python_includes(root, host) == ["python3.11", "python3.12"]
    folder = root / "host-python-include" / "x86_64-linux-gnu"
    assert os.readlink(folder / "python3.12") == str(host / "x86_64-linux-gnu" / "python3.12")
    (host / "x86_64-linux-gnu" / "python3.11").rmdir()
    assert link_host_python_includes(root, host) == ["python3.12"]
    assert sorted(p.name for p in folder.iterdir()) == ["python3.12"]


def test_shim_versions_and_mangled_names() -> None:
    assert shim_versions(frozenset({"3.4.24", "3.4.25"})) == ("3.4.26",)
    assert shim_versions(frozenset({"3.4.26", "3.4.28"})) == ()
    names = GLIBCXX_SHIM_SYMBOLS["3.4.26"]
    assert len(names) == 4 * 2 * 2 * 2 == len(set(names))  # 4 classes, char/wchar_t, C1/C2, two ABIs
    assert "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev" in names
    assert "_ZNSt15basic_stringbufIwSt11char_traitsIwESaIwEEC2Ev" in names
    src = glibcxx_shim_source(("3.4.26",), cxx11=True)
    assert (
        "#define _GLIBCXX_USE_CXX11_ABI 1" in src and "template basic_stringstream<char>::basic_stringstream();" in src
    )
    assert "_GLIBCXX_BEGIN_NAMESPACE_CXX11" not in glibcxx_shim_source(("3.4.26",), cxx11=False)
