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
            extra_compile_args={"cxx": ["-O2", "-fvisibility=hidden"], "nvcc": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
