"""The shipped loader's decisions that need no real library: trusted paths (real files, folders and symlinks built
here), search order, boolean environment, messages, major checks."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slimwheel import envvars
from slimwheel.errors import BadInputError
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


def roots_of(*folders: Path) -> list[tuple[str, str | None]]:
    return [(str(f), None) for f in folders]


def test_symlink_through_a_world_writable_sys_path_folder_is_refused(elsewhere: Path) -> None:
    # The attack of issue 12 item 2: a world-writable folder on sys.path holds `nvidia -> <an ordinary 0755 folder>`.
    # Everything the link resolves to is safe; the folder holding the link is not (anyone can re-point it).
    decoy = elsewhere / "decoy"
    lib = plant(decoy)
    ww = elsewhere / "ww"
    ww.mkdir()
    (ww / "nvidia").symlink_to(decoy / "nvidia")
    ww.chmod(0o777)
    via_link = ww / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    assert loader.trust_problem(str(lib)) is None  # the resolved path alone looks fine
    assert loader.trust_problem(str(via_link)) == f"{ww}: folder writable by everyone (mode 0777, no sticky bit)"
    roots = loader.search_roots(None, [str(ww)])
    found, tried = loader.find_in_wheels(ROW, roots)
    assert found is None
    assert tried == [
        (str(ww / "nvidia" / "cu13" / "lib"), f"refused: {ww}: folder writable by everyone (mode 0777, no sticky bit)")
    ]


def test_a_link_that_leads_through_a_writable_folder_is_refused(elsewhere: Path) -> None:
    # the other direction: the given path is clean, the resolved one passes a folder anyone can write
    ww = elsewhere / "ww"
    lib = plant(ww / "deep")
    ww.chmod(0o777)
    site = elsewhere / "site"
    site.mkdir()
    (site / "nvidia").symlink_to(ww / "deep" / "nvidia")
    assert loader.trust_problem(str(site / "nvidia/cu13/lib/libcudart.so.13")) == (
        f"{ww}: folder writable by everyone (mode 0777, no sticky bit)"
    )
    # a relative link from a sticky folder's subfolder: `..` is taken in the physical folder, as the kernel does
    (site / "up").symlink_to("../ww/deep")
    assert loader.trust_problem(str(site / "up/nvidia/cu13/lib/libcudart.so.13")) is not None
    ww.chmod(0o1777)  # sticky: others may add names but not replace ours
    assert loader.trust_problem(str(site / "nvidia/cu13/lib/libcudart.so.13")) is None
    assert loader.trust_problem(str(lib)) is None


def test_lookups_walk_links_like_the_kernel(elsewhere: Path) -> None:
    (elsewhere / "a").mkdir()
    (elsewhere / "b" / "c").mkdir(parents=True)
    (elsewhere / "a" / "l").symlink_to("../b")
    chain = [p for p, _ in loader.lookups(str(elsewhere / "a" / "l" / "c"))]
    assert chain[-4:] == [
        str(elsewhere / "a"),
        str(elsewhere / "a" / "l"),
        str(elsewhere / "b"),
        str(elsewhere / "b" / "c"),
    ]
    assert chain[0] == "/" and os.path.realpath(chain[-1]) == str((elsewhere / "b" / "c").resolve())
    (elsewhere / "loop").symlink_to("loop")
    assert (loader.trust_problem(str(elsewhere / "loop" / "x")) or "").startswith("cannot resolve")
    (elsewhere / "file").write_bytes(b"")
    assert (loader.trust_problem(str(elsewhere / "file" / "x")) or "").startswith("cannot resolve")


def _st(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


def test_stat_rule() -> None:
    me = 1000
    d, f, ln = stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK
    ok = [(d | 0o755, 0), (d | 0o755, me), (d | 0o1777, 0), (d | 0o1770, me), (f | 0o644, 0), (ln | 0o777, me)]
    for mode, uid in ok:
        assert loader.stat_problem("/x", _st(mode, uid), uid=me, group_is_private=False) is None, oct(mode)
    assert loader.stat_problem("/x", _st(d | 0o775, me), uid=me, group_is_private=True) is None
    assert "writable by group gid" in str(
        loader.stat_problem("/x", _st(d | 0o775, me, 4242), uid=me, group_is_private=False)
    )
    assert "writable by everyone (mode 0777" in str(
        loader.stat_problem("/x", _st(d | 0o777), uid=me, group_is_private=True)
    )
    assert "file writable by everyone" in str(loader.stat_problem("/x", _st(f | 0o666), uid=me, group_is_private=False))
    for mode in (d | 0o755, d | 0o1777, ln | 0o777, f | 0o644):  # another user's object, even a tidy one
        why = loader.stat_problem("/x", _st(mode, 4242), uid=me, group_is_private=True)
        assert (
            why is not None
            and why.startswith("/x is owned by uid 4242")
            and why.endswith("not by root or the current user")
        )


def test_group_writable_and_foreign_owner_on_real_files(elsewhere: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root; test_stat_rule covers the rule itself")
    lib = plant(elsewhere / "g")
    folder = elsewhere / "g" / "nvidia"
    os.chown(folder, -1, 4242)  # a group with no entry in the group database: not anyone's private group
    folder.chmod(0o775)
    assert loader.trust_problem(str(lib)) == f"{folder}: folder writable by group gid 4242 (mode 0775, no sticky bit)"
    folder.chmod(0o755)
    os.chown(folder, 4242, 0)
    assert loader.trust_problem(str(lib)) == f"{folder} is owned by uid 4242, not by root or the current user"
    os.chown(folder, 0, 0)
    # a link that another user planted in a sticky folder: the folder is fine, the link is theirs
    sticky = elsewhere / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "nvidia").symlink_to(elsewhere / "g" / "nvidia")
    os.lchown(sticky / "nvidia", 4242, -1)
    assert loader.trust_problem(str(sticky / "nvidia/cu13/lib/libcudart.so.13")) == (
        f"{sticky / 'nvidia'} is owned by uid 4242, not by root or the current user"
    )


def test_world_writable_library_file_refused(elsewhere: Path) -> None:
    lib = plant(elsewhere / "w")
    lib.chmod(0o666)
    assert loader.trust_problem(str(lib)) == f"{lib}: file writable by everyone (mode 0666, no sticky bit)"


def _tree(base: Path, spec: list[tuple[int, int, int]]) -> list[Path]:
    """Folders base/0 ... (each inside an earlier one or base), some made links to earlier ones; modes from spec."""
    made: list[Path] = []
    for i, (parent, kind, mode) in enumerate(spec):
        where = made[parent % len(made)] if made and parent >= 0 else base
        p = where / f"n{i}"
        if kind == 0 or not made:
            p.mkdir()
            p.chmod(mode)
        else:
            p.symlink_to(made[(parent + kind) % len(made)])
        made.append(p)
    return made


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.lists(
        st.tuples(st.integers(-1, 6), st.integers(0, 3), st.sampled_from([0o755, 0o777, 0o1777, 0o700])),
        min_size=1,
        max_size=8,
    )
)
def test_no_writable_folder_on_either_path_is_ever_trusted(
    tmp_path_factory: pytest.TempPathFactory, spec: list[tuple[int, int, int]]
) -> None:
    # An oracle independent of `lookups`: the folders the path names (lexically) and those of its resolved form.
    # Whenever one of them (or a folder holding a link on the way) is writable by everyone without the sticky bit,
    # trust_problem must object; it may object to more (links inside links), never to less.
    base = tmp_path_factory.mktemp("tree")
    for target in _tree(base, spec):
        given = [target, *target.parents]
        resolved = [Path(os.path.realpath(target)), *Path(os.path.realpath(target)).parents]
        link_dirs = [Path(os.path.realpath(p.parent)) for p in given if p.is_symlink()]
        bad = [
            p
            for p in given + resolved + link_dirs
            if not p.is_symlink() and p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o1002 == 0o002
        ]
        why = loader.trust_problem(str(target))
        if bad:
            assert why is not None and "writable by everyone" in why, (target, bad)
    for p in sorted(base.rglob("*"), reverse=True):
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)


def test_relative_entries_and_the_current_directory_are_refused(elsewhere: Path) -> None:
    cwd = Path.cwd()
    (cwd / "sub").mkdir()
    other = elsewhere / "other"
    other.mkdir()
    roots = loader.search_roots(None, ["", "sub", str(cwd / "sub"), str(cwd), str(other), "missing"])
    assert roots == [
        ("'' in sys.path", f"refused: a relative entry, it means the current directory {cwd}"),
        ("'sub' in sys.path", f"refused: a relative entry, it means the current directory {cwd}"),
        (str(other), None),
    ]  # cwd/sub and cwd are 'sub' and '' again: reported once each
    # what PYTHONPATH=sub becomes once Python has made it absolute
    assert loader.search_roots(None, [str(cwd / "sub")]) == [
        (str(cwd / "sub"), f"refused: under the current directory {cwd}")
    ]


def test_the_package_may_live_under_the_current_directory(elsewhere: Path) -> None:
    # a venv in ~/project/.venv used from ~/project: its own site-packages is fine, a PYTHONPATH folder beside it not
    cwd = Path.cwd()
    site = cwd / ".venv" / "lib" / "site-packages"
    (site / "demo").mkdir(parents=True)
    (cwd / "deps").mkdir()
    own = loader.own_root({"depth": 1}, str(site / "demo" / "_slimwheel_loader.py"))
    assert own == str(site)
    roots = loader.search_roots(own, [str(site), str(cwd / "deps"), ""])
    assert roots == [
        (str(site), None),
        (str(cwd / "deps"), f"refused: under the current directory {cwd}"),
        ("'' in sys.path", f"refused: a relative entry, it means the current directory {cwd}"),
    ]
    # run from inside site-packages: '' is the package's own folder, so it is searched once, as the own root
    os.chdir(site)
    assert loader.search_roots(own, ["", str(site)]) == [(str(site), None)]


def test_installation_folders_and_the_root_directory_are_not_the_current_directory(elsewhere: Path) -> None:
    # a shell in the venv's folder (or in site-packages itself), a container whose working directory is /
    venv = Path.cwd()
    site = venv / "lib" / "site-packages"
    site.mkdir(parents=True)
    (venv / "deps").mkdir()
    roots = loader.search_roots(None, [str(site), str(venv / "deps")], installed=[str(site)])
    assert roots == [(str(site), None), (str(venv / "deps"), f"refused: under the current directory {venv}")]
    os.chdir(site)
    assert loader.search_roots(None, ["", str(site)], installed=[str(site)]) == [(str(site), None)]
    os.chdir("/")
    assert loader.search_roots(None, ["", str(venv / "deps")], installed=[]) == [
        ("'' in sys.path", "refused: a relative entry, it means the current directory /"),
        (str(venv / "deps"), None),
    ]


def test_own_site_packages_first_then_absolute_sys_path(elsewhere: Path) -> None:
    site = elsewhere / "site"
    pkg = site / "demo"
    pkg.mkdir(parents=True)
    other = elsewhere / "other"
    other.mkdir()
    own = loader.own_root({"depth": 1}, str(pkg / "_slimwheel_loader.py"))
    roots = loader.search_roots(own, [str(other), str(site), "/does/not/exist"])
    assert roots == [(str(site), None), (str(other), None)]


def test_wheel_folder_found_and_unsafe_copies_skipped(elsewhere: Path) -> None:
    bad = elsewhere / "bad"
    plant(bad)
    bad.chmod(0o777)
    good = elsewhere / "good"
    lib = plant(good)
    missing = elsewhere / "missing"
    missing.mkdir()
    found, tried = loader.find_in_wheels(ROW, roots_of(missing, bad, good))
    assert found == str(lib.resolve())
    assert tried == [
        (str(missing / "nvidia" / "cu13" / "lib"), "not there"),
        (
            str(bad / "nvidia" / "cu13" / "lib"),
            f"refused: {bad}: folder writable by everyone (mode 0777, no sticky bit)",
        ),
        (str(good / "nvidia" / "cu13" / "lib"), "found"),
    ]


def test_current_directory_copy_is_never_found(elsewhere: Path) -> None:
    plant(Path.cwd())
    found, tried = loader.find_in_wheels(ROW, loader.search_roots(None, [os.getcwd(), ""]))
    assert found is None
    assert tried == [(os.getcwd(), f"refused: under the current directory {os.getcwd()}")]


@settings(max_examples=300)
@given(
    value=st.one_of(
        st.none(),
        st.text(max_size=8),
        st.sampled_from(["1", "0", "TRUE", " yes ", "Off", "no", "on", "", "  ", "2", "y", "nein"]),
    )
)
def test_loader_and_cli_read_booleans_alike(value: str | None) -> None:
    # the loader cannot import slimwheel, so it has its own copy of the vocabulary: both must give the same answer
    env = {} if value is None else {"SLIMWHEEL_USE_SYSTEM_CUDA": value}
    try:
        cli: bool | Exception = envvars.env_bool(env, "SLIMWHEEL_USE_SYSTEM_CUDA", default=False)
    except BadInputError as e:
        cli = e
    try:
        shipped: bool | Exception = loader.env_flag(env, "SLIMWHEEL_USE_SYSTEM_CUDA")
    except ImportError as e:
        shipped = e
    if isinstance(cli, Exception):
        assert isinstance(shipped, ImportError) and str(shipped) == str(cli)
        assert f"SLIMWHEEL_USE_SYSTEM_CUDA={value!r} is not a boolean" in str(cli)
    else:
        assert shipped is cli


def test_use_system_cuda_false_means_off(elsewhere: Path) -> None:
    site = elsewhere / "site"
    (site / "demo").mkdir(parents=True)
    cfg = {"dist": "demo", "depth": 1, "driver": None, "libs": [ROW]}
    for off in ("false", "no", "off", "0", "", "FALSE"):
        with pytest.raises(ImportError) as e:
            loader.ensure_loaded(
                cfg,
                env={"SLIMWHEEL_USE_SYSTEM_CUDA": off},
                loader_file=str(site / "demo" / "_slimwheel_loader.py"),
                path=[],
            )
        assert "system search" not in str(e.value) and f"{site / 'nvidia/cu13/lib'}: not there" in str(e.value)
    with pytest.raises(ImportError) as e:
        loader.ensure_loaded(
            cfg,
            env={"SLIMWHEEL_USE_SYSTEM_CUDA": "maybe"},
            loader_file=str(site / "demo" / "_slimwheel_loader.py"),
            path=[],
        )
    assert str(e.value) == (
        "SLIMWHEEL_USE_SYSTEM_CUDA='maybe' is not a boolean: use 1/0, true/false, yes/no or on/off (or leave it unset)"
    )


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
    cfg = {
        "dist": "demo",
        "depth": 1,
        "driver": None,
        "libs": [dict(ROW, component="nvJitLink", soname="libnvJitLink.so.13", needed=False)],
    }
    state = loader.ensure_loaded(cfg, env={}, loader_file=str(site / "demo" / "_slimwheel_loader.py"), path=[])
    assert state["libraries"] == []


def test_other_major_already_mapped_is_detected() -> None:
    maps = [
        "/x/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
        "/usr/lib/libc.so.6",
        "/opt/cuda/lib64/libcudart.so.13.0.96",
    ]
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


# ------------------------------------------------- issue 24 item 4: no dlopen by a name the search path can redirect


def test_an_already_loaded_library_is_found_in_the_maps_not_by_a_search() -> None:
    maps = [
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/site/nvidia/cu13/lib/libcudart.so.13",
        "/usr/local/cuda/lib64/libcublas.so.13.1.0.3",
        "/opt/libcublasLt.so.130",
    ]
    assert loader.loaded_path("libcudart.so.13", maps) == "/site/nvidia/cu13/lib/libcudart.so.13"
    assert loader.loaded_path("libcublas.so.13", maps) == "/usr/local/cuda/lib64/libcublas.so.13.1.0.3"
    assert loader.loaded_path("libcublasLt.so.13", maps) is None  # .so.130 is another major
    assert loader.loaded_path("libnvJitLink.so.13", maps) is None


def test_driver_candidates_leave_out_what_means_the_current_directory(tmp_path: Path) -> None:
    env = {"LD_LIBRARY_PATH": "/opt/nvidia/lib64::lib:./x:/usr/lib64/"}
    got = loader.driver_candidates(env, conf=["/etc/cuda"])
    assert got[:3] == ["/opt/nvidia/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/etc/cuda/libcuda.so.1"]
    assert all(os.path.isabs(p) for p in got) and len(got) == len(set(got))
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in got


def test_ld_so_conf_includes_are_followed(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "ld.so.conf").write_text("include conf.d/*.conf\n/usr/local/lib # comment\nrelative/ignored\n")
    (tmp_path / "conf.d" / "b.conf").write_text("/b\ninclude /nonexistent/*.conf\n")
    (tmp_path / "conf.d" / "a.conf").write_text("# nothing\n/a\n")
    (tmp_path / "conf.d" / "loop.conf").write_text(f"include {tmp_path}/ld.so.conf\n")  # bounded: 4 levels
    got = loader._ld_so_conf(str(tmp_path / "ld.so.conf"))
    assert got[:3] == ["/a", "/b", "/a"] and got[-1] == "/usr/local/lib" and "relative/ignored" not in got


def test_a_driver_in_a_folder_others_can_write_is_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ww = tmp_path / "ww"
    ww.mkdir()
    (ww / "libcuda.so.1").write_bytes(b"\x7fELF not a library")
    ww.chmod(0o777)
    opened: list[object] = []
    monkeypatch.setattr(loader, "already_loaded", lambda soname: None)

    def cdll(*a: object, **k: object) -> NoReturn:
        opened.append(a)
        raise OSError("x")

    monkeypatch.setattr("slimwheel.runtime.loader.ctypes.CDLL", cdll)
    monkeypatch.setattr(loader, "_DEFAULT_LIB_DIRS", ())
    monkeypatch.setattr(loader, "_ld_so_conf", lambda: [])
    assert loader.driver_handle({"LD_LIBRARY_PATH": f":{ww}"}) is None
    assert opened == []  # neither by name nor the planted file
