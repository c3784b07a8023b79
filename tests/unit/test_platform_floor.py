"""The platform floor: GNU symbol versions read from synthetic ELF files, judged against auditwheel's manylinux
policies by `check --manylinux` and the `manylinux` config key; hostile version tables refused."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from slimwheel import floor
from slimwheel.check import check_wheel, make_policy
from slimwheel.cli import main
from slimwheel.errors import BadInputError, ExitCode
from slimwheel.inspect.elf import VersionNeed, read_elf
from slimwheel.inspect.scan import inspect_wheel
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

# What Debian 11's GCC 10 and glibc 2.31 give a C++ extension that calls exp() and std::filesystem: facts of glibc
# (exp/log/pow got new versions in 2.29) and libstdc++ (3.4.26 is GCC 9's, 3.4.28 GCC 10's), not of slimwheel.
OLD = {
    "libc.so.6": [("malloc", "GLIBC_2.2.5"), ("memcpy", "GLIBC_2.14")],
    "libstdc++.so.6": [("_ZdlPv", "GLIBCXX_3.4"), ("__cxa_begin_catch", "CXXABI_1.3")],
}
NEW = {
    "libm.so.6": [("exp", "GLIBC_2.29"), ("log", "GLIBC_2.29"), ("pow", "GLIBC_2.29")],
    "libstdc++.so.6": [("_ZNSt10filesystem4pathD1Ev", "GLIBCXX_3.4.26"), ("_ZdlPv", "GLIBCXX_3.4")],
}


def ext(imports: dict[str, list[tuple[str, str]]]) -> bytes:
    return elf(needed=tuple(imports), imports=imports)


def wheel(tmp_path: Path, files: dict[str, bytes]) -> Path:
    return make_wheel(tmp_path, name="pkg", files=files, tag="cp312-abi3-linux_x86_64")


def test_version_needs_bind_each_symbol_to_its_library_and_version() -> None:
    r = read_elf(ext(NEW), "pkg/_ext.so")
    assert set(r.version_needs) == {
        VersionNeed(library="libm.so.6", version="GLIBC_2.29", symbols=("exp", "log", "pow")),
        VersionNeed(library="libstdc++.so.6", version="GLIBCXX_3.4.26", symbols=("_ZNSt10filesystem4pathD1Ev",)),
        VersionNeed(library="libstdc++.so.6", version="GLIBCXX_3.4", symbols=("_ZdlPv",)),
    }
    assert read_elf(elf(needed=("libc.so.6",)), "x.so").version_needs == ()  # no version tables: nothing needed


def test_check_names_each_offending_symbol_version_and_file(tmp_path: Path) -> None:
    r = inspect_wheel(wheel(tmp_path, {"pkg/_old.so": ext(OLD), "pkg/_ext.so": ext(NEW)}))
    v = check_wheel(r, make_policy(r, require_arch="none", dependencies=False, manylinux=floor.parse_target("2_28")))
    assert not v.ok
    msgs = [f.message for f in v.failures]
    assert {f.exit_code for f in v.failures} == {ExitCode.ABOVE_PLATFORM_FLOOR}
    assert len(msgs) == 2 and all(m.startswith("pkg/_ext.so: ") for m in msgs)
    glibc = next(m for m in msgs if "GLIBC_2.29" in m)
    assert "exp@GLIBC_2.29, log@GLIBC_2.29, pow@GLIBC_2.29 of libm.so.6" in glibc and "GLIBC up to 2.28" in glibc
    cxx = next(m for m in msgs if "GLIBCXX" in m)
    assert "_ZNSt10filesystem4pathD1Ev@GLIBCXX_3.4.26 of libstdc++.so.6" in cxx and "GLIBCXX up to 3.4.24" in cxx
    assert any("platform floor manylinux_2_31" in n for n in v.notes)
    # Debian 11's level is manylinux_2_31's: the same wheel passes there.
    ok = check_wheel(
        r, make_policy(r, require_arch="none", dependencies=False, manylinux=floor.parse_target("manylinux_2_31"))
    )
    assert ok.ok and any("within manylinux_2_31" in n for n in ok.notes)


def test_an_old_wheel_is_within_an_old_policy(tmp_path: Path) -> None:
    r = inspect_wheel(wheel(tmp_path, {"pkg/_old.so": ext(OLD)}))
    found = floor.wheel_floor(r.elfs)
    assert found is not None and found.name == "manylinux_2_17"
    assert check_wheel(
        r, make_policy(r, require_arch="none", dependencies=False, manylinux=floor.parse_target("manylinux2014"))
    ).ok


def test_private_and_unlisted_versions() -> None:
    # GLIBC_PRIVATE is never on a policy's list; a library's own versions (libcublas.so.13) are not judged here.
    r = read_elf(
        ext({"libc.so.6": [("_dl_x", "GLIBC_PRIVATE")], "libcublas.so.13": [("cublasCreate_v2", "libcublas.so.13")]}),
        "a.so",
    )
    (o,) = floor.offenders([r], floor.parse_target("2_39"))
    assert o.need.version == "GLIBC_PRIVATE" and "_dl_x@GLIBC_PRIVATE" in o.message("manylinux_2_39")


@pytest.mark.parametrize(
    "spec,name",
    [
        ("2_28", "manylinux_2_28"),
        ("manylinux_2_31", "manylinux_2_31"),
        ("manylinux_2_28_x86_64", "manylinux_2_28"),
        ("manylinux2014", "manylinux_2_17"),
        (" MANYLINUX_2_34 ", "manylinux_2_34"),
    ],
)
def test_targets(spec: str, name: str) -> None:
    assert floor.parse_target(spec).name == name


@pytest.mark.parametrize("spec", ["2_29", "musllinux_1_2", "linux", "", "2.28"])
def test_unknown_targets_are_refused(spec: str) -> None:
    with pytest.raises(BadInputError, match="not a manylinux policy"):
        floor.parse_target(spec)


def test_cli_and_config_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = str(wheel(tmp_path, {"pkg/_ext.so": ext(NEW)}))
    base = ["check", "--require-arch", "none", "--no-dependencies"]
    assert main([*base, "--manylinux", "2_28", w]) == ExitCode.ABOVE_PLATFORM_FLOOR
    assert "exp@GLIBC_2.29" in capsys.readouterr().out
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.slimwheel]\nmanylinux = "2_31"\n')
    monkeypatch.chdir(proj)
    assert main([*base, "--format", "json", w]) == 0
    text = capsys.readouterr().out
    assert '"GLIBC_2.29"' in text and "within manylinux_2_31" in text
    assert main([*base, "--manylinux", "2_28", w]) == ExitCode.ABOVE_PLATFORM_FLOOR  # the option beats the key
    (proj / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.slimwheel]\nmanylinux = "2_29"\n')
    capsys.readouterr()
    assert main([*base, w]) == ExitCode.BAD_INPUT
    assert "manylinux" in capsys.readouterr().err


def _verneed(cnt: int, aux: int, nxt: int, anext: int = 0) -> bytes:
    return struct.pack("<HHIII", 1, cnt, 1, aux, nxt) + struct.pack("<IHHII", 0, 0, 2, 1, anext)


@pytest.mark.parametrize(
    "table,problem",
    [
        (_verneed(1, 16, 0), None),  # well formed: read
        (_verneed(1, 16, 0)[:20], "outside"),  # an aux entry cut off by the section's end
        (_verneed(1, 4096, 0), "outside"),  # aux offset past the section
        (_verneed(2, 16, 0, anext=0x7FFFFFF0), "outside"),  # the second aux past the section
        (_verneed(1, 16, 0x10000), "outside"),  # the next library entry past the section
        (_verneed(60000, 16, 0), None),  # a count larger than the chain: the chain's end (anext 0) ends it
    ],
)
def test_hostile_version_tables(table: bytes, problem: str | None) -> None:
    data = elf(needed=("libc.so.6",), imports={"libc.so.6": [("malloc", "GLIBC_2.2.5")]}, verneed=table)
    if problem is None:
        read_elf(data, "h.so")
    else:
        with pytest.raises(BadInputError, match=problem):
            read_elf(data, "h.so")


def test_a_looping_chain_is_refused() -> None:
    # vn_next of 0 would end it; one that points back at itself must not spin: entry 2 points back to entry 1.
    one = struct.pack("<HHIII", 1, 1, 1, 32, 16) + struct.pack("<HHIII", 1, 0, 1, 0, 0xFFFFFFF0)
    table = one + struct.pack("<IHHII", 0, 0, 2, 1, 0)
    data = elf(needed=("libc.so.6",), imports={"libc.so.6": [("malloc", "GLIBC_2.2.5")]}, verneed=table)
    with pytest.raises(BadInputError, match="loops|outside"):
        read_elf(data, "loop.so")


def _report(tmp_path: Path, imports: dict[str, list[tuple[str, str]]]) -> tuple[floor.Policy | None, list[str]]:
    r = inspect_wheel(wheel(tmp_path, {"pkg/_ext.so": ext(imports)}))
    have = floor.wheel_floor(r.elfs)
    tags = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64"]
    tags = [f"py3-none-{p}" for p in (*tags, "linux_x86_64", "musllinux_1_2_x86_64", "any")]
    return have, [*floor.below_floor(tags, have)]


def test_tags_older_than_the_symbol_versions_allow_are_named(tmp_path: Path) -> None:
    # GLIBC_2.29 and GLIBCXX_3.4.26 (Debian 11's glibc and GCC): auditwheel's policies put that at manylinux_2_31;
    # every older manylinux tag promises too much, by its legacy alias or its PEP 600 name; tags of no manylinux
    # policy are never named
    have, stale = _report(tmp_path / "new", NEW)
    assert have is not None and have.name == "manylinux_2_31"
    assert stale == ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64"]
    have, stale = _report(tmp_path / "old", OLD)  # GLIBC_2.14: manylinux2014 (2.17) holds it, manylinux2010 does not
    assert have is not None and have.name == "manylinux_2_17"
    assert stale == ["manylinux1_x86_64", "manylinux2010_x86_64"]
    r = inspect_wheel(wheel(tmp_path / "both", {"pkg/_old.so": ext(OLD), "pkg/_new.so": ext(NEW), "pkg/x.so": ext({})}))
    for p in floor.policies():  # the files over a policy: offenders' files, in the wheel's order
        assert floor.files_above(r.elfs, p) == tuple(
            e.name for e in r.elfs if {o.file for o in floor.offenders(r.elfs, p)} & {e.name}
        )
    assert floor.tag_policy("manylinux2014_aarch64") == floor.tag_policy("manylinux_2_17_x86_64")
    assert floor.tag_policy("musllinux_1_2_x86_64") is None and floor.tag_policy("manylinux_9_99_x86_64") is None


def test_platform_tags_dropped_from_the_name_and_wheel_file() -> None:
    from slimwheel.wheelfile import without_platforms

    text = "Wheel-Version: 1.0\nTag: py3-none-manylinux1_x86_64\nTag: py3-none-manylinux_2_34_x86_64\nBuild: 1\n"
    name, out = without_platforms(
        "gpt4all-2.8.2-py3-none-manylinux1_x86_64.manylinux_2_34_x86_64.whl", text, ["manylinux1_x86_64"]
    )
    assert name == "gpt4all-2.8.2-py3-none-manylinux_2_34_x86_64.whl"
    assert out == "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_34_x86_64\nBuild: 1\n"
    # a build tag stays; a wheel is never left without a platform tag
    name, out = without_platforms("p-1.0-1-cp311-cp311-manylinux1_x86_64.whl", text, ["manylinux1_x86_64"])
    assert (name, out) == ("p-1.0-1-cp311-cp311-manylinux1_x86_64.whl", text)


def test_check_notes_a_tag_the_files_cannot_keep_without_failing(tmp_path: Path) -> None:
    stale = make_wheel(
        tmp_path / "stale", name="pkg", files={"pkg/_ext.so": ext(NEW)}, tag="cp312-abi3-manylinux2014_x86_64"
    )
    r = inspect_wheel(stale)
    v = check_wheel(r, make_policy(r, require_arch="none", dependencies=False))
    assert v.ok and v.failures == ()
    (note,) = [n for n in v.notes if n.startswith("platform tag")]
    assert note.startswith(
        "platform tag manylinux2014_x86_64 promises older systems than pkg/_ext.so needs (manylinux_2_31)"
    )
    assert "that file fails to load" in note
    # with a target, the failures are the target's and the note is said beside them
    v = check_wheel(r, make_policy(r, require_arch="none", dependencies=False, manylinux=floor.parse_target("2_28")))
    assert {f.exit_code for f in v.failures} == {ExitCode.ABOVE_PLATFORM_FLOOR} and note in v.notes
    # a tag at or above the floor, or no manylinux tag at all: nothing said
    for tag in ("cp312-abi3-manylinux_2_31_x86_64", "cp312-abi3-linux_x86_64"):
        fine = inspect_wheel(make_wheel(tmp_path / tag, name="pkg", files={"pkg/_ext.so": ext(NEW)}, tag=tag))
        assert not [
            n
            for n in check_wheel(fine, make_policy(fine, require_arch="none", dependencies=False)).notes
            if n.startswith("platform tag")
        ]
