"""Issue 26: examples/torch-op built with `slimwheel build` against PyPI's torch 2.11.0 (CUDA 13.0) on a machine
without a GPU, in both ways users write torch extensions: the stable-ABI operator with CMake's find_package(Torch)
under scikit-build-core, the classic-API one with setuptools' CUDAExtension. Check tells them apart (torch>=2.11
against torch==2.11.*), pip's resolver installs each beside torch with torch's own nvidia-* pins, and each loads into
torch on this machine with torch's CUDA runtime the only one mapped."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.torchenv import TORCH, env_for, torch_env

from slimwheel import torchext
from slimwheel.errors import ExitCode

pytestmark = pytest.mark.integration

EXAMPLES = ("stable", "classic")


@pytest.fixture(scope="module")
def torch_python() -> Path:
    return torch_env()


@pytest.fixture(scope="module")
def built(repo_root: Path, torch_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("torchop")
    reports: dict[str, dict[str, Any]] = {}  # each example's build report (JSON)
    for name in EXAMPLES:
        proc = subprocess.run(
            [
                str(torch_python),
                "-m",
                "slimwheel",
                "build",
                str(repo_root / "examples" / "torch-op" / name),
                "--out-dir",
                str(out / name),
            ],
            capture_output=True,
            text=True,
            env=env_for(torch_python),
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (report,) = sorted((out / name).glob("*.slimwheel.json"))
        reports[name] = json.loads(report.read_text())
    return reports


def test_the_plan_reaches_the_compiler_both_ways(built: dict[str, dict[str, Any]]) -> None:
    for name, report in built.items():
        got, planned = set(report["report"]["targets"]), set(report["plan"]["targets"])
        # torch's own default list (sm_50 ... sm_120a) would appear here if TORCH_CUDA_ARCH_LIST had not reached it
        assert got == planned == {"sm_75", "sm_80", "sm_90", "sm_100", "sm_120", "compute_120"}, (name, got)
        assert report["plan"]["compression"] == "size"
        assert report["ok"], report["check"]


def test_check_tells_stable_from_classic(built: dict[str, dict[str, Any]]) -> None:
    stable, classic = built["stable"]["torch"], built["classic"]["torch"]
    assert stable["abi"] == "stable" and stable["unstable_symbols"] == 0
    assert stable["stable_floor"] == "2.10"  # torch_library_impl, TORCH_TARGET_VERSION 2.10
    assert classic["abi"] == "unstable" and classic["unstable_symbols"] > 0
    assert "torch>=2.11" in built["stable"]["repair"]["requires"]  # 2.10 from the symbols, 2.11 from CUDA 13
    assert "torch==2.11.*" in built["classic"]["repair"]["requires"]
    assert stable["serves"][0] == "2.11" and len(stable["serves"]) > 1 and classic["serves"] == ["2.11"]
    for report in built.values():
        assert not any("torch" in lib for lib in report["repair"]["bundled"])
        assert set(report["torch"]["needed"]) <= set(torchext.torch_sonames())


def _resolve(python: Path, *wanted: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(tmp / "r.json"),
            *wanted,
        ],
        capture_output=True,
        text=True,
    )


def test_pip_installs_each_beside_torch_with_torchs_pins(
    built: dict[str, dict[str, Any]], torch_python: Path, tmp_path: Path
) -> None:
    wheels = [report["wheel"] for report in built.values()]
    proc = _resolve(torch_python, *wheels, f"torch=={TORCH}", tmp=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chosen = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads((tmp_path / "r.json").read_text())["install"]
    }
    pins = {r.minor: r for r in torchext.pypi_releases()}["2.11"].pins
    assert chosen["nvidia-cuda-runtime"] == pins["nvidia-cuda-runtime"]
    assert chosen["torch"] == TORCH


def test_pip_refuses_each_beside_an_older_torch(
    built: dict[str, dict[str, Any]], torch_python: Path, tmp_path: Path
) -> None:
    # PyPI's torch 2.10 is CUDA 12.8: the stable wheel (CUDA 13) must not install beside it, nor the classic one
    for report in built.values():
        proc = _resolve(torch_python, report["wheel"], "torch==2.10.0", tmp=tmp_path)
        assert proc.returncode != 0 and "torch" in proc.stdout + proc.stderr, report["wheel"]


LOAD = r"""
import os, sys, torch
mod = __import__(sys.argv[1])
op = getattr(torch.ops, sys.argv[1]).axpby
try:
    op(torch.ones(2), torch.ones(2), 1.0, 1.0)
    raise SystemExit("a CPU call was accepted")
