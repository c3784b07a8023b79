"""The CUDA 11.8 toolkit of Debian 12's `non-free` component: the one real static toolchain on our machines.

No PyPI wheel ships static cuBLAS or nvprune (shared/cuda-facts.md, section 1), so slimwheel's static link mode uses the
Debian packages `nvidia-cuda-toolkit` / `nvidia-cuda-dev` 11.8, installed by scripts/setup-cuda11.sh. They put nvcc
under /usr/lib/nvidia-cuda-toolkit/bin, the tools in /usr/bin, headers in /usr/include and libraries (shared and static)
in /usr/lib/x86_64-linux-gnu. nvcc 11.8 rejects GCC > 11, so the host compiler is g++-11.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import ToolError
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool

log = logging.getLogger(__name__)

SETUP_SCRIPT = "scripts/setup-cuda11.sh"
VERSION = CudaVersion(11, 8)

# Paths relative to the installation prefix ("/" on a real system).
NVCC = "usr/lib/nvidia-cuda-toolkit/bin/nvcc"
TOOLS_DIR = "usr/bin"
INCLUDE_DIR = "usr/include"
LIB_DIR = "usr/lib/x86_64-linux-gnu"
HOST_COMPILER = "usr/bin/g++-11"

# component -> file name in LIB_DIR, in link order (slimwheel/cuda/libs.py: the one table).
STATIC_LIBS: dict[str, str] = {s.component: s.file for s in cudalibs.STATIC_LIBS}


def _missing_error(what: str, path: Path) -> ToolError:
    return ToolError(
        f"CUDA 11.8 toolkit: {what} not found at {path}",
        hint=f"run `sudo bash {SETUP_SCRIPT}` (Debian 12 non-free: nvidia-cuda-toolkit, nvidia-cuda-dev, g++-11)",
    )


def parse_nvcc_version(text: str) -> CudaVersion:
    """The release from `nvcc --version` output ("Cuda compilation tools, release 11.8, V11.8.89")."""
    m = re.search(r"release (\d+)\.(\d+)", text)
    if not m:
        raise ToolError(f"cannot read the CUDA release from nvcc --version output: {text.strip()[:200]!r}")
    return CudaVersion(int(m.group(1)), int(m.group(2)))


def parse_gpu_arch_list(text: str) -> tuple[CC, ...]:
    """The compute capabilities from `nvcc --list-gpu-arch` output (one compute_XY per line)."""
    ccs = {CC.parse(m.group(1)) for m in re.finditer(r"\bcompute_(\d+)\b", text)}
    if not ccs:
        raise ToolError(f"nvcc --list-gpu-arch listed no architectures: {text.strip()[:200]!r}")
    return tuple(sorted(ccs))


def _run(cmd: list[str]) -> str:
    return run_tool(cmd, what=cmd[0], timeout=120)


def tool_path(prefix: Path, path: str) -> str:
    """PATH for builds with this toolkit: its folders first, then `path` without them.

    nvcc finds ptxas, fatbinary and nvlink through PATH (Debian's nvcc.profile adds only the folder of nvcc and cicc);
    on a machine that also has another CUDA in /usr/local/bin (CUDA 13's ptxas rejects sm_52, CMake's compiler probe
    target), that one would be used. Pure: the caller passes the PATH to extend.
    """
    ours = [str(prefix / NVCC).rsplit("/", 1)[0], str(prefix / TOOLS_DIR)]
    rest = [p for p in path.split(os.pathsep) if p and p not in ours]
    return os.pathsep.join(ours + rest)


def missing_files(prefix: Path = Path("/")) -> list[tuple[str, Path]]:
    """(what, path) of every file of the installation that is not there; empty when scripts/setup-cuda11.sh ran.
    Looks at files only: runs nothing."""
    prefix = Path(prefix)
    tools, libdir = prefix / TOOLS_DIR, prefix / LIB_DIR
    required = {
        "nvcc": prefix / NVCC,
        "nvprune": tools / "nvprune",
        "cuobjdump": tools / "cuobjdump",
        "g++-11 (the host compiler nvcc 11.8 accepts)": prefix / HOST_COMPILER,
        **{f"static {c} ({name})": libdir / name for c, name in STATIC_LIBS.items()},
    }
    return [(what, path) for what, path in required.items() if not path.exists()]


def find_cuda118(prefix: Path = Path("/"), env: Mapping[str, str] | None = None) -> Toolkit:
    """The installed Debian CUDA 11.8 toolkit, or a ToolError naming the set-up script.

    Every file is checked before any program runs, so a missing installation is reported at once and completely.
    `env` (default os.environ) supplies the PATH that the toolkit's own folders are put in front of.
    """
    prefix = Path(prefix)
    e = os.environ if env is None else env
    nvcc = prefix / NVCC
    tools = prefix / TOOLS_DIR
    libdir = prefix / LIB_DIR
    for what, path in missing_files(prefix):
        raise _missing_error(what, path)

    version = parse_nvcc_version(_run([str(nvcc), "--version"]))
    if version != VERSION:
        raise ToolError(
            f"{nvcc} is CUDA {version}, expected {VERSION}",
            hint=f"scripts/setup-cuda11.sh installs Debian 12's CUDA {VERSION}",
        )
    supported = parse_gpu_arch_list(_run([str(nvcc), "--list-gpu-arch"]))
    static_libs = {c: libdir / name for c, name in STATIC_LIBS.items()}
    components = ["nvcc", "nvprune", "cuobjdump", *(f"{c}_static" for c in STATIC_LIBS)]
    components += [c for c in ("cudart", "cublas", "cublasLt") if (libdir / f"lib{c}.so").exists()]
    host = prefix / HOST_COMPILER
    log.debug("found CUDA %s at %s (archs %s)", version, nvcc, ", ".join(map(str, supported)))
    return Toolkit(
        root=nvcc.parent.parent,
        nvcc=nvcc,
        version=version,
        source="debian",
        supported=supported,
        include_dirs=(prefix / INCLUDE_DIR,),
        lib_dirs=(libdir,),
        components=tuple(components),
        nvprune=tools / "nvprune",
        cuobjdump=tools / "cuobjdump",
        host_compiler=host,
        static_libs=static_libs,
        # CMake reads CUDACXX / CUDAHOSTCXX when it enables CUDA (nvcc 11.8 refuses the default GCC 12); PATH picks
        # this toolkit's ptxas/fatbinary/nvlink over any other CUDA's.
        env={"CUDACXX": str(nvcc), "CUDAHOSTCXX": str(host), "PATH": tool_path(prefix, e.get("PATH", ""))},
    )
