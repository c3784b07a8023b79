"""A virtual environment with PyPI's torch 2.11.0 (CUDA 13.0) and its nvidia-* wheels, in which slimwheel (from this
checkout, on PYTHONPATH) builds torch extensions: torch extensions build against the environment's torch, without
isolation. Made once and kept in slimwheel's cache (about 4.5 GB installed; the downloads stay in pip's cache, so a
second machine with a warm pip cache makes it in about a minute)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

from slimwheel.fsutil import cache_dir, file_lock

TORCH = "2.11.0"
REPO = Path(__file__).resolve().parents[2]
# What the builds need beside slimwheel's own dependencies: torch (setup.py imports it), setuptools below torch's
# bound (torch 2.11: setuptools<82) with wheel, scikit-build-core, CMake >= 3.26 and Ninja as the main venv has them.
BUILD_TOOLS = ("setuptools>=64,<82", "wheel", "scikit-build-core>=0.10", "cmake>=3.26", "ninja")


def torch_env() -> Path:
    """The environment's python (made on first use; slimwheel's dependencies installed again when pyproject.toml
    changed them, so a kept environment never lacks one)."""
    root = cache_dir() / "torch-env" / f"torch-{TORCH}-py{sys.version_info.major}.{sys.version_info.minor}"
    python = root / "bin" / "python"
    stamp = root / "ready"
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    want = "\n".join([TORCH, *BUILD_TOOLS, *sorted(deps)]) + "\n"
    with file_lock(root.with_suffix(".lock")):
        have = stamp.read_text(encoding="utf-8") if stamp.is_file() else None
        if have == want:
            return python
        if have is None:
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"torch=={TORCH}", *BUILD_TOOLS, *deps], check=True
        )
        stamp.write_text(want, encoding="utf-8")
    return python


def env_for(python: Path) -> dict[str, str]:
    """The environment to run `python -m slimwheel` from this checkout in it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["PYTHONPATH"] = str(REPO)
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    env.setdefault("MAX_JOBS", "2")
    return env
