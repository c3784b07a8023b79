"""Issue 38 item 1: the variant wheels of a real multi-arch wheel (nvidia-curand-cu12 10.3.10.19 from PyPI: SASS for
5.0 ... 12.1 and PTX 12.1, 65 MiB) installed by uv 0.13.8 (the test extras' pin) from the folder `variants` writes.
With `--preview-features wheel-variants` and the NVIDIA provider told the GPU and driver
(NV_VARIANT_PROVIDER_FORCE_SM_ARCH / _CUDA_DRIVER_VERSION), uv must install each family's variant for each of its
GPUs, and the universal wheel where no variant fits: no GPU, a driver older than the variant's CUDA bound, a GPU of a
newer major, or no preview flag. pip (the test environment's) installs the universal wheel from the same folder and
refuses a variant file named to it. docs/slim.md states these results."""

from __future__ import annotations

import csv
import ctypes.util
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testkit import corpus

pytestmark = pytest.mark.integration

CURAND = corpus.CorpusWheel(
    requirement="nvidia-curand-cu12==10.3.10.19",
    filename="nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64.whl",
    why="issue 38's example: seven GPU families in one CUDA 12 library",
)
PROJECT = "nvidia-curand-cu12"
LIB = "nvidia/curand/lib/libcurand.so.10"


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """`slimwheel variants` of the real wheel: the output folder and its JSON report."""
    out = tmp_path_factory.mktemp("curand-variants")
    cmd = [sys.executable, "-m", "slimwheel", "variants", "--offline", "--format", "json", "-o", str(out)]
    proc = subprocess.run(
        [*cmd, str(corpus.ensure(CURAND))],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, json.loads(proc.stdout)


def _record_line(rows: str, name: str) -> str:
    (line,) = [r for r in csv.reader(io.StringIO(rows)) if r and r[0] == name]
    return ",".join(line)


def _wheel_record(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (record,) = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
        return zf.read(record).decode()


class Venv:
    """A fresh virtual environment that uv installs into, and what landed there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache = root.parent / f"{root.name}-uv-cache"
        subprocess.run([_uv(), "venv", "-q", "--python", sys.executable, str(root)], check=True, env=self.env({}))

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NV_VARIANT_PROVIDER_", "UV_"))}
        env.update(UV_CACHE_DIR=str(self.cache), UV_OFFLINE="1", UV_NO_CONFIG="1", **extra)
        return env

    def install(
        self, index: list[str], forced: dict[str, str] | None = None, *, preview: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [_uv(), "pip", "install", "--reinstall", "--no-deps", "--python", str(self.root / "bin" / "python")]
        cmd += ["--preview-features", "wheel-variants"] if preview else []
        proc = subprocess.run(
            [*cmd, *index, PROJECT], capture_output=True, text=True, env=self.env(forced or {}), timeout=300
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def landed(self) -> tuple[str | None, str]:
        """The installed variant's label (None: the universal wheel) and the library's RECORD line."""
        (dist,) = (self.root / "lib").glob("python3.*/site-packages/nvidia_curand_cu12-*.dist-info")
        vj = dist / "variant.json"
        label = None
        if vj.is_file():
            (label,) = json.loads(vj.read_text())["variants"]
        return label, _record_line((dist / "RECORD").read_text(), LIB)


def _forced(sm: str, driver: str) -> dict[str, str]:
    return {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm, "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": driver}


def test_uv_installs_each_familys_variant_and_the_universal_wheel_otherwise(
    made: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    out, report = made
    variants = report["variants"]
    assert isinstance(variants, list)
    universal = Path(str(report["universal"]["wheel"]))  # type: ignore[index]
    records: dict[str | None, str] = {None: _record_line(_wheel_record(universal), LIB)}
    records |= {v["label"]: _record_line(_wheel_record(Path(v["wheel"])), LIB) for v in variants}
    assert len(set(records.values())) == len(records)  # each wheel's library differs: RECORD tells which landed
    assert [v["label"] for v in variants] == ["sm5x", "sm6x", "sm7x", "sm8x", "sm9x", "sm10x", "sm12x"]
    simple = ["--index-url", (out / "simple").as_uri()]
    venv = Venv(tmp_path / "venv")
    for v in variants:
        props = v["properties"]["nvidia"]
        (bound,) = props["cuda_version_lower_bound"]
        for gpu in v["gpus"]:
            # the driver at the variant's bound exactly: the bound is inclusive
            venv.install(simple, _forced(gpu, bound))
            assert venv.landed() == (v["label"], records[v["label"]]), (gpu, bound)
    # the same choice from the flat folder (--find-links) as from the PEP 503 pages
    venv.install(["--no-index", "--find-links", str(out)], _forced("8.6", "12.9"))
    assert venv.landed() == ("sm8x", records["sm8x"])
    # where no variant fits: the universal wheel
    top = {v["label"]: v for v in variants}["sm12x"]
    assert top["properties"]["nvidia"]["cuda_version_lower_bound"] == ["12.9"]  # its PTX is ISA 8.8, CUDA 12.9's
    for forced in (
        _forced("12.0", "12.8"),  # a driver older than the sm12x variant's PTX
        _forced("9.0", "11.8"),  # a CUDA 11 driver: none of this CUDA 12 library's variants
        _forced("13.0", "13.0"),  # a GPU of a newer major: its variants offer it nothing, the universal PTX does
        {"NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "9.0"},  # a GPU but no driver told, and none on this machine
    ):
        venv.install(simple, forced)
        assert venv.landed() == (None, records[None]), forced
    # without the preview flag uv reads no variant metadata
    venv.install(simple, _forced("9.0", "12.9"), preview=False)
    assert venv.landed() == (None, records[None])


def test_uv_with_no_gpu_installs_the_universal_wheel(made: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("an NVIDIA driver is on this machine: lab/gpu/variants_uv.sh records what its GPU gets")
    out, report = made
    venv = Venv(tmp_path / "venv")
    venv.install(["--index-url", (out / "simple").as_uri()])
    universal = Path(str(report["universal"]["wheel"]))  # type: ignore[index]
    assert venv.landed() == (None, _record_line(_wheel_record(universal), LIB))


def test_pip_installs_the_universal_wheel_and_refuses_a_variant_file(
    made: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    out, _report = made
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check"]
    proc = subprocess.run(
        [*pip, "--find-links", str(out), "--target", str(tmp_path / "t"), PROJECT], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (dist,) = (tmp_path / "t").glob("nvidia_curand_cu12-*.dist-info")
    assert not (dist / "variant.json").exists()
    (sm9x,) = out.glob("*-sm9x.whl")
    proc = subprocess.run([*pip, "--target", str(tmp_path / "t9"), str(sm9x)], capture_output=True, text=True)
    assert proc.returncode != 0 and "Invalid build number" in proc.stdout + proc.stderr
