"""`slimwheel repair --external` on real wheels: an extension (gcc) that links a shared library from a second wheel,
repaired with real auditwheel and patchelf, checked, then pip-installed with that wheel into a fresh environment where
the extension imports and calls into the library found through RPATH alone. No CUDA involved."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers.wheels_repair import clean_env, ext_suffix, gcc, make_wheel
from packaging.metadata import Metadata

from slimwheel.cli import main
from slimwheel.errors import ExitCode
from slimwheel.inspect.elf import read_elf

pytestmark = pytest.mark.integration

SONAME = "libslimext.so.1"
FOLDER = "slimext_provider/lib"
LIB_SOURCE = "int slimext_answer(void) { return 42; }\n"
EXT_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
int slimext_answer(void);
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(slimext_answer()); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "the provider library's answer"}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&mod); }
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The provider wheel (the library in slimext_provider/lib) and two consumer wheels whose extension needs it, built
    without any RPATH (as a backend that does not know the provider's layout would): one without a requirement on the
    provider, one with its own (`slimext-provider<2`)."""
    tmp = tmp_path_factory.mktemp("external")
    build = tmp / "build"
    build.mkdir()
    (build / "slimext.c").write_text(LIB_SOURCE, encoding="utf-8")
    gcc(["-shared", "-fPIC", "-o", str(build / SONAME), str(build / "slimext.c"), f"-Wl,-soname,{SONAME}"])
    (build / "libslimext.so").symlink_to(SONAME)
    (build / "_ext.c").write_text(EXT_SOURCE, encoding="utf-8")
    ext = build / f"_ext{ext_suffix()}"
    gcc(
        [
            "-shared",
            "-fPIC",
            "-O1",
            "-o",
            str(ext),
            str(build / "_ext.c"),
            f"-I{sysconfig.get_paths()['include']}",
            f"-L{build}",
            "-lslimext",
        ]
    )
    provider_files: dict[str, bytes | Path] = {
        "slimext_provider/__init__.py": b"",
        f"{FOLDER}/{SONAME}": build / SONAME,
    }
    provider = make_wheel(
        tmp / "provider", name="slimext-provider", version="1.0", tag="py3-none-linux_x86_64", files=provider_files
    )
    files: dict[str, bytes | Path] = {
        "consumer/__init__.py": b"from ._ext import answer\n",
        f"consumer/_ext{ext_suffix()}": ext,
    }
    plain = make_wheel(tmp / "plain", name="consumer", version="0.1", files=files)
    own = make_wheel(tmp / "own", name="consumer", version="0.1", files=files, requires=("slimext-provider<2",))
    return {"provider": provider, "plain": plain, "own": own, "build": build}


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def requires_dist(m: dict[str, bytes]) -> list[str]:
    name = next(n for n in m if n.endswith(".dist-info/METADATA"))
    return [str(r) for r in Metadata.from_email(m[name].decode(), validate=True).requires_dist or []]


def search_path(wheel: Path) -> tuple[list[str], str | None]:
    """(DT_NEEDED, RUNPATH or RPATH) of the consumer's extension inside the wheel."""
    name = f"consumer/_ext{ext_suffix()}"
    r = read_elf(members(wheel)[name], name)
    return list(r.needed), r.runpath or r.rpath


def test_the_library_is_left_to_the_provider_wheel_and_found_at_run_time(
    wheels: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc = main(
        [
            "repair",
            "-w",
            str(out),
            "--json",
            "--external",
            f"{SONAME}=slimext-provider>=1.0@{FOLDER}",
            str(wheels["plain"]),
        ]
    )
    assert rc == 0
    result = json.loads(capsys.readouterr().out)
    assert result["external"] == [{"soname": SONAME, "requirement": "slimext-provider>=1.0", "folder": FOLDER}]
    assert SONAME in result["excluded"] and result["bundled"] == []
    (repaired,) = out.glob("*.whl")
    m = members(repaired)
    assert not any("libslimext" in n for n in m), sorted(m)
    assert requires_dist(m) == ["slimext-provider>=1.0"]
    needed, path = search_path(repaired)
    assert SONAME in needed and path == "$ORIGIN/../slimext_provider/lib"

    # The provider is on no index, so whether its wheel installs the library in that folder is not known (exit 19);
    # told to note what it cannot learn, check passes.
    assert main(["check", str(repaired)]) == ExitCode.UNKNOWN
    assert "whether that requirement installs the library there is not known" in capsys.readouterr().out
    assert main(["check", "--unknown=note", str(repaired)]) == 0
    capsys.readouterr()

    # A fresh environment: the provider from its wheel (pip resolves the requirement offline), nothing on
    # LD_LIBRARY_PATH, and the build folder the extension was linked in gone.
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, env=clean_env())
    py = env_dir / "bin" / "python"
    proc = subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
            str(wheels["provider"].parent),
            str(repaired),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for p in wheels["build"].glob("libslimext*"):
        p.unlink()
    proc = subprocess.run(
        [
            str(py),
            "-c",
            "import consumer, json; print(json.dumps([consumer.answer(), "
            "[l.split()[-1] for l in open('/proc/self/maps') if 'libslimext' in l][:1]]))",
        ],
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer, (loaded,) = json.loads(proc.stdout)
    assert answer == 42
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert Path(loaded).resolve() == (site / FOLDER / SONAME).resolve()


def test_the_folder_is_looked_up_in_the_installed_provider_and_requirements_merge(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    # The provider installed where slimwheel's Python finds it (PYTHONPATH), the folder not given: repair reads it
    # from the distribution's RECORD. The consumer already requires slimext-provider<2: one line, both bounds.
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(target),
            str(wheels["provider"]),
        ],
        check=True,
        env=clean_env(),
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slimwheel",
            "repair",
            "-w",
            str(out),
            "--external",
            "libslimext.so.*=slimext-provider>=1.0",
            str(wheels["own"]),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(PYTHONPATH=str(target)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (repaired,) = out.glob("*.whl")
    m = members(repaired)
    assert not any("libslimext" in n for n in m)
    assert requires_dist(m) == ["slimext-provider<2,>=1.0"]
    assert search_path(repaired)[1] == "$ORIGIN/../slimext_provider/lib"
    # the provider is on no index: what its wheel installs is not known to check (exit 19 unless told to note it)
    assert main(["check", str(repaired)]) == ExitCode.UNKNOWN
    assert main(["check", "--unknown=note", str(repaired)]) == 0


def test_without_external_the_library_is_unaccounted_and_the_message_says_how(
    wheels: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repair", "-w", str(tmp_path / "out"), str(wheels["plain"])]) == 12
    err = capsys.readouterr().err
    assert SONAME in err and "--external SONAME=REQUIREMENT" in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_a_provider_that_is_not_installed_is_a_clear_error(
    wheels: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        ["repair", "-w", str(tmp_path / "out"), "--external", f"{SONAME}=slimext-provider>=1.0", str(wheels["plain"])]
    )
    assert rc == 3
    err = capsys.readouterr().err
    assert f"external library {SONAME}: slimext-provider is not installed" in err and "@FOLDER" in err
