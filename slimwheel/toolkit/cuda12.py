"""A CUDA 12 toolkit assembled from Debian's archive and PyPI wheels (shared/cuda-facts.md, section 1).

PyPI has no CUDA 12 nvcc: `nvidia-cuda-nvcc-cu12` ships only ptxas, libnvvm and headers. Debian 13 (trixie)'s
non-free `nvidia-cuda-toolkit` carries NVIDIA's own compiler binaries (nvcc, cicc, ptxas, fatbinary, nvlink,
cudafe++, nvprune, cuobjdump) and nothing else of use, and they run on Debian 12. So the toolkit is:

- compiler binaries: that one .deb, fetched with `apt-get download` under a private apt configuration (its own
  sources list, lists and cache folders; the system's apt state is neither read nor written) and unpacked with
  `dpkg-deb -x`, never installed: trixie's libc must not reach the system;
- headers and libraries: the PyPI wheels of the same release (runtime, nvcc's crt headers and libdevice, CCCL,
  cuBLAS), unzipped;
- `libcudart_static.a`, `libcudadevrt.a`, `libculibos.a` and the driver stub `libcuda.so`: no 12.4 wheel has them,
  and nvcc's default link (so CMake's compiler check) wants the first two. The later cu12 runtime wheel that has
  them (12.9.79) does not do: nvlink 12.4 rejects its libcudadevrt.a ("newer than toolkit (129 vs 124)"). They come
  from trixie's `nvidia-cuda-dev` of the same release (a 0.9 GB .deb: only these four files are unpacked, and the
  .deb is deleted afterwards). Extensions slimwheel builds link the shared libcudart.so.12 of the 12.4 wheel.

Laid out like an NVIDIA toolkit (bin/, nvvm/bin, nvvm/libdevice, include/, lib64/) with an nvcc.profile relative
to nvcc itself, so CMake's FindCUDAToolkit and `enable_language(CUDA)` accept it and the folder can move.
Built in a temporary folder under a lock and renamed into place; verified by compiling a cuBLAS-calling kernel
into a shared library and an executable.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ToolError
from slimwheel.fsutil import file_lock, remove_stale_temps, sha256_file, temp_sibling, write_text_atomic
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool, run_tool_status

log = logging.getLogger("slimwheel.toolkit.cuda12")
T = TypeVar("T")

MANIFEST = "slimwheel-toolkit.json"
SOURCE = "debian+pypi"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@dataclass(frozen=True, kw_only=True)
class Cuda12Release:
    """Where the pieces of one CUDA 12 release come from. Versions are pinned: the toolkit is reproducible."""

    version: CudaVersion
    debian_suite: str
    debian_package: str
    debian_version: str
    debian_dev_package: str  # static runtime archives and stubs
    debian_dev_version: str
    nvcc_wheel: str  # crt headers, libdevice, libnvvm
    runtime_wheel: str  # headers, libcudart.so.12
    cccl_wheel: str  # thrust, cub, libcu++
    cublas_wheel: str  # headers, libcublas.so.12, libcublasLt.so.12

    @property
    def wheels(self) -> tuple[str, ...]:
        return (self.nvcc_wheel, self.runtime_wheel, self.cccl_wheel, self.cublas_wheel)


RELEASES: dict[CudaVersion, Cuda12Release] = {
    CudaVersion(12, 4): Cuda12Release(
        version=CudaVersion(12, 4),
        debian_suite="trixie",
        debian_package="nvidia-cuda-toolkit",
        debian_version="12.4.131~12.4.1-2",
        debian_dev_package="nvidia-cuda-dev",
        debian_dev_version="12.4.127~12.4.1-2",
        nvcc_wheel="nvidia-cuda-nvcc-cu12==12.4.131",
        runtime_wheel="nvidia-cuda-runtime-cu12==12.4.127",
        cccl_wheel="nvidia-cuda-cccl-cu12==12.4.127.post1",
        cublas_wheel="nvidia-cublas-cu12==12.4.5.8",
    ),
}

# deb member -> place in the toolkit. Debian's g++/gcc wrappers beside nvcc are left out on purpose: they pick a
# compiler by Debian's names (g++-13, g++-12 ...) and fail elsewhere; nvcc takes g++ from PATH or -ccbin.
DEB_FILES: dict[str, str] = {
    "usr/lib/nvidia-cuda-toolkit/bin/nvcc": "bin/nvcc",
    "usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub": "bin/crt/link.stub",
    "usr/lib/nvidia-cuda-toolkit/bin/crt/prelink.stub": "bin/crt/prelink.stub",
    "usr/lib/nvidia-cuda-toolkit/bin/cicc": "nvvm/bin/cicc",
    "usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc": "nvvm/libdevice/libdevice.10.bc",
    "usr/bin/ptxas": "bin/ptxas",
    "usr/bin/fatbinary": "bin/fatbinary",
    "usr/bin/nvlink": "bin/nvlink",
    "usr/bin/cudafe++": "bin/cudafe++",
    "usr/bin/nvprune": "bin/nvprune",
    "usr/bin/cuobjdump": "bin/cuobjdump",
    "usr/bin/bin2c": "bin/bin2c",
    "usr/bin/cu++filt": "bin/cu++filt",
    "usr/bin/nvdisasm": "bin/nvdisasm",
}

# nvidia-cuda-dev member -> place. Only what nvcc's own link steps need.
DEV_FILES: dict[str, str] = {
    "usr/lib/x86_64-linux-gnu/libcudart_static.a": "lib64/libcudart_static.a",
    "usr/lib/x86_64-linux-gnu/libcudadevrt.a": "lib64/libcudadevrt.a",
    "usr/lib/x86_64-linux-gnu/libculibos.a": "lib64/libculibos.a",
    "usr/lib/x86_64-linux-gnu/stubs/libcuda.so": "lib64/stubs/libcuda.so",
}

# The standard nvcc.profile of an NVIDIA toolkit, flattened (no targets/x86_64-linux level). _HERE_ is nvcc's
# own folder, so the toolkit stays usable wherever the cache is.
NVCC_PROFILE = """\
# Written by slimwheel: a CUDA {version} toolkit assembled from Debian's {package} {deb_version} and PyPI wheels.
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""

