"""The classic build, as most torch extensions on PyPI are written: setuptools with torch.utils.cpp_extension's
CUDAExtension. slimwheel build passes the plan through the environment torch reads (TORCH_CUDA_ARCH_LIST) and nvcc
reads (NVCC_APPEND_FLAGS: fatbin compression, PTX-only targets), with CUDA_HOME at its toolkit."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    ext_modules=[
        CUDAExtension(
            "torch_op_classic._C",
            # setuptools wants sources relative to setup.py's folder
            ["../csrc/classic.cpp", "../csrc/axpby.cu"],
            extra_compile_args={"cxx": ["-O2", "-fvisibility=hidden", "-DPy_LIMITED_API=0x030a0000"], "nvcc": ["-O2"]},
            # TORCH_LIBRARY only, no Python C API: one cp310-abi3 wheel for every CPython >= 3.10 (torch's
            # recommendation for such extensions); the C++ ABI still ties it to one torch minor.
            py_limited_api=True,
            # torch's compile lines carry -g: 3 MiB of DWARF in a 22 KiB module (`check --debug-symbols` fails it)
            extra_link_args=["-Wl,--strip-debug"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
