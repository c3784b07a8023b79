"""CMake configured as the integration tests run it: a real CMake, the toolkit fixture's nvcc and environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from slimwheel.toolkit import Toolkit

# The system's cmake, else the one pip's `cmake` package put next to this interpreter.
CMAKE = shutil.which("cmake") or str(Path(sys.executable).parent / "cmake")


def tool_env(toolkit: Toolkit) -> dict[str, str]:
    env = dict(os.environ)
    env.update(toolkit.env)
    env.pop("CMAKE_PREFIX_PATH", None)
    return env


def configure(toolkit: Toolkit, src: Path, build: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        CMAKE,
        "-S",
        str(src),
        "-B",
        str(build),
        "-G",
        "Unix Makefiles",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *defines,
    ]
    return subprocess.run(cmd, check=False, env=tool_env(toolkit), capture_output=True, text=True, timeout=300)
