"""The one table of CUDA runtime libraries that PyPI's nvidia-* wheels provide, per CUDA major.

Everything that excludes, requires, or loads a CUDA library reads this table (shared/cuda-facts.md, sections 1-2).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.resources
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RuntimeLib:
    """One shared library of one component, for one CUDA major."""

    component: str  # cudart, cublas, cublasLt, ...
    cuda_major: int
    soname: str  # libcublas.so.13
    package: str  # nvidia-cublas / nvidia-cublas-cu12
    folder: str  # path of the lib folder inside site-packages: nvidia/cu13/lib, nvidia/cublas/lib, cutensor/lib
    module: str  # the import name whose __path__ holds it: nvidia.cu13, nvidia.cublas, cutensor
    load_after: tuple[str, ...] = ()  # components that must be loaded first
    package_major: int | None = None  # the package's version major where it is not the SONAME's (nvidia-cufile 1.x
    # ships libcufile.so.0; nvidia-nvtx 13.x ships libnvtx3interop.so.1): the requirement's bound and pin
    since: str | None = None  # the first release that installs it in `folder`, where older ones used another
    # the first release that no longer installs it (nvidia-nvtx-cu12 12.9 ships libnvtx3interop.so.1 and no
    # libnvToolsExt.so.1): the requirement's upper bound, and a requirement admitting it does not provide it
    until: str | None = None

    @property
    def link_name(self) -> str:
        """The name for -l: libcublasLt.so.13 -> cublasLt."""
        return self.soname.split(".so")[0].removeprefix("lib")

    @property
    def version_major(self) -> int:
        """The major of the package versions that ship this SONAME: the requirement pins it (`<major + 1`)."""
        if self.package_major is not None:
            return self.package_major
        return int(self.soname.rsplit(".so.", 1)[1].split(".")[0])


def _row(
    component: str,
    major: int,
    soname: str,
    package: str,
    folder: str,
    after: tuple[str, ...] = (),
    package_major: int | None = None,
    since: str | None = None,
    until: str | None = None,
) -> RuntimeLib:
    module = folder.removesuffix("/lib").replace("/", ".")
    return RuntimeLib(component, major, soname, package, folder, module, after, package_major, since, until)


def _cu12(
    component: str,
    soname: str,
    package: str,
    pkgdir: str,
    after: tuple[str, ...] = (),
    package_major: int | None = None,
) -> RuntimeLib:
    return _row(component, 12, soname, package, f"nvidia/{pkgdir}/lib", after, package_major)


def _cu13(
    component: str,
    soname: str,
    package: str,
    after: tuple[str, ...] = (),
    folder: str = "nvidia/cu13/lib",
    package_major: int | None = None,
) -> RuntimeLib:
    return _row(component, 13, soname, package, folder, after, package_major)


def _cu11(component: str, soname: str, package: str, pkgdir: str, after: tuple[str, ...] = ()) -> RuntimeLib:
    return _row(component, 11, soname, package, f"nvidia/{pkgdir}/lib", after)


_NPP = ("nppc", "nppial", "nppicc", "nppidei", "nppif", "nppig", "nppim", "nppist", "nppisu", "nppitc", "npps")
_CUDNN = (
    "cudnn",
    "cudnn_adv",
    "cudnn_cnn",
    "cudnn_engines_precompiled",
    "cudnn_engines_runtime_compiled",
    "cudnn_engines_tensor_ir",
    "cudnn_ext",
    "cudnn_graph",
    "cudnn_heuristic",
    "cudnn_ops",
)
_CUTENSOR = ("cutensor", "cutensorMg", "cutensorMp")


def _family(major: int) -> tuple[RuntimeLib, ...]:
    """`load_after` names only what the row's own wheel installs or requires (the loader loads every library of that
    list, and fails on one that is missing); none of these links the CUDA runtime dynamically (read from the wheels'
    libraries: NCCL, cuDNN, cuSPARSELt, NVSHMEM need libc and libstdc++ only).

    The components whose wheels follow one pattern per major: the libraries of NCCL, cuDNN, cuTENSOR, cuSPARSELt,
    NVSHMEM, cuFile, NVTX, CUPTI, NPP, nvJPEG(2000), nvFatbin, cuDSS, cuFFTW, cuSOLVERMg and NVBLAS, as the newest
    wheels of both majors install them (read from the wheels: tests/data/cuda-wheel-files.json, written by
    devtools/cuda_wheel_files.py; tests/unit/test_cuda_libs_facts.py holds every row to it)."""
    cu13 = major == 13
    sfx = f"-cu{major}"
    own = "nvidia/cu13/lib" if cu13 else None  # CUDA 13's toolkit components share one folder

    def tk(
        component: str,
        soname: str,
        package: str,
        pkgdir: str,
        after: tuple[str, ...] = (),
        package_major: int | None = None,
    ) -> RuntimeLib:
        name = package if cu13 else package + sfx
        return _row(component, major, soname, name, own or f"nvidia/{pkgdir}/lib", after, package_major)

    v = major
    cufft_so, cusolver_so = ("12", "12") if cu13 else ("11", "11")
    rows = [
        tk("cufftw", f"libcufftw.so.{cufft_so}", "nvidia-cufft", "cufft", ("cufft",)),
        tk("cusolverMg", f"libcusolverMg.so.{cusolver_so}", "nvidia-cusolver", "cusolver", ("cusolver",)),
        tk("nvblas", f"libnvblas.so.{v}", "nvidia-cublas", "cublas", ("cublas",)),
        tk("cupti", f"libcupti.so.{v}", "nvidia-cuda-cupti", "cuda_cupti"),
        tk("nvtx", "libnvtx3interop.so.1", "nvidia-nvtx", "nvtx", package_major=v),
        tk("cufile", "libcufile.so.0", "nvidia-cufile", "cufile", package_major=1),
        tk("cufile_rdma", "libcufile_rdma.so.1", "nvidia-cufile", "cufile", ("cufile",), package_major=1),
        tk("nvjpeg", f"libnvjpeg.so.{v}", "nvidia-nvjpeg", "nvjpeg"),
        tk("nvfatbin", f"libnvfatbin.so.{v}", "nvidia-nvfatbin", "nvfatbin"),
        *(tk(n, f"lib{n}.so.{v}", "nvidia-npp", "npp", ("nppc",) if n != "nppc" else ()) for n in _NPP),
        # Wheels with a -cuNN name on both majors, in their own folders (cuSPARSELt and cuDSS moved into the shared
        # folder on CUDA 13; cuDSS's cu12 wheel already had one, nvidia/cu12/lib).
        _row("nccl", major, "libnccl.so.2", f"nvidia-nccl{sfx}", "nvidia/nccl/lib"),
        *(
            _row(
                n,
                major,
                f"lib{n}.so.9",
                f"nvidia-cudnn{sfx}",
                "nvidia/cudnn/lib",
                ("cudnn",) if n != "cudnn" else ("cublasLt", "cublas"),
            )
            for n in _CUDNN
        ),
        *(
            _row(n, major, f"lib{n}.so.2", f"cutensor{sfx}", "cutensor/lib", ("cutensor",) if n != "cutensor" else ())
            for n in _CUTENSOR
        ),
        # cuSPARSELt for CUDA 13 moved into the shared folder with 0.9.0 (0.8.1, torch 2.11's pin, has
        # nvidia/cusparselt/lib; 0.9.0, 0.9.1 and 0.10.0 read from the wheels)
        _row(
            "cusparseLt",
            major,
            "libcusparseLt.so.0",
            f"nvidia-cusparselt{sfx}",
            own or "nvidia/cusparselt/lib",
            since="0.9.0" if cu13 else None,
        ),
        _row("nvshmem", major, "libnvshmem_host.so.3", f"nvidia-nvshmem{sfx}", "nvidia/nvshmem/lib"),
        _row(
            "cudss",
            major,
            "libcudss.so.1",
            f"nvidia-cudss{sfx}",
            f"nvidia/cu{major}/lib",
            ("cudart", "cublasLt", "cublas"),
        ),
        _row("nvjpeg2k", major, "libnvjpeg2k.so.0", f"nvidia-nvjpeg2k{sfx}", "nvidia/nvjpeg2k/lib"),
    ]
    return tuple(rows)


RUNTIME_LIBS: tuple[RuntimeLib, ...] = (
    # CUDA 11.8 (SONAMEs read from Debian 12's CUDA 11.8 libraries; the -cu11 wheels use the cu12 layout).
    _cu11("cudart", "libcudart.so.11.0", "nvidia-cuda-runtime-cu11", "cuda_runtime"),
    _cu11("cublasLt", "libcublasLt.so.11", "nvidia-cublas-cu11", "cublas", ("cudart",)),
    _cu11("cublas", "libcublas.so.11", "nvidia-cublas-cu11", "cublas", ("cudart", "cublasLt")),
    _cu11("nvblas", "libnvblas.so.11", "nvidia-cublas-cu11", "cublas", ("cudart", "cublasLt", "cublas")),
    # The rest of CUDA 11's math libraries and NVRTC, as the newest -cu11 wheels install them (cupy-cuda11x 13.6
    # needs them; its check named the CUDA 12 wheels for libcurand.so.10 and called the others no CUDA library).
    _cu11("curand", "libcurand.so.10", "nvidia-curand-cu11", "curand", ("cudart",)),
    _cu11("nvrtc", "libnvrtc.so.11.2", "nvidia-cuda-nvrtc-cu11", "cuda_nvrtc"),
    _cu11("cusparse", "libcusparse.so.11", "nvidia-cusparse-cu11", "cusparse", ("cudart",)),
    _cu11("cufft", "libcufft.so.10", "nvidia-cufft-cu11", "cufft", ("cudart",)),
    _cu11(
        "cusolver",
        "libcusolver.so.11",
        "nvidia-cusolver-cu11",
        "cusolver",
        ("cudart", "cublasLt", "cublas", "cusparse"),
    ),
    _cu11("cufftw", "libcufftw.so.10", "nvidia-cufft-cu11", "cufft", ("cufft",)),
    _cu11("cusolverMg", "libcusolverMg.so.11", "nvidia-cusolver-cu11", "cusolver", ("cusolver",)),
    _cu11("nccl", "libnccl.so.2", "nvidia-nccl-cu11", "nccl"),
    # NVTX 2's library, which torch up to 2.5 and extensions built against it need: nvidia-nvtx-cu11 and
    # nvidia-nvtx-cu12 before 12.9 install it (read from 11.8.86, 12.1.105, 12.6.77 and 12.8.90; 12.9.79 has
    # libnvtx3interop.so.1 only: tests/data/cuda-wheel-files.json, `nvidia-nvtx-cu12<12.9`).
    _row("nvToolsExt", 11, "libnvToolsExt.so.1", "nvidia-nvtx-cu11", "nvidia/nvtx/lib", package_major=11),
    _row("nvToolsExt", 12, "libnvToolsExt.so.1", "nvidia-nvtx-cu12", "nvidia/nvtx/lib", package_major=12, until="12.9"),
    _cu12("cudart", "libcudart.so.12", "nvidia-cuda-runtime-cu12", "cuda_runtime"),
    _cu12("nvJitLink", "libnvJitLink.so.12", "nvidia-nvjitlink-cu12", "nvjitlink", ("cudart",)),
    _cu12("cublasLt", "libcublasLt.so.12", "nvidia-cublas-cu12", "cublas", ("cudart",)),
    _cu12("cublas", "libcublas.so.12", "nvidia-cublas-cu12", "cublas", ("cudart", "cublasLt")),
    _cu12("curand", "libcurand.so.10", "nvidia-curand-cu12", "curand", ("cudart",)),
    _cu12("nvrtc", "libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12", "cuda_nvrtc"),
    _cu12("cusparse", "libcusparse.so.12", "nvidia-cusparse-cu12", "cusparse", ("cudart", "nvJitLink")),
    _cu12("cufft", "libcufft.so.11", "nvidia-cufft-cu12", "cufft", ("cudart",)),
    _cu12(
        "cusolver",
        "libcusolver.so.11",
        "nvidia-cusolver-cu12",
        "cusolver",
        ("cudart", "cublasLt", "cublas", "cusparse"),
    ),
    *_family(12),
    _cu13("cudart", "libcudart.so.13", "nvidia-cuda-runtime"),
    _cu13("nvJitLink", "libnvJitLink.so.13", "nvidia-nvjitlink", ("cudart",)),
    _cu13("cublasLt", "libcublasLt.so.13", "nvidia-cublas", ("cudart", "nvJitLink")),
    _cu13("cublas", "libcublas.so.13", "nvidia-cublas", ("cudart", "nvJitLink", "cublasLt")),
    _cu13("curand", "libcurand.so.10", "nvidia-curand", ("cudart",)),
    _cu13("nvrtc", "libnvrtc.so.13", "nvidia-cuda-nvrtc"),
    _cu13("cusparse", "libcusparse.so.12", "nvidia-cusparse", ("cudart", "nvJitLink")),
    _cu13("cufft", "libcufft.so.12", "nvidia-cufft", ("cudart",)),
    _cu13(
        "cusolver", "libcusolver.so.12", "nvidia-cusolver", ("cudart", "nvJitLink", "cublasLt", "cublas", "cusparse")
    ),
    *_family(13),
)

# CUDA's `cuda-toolkit` metapackage: which nvidia-* wheels each of its extras installs, per major (the Requires-Dist of
# cuda-toolkit 13.5.0 and 12.9.2.0, the newest of each major: tests/data/cuda-wheel-files.json). Projects require CUDA
# through it (`cuda-toolkit[cublas,cudart]==13.*`: CuPy's extra `ctk`, cuda-bindings; RAPIDS' cu12 wheels
# `cuda-toolkit[cublas,curand,...]==12.*`); every release pins the components of that release, and pip takes the
# newest of the major.
TOOLKIT_PACKAGE = "cuda-toolkit"
TOOLKIT_EXTRAS: dict[int, dict[str, tuple[str, ...]]] = {
    12: {
        "cublas": ("nvidia-cublas-cu12",),
        "cudart": ("nvidia-cuda-runtime-cu12",),
        "cufft": ("nvidia-cufft-cu12", "nvidia-nvjitlink-cu12"),
        "cufile": ("nvidia-cufile-cu12",),
        "cupti": ("nvidia-cuda-cupti-cu12",),
        "curand": ("nvidia-curand-cu12",),
        "cusolver": ("nvidia-cublas-cu12", "nvidia-cusolver-cu12", "nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12"),
        "cusparse": ("nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12"),
        "npp": ("nvidia-npp-cu12",),
        "nvfatbin": ("nvidia-nvfatbin-cu12",),
        "nvjitlink": ("nvidia-nvjitlink-cu12",),
        "nvjpeg": ("nvidia-nvjpeg-cu12",),
        "nvrtc": ("nvidia-cuda-nvrtc-cu12",),
        "nvtx": ("nvidia-nvtx-cu12",),
    },
    13: {
        "cublas": ("nvidia-cublas", "nvidia-cuda-nvrtc"),
        "cudart": ("nvidia-cuda-runtime",),
        "cufft": ("nvidia-cufft", "nvidia-nvjitlink"),
        "cufile": ("nvidia-cufile",),
        "cupti": ("nvidia-cuda-cupti",),
        "curand": ("nvidia-curand",),
        "cusolver": ("nvidia-cublas", "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink"),
        "cusparse": ("nvidia-cusparse", "nvidia-nvjitlink"),
        "npp": ("nvidia-npp",),
        "nvfatbin": ("nvidia-nvfatbin",),
        "nvjitlink": ("nvidia-nvjitlink",),
        "nvjpeg": ("nvidia-nvjpeg",),
        "nvrtc": ("nvidia-cuda-nvrtc",),
        "nvtx": ("nvidia-nvtx",),
    },
}


# The library wheels each library wheel of the table requires itself, not under an extra (the Requires-Dist of the
# newest release, tests/data/cuda-wheel-files.json): a project that requires nvidia-cudnn-cu13 gets nvidia-cublas with
# it, which onnxruntime-gpu 1.31's CUDA provider needs (libcublas.so.13) and requires only through its extra `cudnn`.
WHEEL_REQUIRES: dict[str, tuple[str, ...]] = {
    "nvidia-cublas": ("nvidia-cuda-nvrtc",),
    "nvidia-cublas-cu12": ("nvidia-cuda-nvrtc-cu12",),
    "nvidia-cudnn-cu12": ("nvidia-cublas-cu12",),
    "nvidia-cudnn-cu13": ("nvidia-cublas",),
    "nvidia-cudss-cu12": ("nvidia-cublas-cu12", "nvidia-cuda-nvrtc-cu12"),
    "nvidia-cudss-cu13": ("nvidia-cublas", "nvidia-cuda-nvrtc"),
    "nvidia-cufft": ("nvidia-nvjitlink",),
    "nvidia-cufft-cu12": ("nvidia-nvjitlink-cu12",),
    "nvidia-cusolver": ("nvidia-cublas", "nvidia-nvjitlink", "nvidia-cusparse"),
    "nvidia-cusolver-cu11": ("nvidia-cublas-cu11",),
    "nvidia-cusolver-cu12": ("nvidia-cublas-cu12", "nvidia-nvjitlink-cu12", "nvidia-cusparse-cu12"),
    "nvidia-cusparse": ("nvidia-nvjitlink",),
    "nvidia-cusparse-cu12": ("nvidia-nvjitlink-cu12",),
}


def toolkit_packages(major: int, extras: tuple[str, ...] | frozenset[str]) -> tuple[str, ...]:
    """The library wheels `cuda-toolkit[extras]` of that major installs (`all`: every one the table knows)."""
    table = TOOLKIT_EXTRAS.get(major, {})
    chosen = table.values() if "all" in extras else [table.get(e, ()) for e in sorted(extras)]
    return tuple(dict.fromkeys(p for ps in chosen for p in ps))


# Never bundled, never required: the driver comes with the NVIDIA driver install.
# The driver's user-space libraries: installed with its kernel module, of its exact version; never bundled (repair
# excludes them), provided wherever a driver is.
DRIVER_SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "libcudadebugger.so.1")


def driver_copy(filename: str, soname: str | None = None) -> str:
    """The NVIDIA driver library (its SONAME) a file of a wheel is a copy of, by its SONAME or its file name without
    auditwheel's hash (nixl 0.3.0 ships `nixl.libs/libcuda-43c1b388.so.570.124.06`); "" for any other file. The
    driver's libraries must be the installed driver's own: they talk to its kernel module, version for version."""
    for name in (soname, _unhashed(filename.rsplit("/", 1)[-1])):
        if name:
            for lib in DRIVER_SONAMES:
                if name == lib or name.startswith(lib.removesuffix(".1")):
                    return lib
    return ""


def libs_for(major: int) -> tuple[RuntimeLib, ...]:
    return tuple(lib for lib in RUNTIME_LIBS if lib.cuda_major == major)


def lookup(component: str, major: int) -> RuntimeLib:
    for lib in RUNTIME_LIBS:
        if lib.cuda_major == major and lib.component.lower() == component.lower():
            return lib
    from slimwheel.errors import BadInputError

    known = ", ".join(lib.component for lib in libs_for(major)) or "none"
    raise BadInputError(f"no CUDA {major} runtime library named {component!r}", hint=f"known: {known}")


def check_component(component: str) -> None:
    """A `libraries` entry, judged before the CUDA release is known: a runtime library of some CUDA major (what
    `lookup` finds for the release the build then uses) or a static library slimwheel links (STATIC_LIBS)."""
    from slimwheel.errors import BadInputError

    for major in sorted({lib.cuda_major for lib in RUNTIME_LIBS}):
        try:
            lookup(component, major)
            return
        except BadInputError:
            pass
    if any(s.component.lower() == component.strip().lower() for s in STATIC_LIBS):  # prune.resolve_components' match
        return
    known = sorted({lib.component for lib in RUNTIME_LIBS} | {s.component for s in STATIC_LIBS}, key=str.lower)
    raise BadInputError(f"no CUDA library named {component!r}", hint=f"known: {', '.join(known)}")


def by_soname(soname: str) -> RuntimeLib | None:
    for lib in RUNTIME_LIBS:
        if fnmatch.fnmatchcase(soname, lib.soname):
            return lib
    return None


# auditwheel renames the libraries it bundles: libcudart.so.12.0.107 -> libcudart-5a077122.so.12.0.107, or, as
# torchvision 0.26.0's wheel carries them, libcudart.so.13 -> libcudart.faf08d9a.so.13.
_HASHED = re.compile(r"^(?P<stem>lib[^/]*?)[-.][0-9a-f]{8}(?P<ver>\.so(?:\.\d+)*)$")
# Libraries that come with a row's wheel and that the row's library loads itself, with no stable SONAME (it changes
# with every release: libnvrtc-builtins.so.12.0, .12.9): dropped together with that library.
_COMPANIONS = (("nvrtc", re.compile(r"^libnvrtc-builtins(?:\.alt)?\.so\.(?P<major>\d+)(?:\.\d+)*$")),)


@dataclass(frozen=True)
class Vendored:
    """A copy of a table library found inside a wheel (bundled by auditwheel, renamed or not)."""

    candidates: tuple[RuntimeLib, ...]  # the rows it is a copy of (libcurand.so.10: CUDA 12's and 13's)
    real_name: str  # its file name without auditwheel's hash: libcudart.so.12.0.107
    companion: bool  # loaded by another row's library (libnvrtc-builtins): no NEEDED should name it

    @property
    def version(self) -> str | None:
        """The release its file name carries beyond the SONAME (libcudart.so.12.0.107 -> 12.0.107; cuFile's
        libcufile.so.1.15.1 -> 1.15.1, nvidia-cufile's version), if any."""
        tail = self.real_name.split(".so.", 1)[1] if ".so." in self.real_name else ""
        return tail if tail.count(".") >= 1 else None

    def named_after(self, symbol: str) -> bool:
        """Whether a C symbol carries the library's name (cuFile's `cuFileDriverOpen`, libcufile.so.0): what shows a
        copy of a library NVIDIA builds with no GNU symbol versions, whose every C entry point is so named."""
        stems = {c.soname.split(".so", 1)[0].removeprefix("lib").lower() for c in self.candidates}
        return not self.companion and any(symbol.lower().startswith(stem) for stem in stems)

    def own_version_node(self, node: str) -> bool:
        """Whether a GNU symbol version node is the one NVIDIA's build of this library defines its symbols under:
        each names it after the library's own SONAME (libcudart.so.12, libnvjpeg.so.13; libnvrtc-builtins.so.12.0).
        auditwheel renames files and SONAMEs, never version nodes, so the node still says what the copy is."""
        if not self.companion:
            return any(node == c.soname for c in self.candidates)
        majors = {c.cuda_major for c in self.candidates}
        return any((m := pattern.match(node)) is not None and int(m["major"]) in majors for _, pattern in _COMPANIONS)


def content_hash(name: str) -> str | None:
    """The 8 hex digits auditwheel puts in the name of a library it bundles (libcudart-53d54daa.so.12.6.68): the
    start of the original file's SHA-256. Two wheels that carry a file of that one name carry the same library, which
    a process that imports both maps once."""
    m = _HASHED.match(name.rsplit("/", 1)[-1])
    return None if m is None else name.rsplit("/", 1)[-1][len(m["stem"]) + 1 : len(m["stem"]) + 9]


def _unhashed(name: str) -> str:
    m = _HASHED.match(name)
    return m["stem"] + m["ver"] if m else name


def _copy_of(real: str, lib: RuntimeLib) -> bool:
    """Whether a library named `real` (no hash) is a copy of the row: its SONAME, or a file name that extends it
    (libcudart.so.12.0.107), or, where the package's version is not the SONAME's (cuFile: libcufile.so.0 in
    nvidia-cufile 1.x), a file name that carries the package's version (libcufile.so.1.15.1)."""
    if real == lib.soname or real.startswith(lib.soname + "."):
        return True
    stem, _, version = real.partition(".so.")
    return (
        lib.package_major is not None
        and stem == lib.soname.split(".so.", 1)[0]
        and version.startswith(f"{lib.package_major}.")
    )


def vendored(filename: str, soname: str | None = None) -> Vendored | None:
    """Whether a file of a wheel (its path; `soname`: its DT_SONAME where known) is a copy of a CUDA library the
    nvidia-* wheels provide, by name: its SONAME or its file name, each without auditwheel's hash, names a row
    (`_copy_of`). The library in its own wheel's folder (`nvidia/cu13/lib/libcurand.so.10` of nvidia-curand) is the
    original, not a copy. A name proves nothing about the bytes: what the file is, its content shows
    (`own_version_node`, and the symbols its dependants take from it: `slimwheel.repair.unvendor`)."""
    installed = filename.split("/", 2)[2] if filename.split("/", 1)[0].endswith(".data") else filename
    if any(installed.startswith(lib.folder + "/") for lib in RUNTIME_LIBS):
        return None
    real = _unhashed(filename.rsplit("/", 1)[-1])
    names = dict.fromkeys(n for n in (_unhashed(soname) if soname else None, real) if n)
    for name in names:
        rows = tuple(lib for lib in RUNTIME_LIBS if _copy_of(name, lib))
        if rows:
            return Vendored(candidates=rows, real_name=real, companion=False)
    for name in names:
        for component, pattern in _COMPANIONS:
            if c := pattern.match(name):
                rows = tuple(
                    lib for lib in RUNTIME_LIBS if lib.component == component and lib.cuda_major == int(c["major"])
                )
                if rows:
                    return Vendored(candidates=rows, real_name=real, companion=True)
    return None


@functools.lru_cache(maxsize=1)
def baseline() -> dict[str, Any]:
    """resources/cuda-baseline.json (devtools/cuda_baseline.py): per CUDA major, its first release's component
    versions and the symbols each library exports; read once (repair's copy check, the requirement floors)."""
    text = importlib.resources.files("slimwheel.resources").joinpath("cuda-baseline.json").read_text("utf-8")
    import json  # only repair reads the baseline: size-report never imports json

    data: dict[str, Any] = json.loads(text)["majors"]
    return data


def first_release_exports(lib: RuntimeLib) -> frozenset[str] | None:
    """The dynamic symbols the library exports in its major's first release (resources/cuda-baseline.json, written
    by devtools/cuda_baseline.py from a real toolkit): what every release of its nvidia-* wheel in that major
    exports. None where the baseline does not hold the library."""
    libraries = baseline().get(str(lib.cuda_major), {}).get("packages", {}).get(lib.package, {})
    names = libraries.get("libraries", {}).get(lib.soname)
    return None if names is None else frozenset(names)


def load_order(libs: list[RuntimeLib]) -> list[RuntimeLib]:
    """Dependencies first (cudart, nvJitLink, cublasLt, cublas ...), stable otherwise; pulls in what they load after."""
    by_name = {lib.component: lib for lib in libs_for(libs[0].cuda_major)} if libs else {}
    out: list[RuntimeLib] = []

    def visit(lib: RuntimeLib) -> None:
        if lib in out:
            return
        for dep in lib.load_after:
            visit(by_name[dep])
        out.append(lib)

    for lib in libs:
        visit(lib)
    return out


@dataclass(frozen=True)
class StaticLib:
    """A static CUDA archive slimwheel links (`--link static`), as the toolkit ships it (lib/ folder)."""

    component: str
    file: str
    depends: tuple[str, ...]  # what it calls into, besides itself (NVIDIA's cuBLAS docs: -lcublas_static ...)
    device_code: bool  # holds fatbins (nvprune has something to remove) or host code only


# In link order: each archive before the ones it calls into, so one left-to-right pass of the linker resolves
# everything and pulls only the members that are referenced (prune.py, SlimWheelStatic.cmake and the CUDA 11.8
# toolkit check read this one table; SlimWheelTables.cmake carries it to CMake).
STATIC_LIBS: tuple[StaticLib, ...] = (
    StaticLib("cublas", "libcublas_static.a", ("cublasLt", "culibos", "cudart"), device_code=True),
    StaticLib("cublasLt", "libcublasLt_static.a", ("culibos", "cudart"), device_code=True),
    StaticLib("culibos", "libculibos.a", (), device_code=False),
    StaticLib("cudart", "libcudart_static.a", (), device_code=False),
)
