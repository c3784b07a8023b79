"""Issue 12, the items that live in repair and check: hostile wheels built here, each refused or failed as documented
in docs/security.md (items 5, 6, 7, 8, 10, and RECORD verification)."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from slimwheel import fsutil
from slimwheel.check import Verdict, check_wheel, make_policy
from slimwheel.cli import main
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.deps import dependency_problems, satisfiable
from slimwheel.errors import BadInputError, BadRecordError, ExitCode, ToolError
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.repair import repair_wheel, wanted_rpath
from slimwheel.wheelfile import archive_record_problems, judge_record
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel

TAGS = ["cp311-cp311-manylinux_2_28_x86_64"]
CU13 = "nvidia-cuda-runtime>=13.0,<14"


def so(
    *,
    needed: Iterable[str] = ("libcudart.so.13", "libc.so.6"),
    runpath: str | None = "$ORIGIN/../nvidia/cu13/lib",  # where the CUDA requirement installs the libraries
    sections: Mapping[str, bytes] = {},
) -> bytes:
    return elf(needed=needed, runpath=runpath, sections=sections)


def verdict_of(path: Path) -> Verdict:
    r = inspect_wheel(path)
    return check_wheel(r, make_policy(r, require_arch="none"), record_problems=archive_record_problems(path))


def messages(path: Path) -> list[str]:
    return [f.message for f in verdict_of(path).failures]


# ------------------------------------------------------------------------------------------------ 5: search paths


@pytest.mark.parametrize(
    ("rpath", "why"),
    [
        (".", "relative path"),
        ("lib", "relative path"),
        ("/tmp/evil", "absolute path"),
        ("$ORIGIN/../../..", "leaves site-packages"),
        ("$ORIGIN/../nvidia/cu13/lib::", "empty entry"),
    ],
)
def test_check_fails_unsafe_search_path_entries(tmp_path: Path, rpath: str, why: str) -> None:
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so(runpath=rpath)}, requires=[CU13])
    v = verdict_of(w)
    assert not v.ok and all(f.exit_code is ExitCode.INCONSISTENT_DEPENDENCIES for f in v.failures)
    assert any("unsafe" in m and why in m for m in messages(w)), messages(w)


def test_safe_search_paths_pass(tmp_path: Path) -> None:
    w = make_wheel(
        tmp_path, files={"pkg/_ext.abi3.so": so(runpath="$ORIGIN:$ORIGIN/../nvidia/cu13/lib")}, requires=[CU13]
    )
    assert verdict_of(w).ok, messages(w)


def test_repair_drops_unsafe_entries_and_keeps_the_rest() -> None:
    info = ElfInfo(
        path="pkg/_x.so",
        soname=None,
        needed=("libc.so.6",),
        rpath=(),
        runpath=(".", "$ORIGIN/../pkg.libs", "", "/tmp/x", "$ORIGIN/../../../.."),
    )
    assert wanted_rpath(info, None, []) == ("$ORIGIN/../pkg.libs",)
    clean = ElfInfo(path="pkg/_x.so", soname=None, needed=(), rpath=(), runpath=("$ORIGIN/../pkg.libs",))
    assert wanted_rpath(clean, None, []) is None


# ----------------------------------------------------------------------------------- 6: requirements pip installs


@pytest.mark.parametrize(
    "marker",
    ['python_version < "3"', 'sys_platform == "win32"', 'platform_machine == "aarch64"', 'python_version >= "3.12"'],
)
def test_cuda_requirement_under_a_marker_that_does_not_always_hold_fails(tmp_path: Path, marker: str) -> None:
    w = make_wheel(
        tmp_path,
        files={"pkg/_ext.abi3.so": so()},
        requires=[f"{CU13}; {marker}"],
        tag="cp310-abi3-manylinux_2_28_x86_64",
    )
    assert any("only under its marker" in m for m in messages(w)), messages(w)


def test_cuda_requirement_under_a_marker_that_always_holds_passes(tmp_path: Path) -> None:
    w = make_wheel(
        tmp_path,
        files={"pkg/_ext.abi3.so": so()},
        requires=[f'{CU13}; sys_platform == "linux" and python_version >= "3.10"'],
        tag="cp310-abi3-manylinux_2_28_x86_64",
    )
    assert verdict_of(w).ok, messages(w)


def test_contradictory_requirements_fail(tmp_path: Path) -> None:
    w = make_wheel(
        tmp_path,
        files={"pkg/_ext.abi3.so": so(needed=("libcublas.so.13",))},
        requires=["nvidia-cublas<13", "nvidia-cublas==13.*"],
    )
    assert any("contradict" in m for m in messages(w)), messages(w)


@pytest.mark.parametrize(
    ("specs", "ok"),
    [
        ((">=13.0", "<14"), True),
        (("<13", "==13.*"), False),
        (("==13.0.96", ">=13.0,<13.1"), True),
        (("==13.0.96", "!=13.0.96"), False),
        ((">13.2", "<13.3"), True),  # 13.2.1 and more
        ((">=2", "<1"), False),
        (("~=13.1", "<13.1"), False),
    ],
)
def test_satisfiable(specs: tuple[str, ...], ok: bool) -> None:
    assert satisfiable([SpecifierSet(s) for s in specs]) is ok


def test_duplicate_member_names_are_refused_everywhere(tmp_path: Path) -> None:
    good = so()
    evil = elf(needed=("libevil.so.1",))
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": good}, requires=[CU13])
    with zipfile.ZipFile(w, "a") as z, pytest.warns(UserWarning):
        z.writestr("pkg/_ext.abi3.so", evil)
    assert main(["check", str(w)]) == ExitCode.BAD_INPUT
    with pytest.raises(BadInputError, match="twice"):
        repair_wheel(w, tmp_path / "out")


def _rewrite_record(w: Path, edit: Callable[[str], str]) -> None:
    with zipfile.ZipFile(w) as z:
        items = [(zi, z.read(zi)) for zi in z.infolist()]
    with zipfile.ZipFile(w, "w") as z:
        for zi, data in items:
            z.writestr(zi, edit(data.decode()).encode() if zi.filename.endswith("/RECORD") else data)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda r: r.replace("sha256=", "sha256=AAAA", 1), "wrong hash"),
        (lambda r: "\n".join(line for line in r.splitlines() if not line.startswith("pkg/")) + "\n", "not in"),
        (lambda r: r + "pkg/ghost.py,sha256=abc,3\n", "not in the wheel"),
        (lambda r: r.replace(",", ",", 1).replace(f",{len(so())}\n", ",1\n", 1), "wrong size"),
    ],
)
def test_record_is_verified(tmp_path: Path, edit: Callable[[str], str], problem: str) -> None:
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so()}, requires=[CU13])
    assert verdict_of(w).ok
    _rewrite_record(w, edit)
    v = verdict_of(w)
    assert [f.exit_code for f in v.failures] == [ExitCode.BAD_RECORD] and problem in v.failures[0].message
    assert main(["check", "--require-arch", "none", str(w)]) == ExitCode.BAD_RECORD
    with pytest.raises(BadRecordError, match="RECORD does not match") as e:
        repair_wheel(w, tmp_path / "out")
    assert "--rewrite-record" in str(e.value) and e.value.exit_code == ExitCode.BAD_RECORD
    # slim and variants apply repair's rule (wheelfile.judge_record), before they write anything
    for argv in (["repair", "-w"], ["slim", "--archs", "9.0", "-o"], ["variants", "-o"]):
        assert main([*argv, str(tmp_path / "out"), str(w)]) == ExitCode.BAD_RECORD, argv
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), argv


def test_a_hash_without_its_algorithm_is_malformed_not_a_changed_file(tmp_path: Path) -> None:
    """mlx-cuda 0.30.0 lists libmlx.so with its digest and no 'sha256=': check says so (exit 14) without calling the
    file changed; repair (and slim, variants: one rule) rewrites RECORD without --rewrite-record. A bare digest that
    is wrong is still a changed file."""
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so()}, requires=[CU13])
    _rewrite_record(w, lambda r: r.replace("pkg/_ext.abi3.so,sha256=", "pkg/_ext.abi3.so,", 1))
    (f,) = verdict_of(w).failures
    assert f.exit_code == ExitCode.BAD_RECORD and "hash has no algorithm" in f.message and "as built" in f.message
    (said,) = judge_record(w, archive_record_problems(w), rewrite_record=False)  # no refusal: a warning
    assert "hash has no algorithm" in said
    _rewrite_record(w, lambda r: r.replace("pkg/_ext.abi3.so,", "pkg/_ext.abi3.so,AAAA", 1))
    (f,) = verdict_of(w).failures
    assert "no sha256 hash" in f.message
    with pytest.raises(BadRecordError, match="RECORD does not match"):
        repair_wheel(w, tmp_path / "out2")


# --------------------------------------------------------------------------- 7 and 8: one rule for check and repair


def test_a_maintainers_requirement_of_another_major_fails_the_rule() -> None:
    # What repair's own final judgement sees when the wheel keeps `nvidia-cublas<13` for libcublas.so.13.
    elfs = [ElfInfo(path="p/_x.so", soname=None, needed=("libcublas.so.13",), rpath=(), runpath=())]
    v = dependency_problems(elfs, cuda_major=13, requires=["nvidia-cublas<13"], tags=TAGS)
    assert v.problems and "does not pin nvidia-cublas to 13.*" in v.problems[0]


@pytest.mark.parametrize("loader", ["ld64.so.2", "ld-musl-x86_64.so.1", "ld-linux-x86-64.so.2"])
def test_the_system_loader_is_accounted_for(loader: str) -> None:
    elfs = [ElfInfo(path="p/_x.so", soname=None, needed=(loader, "libc.so.6"), rpath=(), runpath=())]
    assert dependency_problems(elfs, cuda_major=None, requires=[], tags=TAGS).problems == ()


# ------------------------------------------------------------------------------------------- 10: repair's bad input


def _zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            z.writestr(name, data)
    return path


def _assert_refused(wheel: Path, out: Path, match: str, plat: str | None = None) -> None:
    with pytest.raises(BadInputError, match=match) as e:
        repair_wheel(wheel, out, plat=plat)
    assert str(wheel.name) in str(e.value) or (plat is not None and plat in str(e.value))
    assert "slimwheel-repair-" not in str(e.value) and ".repair." not in str(e.value)  # never a temporary file's name
    assert str(fsutil.cache_dir()) not in str(e.value)
    assert not out.exists() or not any(out.iterdir())


def test_repair_refuses_a_file_folder_clash(tmp_path: Path) -> None:
    w = _zip(
        tmp_path / "d-1.0-cp311-cp311-linux_x86_64.whl",
        [("d/x", b"file"), ("d/x/y.so", so()), ("d-1.0.dist-info/METADATA", b"Name: d\nVersion: 1.0\n")],
    )
    _assert_refused(w, tmp_path / "out", "both a file and a folder")


def test_repair_refuses_a_bad_crc(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so()}, requires=[CU13], compression=zipfile.ZIP_STORED)
    data = bytearray(w.read_bytes())
    at = data.find(b"\x7fELF")
    data[at + 40] ^= 0xFF  # inside the stored member: its CRC no longer matches
    w.write_bytes(bytes(data))
    _assert_refused(w, tmp_path / "out", "corrupt")


def test_repair_refuses_a_corrupt_elf(tmp_path: Path) -> None:
    body = bytearray(so())
    body[0x28:0x30] = (10**9).to_bytes(8, "little")  # e_shoff far past the end
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": bytes(body)}, requires=[CU13])
    _assert_refused(w, tmp_path / "out", "truncated ELF file")


def test_repair_refuses_a_zip_without_dist_info(tmp_path: Path) -> None:
    w = _zip(tmp_path / "d-1.0-cp311-cp311-linux_x86_64.whl", [("d/_x.so", so())])
    _assert_refused(w, tmp_path / "out", "one .dist-info folder")


def test_repair_refuses_a_wheel_without_record(tmp_path: Path) -> None:
    w = _zip(
        tmp_path / "d-1.0-cp311-cp311-linux_x86_64.whl",
        [
            ("d/_x.so", so()),
            ("d-1.0.dist-info/METADATA", b"Name: d\nVersion: 1.0\n"),
            ("d-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n"),
        ],
    )
    _assert_refused(w, tmp_path / "out", "RECORD is missing")


def test_repair_refuses_an_unknown_platform(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so()}, requires=[CU13])
    _assert_refused(w, tmp_path / "out", "not a platform tag", plat="banana")


def test_repair_refuses_a_symlink_member(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so()}, requires=[CU13])
    with zipfile.ZipFile(w, "a") as z:
        zi = zipfile.ZipInfo("pkg/link")
        zi.external_attr = (0o120777) << 16
        z.writestr(zi, "/etc/passwd")
    _assert_refused(w, tmp_path / "out", "symbolic link")


def test_repair_refuses_a_member_longer_than_declared(tmp_path: Path) -> None:
    # A stored member whose header claims fewer bytes than the data that follows: read up to the claim, then refuse.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("d/_x.so", so())
    w = tmp_path / "d-1.0-cp311-cp311-linux_x86_64.whl"
    w.write_bytes(buf.getvalue())
    with zipfile.ZipFile(w) as z:
        zi = z.getinfo("d/_x.so")
        assert zi.file_size > 16
    data = bytearray(w.read_bytes())
    # central directory: uncompressed size at offset 24 of the entry; local header: at offset 22
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 24 : cd + 28] = (16).to_bytes(4, "little")
    data[22:26] = (16).to_bytes(4, "little")
    w.write_bytes(bytes(data))
    with pytest.raises(BadInputError):
        repair_wheel(w, tmp_path / "out")


# ------------------------------------------------------------------------------ 15: what a coverage failure shows


def test_a_coverage_gap_names_the_code_of_the_modules_that_fail(tmp_path: Path) -> None:
    # Issue 12 item 15: cuBLAS 11.8 ships modules with SASS for 5.0/6.0/6.1 only and no PTX (openai_sgemm); a
    # static link carries them, and check failed 7.0-9.0 with "2 of 119 fatbins run not at all" and nothing more.
    from testkit.binsynth import fatbin, fatbin_entry

    modern = fatbin([fatbin_entry(sm=90), fatbin_entry(kind="ptx", sm=90, ptx_isa=(8, 0))])
    legacy = fatbin([fatbin_entry(sm=50), fatbin_entry(sm=60), fatbin_entry(sm=61)])
    w = make_wheel(tmp_path, files={"pkg/_ext.abi3.so": so(sections={".nv_fatbin": modern + legacy})}, requires=[CU13])
    r = inspect_wheel(w)
    v = check_wheel(r, make_policy(r, require_arch=parse_require_arch("9.0")))
    (f,) = [f for f in v.failures if f.kind == "coverage"]
    assert "1 of 2 fatbins run not at all" in f.message
    assert "their code: sm_50 sm_60 sm_61" in f.message and "SASS for older GPUs only and no PTX" in f.message


# ------------------------------------------------------------------- issue 24 item 6: repair uses check's limits


def _fake_auditwheel(monkeypatch: pytest.MonkeyPatch, bundled: dict[str, bytes]) -> list[Path]:
    """auditwheel as far as these tests need it: the input, with `bundled` libraries added, under a manylinux tag."""
    calls: list[Path] = []

    def run(wheel: Path, out_dir: Path, **_: object) -> Path:
        calls.append(wheel)
        with zipfile.ZipFile(wheel) as z:
            files = {n: z.read(n) for n in z.namelist() if ".dist-info/" not in n}
        return make_wheel(out_dir, files={**files, **bundled}, tag="cp311-cp311-manylinux_2_28_x86_64")

    monkeypatch.setattr("slimwheel.repair.run_auditwheel", run)
    return calls


def _fat(records: int) -> bytes:
    """An ELF file whose one fatbin holds `records` containers and entries (one container, records - 1 entries)."""
    return elf(needed=("libc.so.6",), sections={".nv_fatbin": fatbin([fatbin_entry()] * (records - 1))})


def test_repair_refuses_an_input_check_refuses_before_auditwheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 10)  # check's bound (262,144), lowered
    calls = _fake_auditwheel(monkeypatch, {})
    w = make_wheel(tmp_path, files={"demo/a.so": _fat(6), "demo/b.so": _fat(6)}, tag="cp311-cp311-linux_x86_64")
    assert main(["check", "--require-arch", "none", str(w)]) == ExitCode.BAD_INPUT
    with pytest.raises(BadInputError, match="more than 10 fatbin containers and entries in the wheel"):
        repair_wheel(w, tmp_path / "out")
    assert calls == [] and not (tmp_path / "out").exists()


def test_repair_never_writes_a_wheel_check_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bundled library takes the wheel past check's bound: nothing is written, under any name."""
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 10)
    calls = _fake_auditwheel(monkeypatch, {"demo.libs/libfat.so": _fat(6)})
    w = make_wheel(tmp_path, files={"demo/a.so": _fat(6)}, tag="cp311-cp311-linux_x86_64")
    assert main(["check", "--require-arch", "none", str(w)]) == ExitCode.OK
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(
        BadInputError,
        match=r"^demo-1\.0-cp311-cp311-linux_x86_64\.whl: the repaired wheel would be "
        r"refused by `slimwheel check`, so none was written: the repaired wheel: more than 10",
    ) as e:
        repair_wheel(w, out)
    assert calls and list(out.iterdir()) == [] and ".tmp" not in str(e.value)
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 12)  # at the bound: written, and check reads it
    r = repair_wheel(w, out)
    assert main(["check", "--require-arch", "none", str(r.wheel)]) == ExitCode.OK


