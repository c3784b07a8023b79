"""Find and describe a CUDA toolkit that is already on the machine, and verify that it builds what slimwheel builds.

Everything about a toolkit is asked of nvcc itself: `nvcc --version` for the release, `nvcc --list-gpu-arch` for the
targets, and `nvcc --dryrun` for the folders its nvcc.profile adds (TOP, -I, -L). That works the same for a system
install (/usr/local/cuda), a wrapper script on PATH, and the prefixes slimwheel assembles from wheels or packages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import ToolError
from slimwheel.fsutil import cache_dir, file_lock, write_text_atomic
from slimwheel.inspect.elf import read_elf_file
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool

log = logging.getLogger(__name__)

# Compiled and linked once per toolkit: a kernel, a cuBLAS call, the runtime. Linking with the default (static) cudart
# also proves libcudart_static.a and libcudadevrt.a are there; -lcublas proves the cuBLAS headers and library are.
CHECK_SOURCE = r"""
#include <cstdio>
#include <cuda_runtime.h>
#include <cublas_v2.h>
__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
int main() {
  cublasHandle_t h;
  cublasStatus_t s = cublasCreate(&h);
  float* x = nullptr;
  cudaError_t e = cudaMalloc(&x, 16);
  axpy<<<1, 1>>>(1.0f, x, x, 0);
  std::printf("%d %d\n", static_cast<int>(s), static_cast<int>(e));
  return 0;
}
"""

STAMP_SCHEMA = 1
# Raised whenever check_build changes what it proves, so remembered verdicts of an older check are not trusted.
CHECK_REVISION = 2


@dataclass(frozen=True)
class Candidate:
    """An nvcc worth probing, and why it was considered."""

    nvcc: Path
    origin: str  # "--root", "CUDA_HOME", "PATH", ...


_RELEASE_RE = re.compile(r"release (\d+)\.(\d+), V([\d.]+)")


def nvcc_release(nvcc: Path) -> tuple[CudaVersion, str]:
    """(13.0, "13.0.88") from `nvcc --version`."""
    out = run_tool([str(nvcc), "--version"], what=f"{nvcc}", timeout=60)
    m = _RELEASE_RE.search(out)
    if not m:
        raise ToolError(f"{nvcc}: cannot read the CUDA release from `nvcc --version`:\n{out.strip()}")
    return CudaVersion(int(m.group(1)), int(m.group(2))), m.group(3)


def nvcc_archs(nvcc: Path, version: CudaVersion) -> tuple[CC, ...]:
    """The compute capabilities nvcc can target (`--list-gpu-arch`), or the release table if nvcc cannot say."""
    try:
        out = run_tool([str(nvcc), "--list-gpu-arch"], what=f"{nvcc}", timeout=60)
    except ToolError as e:
        log.debug("%s; using the table for CUDA %s", e, version)
        return supported_archs(version)
    ccs = {CC.parse(m) for m in re.findall(r"compute_(\d+)\b", out)}
    return tuple(sorted(ccs)) or supported_archs(version)


def _profile_vars(nvcc: Path) -> dict[str, str]:
    """The variables nvcc.profile sets (TOP, INCLUDES, LIBRARIES ...), as `nvcc --dryrun` shows them."""
    with tempfile.TemporaryDirectory(prefix="slimwheel-probe-") as tmp:
        src = Path(tmp) / "probe.cu"
        src.write_text("", encoding="utf-8")
        out = run_tool([str(nvcc), "--dryrun", "-c", str(src), "-o", str(Path(tmp) / "probe.o")], what=f"{nvcc}")
    found: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"#\$ ([A-Za-z_]+)=(.*)$", line)
        if m:
            found[m.group(1)] = m.group(2)  # later lines win, as in nvcc
    return found


def _flag_dirs(value: str, flag: str) -> list[Path]:
    out: list[Path] = []
    for tok in shlex.split(value):
        if tok.startswith(flag) and len(tok) > len(flag):
            p = Path(os.path.normpath(tok[len(flag) :]))
            if p.is_dir() and p not in out:
                out.append(p)
    return out


# file name in a lib folder -> component name in Toolkit.components (static libraries also go to static_libs)
_LIB_COMPONENTS = (
    ("libcudart.so", "cudart"),
    ("libcublas.so", "cublas"),
    ("libcublasLt.so", "cublasLt"),
    ("libcurand.so", "curand"),
    ("libnvJitLink.so", "nvJitLink"),
    ("libnvrtc.so", "nvrtc"),
    ("libcusparse.so", "cusparse"),
    ("libcufft.so", "cufft"),
    ("libcusolver.so", "cusolver"),
)
_STATIC_COMPONENTS = (
    ("libcudart_static.a", "cudart_static"),
    ("libcudadevrt.a", "cudadevrt"),
    ("libculibos.a", "culibos"),
    ("libcublas_static.a", "cublas_static"),
    ("libcublasLt_static.a", "cublasLt_static"),
    ("libcurand_static.a", "curand_static"),
    ("libcusparse_static.a", "cusparse_static"),
    ("libcufft_static.a", "cufft_static"),
)


def _which(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def describe(nvcc: Path, *, source: str) -> Toolkit:
    """A Toolkit for this nvcc, every field filled from what nvcc and its folders say."""
    nvcc = Path(nvcc)
    version, _ = nvcc_release(nvcc)
    pv = _profile_vars(nvcc)
    top = Path(os.path.normpath(pv.get("TOP") or str(nvcc.parent.parent)))
    bindir = Path(os.path.normpath(pv.get("_HERE_") or str(nvcc.parent)))
    include_dirs = _flag_dirs(pv.get("INCLUDES", ""), "-I")
    lib_dirs = [d for d in _flag_dirs(pv.get("LIBRARIES", ""), "-L") if d.name != "stubs"]
    if (top / "include" / "cuda_runtime.h").is_file() and top / "include" not in include_dirs:
        include_dirs.append(top / "include")
    for guess in ("lib64", "lib"):
        d = top / guess
        if d.is_dir() and any(d.glob("libcudart*")) and d.resolve() not in {x.resolve() for x in lib_dirs}:
            lib_dirs.append(d)
    components = ["nvcc"]
    static_libs: dict[str, Path] = {}
    names = {p.name for d in lib_dirs for p in d.iterdir()}
    for fname, comp in _LIB_COMPONENTS:
        if any(n == fname or n.startswith(fname + ".") for n in names):
            components.append(comp)
    for fname, comp in _STATIC_COMPONENTS:
        for d in lib_dirs:
            if (d / fname).is_file():
                components.append(comp)
                static_libs[comp.removesuffix("_static")] = d / fname
                break
    if any((d / "cub").is_dir() or (d / "cccl").is_dir() for d in include_dirs):
        components.append("cccl")
    if any((d / "curand_kernel.h").is_file() for d in include_dirs):
        components.append("curand_headers")
    tool_dirs = [bindir, top / "bin"]
    nvprune = _which("nvprune", tool_dirs)
    cuobjdump = _which("cuobjdump", tool_dirs)
    components += [n for n, p in (("nvprune", nvprune), ("cuobjdump", cuobjdump)) if p is not None]
    env = {"CUDA_HOME": str(top), "CUDA_PATH": str(top), "CUDACXX": str(nvcc)}
    return Toolkit(
        root=top,
        nvcc=nvcc,
        version=version,
        source=source,
        supported=nvcc_archs(nvcc, version),
        include_dirs=tuple(include_dirs),
        lib_dirs=tuple(lib_dirs),
        components=tuple(dict.fromkeys(components)),
        nvprune=nvprune,
        cuobjdump=cuobjdump,
        static_libs=static_libs,
        env=env,
    )


def check_build(tk: Toolkit) -> dict[str, Any]:
    """Compile and link the check program (kernel + cuBLAS + cudart) with this toolkit; raise ToolError if it fails.

    Returns a record for the cache: what was run, how long it took, the release nvcc reported.
    """
    # 7.5 is the one target every release slimwheel supports has (11.8's ptxas lists but rejects sm_35)
    arch = CC(7, 5) if CC(7, 5) in tk.supported or not tk.supported else min(tk.supported)
    with tempfile.TemporaryDirectory(prefix="slimwheel-check-") as tmp:
        src = Path(tmp) / "check.cu"
        src.write_text(CHECK_SOURCE, encoding="utf-8")
        cmd = [str(tk.nvcc), f"-arch=sm_{arch.sm}", str(src), "-o", str(Path(tmp) / "check")]
        cmd += [f"-I{d}" for d in tk.include_dirs] + [f"-L{d}" for d in tk.lib_dirs] + ["-lcublas"]
        if tk.host_compiler is not None:
            cmd += ["-ccbin", str(tk.host_compiler)]
        what = f"checking the CUDA {tk.version} toolkit at {tk.root} (compile and link against cuBLAS)"
        t0 = time.monotonic()
        run_tool(cmd, what=what)
        secs = time.monotonic() - t0
        # The linker also searches the system folders: a CUDA 11 libcublas.so in /usr/lib links just as well, and
        # would make a toolkit of mixed releases. The check binary must need this release's cuBLAS.
        needed = _needed(Path(tmp) / "check")
        want = f"libcublas.so.{tk.version.major}"
        if want not in needed:
            raise ToolError(
                f"{what}: the check program links {', '.join(n for n in needed if 'cublas' in n) or 'no cuBLAS'}, "
                f"not {want}: this toolkit has no cuBLAS {tk.version.major} of its own",
                hint=f"install cuBLAS into the toolkit, or let slimwheel assemble CUDA {tk.version} from PyPI",
            )
    _, full = nvcc_release(tk.nvcc)
    return {"ok": True, "command": shlex.join(cmd), "seconds": round(secs, 2), "nvcc_version": full}


def _needed(path: Path) -> tuple[str, ...]:
    """DT_NEEDED of the check program, read by the one ELF reader (() for a file that is not ELF)."""
    report = read_elf_file(path, path.name, fatbins=False)
    return report.needed if report is not None else ()


def _stamp_path(cache: Path, nvcc: Path) -> Path:
    key = hashlib.sha256(str(nvcc.resolve()).encode()).hexdigest()[:16]
    return cache / "toolkits" / "checked" / f"{key}.json"


def _identity(tk: Toolkit) -> dict[str, Any]:
    """What must stay the same for an old check to count: the real nvcc binary (not a wrapper script) and cuBLAS."""
    real = tk.root / "bin" / "nvcc"
    nvcc = (real if real.is_file() else tk.nvcc).resolve()
    st = nvcc.stat()
    libs = sorted(str(p.resolve()) for d in tk.lib_dirs for p in d.glob("libcublas.so*"))
    return {"nvcc": str(nvcc), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "cublas": libs, "check": CHECK_REVISION}


def checked(tk: Toolkit, cache: Path) -> Toolkit:
    """Run check_build once per toolkit (keyed by its real nvcc and cuBLAS files) and remember the verdict.

    A failure is remembered too, so a broken system toolkit costs one compile, not one per run.
    """
    stamp = _stamp_path(cache, tk.nvcc)
    ident = _identity(tk)
    try:
        old = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    if old.get("schema") == STAMP_SCHEMA and old.get("identity") == ident:
        log.debug("toolkit at %s already checked (%s)", tk.root, stamp)
        if old["check"]["ok"]:
            return tk
        raise ToolError(old["check"]["error"], hint=old["check"].get("hint"))
    try:
        record = check_build(tk)
    except ToolError as e:
        record = {"ok": False, "error": e.message, "hint": e.hint}
        log.info("%s (remembered in %s)", e.message.splitlines()[0], stamp)
        write_text_atomic(stamp, json.dumps({"schema": STAMP_SCHEMA, "identity": ident, "check": record}, indent=2))
        raise
    write_text_atomic(stamp, json.dumps({"schema": STAMP_SCHEMA, "identity": ident, "check": record}, indent=2) + "\n")
    return tk


def check_record(tk: Toolkit, cache: Path) -> dict[str, Any] | None:
    """The remembered check of a system toolkit, if any."""
    try:
        data = json.loads(_stamp_path(cache, tk.nvcc).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("check") if data.get("identity") == _identity(tk) else None


def candidates(root: Path | None, env: Mapping[str, str]) -> list[Candidate]:
    """Where to look, in order: the given prefix, CUDA_HOME / CUDA_PATH, nvcc on PATH, /usr/local/cuda."""
    out: list[Candidate] = []
    if root is not None:
        out.append(Candidate(Path(root) / "bin" / "nvcc", "--root"))
        return out
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            out.append(Candidate(Path(env[var]) / "bin" / "nvcc", var))
    on_path = shutil.which("nvcc", path=env.get("PATH", ""))
    if on_path:
        out.append(Candidate(Path(on_path), "PATH"))
    seen: set[Path] = set()
    unique = []
    for c in out:
        key = c.nvcc.resolve() if c.nvcc.exists() else c.nvcc
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def version_matches(found: CudaVersion, wanted: CudaVersion | None) -> bool:
    """None wants any release; otherwise major and minor must agree (13.0 asks for 13.0.x)."""
    return wanted is None or (found.major, found.minor) == (wanted.major, wanted.minor)


def with_source(tk: Toolkit, source: str) -> Toolkit:
    return replace(tk, source=source)


def cuobjdump_for(toolkit: Toolkit | None = None) -> Path:
    """A cuobjdump: the toolkit's, else CUDA 13's from PyPI's nvidia-cuda-cuobjdump wheel, installed once into the
    cache (the PyPI-assembled CUDA 13.0 toolkit has none: the wheel's first release is 13.2, and cuobjdump of any 13.x
    reads 13.0 binaries)."""
    if toolkit is not None and toolkit.cuobjdump is not None and toolkit.cuobjdump.is_file():
        return toolkit.cuobjdump
    target = cache_dir() / "tools" / "cuobjdump-13"
    exe = target / "nvidia" / "cu13" / "bin" / "cuobjdump"
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / "cuobjdump-13.lock"):
        if not exe.is_file():
            tmp = target.with_name(target.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            run_tool(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--target",
                    str(tmp),
                    "nvidia-cuda-cuobjdump==13.*",
                ],
                what="installing cuobjdump from PyPI",
            )
            shutil.rmtree(target, ignore_errors=True)
            tmp.rename(target)  # whole or not at all
    return exe
