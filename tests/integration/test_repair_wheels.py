"""`slimwheel repair` on real wheels: real gcc-built extensions linked to CUDA 13 libraries, real auditwheel, twine."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from helpers.wheels_repair import (
    build_extension,
    build_fake_lib,
    ext_suffix,
    make_wheel,
    stub_dir,
)
from packaging.metadata import Metadata

from slimwheel.cli import main
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

INIT = b'"""A test package."""\nfrom __future__ import annotations\n\nfrom ._ext import versions\n'


@pytest.fixture(scope="module")
def cu13_libdir(toolkit13: Toolkit) -> Path:
    for d in toolkit13.lib_dirs:
        if (Path(d) / "libcudart.so").exists() and (Path(d) / "libcublas.so").exists():
            return Path(d)
    raise AssertionError(f"the CUDA 13 toolkit has no linkable libcudart/libcublas in {toolkit13.lib_dirs}")


@pytest.fixture(scope="module")
def cu13_wheel(tmp_path_factory: pytest.TempPathFactory, cu13_libdir: Path) -> Path:
    tmp = tmp_path_factory.mktemp("cu13")
    ext = build_extension(
        tmp / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir],
        libs=["cudart", "cublas"],
        runpath=["$ORIGIN/../nvidia/cu13/lib"],
    )
    return make_wheel(
        tmp / "dist",
        name="fakecuda",
        version="0.1",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def repair(wheel: Path, out: Path, *args: str) -> tuple[int, Path | None]:
    rc = main(["repair", "-w", str(out), *args, str(wheel)])
    made = sorted(out.glob("*.whl")) if out.exists() else []
    return rc, made[0] if made else None


def read_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def dynamic(data: bytes) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"needed": [], "rpath": [], "runpath": []}
    elf = ELFFile(io.BytesIO(data))
    # pyelftools sets needed/rpath/runpath on the tags at run time; its type stubs do not declare them
    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            for t in sec.iter_tags():
                if t.entry.d_tag == "DT_NEEDED":
                    out["needed"].append(t.needed)  # type: ignore[attr-defined]
                elif t.entry.d_tag == "DT_RPATH":
                    out["rpath"] += t.rpath.split(":")  # type: ignore[attr-defined]
                elif t.entry.d_tag == "DT_RUNPATH":
                    out["runpath"] += t.runpath.split(":")  # type: ignore[attr-defined]
    return out


def metadata(members: dict[str, bytes]) -> Metadata:
    name = next(n for n in members if n.endswith(".dist-info/METADATA"))
    return Metadata.from_email(members[name].decode(), validate=True)


def assert_record_valid(members: dict[str, bytes]) -> None:
    record_name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(members[record_name].decode())))
    listed = {r[0] for r in rows}
    assert listed == set(members), f"RECORD lists {sorted(listed ^ set(members))} wrongly"
    for name, digest, size in rows:
        if name == record_name:
            assert digest == "" and size == ""
            continue
        data = members[name]
        expect = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        assert (digest, int(size)) == (expect, len(data)), name


def test_cu13_wheel_repaired(cu13_wheel: Path, tmp_path: Path) -> None:
    before = sha(cu13_wheel)
    rc, out = repair(cu13_wheel, tmp_path / "out")
    assert rc == 0 and out is not None
    assert sha(cu13_wheel) == before  # input untouched
    members = read_members(out)
    reqs = sorted(str(r) for r in metadata(members).requires_dist or [])
    assert reqs == ["nvidia-cublas<14,>=13.0", "nvidia-cuda-runtime<14,>=13.0"]
    assert_record_valid(members)
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(out)], capture_output=True, text=True, check=False
    )
    assert twine.returncode == 0, twine.stdout + twine.stderr
    ext = dynamic(members[f"fakecuda/_ext{ext_suffix()}"])
    assert "$ORIGIN/../nvidia/cu13/lib" in ext["runpath"] + ext["rpath"]
    assert not any(n.startswith(("libcudart", "libcublas", "libcuda.")) for n in members)  # nothing CUDA bundled
    init = members["fakecuda/__init__.py"].decode()
    assert init.splitlines()[2].startswith("from . import _slimwheel_loader")
    assert "fakecuda/_slimwheel_loader.py" in members
    assert ".manylinux" in out.name or "manylinux_" in out.name


def test_output_is_deterministic(cu13_wheel: Path, tmp_path: Path) -> None:
    _, a = repair(cu13_wheel, tmp_path / "a")
    _, b = repair(cu13_wheel, tmp_path / "b")
    assert a is not None and b is not None and sha(a) == sha(b)


def test_bundling_another_library_keeps_the_nvidia_rpath(tmp_path: Path, cu13_libdir: Path) -> None:
    helper_dir = tmp_path / "helper"
    build_fake_lib(helper_dir / "libhelper.so.1", "libhelper.so.1", tag="helper", version=1)
    (helper_dir / "libhelper.so").symlink_to("libhelper.so.1")
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir, helper_dir],
        libs=["cudart", "cublas", "helper"],
        runpath=["$ORIGIN/../nvidia/cu13/lib", str(helper_dir)],
    )
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.2",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    # the helper's folder is outside the wheel: named by the user, it may be bundled from (issue 41 S1)
    rc, out = repair(wheel, tmp_path / "out", "--library-dir", str(helper_dir))
    assert rc == 0 and out is not None
    members = read_members(out)
    bundled = [n for n in members if n.startswith("fakecuda.libs/libhelper")]
    assert len(bundled) == 1
    d = dynamic(members[f"fakecuda/_ext{ext_suffix()}"])
    path = d["runpath"] + d["rpath"]
    assert "$ORIGIN/../fakecuda.libs" in path and "$ORIGIN/../nvidia/cu13/lib" in path
    assert str(helper_dir) not in path  # the build machine's folder is gone
    assert_record_valid(members)


def test_cuda12_variant_requires_cu12_wheels(tmp_path: Path) -> None:
    stubs = stub_dir(tmp_path, {"libcudart.so.12": 12040, "libcublas.so.12": 12040})
    ext = build_extension(tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs], libs=["cudart", "cublas"])
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda12",
        version="0.1",
        files={"fakecuda12/__init__.py": INIT, f"fakecuda12/_ext{ext_suffix()}": ext},
    )
    rc, out = repair(wheel, tmp_path / "out", "--cuda", "12.4")
    assert rc == 0 and out is not None
    members = read_members(out)
    reqs = sorted(str(r) for r in metadata(members).requires_dist or [])
    assert reqs == ["nvidia-cublas-cu12<13,>=12.4", "nvidia-cuda-runtime-cu12<13,>=12.4"]
    d = dynamic(members[f"fakecuda12/_ext{ext_suffix()}"])
    # built without any RPATH (another backend): repair adds the per-component cu12 folders
    assert d["runpath"] + d["rpath"] == ["$ORIGIN/../nvidia/cuda_runtime/lib", "$ORIGIN/../nvidia/cublas/lib"]
    loader = members["fakecuda12/_slimwheel_loader.py"].decode()
    assert "'folder': 'nvidia/cuda_runtime/lib'" in loader and "'soname': 'libcublasLt.so.12'" in loader


def test_driver_is_never_bundled(tmp_path: Path, cu13_libdir: Path) -> None:
    drv = tmp_path / "driver"
    build_fake_lib(drv / "libcuda.so.1", "libcuda.so.1", tag="driver", version=13000)
    (drv / "libcuda.so").symlink_to("libcuda.so.1")
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir, drv],
        libs=["cudart", "cublas", "cuda"],
        runpath=[str(drv)],
    )
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.3",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 0 and out is not None
    members = read_members(out)
    assert not any("libcuda" in n for n in members)
    assert "libcuda.so.1" in dynamic(members[f"fakecuda/_ext{ext_suffix()}"])["needed"]
    assert not any("driver" in str(r) for r in metadata(members).requires_dist or [])


def test_unaccounted_library_is_refused_with_exit_12(tmp_path: Path, cu13_libdir: Path) -> None:
    gone = tmp_path / "gone"
    build_fake_lib(gone / "libmissing.so.7", "libmissing.so.7", tag="missing", version=1)
    (gone / "libmissing.so").symlink_to("libmissing.so.7")
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[cu13_libdir, gone], libs=["cudart", "missing"]
    )
    for p in gone.iterdir():
        p.unlink()
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.4",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 12 and out is None


def test_two_cuda_majors_are_refused_with_exit_12(tmp_path: Path, cu13_libdir: Path) -> None:
    stubs = stub_dir(tmp_path, {"libcublas.so.12": 12040})
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs, cu13_libdir], libs=["cudart", "cublas"]
    )
    assert dynamic(ext.read_bytes())["needed"][:2] == ["libcudart.so.13", "libcublas.so.12"]
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.5",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 12 and out is None


def test_no_loader(cu13_wheel: Path, tmp_path: Path) -> None:
    rc, out = repair(cu13_wheel, tmp_path / "out", "--no-loader")
    assert rc == 0 and out is not None
    members = read_members(out)
    assert "fakecuda/_slimwheel_loader.py" not in members
    assert members["fakecuda/__init__.py"] == INIT


def test_top_level_extension_gets_a_shim(tmp_path: Path, cu13_libdir: Path) -> None:
    ext = build_extension(
        tmp_path / f"topmod{ext_suffix()}",
        "topmod",
        lib_dirs=[cu13_libdir],
        libs=["cudart", "cublas"],
        runpath=["$ORIGIN/nvidia/cu13/lib"],
    )
    wheel = make_wheel(tmp_path / "dist", name="topmod", version="0.1", files={f"topmod{ext_suffix()}": ext})
    rc, out = repair(wheel, tmp_path / "out", "--plat", "manylinux_2_28_x86_64")
    assert rc == 0 and out is not None
    assert "manylinux_2_28_x86_64" in out.name  # auditwheel adds the older tags the wheel also satisfies
    members = read_members(out)
    assert f"topmod{ext_suffix()}" not in members
    moved = members[f"topmod.slimwheel/topmod{ext_suffix()}"]
    d = dynamic(moved)
    assert d["runpath"] + d["rpath"] == ["$ORIGIN/../nvidia/cu13/lib"]
    assert "topmod.py" in members and "topmod.slimwheel/_slimwheel_loader.py" in members
    assert_record_valid(members)


def test_unsafe_runpath_entries_are_dropped_and_the_output_passes_check(tmp_path: Path, cu13_libdir: Path) -> None:
    # Issue 12 item 5: `.`, an empty entry and an absolute build folder survived repair and passed check; after
    # install, a libz.so.1 in the current directory ran at import.
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir],
        libs=["cudart"],
        runpath=[".", "/tmp/buildfolder", "$ORIGIN/../nvidia/cu13/lib"],
    )
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.8",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    assert main(["check", "--require-arch", "none", str(wheel)]) == 12
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 0 and out is not None
    search = dynamic(read_members(out)[f"fakecuda/_ext{ext_suffix()}"])
    entries = search["runpath"] or search["rpath"]
    assert "." not in entries and "/tmp/buildfolder" not in entries and "$ORIGIN/../nvidia/cu13/lib" in entries
    assert main(["check", "--require-arch", "none", str(out)]) == 0


def test_a_requirement_of_another_major_is_refused_not_emitted(tmp_path: Path, cu13_libdir: Path) -> None:
    # Issue 12 item 7: repair kept `nvidia-cublas<13` on a CUDA 13 wheel, exited 0, and check then failed it.
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir],
        libs=["cudart", "cublas"],
        runpath=["$ORIGIN/../nvidia/cu13/lib"],
    )
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.9",
        requires=("nvidia-cublas<13",),
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 12 and out is None


def test_a_changed_wheel_is_repaired_only_when_told(tmp_path: Path, cu13_wheel: Path) -> None:
    changed = tmp_path / "in" / cu13_wheel.name
    changed.parent.mkdir()
    with zipfile.ZipFile(cu13_wheel) as src, zipfile.ZipFile(changed, "w") as dst:
        for zi in src.infolist():
            data = src.read(zi)
            dst.writestr(zi, data + b"\n# changed\n" if zi.filename.endswith("__init__.py") else data)
    rc, out = repair(changed, tmp_path / "out")
    assert rc == 14 and out is None
    rc, out = repair(changed, tmp_path / "out", "--rewrite-record")
    assert rc == 0 and out is not None
    assert_record_valid(read_members(out))


def test_a_library_the_wheel_carries_is_not_required(tmp_path: Path) -> None:
    """A wheel that is itself a CUDA library wheel (nvidia-cufft: libcufftw.so.12 needs libcufft.so.12 beside it):
    repair required the wheel's own project (`nvidia-cufft>=12,<13` on nvidia-cufft 12.5.0.14)."""
    lib = tmp_path / "nvidia/cu13/lib"
    build_fake_lib(lib / "libcufft.so.12", "libcufft.so.12", tag="cufft", version=12)
    stubs = stub_dir(tmp_path / "stubs", {"libcufft.so.12": 12})
    w = build_extension(tmp_path / "libcufftw.so.12", "cufftw", lib_dirs=[stubs], libs=["cufft"], runpath=["$ORIGIN"])
    wheel = make_wheel(
        tmp_path / "dist",
        name="nvidia-cufft",
        version="12.5.0.14",
        files={"nvidia/cu13/lib/libcufft.so.12": lib / "libcufft.so.12", "nvidia/cu13/lib/libcufftw.so.12": w},
    )
    rc, out = repair(wheel, tmp_path / "out", "--cuda", "13.0")
    assert rc == 0 and out is not None
    assert not (metadata(read_members(out)).requires_dist or [])