except NotImplementedError as e:
    assert "CPU" in str(e), e
maps = {l.split()[-1] for l in open("/proc/self/maps") if "libcudart.so" in l}
assert len(maps) == 1 and "/nvidia/cu13/lib/" in maps.pop(), maps
print("loaded")
"""


def test_each_loads_into_torch_here(built: dict[str, dict[str, Any]], torch_python: Path, tmp_path: Path) -> None:
    for name, report in built.items():
        target = tmp_path / name
        subprocess.run(
            [
                str(torch_python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                report["wheel"],
            ],
            check=True,
        )
        proc = subprocess.run(
            [str(torch_python), "-c", LOAD, f"torch_op_{name}"],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
        )
        assert proc.returncode == 0 and "loaded" in proc.stdout, proc.stderr[-3000:]


def test_a_toolkit_of_another_cuda_major_is_refused(repo_root: Path, torch_python: Path) -> None:
    proc = subprocess.run(
        [
            str(torch_python),
            "-m",
            "slimwheel",
            "build",
            str(repo_root / "examples" / "torch-op" / "stable"),
            "--cuda",
            "12.4",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        env=env_for(torch_python),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 3, text
    assert "CUDA 12" in text and "13.0" in text and TORCH in text, text


def _slimwheel(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "slimwheel", *args], capture_output=True, text=True, env=env_for(python), check=False
    )


def test_torchs_debug_info_fails_check_by_default_and_repair_strips_it(
    repo_root: Path, torch_python: Path, tmp_path: Path
) -> None:
    """Issue 38: the classic extension as torch writes it, without the example's `-Wl,--strip-debug` and `strip =
    true`: torch's compile lines carry -g, so the module is mostly DWARF. `build` fails its check phase with exit 16, `check` of the wheel
    says the same, and `repair --strip` makes a wheel that passes and still loads into torch."""
    project = tmp_path / "torch-op"
    shutil.copytree(repo_root / "examples" / "torch-op", project, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    setup_py = project / "classic" / "setup.py"
    text = setup_py.read_text()
    assert 'extra_link_args=["-Wl,--strip-debug"],' in text
    setup_py.write_text(text.replace('extra_link_args=["-Wl,--strip-debug"],', ""))
    pyproject = project / "classic" / "pyproject.toml"
    assert "\nstrip = true\n" in pyproject.read_text()
    pyproject.write_text(pyproject.read_text().replace("\nstrip = true\n", "\nstrip = false\n"))

    out = tmp_path / "out"
    built = _slimwheel(torch_python, "build", str(project / "classic"), "--archs", "9.0", "--out-dir", str(out))
    assert built.returncode == ExitCode.DEBUG_INFO, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (module,) = [n for n in zf.namelist() if n.endswith(".so")]
        debug_bytes = sum(s.data_size for s in _elf_sections(zf.read(module)) if s.name.startswith(".debug_"))
    assert debug_bytes > 2**20, debug_bytes  # torch's -g: MiBs of DWARF in a module of a few dozen KiB of code

    checked = _slimwheel(torch_python, "check", str(wheel), "--offline", "--require-arch", "9.0")
    assert checked.returncode == ExitCode.DEBUG_INFO, checked.stdout + checked.stderr
    assert "debug" in (checked.stdout + checked.stderr).lower()

    stripped_dir = tmp_path / "stripped"
    repaired = _slimwheel(torch_python, "repair", str(wheel), "--strip", "-w", str(stripped_dir))
    assert repaired.returncode == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
    (stripped,) = stripped_dir.glob("*.whl")
    assert stripped.stat().st_size < wheel.stat().st_size
    rechecked = _slimwheel(torch_python, "check", str(stripped), "--offline", "--require-arch", "9.0")
    assert rechecked.returncode == 0, rechecked.stdout + rechecked.stderr

    target = tmp_path / "site"
    subprocess.run(
        [str(torch_python), "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(stripped)],
        check=True,
    )
    proc = subprocess.run(
        [str(torch_python), "-c", LOAD, "torch_op_classic"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and "loaded" in proc.stdout, proc.stderr[-3000:]


def _elf_sections(data: bytes) -> list[Any]:
    from elftools.elf.elffile import ELFFile

    return list(ELFFile(io.BytesIO(data)).iter_sections())