# The last GCC major each CUDA 12 release accepts as host compiler (CUDA installation guide, host compiler table).
MAX_GCC: dict[CudaVersion, int] = {CudaVersion(12, 4): 13}

PROBE_SOURCE = r"""
// slimwheel's toolkit check: a kernel, the runtime API and a cuBLAS call, as an extension would have them.
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ void slimwheel_scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int slimwheel_probe(int n, float* result) {
  float* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 1;
  cudaMemset(d, 0, n * sizeof(float));
  slimwheel_scale<<<(n + 255) / 256, 256>>>(d, 2.0f, n);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 2;
  cublasStatus_t s = cublasSasum(h, n, d, 1, result);
  cublasDestroy(h);
  cudaFree(d);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 3;
}
"""
PROBE_MAIN = r"""
#include <cstdio>
extern "C" int slimwheel_probe(int n, float* result);
int main() { float r = -1; int rc = slimwheel_probe(1024, &r); std::printf("probe rc=%d sum=%f\n", rc, r); return rc; }
"""


def release_for(version: CudaVersion) -> Cuda12Release:
    try:
        return RELEASES[version]
    except KeyError:
        known = ", ".join(str(v) for v in RELEASES)
        raise BadInputError(
            f"slimwheel cannot assemble CUDA {version}: it knows how to assemble CUDA {known}",
            hint="use --cuda 12.4, or point --toolkit / CUDA_HOME at an installed CUDA 12 toolkit",
        ) from None


def toolkit_dir(version: CudaVersion, cache: Path) -> Path:
    return cache / "toolkits" / f"cuda-{version}"


