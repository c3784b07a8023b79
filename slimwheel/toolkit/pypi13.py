"""A CUDA 13 toolkit assembled from PyPI's nvidia-* wheels into slimwheel's cache.

The cu13 wheels install one tree, `site-packages/nvidia/cu13/{bin,include,lib,nvvm}`, that is a complete compiler
(shared/cuda-facts.md, section 1). Two things keep it from being a toolkit that CMake and nvcc accept as is: nvcc's
profile looks for libraries in `lib64`, and the libraries carry only versioned names (`libcublas.so.13`), so
`-lcublas` and CMake's `find_library(cublas)` find nothing. So the wheels go into `<prefix>/site` (pip --target) and the
prefix gets its own `bin/` (relative symlinks to the tools plus an nvcc.profile whose TOP is the prefix), an `include`
link, an `nvvm/` folder laid out as the system toolkit's (nvlink loads `nvvm/lib64/libnvvm.so` for device LTO), and
`lib64/` with every library under its own name and the unversioned link name. nvcc takes `_HERE_` from
the path it was started by, not the symlink's target, so TOP is the prefix. All links are relative: the prefix is built
in a temporary folder and renamed into place, under an fcntl lock, so concurrent runs never see half a toolkit.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ToolError
from slimwheel.fsutil import file_lock, remove_stale_temps, temp_sibling, write_text_atomic
from slimwheel.toolkit.find import check_build, describe
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool

log = logging.getLogger(__name__)

MANIFEST = "slimwheel-toolkit.json"
MANIFEST_SCHEMA = 2  # 2: nvvm/ is a folder with lib64/libnvvm.so (nvlink -dlto); a 1 prefix is re-assembled

# What a build needs, and what `slimwheel toolkit` reports. Measured with `pip index versions` (2026-11-30):
# nvcc/crt/nvvm/cccl/runtime/nvjitlink/culibos have 13.0.* releases; cuBLAS numbers its releases on its own
# (13.0.x ships with CUDA 13.0), cuRAND too (10.4.0.x with 13.0, 10.4.N with 13.N); cuobjdump has no 13.0 or 13.1
# wheel (first: 13.2.51), and a newer cuobjdump reads older fatbins, so it takes the newest of the major.
BASE_PACKAGES = (
    "nvidia-cuda-nvcc",  # nvcc, ptxas, fatbinary, nvlink, cudafe++
    "nvidia-cuda-crt",  # crt/ headers nvcc includes
    "nvidia-nvvm",  # cicc and libdevice
    "nvidia-cuda-cccl",  # thrust, cub, libcu++
    "nvidia-cuda-runtime",  # cudart (shared and static), cudadevrt, runtime headers
    "nvidia-nvjitlink",  # cuBLAS 13 links libnvJitLink
    "nvidia-cuda-culibos",  # libculibos.a, for static linking
    "nvidia-cuda-profiler-api",  # cuda_profiler_api.h (faiss includes it; a full toolkit has it)
)


def requirements(version: CudaVersion) -> tuple[str, ...]:
    """pip requirement strings for a CUDA 13.N toolkit."""
    if version.major != 13:
        raise BadInputError(
            f"CUDA {version}: PyPI's nvidia-* wheels make a complete toolkit only for CUDA 13",
            hint="CUDA 12 has no nvcc on PyPI; see `slimwheel toolkit --cuda 12.4`",
        )
    minor = f"13.{version.minor}.*"
    reqs = [f"{p}=={cccl_version(version) if p == 'nvidia-cuda-cccl' else minor}" for p in BASE_PACKAGES]
    reqs.append("nvidia-cublas==13.0.*" if version.minor == 0 else "nvidia-cublas>=13,<14")
    reqs.append(f"nvidia-curand==10.4.{version.minor}.*")  # curand.h and curand_kernel.h for device RNG code
    reqs.append("nvidia-cuda-cuobjdump>=13,<14")
    return tuple(reqs)


def cccl_version(version: CudaVersion) -> str:
    """The nvidia-cuda-cccl release of a CUDA 13.N toolkit. Up to 13.2 it is numbered 13.N.x like the rest; from
    CUDA 13.3 on it is 13.<CCCL version>: 13.3.3.3.1 (CCCL 3.3.3, CUDA 13.3), 13.3.4.2.1 (CCCL 3.4.2, CUDA 13.4),
    13.3.5.0.6 (CCCL 3.5.0, CUDA 13.5). Measured with `pip index versions nvidia-cuda-cccl` (2026-12-01); the
    release notes' component table lists the same numbers (CUDA 13.5: Thrust 3.5.0, Cooperative Groups 13.3.5.0.6)."""
    if version.minor <= 2:
        return f"13.{version.minor}.*"
    return f"13.3.{version.minor}.*"


