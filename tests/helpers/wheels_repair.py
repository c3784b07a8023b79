"""Small real binaries and wheels for the repair and runtime tests: shared objects built with gcc, packed as wheels.

Nothing here is mocked: the libraries are real ELF files with real DT_NEEDED entries, the wheels real zip files
with METADATA, WHEEL and RECORD as pip and twine expect them.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

# A CPython extension module that calls into cudart and cuBLAS without a GPU (version queries only).
EXT_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
int cudaRuntimeGetVersion(int *version);
int cublasGetProperty(int type, int *value);

static PyObject *versions(PyObject *self, PyObject *args) {
    int rt = -1, cublas_major = -1;
    if (cudaRuntimeGetVersion(&rt) != 0) rt = -1;
    if (cublasGetProperty(0, &cublas_major) != 0) cublas_major = -1;
    return Py_BuildValue("(ii)", rt, cublas_major);
}
static PyMethodDef methods[] = {{"versions", versions, METH_NOARGS, "cudart and cuBLAS versions"}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_MODNAME(void) { return PyModule_Create(&mod); }
"""

# A stand-in CUDA library that records every time it is loaded (its constructor appends TAG to $FAKE_CUDA_MARKER).
FAKE_LIB_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void slimwheel_test_mark(void) {
    const char *p = getenv("FAKE_CUDA_MARKER");
    if (p) { FILE *f = fopen(p, "a"); if (f) { fprintf(f, "%s\n", "TAG"); fclose(f); } }
}
int cudaRuntimeGetVersion(int *version) { *version = VERSION; return 0; }
int cublasGetProperty(int type, int *value) { *value = VERSION / 1000; return 0; }
int cuDriverGetVersion(int *version) { *version = VERSION; return 0; }
"""


def gcc(args: list[str]) -> None:
    proc = subprocess.run(["nice", "-n", "10", "gcc", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"gcc {' '.join(args)} failed:\n{proc.stderr}")


def ext_suffix() -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert isinstance(suffix, str), suffix  # CPython always sets it
    return suffix


def build_extension(
    out: Path,
    module: str,
    *,
    lib_dirs: list[Path],
    libs: list[str],
    runpath: Sequence[str] = (),
    source: str | None = None,
) -> Path:
    """A real extension module `module` that DT_NEEDs the given libraries (e.g. ["cudart", "cublas"], or
    [":libcudart.so.12"] for a file name); `source`: its C code, instead of a module that calls nothing of them."""
    src = out.parent / f"{module}.c"
    src.write_text(source if source is not None else EXT_SOURCE.replace("MODNAME", module), encoding="utf-8")
    args = ["-shared", "-fPIC", "-O1", "-o", str(out), str(src), f"-I{sysconfig.get_paths()['include']}"]
    # --no-as-needed: keep every listed library in DT_NEEDED even when no symbol of it is used (stand-ins)
    args += [f"-L{d}" for d in lib_dirs] + ["-Wl,--no-as-needed"] + [f"-l{lib}" for lib in libs]
    if runpath:
        args.append("-Wl,--enable-new-dtags,-rpath," + ":".join(runpath))
    gcc(args)
    return out


def build_fake_lib(out: Path, soname: str, *, tag: str, version: int, version_node: bool = False) -> Path:
    """A shared library with this SONAME whose constructor writes `tag` to $FAKE_CUDA_MARKER. `version_node`: its
    symbols defined under a GNU version node named after the SONAME, as NVIDIA builds its libraries (what shows a
    vendored copy to be the library its name says)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f".{out.name}.c"
    src.write_text(FAKE_LIB_SOURCE.replace("TAG", tag).replace("VERSION", str(version)), encoding="utf-8")
    args = ["-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}"]
    script = out.parent / f".{out.name}.map"
    if version_node:
        script.write_text(f"{soname} {{ global: *; }};\n", encoding="utf-8")
        args.append(f"-Wl,--version-script={script}")
    gcc(args)
    src.unlink()
    script.unlink(missing_ok=True)
    return out


def stub_dir(tmp: Path, sonames: dict[str, int], *, version_nodes: bool = False) -> Path:
    """A folder of linkable stand-ins (libX.so -> SONAME libX.so.N): for linking a CUDA 12 variant without 1 GB of
    cu12 wheels; repair never loads them. `version_nodes`: as `build_fake_lib`'s `version_node`."""
    d = tmp / "stubs"
    for soname, version in sonames.items():
        real = build_fake_lib(d / soname, soname, tag=soname, version=version, version_node=version_nodes)
        link = d / (soname.split(".so")[0] + ".so")
        if not link.exists():
            link.symlink_to(real.name)
    return d


def _record_row(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def make_wheel(
    dest: Path,
    *,
    name: str,
    version: str,
    files: Mapping[str, bytes | Path],
    tag: str | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A valid wheel (METADATA 2.1 with a description, so `twine check --strict` has nothing to warn about)."""
    tag = tag or f"{python_tag()}-{python_tag()}-linux_x86_64"
    dist = f"{name.replace('-', '_')}-{version}"
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        "Summary: a slimwheel test package",
        "Description-Content-Type: text/markdown",
        *[f"Requires-Dist: {r}" for r in requires],
        "",
        f"# {name}\n\nA small test package built by slimwheel's tests.\n",
    ]
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: slimwheel-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    entries: dict[str, bytes] = {}
    for arc, content in files.items():
        entries[arc] = content.read_bytes() if isinstance(content, Path) else content
    entries[f"{dist}.dist-info/METADATA"] = "\n".join(meta).encode()
    entries[f"{dist}.dist-info/WHEEL"] = wheel_meta.encode()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for arc, data in entries.items():
        w.writerow(_record_row(arc, data))
    w.writerow([f"{dist}.dist-info/RECORD", "", ""])
    entries[f"{dist}.dist-info/RECORD"] = buf.getvalue().encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries.items():
            zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            mode = 0o755 if arc.endswith(".so") or ".so." in arc else 0o644
            zi.external_attr = (mode | 0o100000) << 16
            zf.writestr(zi, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


def maps_of(pid: int | str = "self") -> list[str]:
    with open(f"/proc/{pid}/maps", encoding="utf-8") as f:
        return sorted({line.split()[-1] for line in f if len(line.split()) >= 6 and ".so" in line.split()[-1]})


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_", "SLIMWHEEL_USE"))}
    env.update(extra)
    return env


def venv(path: Path) -> Path:
    """A fresh virtual environment of this Python: its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=clean_env())
    return path / "bin" / "python"


def pip(py: Path, *args: str) -> None:
    """`pip install ARGS` into the environment of `py`; the test fails with pip's error when it does."""
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def site_of(py: Path) -> Path:
    return next((py.parent.parent / "lib").glob("python3*/site-packages"))
