"""The shipped loader never dlopens a bare SONAME that the search path can redirect (issue 24 item 4).

With an empty element in LD_LIBRARY_PATH (`/x:`) the dynamic loader searches the current directory for a bare name:
`handle_path` used `CDLL("libdl.so.2")` and `driver_version` `CDLL("libcuda.so.1")`, and gcc-built fakes of both
planted in the working directory ran their constructors. The loader file runs standalone, as repair ships it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.wheels_repair import build_fake_lib, clean_env

import slimwheel.runtime.loader

pytestmark = pytest.mark.integration

PROBE = r"""
import ctypes, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("_slimwheel_loader", sys.argv[1])
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)
# a library already loaded by absolute path, as torch loads the CUDA runtime
handle = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
print(json.dumps({
    "path": loader.handle_path(handle),
    "reused": (loader.already_loaded("libz.so.1") or (None, None))[1],
    "missing": loader.already_loaded("libcudart.so.13"),
    "driver": loader.driver_version(),
    "maps": sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]}),
}))
"""


def _libz() -> str:
    import ctypes.util

    for folder in (
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib/aarch64-linux-gnu",
    ):
        p = Path(folder) / "libz.so.1"
        if p.is_file():
            return str(p.resolve())
    raise AssertionError(f"no libz.so.1 in the system folders (ctypes finds {ctypes.util.find_library('z')})")


@pytest.mark.parametrize("ld_library_path", ["/nonexistent:", ":/nonexistent", "/a::/b", "."])
def test_planted_libdl_and_libcuda_never_run(tmp_path: Path, ld_library_path: str) -> None:
    cwd = tmp_path / "cwd"
    marker = tmp_path / "ran.txt"
    build_fake_lib(cwd / "libdl.so.2", "libdl.so.2", tag="libdl", version=1)
    build_fake_lib(cwd / "libcuda.so.1", "libcuda.so.1", tag="libcuda", version=99999)
    build_fake_lib(cwd / "libcudart.so.13", "libcudart.so.13", tag="libcudart", version=13000)
    libz = _libz()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, slimwheel.runtime.loader.__file__, libz],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=clean_env(LD_LIBRARY_PATH=ld_library_path, FAKE_CUDA_MARKER=str(marker)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not marker.exists(), marker.read_text()  # no constructor of a planted file ran
    assert not [m for m in res["maps"] if m.startswith(str(cwd))]
    assert res["path"] == libz and res["reused"] == libz and res["missing"] is None
    assert res["driver"] != 99999  # the real driver's version on a GPU machine, None here; never the fake's