def assemble_cuda12(version: CudaVersion, cache: Path) -> Toolkit:
    """The CUDA 12 toolkit of this release under cache/toolkits/cuda-<ver>, assembled and verified if not there yet.

    Safe to call from several processes at once: one assembles under a lock, the others wait and reuse it.
    """
    release = release_for(version)
    dest = toolkit_dir(version, cache)
    cached = _load_cached(dest, release)
    if cached is not None:
        return cached
    dest.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(dest.parent / f".cuda-{version}.lock"):
        cached = _load_cached(dest, release)
        if cached is not None:
            return cached
        t0 = time.monotonic()
        log.info(
            "assembling CUDA %s into %s (Debian %s %s + PyPI wheels)",
            version,
            dest,
            release.debian_suite,
            release.debian_package,
        )
        # Under the lock no other run is assembling this release: its temp folders here are orphans of killed runs.
        remove_stale_temps(dest, min_age_s=0, legacy=(rf"\.{re.escape(dest.name)}\.[a-z0-9_]{{8}}",))
        with temp_sibling(dest, directory=True) as work:
            _assemble_in(work, dest, release, version, cache, t0)
        log.info("CUDA %s ready in %.1f s: %s", version, time.monotonic() - t0, dest)
        result = _load_cached(dest, release)
        assert result is not None, "manifest just written"
        return result


