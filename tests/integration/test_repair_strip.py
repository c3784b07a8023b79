"""Debug info, end to end (issue 38 item 5): a real extension module compiled here with `gcc -g` fails `check` by
default with its own exit code (16) and passes with `--no-debug-symbols`; `repair --strip` strips it with GNU strip
(the file shrinks, check passes, the module still imports and runs); a file with nothing to strip is left as it was."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from slimwheel.cli import main
from slimwheel.errors import ExitCode
from testkit.wheelmaker import make_wheel

pytestmark = pytest.mark.integration

MODULE_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
/* getenv: a libc symbol, so that the module needs libc.so.6 as every real extension does (auditwheel reads it) */
static PyObject* twice(PyObject* self, PyObject* arg) {
  return PyLong_FromLong((getenv("DEMO_NEVER_SET") ? 3 : 2) * PyLong_AsLong(arg));
}
static PyMethodDef methods[] = {{"twice", twice, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_demo", NULL, -1, methods};
PyMODINIT_FUNC PyInit__demo(void) { return PyModule_Create(&mod); }
"""
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")  # .cpython-311-x86_64-linux-gnu.so


def compiled(tmp: Path, *flags: str) -> bytes:
    src = tmp / "demo.c"
    src.write_text(MODULE_C)
    so = tmp / f"_demo{'-'.join(flags)}.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(["gcc", "-O1", "-fPIC", "-shared", f"-I{include}", *flags, "-o", str(so), str(src)], check=True)
    return so.read_bytes()


def wheel_of(out: Path, module: bytes) -> Path:
    return make_wheel(
        out,
        name="demo",
        files={"demo/__init__.py": b"from demo._demo import twice\n", f"demo/_demo{SUFFIX}": module},
        tag=f"{TAG}-{TAG}-linux_x86_64",
    )


def member(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def test_debug_info_fails_check_by_default_and_repair_strip_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    debug = compiled(tmp_path, "-g")
    w = wheel_of(tmp_path / "in", debug)
    assert main(["check", str(w), "--offline"]) == ExitCode.DEBUG_INFO
    out = capsys.readouterr().out
    assert "debug-symbols (exit 16)" in out and "of .debug_* sections" in out and "repair --strip" in out
    assert main(["check", str(w), "--offline", "--no-debug-symbols"]) == 0
    capsys.readouterr()
    assert main(["size-report", str(w)]) == 0
    assert "debug info" in capsys.readouterr().out

    assert main(["repair", str(w), "-w", str(tmp_path / "out"), "--strip", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (stripped,) = result["stripped"]
    assert stripped["file"].endswith(".so") and stripped["bytes_after"] < stripped["bytes_before"]
    repaired = Path(result["wheel"])
    assert main(["check", str(repaired), "--offline"]) == 0  # nothing left for the default check to fail
    capsys.readouterr()
    # the stripped module still imports and runs
    site = tmp_path / "site"
    with zipfile.ZipFile(repaired) as z:
        z.extractall(site)
    proc = subprocess.run(
        [sys.executable, "-c", "import demo; print(demo.twice(21))"],
        cwd=site,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr


def test_repair_strip_leaves_a_stripped_file_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = compiled(tmp_path, "-g0")
    w = wheel_of(tmp_path / "in", clean)
    plain_dir, strip_dir = tmp_path / "plain", tmp_path / "strip"
    assert main(["repair", str(w), "-w", str(plain_dir), "--format", "json"]) == 0
    plain = Path(json.loads(capsys.readouterr().out)["wheel"])
    assert main(["repair", str(w), "-w", str(strip_dir), "--strip", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stripped"] == []
    digest = [hashlib.sha256(member(p, f"_demo{SUFFIX}")).hexdigest() for p in (plain, Path(result["wheel"]))]
    assert digest[0] == digest[1]
