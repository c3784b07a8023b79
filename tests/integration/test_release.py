"""slimwheel as a release (issue 38 item 2): scripts/release-check.sh, the build/test part of the release workflow,
builds the sdist and the wheel, `twine check`s them, installs the wheel alone into a fresh venv and runs the main job
from it; the README's project, whose [build-system] requires slimwheel, then builds from that venv with build
isolation, finding slimwheel through PIP_FIND_LINKS (the documented way: no index has it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import slimwheel

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KNN = REPO / "examples" / "knn"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release")
    env = {**os.environ, "SLIMWHEEL_ARCHS": "8.0"}  # one target keeps the compile short; the plan still runs
    env.pop("PIP_FIND_LINKS", None)
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "release-check.sh"), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def test_the_sdist_and_the_wheel_carry_the_package_its_cmake_and_resources(released: Path) -> None:
    version = slimwheel.__version__
    (wheel,) = (released / "dist").glob("*.whl")
    (sdist,) = (released / "dist").glob("*.tar.gz")
    assert wheel.name == f"slimwheel-{version}-py3-none-any.whl" and sdist.name == f"slimwheel-{version}.tar.gz"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"slimwheel-{version}.dist-info/METADATA").decode()
        entry_points = z.read(f"slimwheel-{version}.dist-info/entry_points.txt").decode()
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "slimwheel").rglob("*") if p.is_file()}
    package = {n for n in package if "__pycache__" not in n}
    assert package <= names, sorted(package - names)  # every file of the package: CMake, schema, container scripts
    assert f"Version: {version}" in meta  # the one version string, slimwheel/__init__.py
    assert "slimwheel = slimwheel.cmake" in entry_points and "slimwheel = slimwheel.cli:entry" in entry_points
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {
        "pyproject.toml",
        "slimwheel/cmake/SlimWheel.cmake",
        "CMakeLists.txt",
        "scripts/release-check.sh",
    } <= members
    assert not any(m.startswith("lab/") for m in members)  # the measurement harness is no part of a release


def test_the_installed_wheel_ran_the_main_job(released: Path) -> None:
    (report,) = (released / "wheelhouse").glob("*.slimwheel.json")
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["slimwheel"] == slimwheel.__version__
    assert data["plan"]["cuda"].startswith("13.")
    # built by the venv's slimwheel, not this checkout's
    assert Path(data["build_command"][0]).parent == released / "venv" / "bin"


def test_the_readme_project_builds_isolated_from_the_wheel_folder(released: Path, tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    toml = re.search(r"^```toml\n(.*?)^```", readme, re.M | re.S)
    cmake = re.search(r"^```cmake\n(.*?)^```", readme, re.M | re.S)
    assert toml and cmake
    assert '"slimwheel"' in toml.group(1)  # it requires slimwheel: the isolated build must find it
    project = tmp_path / "knn"
    shutil.copytree(KNN / "csrc", project / "csrc")
    shutil.copytree(KNN / "src", project / "src")
    (project / "pyproject.toml").write_text(toml.group(1))
    (project / "CMakeLists.txt").write_text(cmake.group(1))
    env = {**os.environ, "SLIMWHEEL_ARCHS": "8.0", "PIP_FIND_LINKS": str(released / "dist")}
    proc = subprocess.run(
        [str(released / "venv" / "bin" / "slimwheel"), "build", str(project), "--out-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (report,) = (tmp_path / "out").glob("*.slimwheel.json")
    data = json.loads(report.read_text())
    assert data["ok"] is True and "--no-isolation" not in data["build_command"]
    log = Path(data["build_log"]).read_text()
    # pypa/build installed slimwheel into the isolated environment, from the wheel folder
    assert re.search(rf"^\s+- slimwheel=={re.escape(slimwheel.__version__)}$", log, re.M), log[:3000]


def test_the_release_workflow_tests_with_this_script_and_publishes_what_it_tested() -> None:
    text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    build, publish = text.split("\n  publish:\n")
    assert "run: bash scripts/release-check.sh release-check" in build and "pull_request:" in text
    assert "path: release-check/dist/" in build
    assert "needs: build" in publish and "id-token: write" in publish and "name: pypi" in publish
    assert "startsWith(github.ref, 'refs/tags/v')" in publish
    assert "uses: pypa/gh-action-pypi-publish@release/v1" in publish
    assert "password" not in publish and "secrets." not in publish  # trusted publishing: no stored token


def test_the_readmes_install_block_runs_as_written(tmp_path: Path) -> None:
    # the README's Install block, verbatim, in a copy of the checkout with a fresh venv's `python` first on PATH
    block = re.search(r"^## Install\n.*?^```bash\n(.*?)^```", (REPO / "README.md").read_text(), re.M | re.S)
    assert block, "README.md: no bash block under ## Install"
    checkout = tmp_path / "slimwheel"
    skip = shutil.ignore_patterns(".git", ".venv", "build", "dist", "wheelhouse", ".carry", "__pycache__", "lab")
    shutil.copytree(REPO, checkout, ignore=skip)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    script = block.group(1) + 'slimwheel --version\nprintf "links=%s\\n" "$PIP_FIND_LINKS"\n'
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"slimwheel, version {slimwheel.__version__}" in proc.stdout
    assert f"links={checkout / 'dist'}" in proc.stdout
    assert (venv / "bin" / "slimwheel").is_file()
