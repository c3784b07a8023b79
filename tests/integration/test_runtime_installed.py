"""The loader inside repaired wheels, installed with pip into fresh virtual environments next to PyPI's nvidia-* wheels.

Planted stand-in libraries (gcc-built, with the real SONAMEs, writing a marker file when loaded) check what the loader
must never load, what it must prefer, and what it must refuse. /proc/self/maps of the importing process is the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.wheels_repair import (
    build_extension,
    build_fake_lib,
    clean_env,
    ext_suffix,
    make_wheel,
    pip,
    site_of,
    venv,
)

from slimwheel.cli import main
from slimwheel.doctor import doctor_to_json, run_doctor
from slimwheel.runtime.driver import CudaDriver
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration

INIT = b'"""A test package."""\nfrom __future__ import annotations\n\nfrom ._ext import versions\n'
PROBE = r"""
import json, sys
res = {}
try:
    import fakecuda
    res["versions"] = fakecuda.versions()
    res["state"] = fakecuda._slimwheel_loader.STATE
except ImportError as e:
    res["error"] = str(e)
res["maps"] = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]})
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory, toolkit13: Toolkit) -> dict[str, Path]:
    libdir = next(Path(d) for d in toolkit13.lib_dirs if (Path(d) / "libcublas.so").exists())
    tmp = tmp_path_factory.mktemp("rt-wheels")
    ext = build_extension(
        tmp / f"_ext{ext_suffix()}",
        "_ext",
        lib_dirs=[libdir],
        libs=["cudart", "cublas"],
        runpath=["$ORIGIN/../nvidia/cu13/lib"],
    )
    top = build_extension(
        tmp / f"topmod{ext_suffix()}",
        "topmod",
        lib_dirs=[libdir],
        libs=["cudart", "cublas"],
        runpath=["$ORIGIN/nvidia/cu13/lib"],
    )
    pkg_wheel = make_wheel(
        tmp / "dist",
        name="fakecuda",
        version="0.1",
        files={"fakecuda/__init__.py": INIT, f"fakecuda/_ext{ext_suffix()}": ext},
    )
    top_wheel = make_wheel(tmp / "dist", name="topmod", version="0.1", files={f"topmod{ext_suffix()}": top})
    out = tmp / "repaired"
    assert main(["repair", "-w", str(out), str(pkg_wheel)]) == 0
    assert main(["repair", "-w", str(out), str(top_wheel)]) == 0
    return {"fakecuda": next(out.glob("fakecuda-*.whl")), "topmod": next(out.glob("topmod-*.whl"))}


@pytest.fixture(scope="module")
def cu13_env(tmp_path_factory: pytest.TempPathFactory, repaired: dict[str, Path]) -> Path:
    """A fresh environment: the repaired wheels, their nvidia-* requirements resolved by pip from PyPI (the CUDA 13.0
    release the toolkit is: the pip cache already holds those wheels)."""
    py = venv(tmp_path_factory.mktemp("venv13") / "v")
    pip(py, str(repaired["fakecuda"]), str(repaired["topmod"]), "nvidia-cublas==13.0.*", "nvidia-cuda-runtime==13.0.*")
    return py


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory: pytest.TempPathFactory, repaired: dict[str, Path]) -> Path:
    """The repaired wheel without its nvidia-* requirements."""
    py = venv(tmp_path_factory.mktemp("venv-bare") / "v")
    pip(py, "--no-deps", str(repaired["fakecuda"]))
    return py


def probe(py: Path, *, cwd: Path, code: str = PROBE, **env: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(py), "-c", code], capture_output=True, text=True, check=False, cwd=cwd, env=clean_env(**env)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])  # what PROBE prints
    return found


def cuda_maps(maps: list[str], stem: str) -> list[str]:
    return [m for m in maps if os.path.basename(m).startswith(stem + ".so")]