def _assemble_in(work: Path, dest: Path, release: Cuda12Release, version: CudaVersion, cache: Path, t0: float) -> None:
    """Download, unpack and verify the toolkit in `work`, then rename it to `dest`."""
    dev_unpack: _Extraction | None = None
    try:
        downloads = cache / "downloads"
        debs = _phase("download the Debian packages", lambda: _download_debs(release, downloads / "deb"))
        tool_deb, dev_deb = debs[release.debian_package], debs[release.debian_dev_package]
        # xz-decompressing the 0.9 GB dev package takes most of a minute on one core: let it run on the other
        # core while the wheels download and unpack.
        dev_unpack = _start_deb_extract(dev_deb, DEV_FILES, work / ".dev")
        wheels = _phase("download the PyPI wheels", lambda: _download_wheels(release, downloads / "wheels"))
        _phase("unpack", lambda: _unpack(release, tool_deb, wheels, work))
        _phase(f"unpack {dev_deb.name} (static runtime, stubs)", lambda: _finish_deb_extract(dev_unpack, work))
        toolkit = _toolkit_at(work, release)
        _phase("verify (compile and link a cuBLAS kernel)", lambda: verify(toolkit, work / ".verify"))
        shutil.rmtree(work / ".verify", ignore_errors=True)
        manifest = {
            "schema": 1,
            "cuda": str(version),
            "source": SOURCE,
            "debian": {
                "suite": release.debian_suite,
                "packages": {d.name: sha256_file(d) for d in (tool_deb, dev_deb)},
                "version": release.debian_version,
            },
            "wheels": {w.name: sha256_file(w) for w in wheels},
            "supported": [str(cc) for cc in toolkit.supported],
            "assembled_seconds": round(time.monotonic() - t0, 1),
        }
        write_text_atomic(work / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if dest.exists():  # a broken earlier attempt (no valid manifest): replace it
            shutil.rmtree(dest)
        os.replace(work, dest)
        dev_deb.unlink()  # 0.9 GB of which four small files were used; the manifest keeps its hash
    finally:
        if dev_unpack is not None:
            dev_unpack.stop()  # after a failure elsewhere: no unpacker may outlive the folder it writes to


def _phase(name: str, fn: Callable[[], T]) -> T:
    t = time.monotonic()
    log.info("  %s ...", name)
    out = fn()
    log.info("  %s: %.1f s", name, time.monotonic() - t)
    return out


def _load_cached(dest: Path, release: Cuda12Release) -> Toolkit | None:
    path = dest / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if manifest.get("schema") != 1 or manifest.get("cuda") != str(release.version):
        return None
    if manifest.get("debian", {}).get("version") != release.debian_version:
        return None  # assembled from other pins: rebuild
    if not (dest / "bin" / "nvcc").is_file():
        return None
    supported = tuple(CC.parse(s) for s in manifest.get("supported", ()))
    return _toolkit_at(dest, release, supported=supported)


def _toolkit_at(root: Path, release: Cuda12Release, *, supported: tuple[CC, ...] | None = None) -> Toolkit:
    nvcc = root / "bin" / "nvcc"
    if supported is None:
        supported = list_gpu_archs(nvcc)
    host = host_compiler_for(release.version, os.environ)
    env = {"CUDA_HOME": str(root), "CUDA_PATH": str(root), "CUDACXX": str(nvcc)}
    if host is not None:
        env["CUDAHOSTCXX"] = str(host)
    return Toolkit(
        root=root,
        nvcc=nvcc,
        version=release.version,
        source=SOURCE,
        supported=supported,
        include_dirs=(root / "include",),
        lib_dirs=(root / "lib64",),
        components=("nvcc", "cudart", "cublas", "cublasLt", "cudart_static", "cudadevrt", "nvprune", "cuobjdump"),
        nvprune=root / "bin" / "nvprune",
        cuobjdump=root / "bin" / "cuobjdump",
        host_compiler=host,
        static_libs={"cudart": root / "lib64" / "libcudart_static.a"},
        env=env,
    )


def host_compiler_for(version: CudaVersion, env: Mapping[str, str]) -> Path | None:
    """None when the default g++ suits this release; else the newest acceptable g++-N on PATH.

    CUDA 12.4's nvcc refuses GCC > 13 ("unsupported GNU version"); manylinux_2_28 and new distributions ship 14.
    """
    limit = MAX_GCC.get(version, 13)
    path = env.get("PATH", os.defpath)
    gxx = shutil.which("g++", path=path)
    if gxx is not None and _gcc_major(gxx) is not None and _gcc_major(gxx) <= limit:  # type: ignore[operator]
        return None
    for major in range(limit, 8, -1):
        cand = shutil.which(f"g++-{major}", path=path)
        if cand is not None:
            return Path(cand)
    if gxx is None:
        raise ToolError(
            f"no C++ compiler (g++) on PATH for CUDA {version}", hint="install g++ (Debian: apt-get install g++)"
        )
    raise ToolError(
        f"{gxx} is GCC {_gcc_major(gxx)}, newer than CUDA {version} accepts (GCC <= {limit}), and no g++-{limit} or "
        "older is on PATH",
        hint=f"install g++-{limit} (or gcc-toolset-{limit} in manylinux containers)",
    )


def _gcc_major(gxx: str) -> int | None:
    try:
        run = run_tool_status([gxx, "-dumpversion"], what=f"{gxx} -dumpversion", timeout=30, separate_stderr=True)
        return int(run.output.strip().split(".")[0]) if run.returncode == 0 else None
    except (ToolError, ValueError):  # not there, not runnable, or not a version: not a usable g++
        return None


def list_gpu_archs(nvcc: Path) -> tuple[CC, ...]:
    out = run_tool([str(nvcc), "--list-gpu-arch"], what="nvcc --list-gpu-arch")
    ccs = sorted({CC.parse(m) for m in re.findall(r"compute_(\d+)\b", out)})
    if not ccs:
        raise ToolError(f"{nvcc} --list-gpu-arch listed no architectures:\n{out}")
    return tuple(ccs)


# --- downloads -------------------------------------------------------------------------------------------------


def apt_options(
    state: Path, release: Cuda12Release, *, mirror: str = DEBIAN_MIRROR, keyring: Path = DEBIAN_KEYRING
) -> tuple[list[str], str]:
    """apt-get options for a private apt world under `state` (sources list text returned beside them).

    The host's sources, lists, cache, status and locks are never touched: this downloads one .deb of another
    Debian release and installs nothing.
    """
    return private_apt(state, release.debian_suite, "non-free", mirror=mirror, keyring=keyring)


def private_apt(
    state: Path, suite: str, component: str, *, mirror: str = DEBIAN_MIRROR, keyring: Path = DEBIAN_KEYRING
) -> tuple[list[str], str]:
    """apt-get options for a private apt world under `state` that reads `suite`'s `component` of Debian's archive,
    and the sources list text to write to `state/sources.list` (also used by slimwheel.toolkit.sysroot)."""
    sources = f"deb [signed-by={keyring}] {mirror} {suite} {component}\n"
    opts = [
        f"-oDir::Etc::SourceList={state / 'sources.list'}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::Cache={state / 'cache'}",
        f"-oDir::State::Status={state / 'status'}",  # empty: nothing is installed in this apt world
        "-oDebug::NoLocking=true",
        "-oAcquire::Languages=none",
        "-oAPT::Architecture=amd64",
    ]
    if os.geteuid() == 0:
        # apt drops to its _apt user to download, which cannot write into a root-owned private cache folder
        opts.append("-oAPT::Sandbox::User=root")
    return opts, sources


def _download_debs(release: Cuda12Release, folder: Path) -> dict[str, Path]:
    """The two pinned .debs (compiler binaries, dev files), downloaded once into `folder` with a private apt state."""
    if os.uname().machine != "x86_64":
        raise ToolError(f"assembling CUDA {release.version} needs an x86_64 host, this is {os.uname().machine}")
    wanted = {release.debian_package: release.debian_version, release.debian_dev_package: release.debian_dev_version}
    targets = {pkg: folder / f"{pkg}_{ver.replace(':', '%3a')}_amd64.deb" for pkg, ver in wanted.items()}
    missing = [pkg for pkg, t in targets.items() if not t.is_file()]
    if not missing:
        return targets
    for tool in ("apt-get", "dpkg-deb", "tar"):
        if shutil.which(tool) is None:
            raise ToolError(
                f"assembling CUDA {release.version} needs {tool} (a Debian or Ubuntu host)",
                hint="in manylinux containers use `slimwheel container` (its cuda12.sh installs from NVIDIA's rpm "
                "repository)",
            )
    if not DEBIAN_KEYRING.is_file():
        raise ToolError(
            f"{DEBIAN_KEYRING} is missing: it verifies Debian's archive", hint="apt-get install debian-archive-keyring"
        )
    state = folder / ".apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    opts, sources = apt_options(state, release)
    write_text_atomic(state / "sources.list", sources)
    (state / "status").touch()
    run_tool(
        ["apt-get", *opts, "update"],
        what=f"apt-get update ({release.debian_suite} non-free, private lists)",
        timeout=1800,
    )
    # a sibling temp folder (not tempfile's tmpXXXXXXXX): a killed download (up to 1 GB) is removed by the next one
    with temp_sibling(folder / "apt-download", directory=True) as tmp:
        specs = [f"{pkg}={wanted[pkg]}" for pkg in missing]
        run_tool(
            ["apt-get", *opts, "download", *specs],
            what=f"apt-get download {' '.join(specs)}",
            cwd=Path(tmp),
            timeout=1800,
        )
        for pkg in missing:
            got = list(Path(tmp).glob(f"{pkg}_*.deb"))
            if len(got) != 1:
                raise ToolError(f"apt-get download {pkg} left {len(got)} matching .deb files, expected 1")
            os.replace(got[0], targets[pkg])
    return targets


@dataclass(frozen=True, kw_only=True)
class _Extraction:
    feed: subprocess.Popen[bytes]
    untar: subprocess.Popen[bytes]
    deb: Path
    files: Mapping[str, str]
    into: Path

    def stop(self) -> None:
        for proc in (self.untar, self.feed):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _start_deb_extract(deb: Path, files: Mapping[str, str], into: Path) -> _Extraction:
    """dpkg-deb --fsys-tarfile | tar -x of just `files`, started in the background."""
    into.mkdir(parents=True, exist_ok=True)
    log.debug("$ dpkg-deb --fsys-tarfile %s | tar -x -C %s ...", deb, into)
    feed = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    untar = subprocess.Popen(
        ["tar", "-x", "-C", str(into), "-f", "-", *(f"./{m}" for m in files)], stdin=feed.stdout, stderr=subprocess.PIPE
    )
    assert feed.stdout is not None
    feed.stdout.close()  # tar owns the pipe now: dpkg-deb gets SIGPIPE if tar dies
    return _Extraction(feed=feed, untar=untar, deb=deb, files=files, into=into)


def _finish_deb_extract(job: _Extraction, root: Path) -> None:
    untar_err = job.untar.communicate()[1]
    feed_err = job.feed.communicate()[1]
    if job.untar.returncode != 0 or job.feed.returncode != 0:
        msg = (feed_err + untar_err).decode(errors="replace").strip()[-2000:]
        raise ToolError(
            f"unpacking {job.deb.name} failed (dpkg-deb exit {job.feed.returncode}, tar exit "
            f"{job.untar.returncode}):\n{msg}"
        )
    for member, place in job.files.items():
        src = job.into / member
        if not src.is_file():
            raise ToolError(f"{job.deb.name} has no {member}: the package layout changed")
        dst = root / place
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    shutil.rmtree(job.into)


def _download_wheels(release: Cuda12Release, folder: Path) -> list[Path]:
    """pip download --no-deps of each pinned wheel into the download cache (pip skips what is already there)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for req in release.wheels:
        name, ver = req.split("==")
        pattern = f"{name.replace('-', '_')}-{ver}-*.whl"
        have = sorted(folder.glob(pattern))
        if not have:
            run_tool(
                [
                    _python(),
                    "-m",
                    "pip",
                    "download",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    "manylinux2014_x86_64",
                    "--python-version",
                    "3",
                    "-d",
                    str(folder),
                    req,
                ],
                what=f"pip download {req}",
                timeout=1800,
            )
            have = sorted(folder.glob(pattern))
        if not have:
            raise ToolError(f"pip download {req} did not leave a wheel matching {pattern} in {folder}")
        out.append(have[-1])
    return out


def _python() -> str:
    return sys.executable


# --- unpacking -------------------------------------------------------------------------------------------------


def _unpack(release: Cuda12Release, deb: Path, wheels: list[Path], root: Path) -> None:
    # inside the toolkit's own temp folder, so that an orphan of a killed run goes with it
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        run_tool(["dpkg-deb", "-x", str(deb), tmp], what=f"dpkg-deb -x {deb.name}")
        for member, place in DEB_FILES.items():
            src = Path(tmp) / member
            if not src.is_file():
                raise ToolError(f"{deb.name} has no {member}: the package layout changed")
            dst = root / place
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    write_text_atomic(
        root / "bin" / "nvcc.profile",
        NVCC_PROFILE.format(
            version=release.version, package=release.debian_package, deb_version=release.debian_version
        ),
    )
    by_req = dict(zip(release.wheels, wheels, strict=True))
    _unzip(by_req[release.nvcc_wheel], "nvidia/cuda_nvcc/include/", root / "include")
    _unzip(by_req[release.nvcc_wheel], "nvidia/cuda_nvcc/nvvm/lib64/", root / "nvvm" / "lib64")
    _unzip(by_req[release.nvcc_wheel], "nvidia/cuda_nvcc/nvvm/include/", root / "nvvm" / "include")
    _unzip(by_req[release.runtime_wheel], "nvidia/cuda_runtime/include/", root / "include")
    _unzip(by_req[release.runtime_wheel], "nvidia/cuda_runtime/lib/", root / "lib64")
    _unzip(by_req[release.cccl_wheel], "nvidia/cuda_cccl/include/", root / "include")
    _unzip(by_req[release.cublas_wheel], "nvidia/cublas/include/", root / "include")
    _unzip(by_req[release.cublas_wheel], "nvidia/cublas/lib/", root / "lib64")
    lib64 = root / "lib64"
    for so in sorted(lib64.glob("lib*.so.*")):
        link = lib64 / (so.name.split(".so")[0] + ".so")
        if not link.exists():
            link.symlink_to(so.name)  # the -lcublas name the linker looks for; the SONAME stays libcublas.so.12
    for required in (
        "include/cuda_runtime.h",
        "include/crt/host_config.h",
        "include/cublas_v2.h",
        "include/thrust/version.h",
        "lib64/libcudart.so",
        "lib64/libcublas.so",
    ):
        if not (root / required).exists():
            raise ToolError(f"assembled CUDA {release.version} lacks {required}: a wheel's layout changed")


def _unzip(wheel: Path, prefix: str, dest: Path) -> None:
    """Extract the members of `wheel` under `prefix` into `dest`, skipping the namespace packages' __init__.py."""
    n = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(prefix) or info.filename.endswith("__init__.py"):
                continue
            rel = info.filename[len(prefix) :]
            if rel.startswith("/") or ".." in Path(rel).parts:
                raise BadInputError(f"{wheel}: unsafe member name {info.filename!r}")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode | 0o200)
            n += 1
    if n == 0:
        raise ToolError(f"{wheel.name} has no files under {prefix}: its layout changed")