def _evil_wheel(tmp_path: Path, cu13_libdir: Path) -> tuple[Path, Path]:
    """An extension that needs libevil.so.1, found only through its RUNPATH entry into a /tmp folder."""
    evil_dir = tmp_path / "x"
    build_fake_lib(evil_dir / "libevil.so.1", "libevil.so.1", tag="evil", version=1)
    (evil_dir / "libevil.so").symlink_to("libevil.so.1")
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cu13_libdir, evil_dir],
        libs=["cudart", "evil"],
        runpath=[str(evil_dir), "$ORIGIN/../nvidia/cu13/lib"],
    )
    wheel = make_wheel(
        tmp_path / "dist",
        name="fakecuda",
        version="0.9",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    return wheel, evil_dir


def test_a_library_reached_only_through_an_unnamed_folder_is_never_bundled(
    tmp_path: Path, cu13_libdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 41 S1: auditwheel followed the RUNPATH entry /tmp/.../x and copied libevil.so.1 into the released wheel.
    wheel, evil_dir = _evil_wheel(tmp_path, cu13_libdir)
    capsys.readouterr()
    rc, out = repair(wheel, tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 12 and out is None
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert f"fakecuda/_ext{ext_suffix()} needs libevil.so.1, found only at {evil_dir / 'libevil.so.1'}" in err


def test_a_library_in_a_folder_the_user_named_is_bundled(tmp_path: Path, cu13_libdir: Path) -> None:
    wheel, evil_dir = _evil_wheel(tmp_path, cu13_libdir)
    rc, out = repair(wheel, tmp_path / "out", "--library-dir", str(evil_dir))
    assert rc == 0 and out is not None
    members = read_members(out)
    assert [n for n in members if n.startswith("fakecuda.libs/libevil")]
    search = dynamic(members[f"fakecuda/_ext{ext_suffix()}"])
    assert str(evil_dir) not in search["runpath"] + search["rpath"]
    assert main(["check", "--require-arch", "none", str(out)]) == 0


def test_a_library_on_the_users_ld_library_path_is_bundled(
    tmp_path: Path, cu13_libdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LD_LIBRARY_PATH is the user's own setting, which auditwheel reads itself: the folder is named that way too
    wheel, evil_dir = _evil_wheel(tmp_path, cu13_libdir)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(evil_dir))
    rc, out = repair(wheel, tmp_path / "out")
    assert rc == 0 and out is not None
    assert [n for n in read_members(out) if n.startswith("fakecuda.libs/libevil")]


THREADED = r"""
#include <pthread.h>
static void *run(void *arg) { return arg; }
int start_one(void) { pthread_t t; if (pthread_create(&t, 0, run, 0)) return -1; return pthread_join(t, 0); }
"""


def test_a_tag_older_than_the_files_allow_is_dropped(tmp_path: Path) -> None:
    """gpt4all 2.8.2 is tagged manylinux1 and needs GLIBC_2.34; auditwheel adds manylinux_2_34 but keeps manylinux1
    (it replaces only linux_*), and pip on an older glibc installed the repaired wheel by that tag, to fail at import.
    A library built here (glibc 2.36: pthread_create@GLIBC_2.34) in a wheel tagged manylinux1: the output keeps only
    the tag its files allow, in its name and WHEEL, and pip for a manylinux2014 machine finds no wheel to install."""
    lib = build_extension(tmp_path / "libthreaded.so", "threaded", lib_dirs=[], libs=[], source=THREADED)
    files: dict[str, bytes | Path] = {"threaded/__init__.py": b"", "threaded/libthreaded.so": lib}
    wheel = make_wheel(tmp_path / "dist", name="threaded", version="0.1", files=files, tag="py3-none-manylinux1_x86_64")
    out = tmp_path / "out"
    assert main(["-q", "repair", "--offline", "-w", str(out), str(wheel)]) == 0
    (written,) = out.glob("*.whl")
    platforms = written.name.removesuffix(".whl").rsplit("-", 1)[1].split(".")
    assert "manylinux1_x86_64" not in platforms and platforms, written.name
    with zipfile.ZipFile(written) as z:
        tags = [
            line.split(":", 1)[1].strip()
            for line in z.read("threaded-0.1.dist-info/WHEEL").decode().splitlines()
            if line.startswith("Tag:")
        ]
    assert tags == [f"py3-none-{p}" for p in platforms]

    def pip_takes(platform: str) -> bool:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-index",
                "--find-links",
                str(out),
                "--only-binary",
                ":all:",
                "--platform",
                platform,
                "--python-version",
                "3.11",
                "-d",
                str(tmp_path / platform),
                "threaded",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.returncode == 0

    assert not pip_takes("manylinux2014_x86_64") and pip_takes("manylinux_2_34_x86_64")