# -------------------------------------------------------------- issue 24 item 8: the input's name, a relative cache


def _with_dynsym(field: int, value: int) -> bytes:
    """An ELF file whose .dynsym section header has `value` at byte `field` (40: sh_link, 56: sh_entsize)."""
    data = bytearray(elf(needed=("libc.so.6",), symbols=("f",)))
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shnum,) = struct.unpack_from("<H", data, 0x3C)
    (dynsym,) = [shoff + 64 * i for i in range(1, shnum) if struct.unpack_from("<I", data, shoff + 64 * i + 4)[0] == 11]
    struct.pack_into("<I" if field == 40 else "<Q", data, dynsym + field, value)
    return bytes(data)


def test_repair_names_the_input_for_a_corrupt_symbol_table(tmp_path: Path) -> None:
    """The symbol-version walk (deps' imports) named `.repair.XXXX.tmp/in/...`; a symbol table whose entry size lies is
    refused by the one ELF reader, naming the input and the member."""
    w = make_wheel(tmp_path, files={"demo/a.so": _with_dynsym(56, 0)}, tag="cp311-cp311-linux_x86_64")
    _assert_refused(
        w,
        tmp_path / "out",
        r"demo-1\.0-cp311-cp311-linux_x86_64\.whl: demo/a\.so: malformed ELF file: \.dynsym has entries of 0 bytes",
    )