def prefix_path(cache: Path, version: CudaVersion) -> Path:
    return cache / "toolkits" / f"cuda-{version}"


def _legacy_temps(prefix: Path) -> tuple[str, ...]:
    """Names of the temp folders slimwheel 0.1 made beside `prefix` (before `fsutil.temp_sibling`)."""
    name = re.escape(prefix.name)
    return (rf"\.{name}\.tmp-[a-z0-9_]{{8}}", rf"\.{name}\.stale-[a-z0-9_]{{8}}")


def read_manifest(prefix: Path) -> dict[str, Any] | None:
    try:
        data: Any = json.loads((prefix / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):  # a hand-edited or truncated manifest is no manifest
        return None
    if data.get("schema") != MANIFEST_SCHEMA or not data.get("check", {}).get("ok"):
        return None
    if not (prefix / "bin" / "nvcc").exists():
        return None
    return dict(data)


def _rel_symlink(target: Path, link: Path) -> None:
    link.symlink_to(os.path.relpath(target, link.parent))


_PROFILE = """\
# Written by slimwheel: nvcc from PyPI wheels, with the prefix (not the wheel folder) as TOP.
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""


def _make_prefix(prefix: Path) -> None:
    """bin/, include, nvvm, lib64/ (+ lib) over <prefix>/site/nvidia/cu13, as described in the module docstring."""
    cu13 = prefix / "site" / "nvidia" / "cu13"
    if not (cu13 / "bin" / "nvcc").is_file():
        raise ToolError(f"{cu13}: the nvidia-cuda-nvcc wheel installed no bin/nvcc")
    (prefix / "bin").mkdir()
    for tool in sorted((cu13 / "bin").iterdir()):
        if tool.name != "nvcc.profile":
            _rel_symlink(tool, prefix / "bin" / tool.name)
    (prefix / "bin" / "nvcc.profile").write_text(_PROFILE, encoding="utf-8")
    _rel_symlink(cu13 / "include", prefix / "include")
    # nvvm/ as the system toolkit lays it out: the wheel's bin (cicc) and libdevice, and lib64/libnvvm.so, which
    # nvlink loads from <bin>/../nvvm/lib64 for device LTO (-dlto) and which the wheel puts in cu13/lib instead.
    # Without it `nvcc -dlink -dlto` stops with "nvlink fatal: elfLink linker library load error".
    (prefix / "nvvm").mkdir()
    for entry in sorted((cu13 / "nvvm").iterdir()):
        _rel_symlink(entry, prefix / "nvvm" / entry.name)
    libnvvm = sorted((cu13 / "lib").glob("libnvvm.so.*"))
    if libnvvm and not (prefix / "nvvm" / "lib64").exists():
        (prefix / "nvvm" / "lib64").mkdir()
        for lib in libnvvm:
            _rel_symlink(lib, prefix / "nvvm" / "lib64" / lib.name)
        _rel_symlink(libnvvm[0], prefix / "nvvm" / "lib64" / "libnvvm.so")
    lib64 = prefix / "lib64"
    lib64.mkdir()
    for lib in sorted((cu13 / "lib").iterdir()):
        _rel_symlink(lib, lib64 / lib.name)
        if ".so." in lib.name:
            link_name = lib.name.split(".so.")[0] + ".so"
            if not (lib64 / link_name).exists():
                _rel_symlink(lib, lib64 / link_name)
    (prefix / "lib").symlink_to("lib64")
    # CMake's FindCUDAToolkit reads the release from version.json when there is one; the system toolkit has it too.


def _installed(site: Path) -> dict[str, str]:
    out = {}
    for d in sorted(site.glob("*.dist-info")):
        name, _, ver = d.name.removesuffix(".dist-info").partition("-")
        out[name.replace("_", "-").lower()] = ver
    return out


def _pip_install(site: Path, reqs: tuple[str, ...]) -> None:
    if importlib.util.find_spec("pip") is None:
        raise ToolError(
            f"assembling the CUDA toolkit needs pip, and {sys.executable} has no pip module",
            hint=f"{sys.executable} -m ensurepip, or run slimwheel from a virtual environment made with pip",
        )
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",
        str(site),
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        *reqs,
    ]
    try:
        run_tool(cmd, what="installing the CUDA toolkit wheels from PyPI", timeout=1800)
    except ToolError as e:
        raise ToolError(
            e.message, hint="pip needs to reach PyPI (or an index with the nvidia-* wheels); about 1.1 GB on disk"
        ) from None


def assemble(version: CudaVersion, cache: Path) -> Toolkit:
    """The CUDA 13.N toolkit from PyPI wheels in `cache`/toolkits/cuda-13.N, assembling and checking it once."""
    reqs = requirements(version)
    prefix = prefix_path(cache, version)

    def current() -> bool:
        # A prefix assembled from another package list (an older slimwheel) is rebuilt, not silently used.
        data = read_manifest(prefix)
        return data is not None and data.get("requirements") == list(reqs)

    if current():
        return describe(prefix / "bin" / "nvcc", source="pypi")
    with file_lock(prefix.parent / f".{prefix.name}.lock"):
        if current():  # another process finished it while we waited
            return describe(prefix / "bin" / "nvcc", source="pypi")
        # Under the lock no other run is assembling: every temp folder here is an orphan of a killed one (~1 GB each).
        remove_stale_temps(prefix, min_age_s=0, legacy=_legacy_temps(prefix))
        with temp_sibling(prefix, directory=True) as tmp:
            log.info("assembling CUDA %s from PyPI wheels into %s", version, prefix)
            t0 = time.monotonic()
            _pip_install(tmp / "site", reqs)
            t_pip = time.monotonic() - t0
            _make_prefix(tmp)
            tk = describe(tmp / "bin" / "nvcc", source="pypi")
            if (tk.version.major, tk.version.minor) != (version.major, version.minor):
                raise ToolError(f"{tmp}: asked pip for CUDA {version}, got nvcc {tk.version}")
            check = check_build(tk)
            manifest = {
                "schema": MANIFEST_SCHEMA,
                "cuda": str(version),
                "requirements": list(reqs),
                "installed": _installed(tmp / "site"),
                "pip_seconds": round(t_pip, 2),
                "check": check,
            }
            write_text_atomic(tmp / MANIFEST, json.dumps(manifest, indent=2) + "\n")
            (tmp / MANIFEST).chmod(0o644)
            tmp.chmod(0o755)  # mkdtemp makes it private; the toolkit is for every user of this cache
            if prefix.exists() or prefix.is_symlink():  # a broken earlier attempt: move it aside, then remove
                with temp_sibling(prefix, directory=True) as stale:
                    os.replace(prefix, stale / "old")
            os.replace(tmp, prefix)
            log.info(
                "CUDA %s assembled in %.1f s (pip %.1f s, check %.1f s)",
                version,
                time.monotonic() - t0,
                t_pip,
                check["seconds"],
            )
    return describe(prefix / "bin" / "nvcc", source="pypi")


def manifest_of(tk: Toolkit) -> dict[str, Any] | None:
    """The cache record of a PyPI toolkit (packages, check), for reports."""
    return read_manifest(tk.root) if tk.source == "pypi" else None
