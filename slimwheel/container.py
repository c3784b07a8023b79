"""Local manylinux container builds: cibuildwheel, driven with a configuration derived from [tool.slimwheel].

The same configuration runs in CI (.github/workflows/wheels.yml) and on a laptop with docker or podman:

- image: manylinux_2_28 (x86_64); musllinux is skipped (no CUDA there);
- before-all: scripts/manylinux-cuda13.sh (CUDA 13 assembled from PyPI wheels by slimwheel itself) or
  scripts/manylinux-cuda12.sh (CUDA 12 from NVIDIA's rpm repository, as faiss and RAPIDS build theirs). Both install
  slimwheel from its source tree, mounted read-only at /slimwheel, and leave the toolkit at /usr/local/cuda;
- config-settings: the plan's SLIMWHEEL_* CMake cache variables (targets, compression, link mode, CUDA major) and
  slimwheel_DIR, so the project's CMake finds slimwheel's module the way `slimwheel build` passes it;
- repair-wheel-command: `slimwheel repair` (excludes the nvidia-* libraries, adds Requires-Dist and the loader);
- test-command: the wheel installs with its nvidia-* requirements and imports.

`cibw_config` is pure: it returns the [tool.cibuildwheel] table as a dict. `render_toml` and `render_env` turn that
one dict into TOML (to paste into pyproject.toml) and CIBW_* variables (what `slimwheel container` runs with, so
the project's own [tool.cibuildwheel] settings still apply underneath).
"""

from __future__ import annotations

import logging
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from slimwheel.config import Config, read_pyproject
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ToolError
from slimwheel.plan import cmake_defines, make_plan_for_release

log = logging.getLogger("slimwheel.container")

IMAGE = "manylinux_2_28"
SOURCE_MOUNT = "/slimwheel"  # slimwheel's source tree inside the container (read-only)
VENV = "/opt/slimwheel"  # slimwheel's own virtual environment inside the container, made by the before-all script
CUDA_ROOT = "/usr/local/cuda"  # where the before-all scripts leave the toolkit
SUPPORTED = (CudaVersion(12, 4), CudaVersion(13, 0))
# CUDA 12.4's nvcc accepts GCC <= 13; manylinux_2_28's default compiler is newer. The CUDA 12 script installs
# gcc-toolset-13 and nvcc uses it for host code (CUDAHOSTCXX); C++ files keep the image's compiler.
GCC_TOOLSET_FOR = {12: "/opt/rh/gcc-toolset-13/root/usr/bin/g++"}


@dataclass(frozen=True, kw_only=True)
class Project:
    """What the container build needs to know about the project besides [tool.slimwheel]."""

    path: Path
    name: str  # the distribution name, for messages
    import_name: str  # what the test command imports


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """What `slimwheel container` runs: cibuildwheel's command line and the CIBW_* variables it adds."""

    argv: tuple[str, ...]
    env: dict[str, str]
    engine: str


def load_project(path: Path, *, import_name: str | None = None) -> Project:
    """Read the project's pyproject.toml: its name and the module the test command imports.

    The import name is, in order: the one given, the last entry of scikit-build-core's `wheel.packages`, the
    distribution name with dashes as underscores."""
    path = Path(path)
    data, _ = read_pyproject(path)
    if not data:
        raise BadInputError(f"{path / 'pyproject.toml'}: missing", hint="pass the folder of a Python project")
    def table(parent: Any, key: str) -> Any:  # a malformed pyproject has strings where tables belong
        value = parent.get(key, {}) if isinstance(parent, dict) else {}
        return value if isinstance(value, dict) else {}

    name = table(data, "project").get("name")
    if not isinstance(name, str) or not name:
        raise BadInputError(f"{path / 'pyproject.toml'}: [project] has no name")
    if import_name is None:
        packages = table(table(table(data, "tool"), "scikit-build"), "wheel").get("packages")
        if isinstance(packages, list) and packages and isinstance(packages[-1], str):
            import_name = Path(packages[-1]).name
        else:
            import_name = re.sub(r"[-.]+", "_", name).lower()
    if not import_name.isidentifier():
        raise BadInputError(f"{import_name!r} is not a Python module name", hint="pass --import-name")
    return Project(path=path, name=name, import_name=import_name)


