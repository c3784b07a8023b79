"""Real CUDA binaries for the inspect tests, compiled from tests/packages/fatbin-fixtures/*.cu with a real nvcc.

Outputs are cached under slimwheel's cache (test-fixtures/<hash of sources, flags and nvcc>), so only the first run
compiles. Also: the cuobjdump to cross-check against, and the real wheels from PyPI the tests read.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from slimwheel.fsutil import cache_dir
from slimwheel.toolkit.find import cuobjdump_for
from slimwheel.toolkit.model import Toolkit

FIXTURES = Path(__file__).resolve().parent.parent / "packages" / "fatbin-fixtures"
SOURCES = ("saxpy.cu", "reduce.cu")
# SASS for Turing, arch-specific Hopper SASS, and PTX for Blackwell: plain, `a` and PTX entries in one binary.
GENCODE = (
    "-gencode=arch=compute_75,code=sm_75",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_120,code=compute_120",
)


CUBIN_ARCHS = ("90", "90a", "100", "100a", "100f", "120a")


@dataclass(frozen=True)
class Build:
    name: str  # output file name
    args: tuple[str, ...]  # nvcc arguments besides sources and -o
    sources: tuple[str, ...] = SOURCES


BUILDS = (
    # A shared library (like an extension module) per compression mode.
    Build("none.so", ("-shared", "-Xcompiler=-fPIC", "-cudart=shared", *GENCODE, "--compress-mode=none")),
    Build("size.so", ("-shared", "-Xcompiler=-fPIC", "-cudart=shared", *GENCODE, "--compress-mode=size")),
    Build("default.so", ("-shared", "-Xcompiler=-fPIC", "-cudart=shared", *GENCODE, "-Xfatbin=-compress-all")),
    # A relocatable (-rdc) object: __nv_relfatbin; LZ4 (speed mode); family SASS and arch-specific PTX.
    Build(
        "rdc.o",
        (
            "-c",
            "-rdc=true",
            "--compress-mode=speed",
            "-gencode=arch=compute_100f,code=sm_100f",
            "-gencode=arch=compute_80,code=sm_80",
            "-gencode=arch=compute_120a,code=compute_120a",
        ),
        ("saxpy.cu",),
    ),
    # A host object: .nv_fatbin + .nvFatBinSegment with a relocation.
    Build("host.o", ("-c", "-Xcompiler=-fPIC", *GENCODE), ("saxpy.cu",)),
    # A bare fatbin file.
    Build("kernels.fatbin", ("-fatbin", *GENCODE), ("saxpy.cu",)),
    # Standalone cubins (as flashinfer-cubin ships them), plain, arch-specific and family-specific: CUDA 13.0 marks
    # `a` in their .nv.compat section only (see slimwheel.inspect.fatbin.cubin_entry).
    *(Build(f"sm_{a}.cubin", ("-cubin", f"-arch=sm_{a}"), ("saxpy.cu",)) for a in CUBIN_ARCHS),
)


def _key(toolkit: Toolkit, build: Build) -> str:
    h = hashlib.sha256()
    h.update(str(toolkit.nvcc).encode())
    h.update(str(toolkit.version).encode())
    h.update("\0".join(build.args).encode())
    for s in build.sources:
        h.update(s.encode() + b"\0" + (FIXTURES / s).read_bytes())
    return h.hexdigest()[:20]


def compile_fixtures(toolkit: Toolkit, *, root: Path | None = None) -> dict[str, Path]:
    """Compile every Build (cached by content), two at a time, niced. Returns {name: path}."""
    root = root or cache_dir() / "test-fixtures"
    env = {**os.environ, **toolkit.env}
    include = [f"-I{d}" for d in toolkit.include_dirs]
    libdirs = [f"-L{d}" for d in toolkit.lib_dirs]

    def one(b: Build) -> tuple[str, Path]:
        out = root / _key(toolkit, b) / b.name
        if out.is_file():
            return b.name, out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{b.name}.{os.getpid()}.tmp{Path(b.name).suffix}")
        cmd = [
            "nice",
            "-n",
            "10",
            str(toolkit.nvcc),
            *b.args,
            *include,
            *(libdirs if "-shared" in b.args else []),
            "-o",
            str(tmp),
            *(str(FIXTURES / s) for s in b.sources),
        ]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed for {b.name}:\n{' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
        os.replace(tmp, out)
        return b.name, out

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, BUILDS))


def find_cuobjdump(toolkit: object) -> Path:
    """The toolkit's cuobjdump, else the one of PyPI's nvidia-cuda-cuobjdump wheel (slimwheel's own helper)."""
    return cuobjdump_for(toolkit if isinstance(toolkit, Toolkit) else None)


_LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+?)\.(cubin|ptx)$")


def cuobjdump_list(cuobjdump: Path, binary: Path) -> list[tuple[str, str]]:
    """[(kind, arch)] in file order from `cuobjdump --list-elf` and `--list-ptx`: ("sass", "90a"), ("ptx", "120")."""
    out: list[tuple[str, str]] = []
    for flag, kind in (("--list-elf", "sass"), ("--list-ptx", "ptx")):
        r = subprocess.run([str(cuobjdump), flag, str(binary)], capture_output=True, text=True, check=False)
        if r.returncode != 0 and "No " not in r.stderr:
            raise RuntimeError(f"cuobjdump {flag} {binary} failed: {r.stderr}")
        for line in r.stdout.splitlines():
            m = _LINE.match(line.strip())
            if m:
                out.append((kind, m.group(2).removeprefix("sm_")))
    return out


PYPI_WHEELS = {
    "faiss-gpu": ("faiss-gpu==1.15.1", "3.12"),
    "faiss-gpu-cu12": ("faiss-gpu-cu12==1.14.1.post1", "3.11"),
}


def pypi_wheel(key: str) -> Path:
    """A real wheel from PyPI, downloaded once into the cache (test-wheels/)."""
    spec, py = PYPI_WHEELS[key]
    dest = cache_dir() / "test-wheels"
    stem = spec.split("==")[0].replace("-", "_") + "-" + spec.split("==")[1] + "-"
    found = sorted(dest.glob(f"{stem}*.whl")) if dest.is_dir() else []
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            py,
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux2014_x86_64",
            "-d",
            str(dest),
            spec,
        ],
        check=True,
    )
    return sorted(dest.glob(f"{stem}*.whl"))[0]
