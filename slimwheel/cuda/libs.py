"""The one table of CUDA runtime libraries that PyPI's nvidia-* wheels provide, per CUDA major.

Everything that excludes, requires, or loads a CUDA library reads this table (shared/cuda-facts.md, sections 1-2).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeLib:
    """One shared library of one component, for one CUDA major."""

    component: str  # cudart, cublas, cublasLt, ...
    cuda_major: int
    soname: str  # libcublas.so.13
    package: str  # nvidia-cublas / nvidia-cublas-cu12
    folder: str  # path of the lib folder inside site-packages: nvidia/cu13/lib, nvidia/cublas/lib
    module: str  # the import name whose __path__ holds it: nvidia.cu13, nvidia.cublas
    load_after: tuple[str, ...] = ()  # components that must be loaded first

    @property
    def link_name(self) -> str:
        """The name for -l: libcublasLt.so.13 -> cublasLt."""
        return self.soname.split(".so")[0].removeprefix("lib")


def _cu12(component: str, soname: str, package: str, pkgdir: str, after: tuple[str, ...] = ()) -> RuntimeLib:
    return RuntimeLib(component, 12, soname, package, f"nvidia/{pkgdir}/lib", f"nvidia.{pkgdir}", after)


def _cu13(component: str, soname: str, package: str, after: tuple[str, ...] = ()) -> RuntimeLib:
    return RuntimeLib(component, 13, soname, package, "nvidia/cu13/lib", "nvidia.cu13", after)


def _cu11(component: str, soname: str, package: str, pkgdir: str, after: tuple[str, ...] = ()) -> RuntimeLib:
    return RuntimeLib(component, 11, soname, package, f"nvidia/{pkgdir}/lib", f"nvidia.{pkgdir}", after)


RUNTIME_LIBS: tuple[RuntimeLib, ...] = (
    # CUDA 11.8 (SONAMEs read from Debian 12's CUDA 11.8 libraries; the -cu11 wheels use the cu12 layout).
    _cu11("cudart", "libcudart.so.11.0", "nvidia-cuda-runtime-cu11", "cuda_runtime"),
    _cu11("cublasLt", "libcublasLt.so.11", "nvidia-cublas-cu11", "cublas", ("cudart",)),
    _cu11("cublas", "libcublas.so.11", "nvidia-cublas-cu11", "cublas", ("cudart", "cublasLt")),
    _cu12("cudart", "libcudart.so.12", "nvidia-cuda-runtime-cu12", "cuda_runtime"),
    _cu12("nvJitLink", "libnvJitLink.so.12", "nvidia-nvjitlink-cu12", "nvjitlink", ("cudart",)),
    _cu12("cublasLt", "libcublasLt.so.12", "nvidia-cublas-cu12", "cublas", ("cudart",)),
    _cu12("cublas", "libcublas.so.12", "nvidia-cublas-cu12", "cublas", ("cudart", "cublasLt")),
    _cu12("curand", "libcurand.so.10", "nvidia-curand-cu12", "curand", ("cudart",)),
    _cu12("nvrtc", "libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12", "cuda_nvrtc"),
    _cu12("cusparse", "libcusparse.so.12", "nvidia-cusparse-cu12", "cusparse", ("cudart", "nvJitLink")),
    _cu12("cufft", "libcufft.so.11", "nvidia-cufft-cu12", "cufft", ("cudart",)),
    _cu12("cusolver", "libcusolver.so.11", "nvidia-cusolver-cu12", "cusolver", ("cudart", "cublasLt", "cublas", "cusparse")),
    _cu13("cudart", "libcudart.so.13", "nvidia-cuda-runtime"),
    _cu13("nvJitLink", "libnvJitLink.so.13", "nvidia-nvjitlink", ("cudart",)),
    _cu13("cublasLt", "libcublasLt.so.13", "nvidia-cublas", ("cudart", "nvJitLink")),
    _cu13("cublas", "libcublas.so.13", "nvidia-cublas", ("cudart", "nvJitLink", "cublasLt")),
    _cu13("curand", "libcurand.so.10", "nvidia-curand", ("cudart",)),
    _cu13("nvrtc", "libnvrtc.so.13", "nvidia-cuda-nvrtc"),
    _cu13("cusparse", "libcusparse.so.12", "nvidia-cusparse", ("cudart", "nvJitLink")),
    _cu13("cufft", "libcufft.so.12", "nvidia-cufft", ("cudart",)),
    _cu13("cusolver", "libcusolver.so.12", "nvidia-cusolver", ("cudart", "nvJitLink", "cublasLt", "cublas", "cusparse")),
)  # fmt: skip

# Never bundled, never required: the driver comes with the NVIDIA driver install.
DRIVER_SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1")


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