def cibw_config(
    cfg: Config,
    cuda: CudaVersion,
    project: Project,
    *,
    engine: str = "docker",
    source: Path | str = "/path/to/slimwheel",
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The [tool.cibuildwheel] table for building `project` with CUDA `cuda` in a manylinux container.

    `source` is slimwheel's source tree on the host (mounted read-only at /slimwheel); `extra_env` adds variables
    to the container's build environment (e.g. FAISS_SOURCE_DIR=/project/faiss-src). Pure: no I/O.
    """
    if cuda not in SUPPORTED:
        raise BadInputError(
            f"container builds support CUDA {' and '.join(map(str, SUPPORTED))}, not {cuda}",
            hint="use --cuda 12.4 or --cuda 13.0",
        )
    if cfg.link != "dynamic":
        raise BadInputError(
            f"link = {cfg.link!r}: container builds link dynamically against PyPI's nvidia-* wheels",
            hint="static linking needs static cuBLAS and nvprune; build with `slimwheel build` and CUDA 11.8",
        )
    plan = make_plan_for_release(cfg, cuda)
    defines = cmake_defines(plan, cuda_root=CUDA_ROOT, package_dir=f"{VENV}/cmake")
    env = {
        "CUDA_HOME": CUDA_ROOT,
        "CUDACXX": f"{CUDA_ROOT}/bin/nvcc",
        # Not slimwheel's venv: cibuildwheel insists that `python` on PATH is the build's own. The before-all
        # script links /usr/local/bin/slimwheel instead.
        "PATH": f"{CUDA_ROOT}/bin:$PATH",
    }
    if cuda.major in GCC_TOOLSET_FOR:
        env["CUDAHOSTCXX"] = GCC_TOOLSET_FOR[cuda.major]
    for k, v in (extra_env or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise BadInputError(f"--env {k}={v}: {k!r} is not an environment variable name")
        if '"' in v or "\\" in v:
            # cibuildwheel writes each value inside double quotes (in both forms) without escaping
            raise BadInputError(f"--env {k}={v}: double quotes and backslashes cannot be passed to cibuildwheel")
        env[k] = v
    script = f"manylinux-cuda{cuda.major}.sh"
    repair = f"slimwheel repair --cuda {cuda} -w {{dest_dir}} {{wheel}}"
    if not cfg.loader:
        repair += " --no-loader"
    return {
        "archs": ["x86_64"],
        # no CUDA on musl; no free-threaded builds (an extension must be made ready for them first)
        "skip": "*-musllinux_* cp3??t-* cp3?t-*",
        "manylinux-x86_64-image": IMAGE,
        "container-engine": {"name": engine, "create-args": ["--volume", f"{source}:{SOURCE_MOUNT}:ro"]},
        "before-all": f"bash {SOURCE_MOUNT}/scripts/{script} {cuda}",
        "environment": env,
        "config-settings": {f"cmake.define.{k}": v for k, v in defines.items()},
        "build-verbosity": 1,
        "repair-wheel-command": repair,
        "test-command": f'python -c "import {project.import_name}"',
    }


def render_toml(table: Mapping[str, Any]) -> str:
    """The table as a pyproject.toml fragment: [tool.cibuildwheel]."""
    return tomli_w.dumps({"tool": {"cibuildwheel": dict(table)}})


def _env_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    if key == "environment":
        # cibuildwheel's own bash-like syntax: $VAR expands in the container, so double quotes, never single.
        return " ".join(f'{k}="{v}"' for k, v in value.items())
    if key == "config-settings":
        return " ".join(shlex.quote(f"{k}={v}") for k, v in value.items())
    if key == "container-engine":
        args = " ".join(shlex.quote(a) for a in value.get("create-args", ()))
        return f"{value['name']}; create_args: {args}" if args else str(value["name"])
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    raise BadInputError(f"cibuildwheel option {key}: no CIBW_* form for {value!r}")


def env_name(key: str) -> str:
    return "CIBW_" + key.upper().replace("-", "_")


def render_env(table: Mapping[str, Any]) -> dict[str, str]:
    """The table as CIBW_* environment variables (cibuildwheel reads these over the project's pyproject.toml)."""
    return {env_name(k): _env_value(k, v) for k, v in table.items()}


def render_shell(env: Mapping[str, str], argv: Sequence[str]) -> str:
    """A copy-pasteable shell form: one export per variable, then the command."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines.append(shlex.join(argv))
    return "\n".join(lines) + "\n"


def source_tree() -> Path:
    """slimwheel's source tree: the before-all scripts and the package to install in the container live there."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "scripts" / "manylinux-cuda13.sh").is_file():
        raise BadInputError(
            f"slimwheel container needs slimwheel's source tree (scripts/manylinux-*.sh), not found above {root}",
            hint="install slimwheel from a checkout (pip install -e path/to/slimwheel)",
        )
    return root


def invocation(table: Mapping[str, Any], project: Project, output_dir: Path, *, only: str | None = None) -> Invocation:
    argv = [sys.executable, "-m", "cibuildwheel", "--platform", "linux", "--output-dir", str(output_dir)]
    if only:
        argv += ["--only", only]
    argv.append(str(project.path))
    engine = table.get("container-engine", {}).get("name", "docker")
    return Invocation(argv=tuple(argv), env=render_env(table), engine=engine)


def engine_problem(engine: str, env: Mapping[str, str]) -> str | None:
    """None when `engine info` works; else why not, in one line (missing client, or no engine running)."""
    exe = shutil.which(engine, path=env.get("PATH"))
    if exe is None:
        return f"{engine} is not installed (no {engine} on PATH)"
    try:
        proc = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"`{engine} info` did not answer within 60 s"
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        return f"`{engine} info` failed (exit {proc.returncode}): {why[-1] if why else 'no output'}"
    return None


def pick_engine(requested: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """(engine, problem): the requested one, or with "auto" the first of docker, podman that works."""
    if requested != "auto":
        return requested, engine_problem(requested, env)
    problems = []
    for name in ("docker", "podman"):
        problem = engine_problem(name, env)
        if problem is None:
            return name, None
        problems.append(problem)
    return "docker", "; ".join(problems)


def cibuildwheel_problem() -> str | None:
    """None when cibuildwheel can be run with this Python (`python -m cibuildwheel`); else why not."""
    import importlib.util

    if importlib.util.find_spec("cibuildwheel") is None:
        return f"cibuildwheel is not installed for {sys.executable} (pip install cibuildwheel)"
    return None


def run(inv: Invocation, base_env: Mapping[str, str]) -> None:
    """Run cibuildwheel; its output streams to the terminal (a container build is long and the user watches it)."""
    env = dict(base_env)
    env.update(inv.env)
    log.info("running cibuildwheel (%s): %s", inv.engine, shlex.join(inv.argv))
    proc = subprocess.run(list(inv.argv), env=env)
    if proc.returncode != 0:
        raise ToolError(f"cibuildwheel failed (exit {proc.returncode})", hint="its output above says which step")
