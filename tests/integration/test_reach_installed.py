"""Issue 37 item 3 end to end: a search path that leads nowhere, judged by `slimwheel check` and then seen by pip and
the loader.

A gcc-built extension module needs libcudart.so.12 (linked against the real nvidia-cuda-runtime-cu12 wheel's copy)
and has the RUNPATH `$ORIGIN/lib`, a folder the wheel does not have; the wheel requires exactly what check used to ask
for, `nvidia-cuda-runtime-cu12`. check must fail it (exit 12) naming the entry to add; installed with pip into a fresh
venv beside nvidia-cuda-runtime-cu12 from PyPI, `import` fails as check says; the wheel rebuilt with the entry check
names passes check, imports, and calls cudaRuntimeGetVersion (no GPU needed: libcudart loads without a driver) from
the nvidia wheel's copy, as /proc/self/maps of the importing process shows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.wheels_repair import build_extension, clean_env, ext_suffix, make_wheel, pip, site_of, venv

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
RUNTIME = "nvidia-cuda-runtime-cu12==12.6.77"  # the CUDA 12 runtime the extension links and runs with
REQUIRES = "nvidia-cuda-runtime-cu12"  # what the wheel says: exactly the requirement check used to ask for
SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
int cudaRuntimeGetVersion(int *version);

static PyObject *runtime_version(PyObject *self, PyObject *args) {
    int v = -1;
    if (cudaRuntimeGetVersion(&v) != 0) v = -1;
    return PyLong_FromLong(v);
}
static PyMethodDef methods[] = {{"runtime_version", runtime_version, METH_NOARGS, "cudart's version"}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&mod); }
"""
PROBE = r"""
import json
res = {}
try:
    import reachdemo
    res["version"] = reachdemo.runtime_version()
except ImportError as e:
    res["error"] = str(e)
res["maps"] = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]})
print(json.dumps(res))
"""


def fresh_venv(path: Path, *install: str) -> Path:
    py = venv(path)
    pip(py, *install)
    return py


@pytest.fixture(scope="module")
def cudart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the real libcudart.so.12, from the nvidia-cuda-runtime-cu12 wheel pip brings: what we link."""
    py = fresh_venv(tmp_path_factory.mktemp("link") / "v", RUNTIME)
    d = site_of(py) / "nvidia" / "cuda_runtime" / "lib"
    assert (d / "libcudart.so.12").is_file(), sorted(p.name for p in d.parent.rglob("*"))
    return d


def build_wheel(tmp: Path, cudart_dir: Path, runpath: str) -> Path:
    tmp.mkdir(parents=True)
    ext = build_extension(
        tmp / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[cudart_dir],
        libs=[":libcudart.so.12"],
        runpath=[runpath],
        source=SOURCE,
    )
    readelf = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True, check=True).stdout
    assert "[libcudart.so.12]" in readelf and f"Library runpath: [{runpath}]" in readelf, readelf
    init = b'"""issue 37 item 3: a search path that leads nowhere."""\nfrom ._ext import runtime_version\n'
    files: dict[str, bytes | Path] = {"reachdemo/__init__.py": init, f"reachdemo/_ext{ext_suffix()}": ext}
    return make_wheel(tmp / "dist", name="reachdemo", version="0.1", files=files, requires=(REQUIRES,))


def check(wheel: Path) -> tuple[int, list[str], list[str]]:
    """check as a user runs it (the package index read): exit status, failure messages, notes."""
    proc = subprocess.run(
        [str(BIN / "slimwheel"), "check", str(wheel), "--format", "json"], capture_output=True, text=True, check=False
    )
    data = json.loads(proc.stdout)
    (v,) = data["verdicts"]
    return proc.returncode, [f["message"] for f in v["failures"]], list(v["notes"])


def probe(py: Path, cwd: Path) -> dict[str, Any]:
    proc = subprocess.run([str(py), "-c", PROBE], capture_output=True, text=True, check=False, cwd=cwd, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_check_tells_the_truth_about_a_search_path_that_leads_nowhere(tmp_path: Path, cudart_dir: Path) -> None:
    nowhere = build_wheel(tmp_path / "nowhere", cudart_dir, "$ORIGIN/lib")
    rc, failures, _ = check(nowhere)
    assert rc == 12, failures
    (msg,) = failures
    assert msg.startswith("reachdemo/_ext") and "needs libcudart.so.12" in msg, msg
    assert f"Requires-Dist '{REQUIRES}' installs it in nvidia/cuda_runtime/lib" in msg, msg
    added = re.search(r"add (\S+) to its RUNPATH$", msg)
    assert added is not None and added[1] == "$ORIGIN/../nvidia/cuda_runtime/lib", msg

    # what check says, seen: pip installs the requirement, and nothing reaches it
    py = fresh_venv(tmp_path / "venv-nowhere", str(nowhere), RUNTIME)
    assert (site_of(py) / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12").is_file()
    got = probe(py, tmp_path)
    assert "libcudart.so.12: cannot open shared object file" in got.get("error", ""), got

    # the entry check names, added after the one that leads nowhere: check passes and the module imports
    fixed = build_wheel(tmp_path / "fixed", cudart_dir, f"$ORIGIN/lib:{added[1]}")
    rc, failures, _ = check(fixed)
    assert rc == 0 and failures == [], failures
    py = fresh_venv(tmp_path / "venv-fixed", str(fixed), RUNTIME)
    got = probe(py, tmp_path)
    assert got.get("version") == 12060, got  # CUDA 12.6's runtime, called without a GPU
    cudart = [m for m in got["maps"] if m.endswith("/libcudart.so.12")]
    assert cudart == [str((site_of(py) / "nvidia/cuda_runtime/lib/libcudart.so.12").resolve())], got["maps"]
