"""Questions to the NVIDIA driver through ctypes: NVML (libnvidia-ml.so.1) and the driver API (libcuda.so.1).

No CUDA toolkit, no torch, no pynvml: both libraries come with every driver install, and their C APIs used here have
been stable for many releases. Every function returns None (or an empty result) on a machine without a driver.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

# cuDeviceGetAttribute attributes (cuda.h)
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    cc: str  # "9.0"
    memory_total: int | None  # bytes
    memory_used: int | None  # bytes, whole device, every process


class _NvmlMemory(ctypes.Structure):
    _fields_ = (("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong))


class _NvmlProcess(ctypes.Structure):  # nvmlProcessInfo_t (v2/v3 layout)
    _fields_ = (
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    )


def _load(soname: str) -> ctypes.CDLL | None:
    # Driver libraries are system libraries by definition: the normal loader search (ld.so.cache) is the right one.
    try:
        return ctypes.CDLL(soname)
    except OSError:
        return None


class Nvml:
    """An initialised NVML session; use as a context manager. `Nvml.open()` is None without a driver."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    @classmethod
    def open(cls) -> Nvml | None:
        lib = _load("libnvidia-ml.so.1")
        if lib is None:
            return None
        try:
            if lib.nvmlInit_v2() != 0:
                return None
        except AttributeError:
            return None
        return cls(lib)

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lib.nvmlShutdown()

    def driver_version(self) -> str | None:
        buf = ctypes.create_string_buffer(96)
        if self.lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))) != 0:
            return None
        return buf.value.decode()

    def _handle(self, index: int) -> ctypes.c_void_p | None:
        h = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(h)) != 0:
            return None
        return h

    def gpus(self) -> list[Gpu]:
        n = ctypes.c_uint(0)
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0:
            return []
        out = []
        for i in range(n.value):
            h = self._handle(i)
            if h is None:
                continue
            name = ctypes.create_string_buffer(96)
            self.lib.nvmlDeviceGetName(h, name, ctypes.c_uint(len(name)))
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cc = None
            if self.lib.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(major), ctypes.byref(minor)) == 0:
                cc = f"{major.value}.{minor.value}"
            mem = _NvmlMemory()
            ok = self.lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)) == 0
            out.append(
                Gpu(
                    index=i,
                    name=name.value.decode(errors="replace"),
                    cc=cc or "?",
                    memory_total=mem.total if ok else None,
                    memory_used=mem.used if ok else None,
                )
            )
        return out

    def process_memory(self, pid: int, index: int = 0) -> int | None:
        """NVML's usedGpuMemory of one process on one GPU (bytes), or None when the process is not listed."""
        h = self._handle(index)
        if h is None:
            return None
        for fn_name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            fn = getattr(self.lib, fn_name, None)
            if fn is None:
                continue
            count = ctypes.c_uint(64)
            procs = (_NvmlProcess * 64)()
            if fn(h, ctypes.byref(count), procs) != 0:
                continue
            for p in procs[: count.value]:
                if p.pid == pid:
                    return int(p.usedGpuMemory)
            return None
        return None


class CudaDriver:
    """The driver API on libcuda.so.1. `CudaDriver.open()` is None without a driver."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self._ctx: ctypes.c_void_p | None = None

    @classmethod
    def open(cls) -> CudaDriver | None:
        lib = _load("libcuda.so.1")
        return None if lib is None else cls(lib)

    def version(self) -> int | None:
        v = ctypes.c_int(0)
        return v.value if self.lib.cuDriverGetVersion(ctypes.byref(v)) == 0 else None

    def init(self) -> int:
        return int(self.lib.cuInit(0))

    def gpus(self) -> list[Gpu]:
        if self.init() != 0:
            return []
        n = ctypes.c_int(0)
        if self.lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return []
        out = []
        for i in range(n.value):
            dev = ctypes.c_int(0)
            self.lib.cuDeviceGet(ctypes.byref(dev), i)
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            self.lib.cuDeviceGetAttribute(ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            self.lib.cuDeviceGetAttribute(ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            name = ctypes.create_string_buffer(96)
            self.lib.cuDeviceGetName(name, len(name), dev)
            total = ctypes.c_size_t(0)
            self.lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
            out.append(
                Gpu(
                    index=i,
                    name=name.value.decode(errors="replace"),
                    cc=f"{major.value}.{minor.value}",
                    memory_total=total.value,
                    memory_used=None,
                )
            )
        return out

    def retain_primary_context(self, index: int = 0) -> int:
        """Create (or join) the device's primary context, the one the CUDA runtime uses, and make it current."""
        rc = self.init()
        if rc != 0:
            return rc
        dev = ctypes.c_int(0)
        rc = self.lib.cuDeviceGet(ctypes.byref(dev), index)
        if rc != 0:
            return int(rc)
        ctx = ctypes.c_void_p()
        rc = self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        if rc != 0:
            return int(rc)
        self._ctx = ctx
        return int(self.lib.cuCtxSetCurrent(ctx))

    def mem_used(self) -> int | None:
        """total - free of the current context's device (bytes): every process's use, so measure deltas."""
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        if self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) != 0:
            return None
        return int(total.value - free.value)

    def synchronize(self) -> int:
        return int(self.lib.cuCtxSynchronize())


def format_cuda_version(v: int | None) -> str | None:
    """13000 -> "13.0"."""
    return None if v is None else f"{v // 1000}.{v % 1000 // 10}"


def module_loading() -> tuple[str, str]:
    """(mode, where it came from): CUDA_MODULE_LOADING, else the driver default (LAZY since CUDA 12.2 on Linux)."""
    value = os.environ.get("CUDA_MODULE_LOADING")
    if value:
        return value.upper(), "CUDA_MODULE_LOADING"
    return "LAZY", "default since CUDA 12.2 (CUDA_MODULE_LOADING unset)"
