"""`slimwheel slim`, `variants` and `diff` on the real example (examples/knn built by nvcc 13.0 from PyPI wheels):
NVIDIA's own cuobjdump lists exactly the entries slim kept, and extracts the same cubin bytes as from the original."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit.model import Toolkit

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    return env


@pytest.fixture(scope="session")
def universal(repo_root: Path, toolkit13: Toolkit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example built once per session for four families: SASS 7.5, 8.0, 9.0, 12.0 + PTX 12.0."""
    out = tmp_path_factory.mktemp("knn-universal")
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(repo_root / "examples" / "knn"),
            "--archs",
            "7.5,8.0,9.0,12.0",
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit13.root),
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _so(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / Path(name).name
        path.write_bytes(zf.read(name))
    return path


def _listed(cuobjdump: Path, so: Path) -> tuple[list[str], list[str]]:
    elf = subprocess.run([str(cuobjdump), "--list-elf", str(so)], capture_output=True, text=True)
    ptx = subprocess.run([str(cuobjdump), "--list-ptx", str(so)], capture_output=True, text=True)
    assert elf.returncode == 0, elf.stderr
    cubins = re.findall(r"\.(sm_\d+[af]?)\.cubin", elf.stdout)
    ptxs = re.findall(r"\.(sm_\d+[af]?)\.ptx", ptx.stdout)
    return sorted(cubins), sorted(ptxs)


def test_cuobjdump_lists_exactly_the_kept_entries(universal: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    assert toolkit13.cuobjdump is not None, "the CUDA 13.0 toolkit from PyPI includes cuobjdump"
    orig = _so(universal, tmp_path / "orig")
    assert _listed(toolkit13.cuobjdump, orig) == (["sm_120", "sm_75", "sm_80", "sm_90"], ["sm_120"])
    for archs, ptx, want in (
        ("9.0", "needed", (["sm_90"], [])),
        ("8.0-9.0", "needed", (["sm_80", "sm_90"], [])),
        ("9.0", "newest", (["sm_90"], ["sm_120"])),
        ("12.0", "needed", (["sm_120"], [])),  # the cubin serves 12.0: its PTX goes
    ):
        out = tmp_path / f"slim-{archs}-{ptx}"
        proc = subprocess.run(
            [*CLI, "slim", str(universal), "--archs", archs, "--ptx", ptx, "-o", str(out), "--format", "json"],
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        assert report["check"]["ok"] is True
        slimmed = Path(report["wheel"])
        so = _so(slimmed, tmp_path / f"so-{archs}-{ptx}")
        assert _listed(toolkit13.cuobjdump, so) == want, (archs, ptx)
        assert so.stat().st_size == orig.stat().st_size  # sections keep their size: nothing relinked
        assert slimmed.stat().st_size < universal.stat().st_size


def test_a_gpu_nothing_serves_fails_the_check(universal: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    """10.0: no cubin (only 7.5, 8.0, 9.0, 12.0) and PTX 12.0 does not JIT for an older GPU. Refused with 11 and
    nothing written; with --allow-unserved the wheel is written with empty containers, cuobjdump reads it, and the
    check fails it with 11."""
    out = tmp_path / "slim"
    proc = subprocess.run(
        [*CLI, "slim", str(universal), "--archs", "10.0", "-o", str(out)], capture_output=True, text=True, env=_env()
    )
    assert proc.returncode == 11 and "no wheel was written" in proc.stderr, proc.stdout + proc.stderr
    assert not list(out.glob("*.whl"))
    proc = subprocess.run(
        [*CLI, "slim", str(universal), "--archs", "10.0", "--allow-unserved", "-o", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 11, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert [f["kind"] for f in report["check"]["failures"]] == ["coverage"]
    assert report["targets_after"] == []
    assert toolkit13.cuobjdump is not None
    assert _listed(toolkit13.cuobjdump, _so(Path(report["wheel"]), tmp_path / "so")) == ([], [])


def test_the_kept_cubin_is_byte_identical(universal: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    out = tmp_path / "slim"
    subprocess.run(
        [*CLI, "slim", str(universal), "--archs", "9.0", "-o", str(out)], check=True, env=_env(), capture_output=True
    )
    (slimmed,) = out.glob("*.whl")
    cubins = {}
    for label, wheel in (("orig", universal), ("slim", slimmed)):
        so = _so(wheel, tmp_path / label)
        subprocess.run(
            [str(toolkit13.cuobjdump), "-xelf", "all", str(so)], cwd=so.parent, check=True, capture_output=True
        )
        (cubin,) = so.parent.glob("*sm_90.cubin")
        cubins[label] = cubin.read_bytes()
    assert cubins["orig"] == cubins["slim"] and len(cubins["orig"]) > 1000


def test_variants_of_the_example(universal: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    out = tmp_path / "variants"
    proc = subprocess.run(
        [*CLI, "variants", str(universal), "-o", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    labels = {v["label"]: v for v in data["variants"]}
    assert list(labels) == ["sm7x", "sm8x", "sm9x", "sm12x"]
    assert (out / universal.name).read_bytes() == universal.read_bytes()
    cuobjdump = toolkit13.cuobjdump
    assert cuobjdump is not None
    for label, want in (
        ("sm7x", (["sm_75"], [])),
        ("sm8x", (["sm_80"], [])),
        ("sm9x", (["sm_90"], [])),
        ("sm12x", (["sm_120"], ["sm_120"])),
    ):
        wheel = Path(labels[label]["wheel"])
        assert wheel.name.endswith(f"-{label}.whl")
        assert _listed(cuobjdump, _so(wheel, tmp_path / label)) == want
        assert labels[label]["check"]["ok"] is True
    # nvcc 13.0's PTX (ISA 9.0) is JIT-compiled by any CUDA 13 driver, and CUDA 13 SASS loads on any
    assert labels["sm12x"]["properties"] == {
        "nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["120_real", "120_virtual"]}
    }


def test_diff_of_universal_and_slim(universal: Path, tmp_path: Path) -> None:
    out = tmp_path / "slim"
    subprocess.run(
        [*CLI, "slim", str(universal), "--archs", "9.0", "-o", str(out)], check=True, env=_env(), capture_output=True
    )
    (slimmed,) = out.glob("*.whl")
    proc = subprocess.run(
        [*CLI, "diff", str(slimmed), str(universal), "--format", "markdown", "--fail-over", "5%"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 10, proc.stdout + proc.stderr
    before, after = inspect_wheel(slimmed), inspect_wheel(universal)
    assert "sass 75" in proc.stdout and "ptx 120" in proc.stdout
    assert f"{100 * (after.size - before.size) / before.size:+.2f}%" in proc.stdout