@pytest.fixture()
def fakes(tmp_path: Path) -> dict[str, Path]:
    """Stand-in CUDA libraries that write their tag to the marker file when loaded."""
    marker = tmp_path / "loaded.txt"
    cwd = tmp_path / "cwd"
    build_fake_lib(cwd / "libcudart.so.13", "libcudart.so.13", tag="cwd", version=13000)
    build_fake_lib(cwd / "nvidia/cu13/lib/libcudart.so.13", "libcudart.so.13", tag="cwd-wheel-folder", version=13000)
    ww = tmp_path / "world-writable"
    for name in ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"):
        build_fake_lib(ww / "nvidia/cu13/lib" / name, name, tag="world-writable", version=13000)
    ww.chmod(0o777)
    # issue 12 item 2: a world-writable sys.path folder with `nvidia -> <an ordinary 0755 folder>` holding the fakes
    decoy = tmp_path / "decoy"
    for name in ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libnvJitLink.so.13"):
        build_fake_lib(decoy / "nvidia/cu13/lib" / name, name, tag="symlinked", version=13000)
    ww_link = tmp_path / "ww-link"
    ww_link.mkdir()
    (ww_link / "nvidia").symlink_to(decoy / "nvidia")
    ww_link.chmod(0o777)
    system = tmp_path / "system"
    for name in ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"):
        build_fake_lib(system / name, name, tag="system", version=13050)
    return {"marker": marker, "cwd": cwd, "ww": ww, "ww_link": ww_link, "system": system, "tmp": tmp_path}


def marks(fakes: dict[str, Path]) -> list[str]:
    return fakes["marker"].read_text().split() if fakes["marker"].exists() else []


