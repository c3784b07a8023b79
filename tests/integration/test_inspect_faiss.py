"""size-report and check on two real faiss GPU wheels from PyPI (downloaded once into the cache).

faiss-gpu 1.15.1 (upstream, CUDA 12, abi3, 135 MB): SASS 70/75/80/86/89/90 + PTX 90, so CC 10.x and 12.x only run
through PTX JIT. faiss-gpu-cu12 1.14.1.post1 (48 MB): SASS 70/80 and no PTX, so it cannot run on Hopper (9.0).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers.cudafixtures import cuobjdump_list, find_cuobjdump, pypi_wheel

from slimwheel.cli import main
from slimwheel.cuda.arch import CC
from slimwheel.errors import ExitCode
from slimwheel.inspect.report import target_totals
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit import Toolkit

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def faiss_gpu() -> Path:
    return pypi_wheel("faiss-gpu")


@pytest.fixture(scope="session")
def faiss_gpu_cu12() -> Path:
    return pypi_wheel("faiss-gpu-cu12")


def test_faiss_gpu_1_15_1(faiss_gpu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = inspect_wheel(faiss_gpu)
    assert [str(t) for t in r.targets] == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_90"]
    for cc in (CC(10, 0), CC(10, 3), CC(12, 0)):
        assert cc in r.coverage.ptx_only
    assert CC(9, 0) in r.coverage.native and CC(6, 1) in r.coverage.none
    (lib,) = [e for e in r.elfs if e.name == "faiss/libfaiss.so"]
    assert len(lib.fatbins) == 182 and lib.sections[".nv_fatbin"] > 170 * 10**6
    assert {"libcudart.so.12", "libcublas.so.12"} <= set(lib.needed) and lib.rpath == "$ORIGIN/../faiss_gpu.libs"
    assert r.cuda_major == 12 and r.compression == ("lz4",)
    assert str(r.ptx_release) == "12.5" and r.ptx_driver_floor == "555.42.02" and r.driver_floor == "525.60.13"
    assert {(t.kind, t.arch): t.count for t in target_totals(r.fatbin_entries)}[("ptx", "90")] == 182
    assert main(["-q", "size-report", str(faiss_gpu)]) == 0
    out = capsys.readouterr().out
    assert "PTX JIT only: 10.0, 10.3, 12.0" in out and "not at all: 5.0, 5.2, 6.0, 6.1" in out
    # 135 MB is over the default budget (60 MiB); its dependencies are consistent (cu12 wheels required).
    assert main(["-q", "check", str(faiss_gpu)]) == 10


def test_faiss_gpu_cu12_cannot_run_on_hopper(faiss_gpu_cu12: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = inspect_wheel(faiss_gpu_cu12)
    assert [str(t) for t in r.targets] == ["sm_70", "sm_80"]
    assert r.coverage.ptx_only == () and CC(9, 0) in r.coverage.none
    # --no-debug-symbols: the coverage verdicts alone; libfaiss keeps a 1.66 MiB symbol table, which check fails by
    # default with its own exit code
    assert main(["-q", "check", "--require-arch", "7.0-8.9", str(faiss_gpu_cu12)]) == ExitCode.DEBUG_INFO
    assert "a 1.66 MiB symbol table (.symtab/.strtab)" in capsys.readouterr().out
    assert main(["-q", "check", "--no-debug-symbols", "--require-arch", "7.0-9.0", str(faiss_gpu_cu12)]) == 11
    out = capsys.readouterr().out
    assert "FAIL" in out and "9.0 (Hopper (H100, H200))" in out and "8.9" not in out.split("neither SASS nor PTX")[1]
    assert main(["-q", "check", "--no-debug-symbols", "--require-arch", "7.0-8.9", str(faiss_gpu_cu12)]) == 0
    capsys.readouterr()
    assert main(["-q", "size-report", "--format", "json", str(faiss_gpu_cu12)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == 1 and doc["wheels"][0]["targets"] == ["sm_70", "sm_80"]


def test_faiss_gpu_cu12_entries_match_cuobjdump(faiss_gpu_cu12: Path, toolkit13: Toolkit, tmp_path: Path) -> None:
    name = "faiss_gpu_cu12.libs/libfaiss-6b43fd57.so"
    with zipfile.ZipFile(faiss_gpu_cu12) as z:
        lib = Path(z.extract(name, tmp_path))
    expected = cuobjdump_list(find_cuobjdump(toolkit13), lib)
    (elf,) = [e for e in inspect_wheel(faiss_gpu_cu12).elfs if e.name == name]
    got = [(e.kind, e.arch) for fb in elf.fatbins for e in fb.entries]
    assert len(expected) == 364 and got == expected