def test_repair_names_the_input_for_whatever_fails_in_its_work_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(wheel: Path, out_dir: Path, **_: object) -> Path:  # a tool whose message names repair's own files
        raise ToolError(f"auditwheel failed on {wheel}: see {out_dir}/log")

    monkeypatch.setattr("slimwheel.repair.run_auditwheel", failing)
    w = make_wheel(tmp_path, files={"demo/a.so": elf(needed=("libc.so.6",))}, tag="cp311-cp311-linux_x86_64")
    with pytest.raises(ToolError) as e:
        repair_wheel(w, tmp_path / "out")
    assert str(e.value) == f"auditwheel failed on {w}: see log"
    _fake_auditwheel(monkeypatch, {"demo.libs/libbad.so": _with_dynsym(40, 77)})  # a bundled library that breaks
    _assert_refused(w, tmp_path / "out", r"demo\.libs/libbad\.so")


def test_a_relative_cache_folder_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert fsutil.cache_dir({"SLIMWHEEL_CACHE": "rel/cache"}) == tmp_path / "rel" / "cache"
    assert fsutil.cache_dir({"XDG_CACHE_HOME": "rel"}) == Path.home() / ".cache" / "slimwheel"  # XDG: ignore relative
    monkeypatch.setenv("SLIMWHEEL_CACHE", "rel/cache")
    seen: list[Path] = []

    def run(wheel: Path, out_dir: Path, *, cwd: Path, **_: object) -> Path:  # auditwheel runs in another folder
        assert wheel.is_absolute() and out_dir.is_absolute() and cwd.is_absolute()
        seen.append(cwd)
        with zipfile.ZipFile(wheel) as z:
            files = {n: z.read(n) for n in z.namelist() if ".dist-info/" not in n}
        return make_wheel(out_dir, files=files, tag="cp311-cp311-manylinux_2_28_x86_64")

    monkeypatch.setattr("slimwheel.repair.run_auditwheel", run)
    w = make_wheel(tmp_path / "in", files={"demo/a.so": elf(needed=("libc.so.6",))}, tag="cp311-cp311-linux_x86_64")
    r = repair_wheel(Path("in") / w.name, Path("out"))
    assert r.wheel == tmp_path / "out" / r.wheel.name and r.wheel.is_file()
    assert seen and seen[0].is_relative_to(tmp_path / "rel" / "cache" / "work")