def test_installed_wheel_loads_its_nvidia_folder(cu13_env: Path, tmp_path: Path) -> None:
    lib = site_of(cu13_env) / "nvidia" / "cu13" / "lib"
    res = probe(cu13_env, cwd=tmp_path)
    assert res["versions"] == [13000, 13]
    assert cuda_maps(res["maps"], "libcudart") == [str(lib / "libcudart.so.13")]
    assert cuda_maps(res["maps"], "libcublas") == [str(lib / "libcublas.so.13")]
    assert {r["via"] for r in res["state"]["libraries"]} == {"wheel"}
    # the shimmed top-level module: same libraries, and `import topmod` is the extension itself
    code = (
        "import json, topmod; print(json.dumps([topmod.versions(), topmod.__file__, "
        "sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcudart' in l})]))"
    )
    proc = subprocess.run(
        [str(cu13_env), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=clean_env(), check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    versions, file, cudart = json.loads(proc.stdout)
    assert versions == [13000, 13] and file.endswith(f"topmod.slimwheel/topmod{ext_suffix()}")
    assert cudart == [str(lib / "libcudart.so.13")]


def test_planted_copies_are_never_loaded(cu13_env: Path, bare_env: Path, fakes: dict[str, Path]) -> None:
    env = {"FAKE_CUDA_MARKER": str(fakes["marker"]), "PYTHONPATH": str(fakes["ww"])}
    res = probe(cu13_env, cwd=fakes["cwd"], **env)
    assert res["versions"] == [13000, 13] and marks(fakes) == []
    # without the nvidia-* wheels the loader must look further, and still refuse both plants
    res = probe(bare_env, cwd=fakes["cwd"], **env)
    assert marks(fakes) == []
    ww = fakes["ww"]
    assert (
        f"{ww / 'nvidia/cu13/lib'}: refused: {ww}: folder writable by everyone (mode 0777, no sticky bit)"
        in res["error"]
    )
    assert not cuda_maps(res["maps"], "libcudart")


def test_symlink_from_a_world_writable_folder_is_refused(bare_env: Path, fakes: dict[str, Path]) -> None:
    # only the folder holding the link is writable by everyone; what it points at is an ordinary 0755 folder
    ww = fakes["ww_link"]  # run from fakes["cwd"]: from tmp, ww-link would be refused as under the current directory
    res = probe(bare_env, cwd=fakes["cwd"], FAKE_CUDA_MARKER=str(fakes["marker"]), PYTHONPATH=str(ww))
    assert marks(fakes) == [] and not cuda_maps(res["maps"], "libcudart")
    assert (
        f"{ww / 'nvidia/cu13/lib'}: refused: {ww}: folder writable by everyone (mode 0777, no sticky bit)"
        in res["error"]
    )


def test_relative_pythonpath_is_refused(bare_env: Path, fakes: dict[str, Path]) -> None:
    # Python makes PYTHONPATH=nvidia-fakes absolute before the loader sees it: the place decides, not the spelling
    sub = fakes["tmp"] / "nvidia-fakes"
    build_fake_lib(sub / "nvidia/cu13/lib/libcudart.so.13", "libcudart.so.13", tag="relative", version=13000)
    res = probe(bare_env, cwd=fakes["tmp"], FAKE_CUDA_MARKER=str(fakes["marker"]), PYTHONPATH="nvidia-fakes")
    assert marks(fakes) == [] and not cuda_maps(res["maps"], "libcudart")
    assert f"{sub}: refused: under the current directory {fakes['tmp']}" in res["error"]


def test_use_system_cuda_is_a_boolean(cu13_env: Path, fakes: dict[str, Path]) -> None:
    lib = site_of(cu13_env) / "nvidia" / "cu13" / "lib"
    env = {"FAKE_CUDA_MARKER": str(fakes["marker"]), "LD_LIBRARY_PATH": str(fakes["system"])}
    for off in ("false", "no", "off", "0", ""):
        res = probe(cu13_env, cwd=fakes["tmp"], SLIMWHEEL_USE_SYSTEM_CUDA=off, **env)
        assert marks(fakes) == [] and cuda_maps(res["maps"], "libcudart") == [str(lib / "libcudart.so.13")], off
    res = probe(cu13_env, cwd=fakes["tmp"], SLIMWHEEL_USE_SYSTEM_CUDA="yes", **env)
    assert res["versions"] == [13050, 13]
    res = probe(cu13_env, cwd=fakes["tmp"], SLIMWHEEL_USE_SYSTEM_CUDA="sometimes", **env)
    assert res["error"].startswith("SLIMWHEEL_USE_SYSTEM_CUDA='sometimes' is not a boolean")


def test_missing_nvidia_package_message(bare_env: Path, tmp_path: Path) -> None:
    paths = json.loads(
        subprocess.run(
            [str(bare_env), "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=clean_env(),
            check=True,
        ).stdout
    )
    # `python -c` puts '' (the current directory) first on sys.path: reported as refused, in its place
    roots = [str(site_of(bare_env))] + [p for p in paths if p == "" or (os.path.isabs(p) and os.path.isdir(p))]
    roots = list(dict.fromkeys(roots))
    refused = f"'' in sys.path: refused: a relative entry, it means the current directory {tmp_path.resolve()}"
    res = probe(bare_env, cwd=tmp_path)
    expected = "\n".join(
        [
            "fakecuda needs libcudart.so.13 (CUDA 13 cudart), which could not be loaded.",
            "  looked in:",
            "    - already-loaded libraries of this process: not loaded",
            *[f"    - {r}/nvidia/cu13/lib: not there" if r else f"    - {refused}" for r in roots],
            "  fix: pip install 'nvidia-cuda-runtime>=13.0,<14'",
            "  (or set SLIMWHEEL_USE_SYSTEM_CUDA=1 to load a system CUDA installation by SONAME)",
        ]
    )
    assert res["error"] == expected


def test_wheel_folder_wins_over_a_system_copy(cu13_env: Path, fakes: dict[str, Path]) -> None:
    lib = site_of(cu13_env) / "nvidia" / "cu13" / "lib"
    env = {"FAKE_CUDA_MARKER": str(fakes["marker"]), "LD_LIBRARY_PATH": str(fakes["system"])}
    res = probe(cu13_env, cwd=fakes["tmp"], **env)
    assert marks(fakes) == [] and res["versions"] == [13000, 13]
    assert cuda_maps(res["maps"], "libcudart") == [str(lib / "libcudart.so.13")]
    # the opt-out: SLIMWHEEL_USE_SYSTEM_CUDA=1 loads by SONAME with the normal search
    res = probe(cu13_env, cwd=fakes["tmp"], SLIMWHEEL_USE_SYSTEM_CUDA="1", **env)
    assert res["versions"] == [13050, 13] and "system" in marks(fakes)
    assert {r["via"] for r in res["state"]["libraries"]} == {"system"}


def test_already_loaded_library_is_reused(cu13_env: Path, fakes: dict[str, Path]) -> None:
    pre = build_fake_lib(fakes["tmp"] / "pre" / "libcudart.so.13", "libcudart.so.13", tag="preloaded", version=13020)
    code = f"import ctypes, os; ctypes.CDLL({str(pre)!r}, mode=os.RTLD_GLOBAL)\n" + PROBE
    res = probe(cu13_env, cwd=fakes["tmp"], code=code, FAKE_CUDA_MARKER=str(fakes["marker"]))
    assert marks(fakes) == ["preloaded"]
    assert res["versions"][0] == 13020  # the extension runs on the preloaded copy
    assert cuda_maps(res["maps"], "libcudart") == [str(pre)]
    cudart = res["state"]["libraries"][0]
    assert (cudart["via"], cudart["path"]) == ("already-loaded", str(pre))


def test_wrong_major_is_refused(cu13_env: Path, fakes: dict[str, Path]) -> None:
    old = build_fake_lib(fakes["tmp"] / "o" / "libcudart.so.12", "libcudart.so.12", tag="cu12", version=12080)
    code = f"import ctypes, os; ctypes.CDLL({str(old)!r}, mode=os.RTLD_GLOBAL)\n" + PROBE
    res = probe(cu13_env, cwd=fakes["tmp"], code=code)
    assert "another major version is already loaded in this process: " + str(old) in res["error"]
    liar = build_fake_lib(fakes["tmp"] / "l" / "libcudart.so.13", "libcudart.so.13", tag="liar", version=12080)
    code = f"import ctypes, os; ctypes.CDLL({str(liar)!r}, mode=os.RTLD_GLOBAL)\n" + PROBE
    res = probe(cu13_env, cwd=fakes["tmp"], code=code)
    assert f"{liar} reports CUDA runtime 12.8, not CUDA 13" in res["error"]


def test_driver_too_old_for_the_cuda_major(cu13_env: Path, fakes: dict[str, Path]) -> None:
    # a stand-in driver that reports CUDA 12.8 (what driver 570 reports): CUDA 13 code cannot run on it
    drv = build_fake_lib(fakes["tmp"] / "driver" / "libcuda.so.1", "libcuda.so.1", tag="driver", version=12080)
    res = probe(cu13_env, cwd=fakes["tmp"], LD_LIBRARY_PATH=str(drv.parent))
    assert res["error"] == (
        "fakecuda: the NVIDIA driver supports CUDA 12.8 (cuDriverGetVersion 12080), but this wheel needs CUDA 13.0 "
        "(CUDA 13 needs driver 580.65.06 or newer).\n  fix: update the NVIDIA driver to 580.65.06 or newer"
    )
    new = build_fake_lib(fakes["tmp"] / "driver13" / "libcuda.so.1", "libcuda.so.1", tag="driver", version=13000)
    res = probe(cu13_env, cwd=fakes["tmp"], LD_LIBRARY_PATH=str(new.parent))
    assert res["versions"] == [13000, 13] and res["state"]["driver_version"] == 13000


def test_doctor_on_a_repaired_wheel(repaired: dict[str, Path]) -> None:
    report = doctor_to_json(run_doctor(str(repaired["fakecuda"]), env={}))
    assert report["schema"] == 1 and report["cuda_major"] == 13
    libraries, notes = report["libraries"], report["notes"]
    assert isinstance(libraries, list) and isinstance(notes, list)
    assert [lib["soname"] for lib in libraries] == ["libcudart.so.13", "libcublas.so.13"]
    if CudaDriver.open() is None:
        assert report["gpus"] == [] and any("no NVIDIA driver" in n for n in notes)


def test_footprint_without_a_gpu_says_so(cu13_env: Path) -> None:
    if CudaDriver.open() is not None:
        pytest.skip("this machine has an NVIDIA driver; tests/gpu measures the footprint")
    assert main(["footprint", "json"]) == 4