# --- verification ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    shared_object: Path
    executable: Path
    needed: tuple[str, ...]
    fatbin_bytes: int


def verify(toolkit: Toolkit, work: Path) -> ProbeResult:
    """Compile a kernel that calls cuBLAS for sm_80 + sm_90 + PTX 90; link it as a shared library against the
    dynamic libcudart.so.12 (as extensions are) and as an executable with nvcc's default static cudart (as CMake's
    compiler check does). Raises ToolError with nvcc's output when anything fails."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "probe.cu").write_text(PROBE_SOURCE, encoding="utf-8")
    (work / "main.cpp").write_text(PROBE_MAIN, encoding="utf-8")
    env = dict(os.environ)
    env.update(toolkit.env)
    ccbin = ["-ccbin", str(toolkit.host_compiler)] if toolkit.host_compiler else []
    nvcc = [str(toolkit.nvcc), *ccbin]
    gencode = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    run_tool(
        [*nvcc, "-c", "-Xcompiler", "-fPIC", *gencode, "probe.cu", "-o", "probe.o"],
        what="nvcc (compile)",
        env=env,
        cwd=work,
    )
    run_tool(
        [*nvcc, "-shared", "-cudart", "shared", "probe.o", "-lcublas", "-o", "libprobe.so"],
        what="nvcc (link a shared library, dynamic cudart)",
        env=env,
        cwd=work,
    )
    run_tool(
        [*nvcc, "probe.o", "main.cpp", "-lcublas", "-o", "probe"],
        what="nvcc (link an executable, static cudart)",
        env=env,
        cwd=work,
    )
    so = work / "libprobe.so"
    needed, fatbin = _needed_and_fatbin(so)
    for want in ("libcudart.so.12", "libcublas.so.12"):
        if want not in needed:
            raise ToolError(f"{so}: DT_NEEDED {list(needed)} lacks {want}: the toolkit linked the wrong libraries")
    if fatbin == 0:
        raise ToolError(f"{so}: no .nv_fatbin section: nvcc produced no device code")
    return ProbeResult(shared_object=so, executable=work / "probe", needed=needed, fatbin_bytes=fatbin)


def _needed_and_fatbin(path: Path) -> tuple[tuple[str, ...], int]:
    """DT_NEEDED and fatbin bytes of the probe nvcc built, read by slimwheel's one ELF reader."""
    from slimwheel.inspect.scan import inspect_binary

    try:
        elf = inspect_binary(path)
    except BadInputError as e:  # nvcc's own output: unreadable means the toolkit is broken, not the user's input
        raise ToolError(f"{path}: {e.message}") from None
    return elf.needed, elf.fatbin_bytes
