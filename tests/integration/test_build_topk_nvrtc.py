"""`slimwheel build` of examples/topk-nvrtc/runtime (the CUDA 13 toolkit from PyPI): the repaired wheel carries the
kernel sources, byte for byte, in its extension's slimwheel_nvrtc section, and no fatbin and no link to NVRTC."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from slimwheel.inspect.dynamic import imports_by_library
from slimwheel.inspect.nvrtc import served_ccs
from slimwheel.inspect.scan import inspect_wheel, wheel_embedded_sources

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_runtime_wheel_embeds_the_kernel_sources(toolkit13: Any, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slimwheel",
            "build",
            str(REPO / "examples/topk-nvrtc/runtime"),
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit13.root),
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (wheel,) = tmp_path.glob("topk_runtime-*.whl")
    found = wheel_embedded_sources(wheel)
    (member,) = found
    assert member.startswith("topk_runtime/_topk") and member.endswith(".so")
    (record,) = found[member]
    csrc = REPO / "examples/topk-nvrtc/csrc"
    assert [f.name for f in record.files] == ["topk.cuh", "topk_sort.cuh"]
    assert all(f.sha256 == hashlib.sha256((csrc / f.name).read_bytes()).hexdigest() for f in record.files)
    assert record.nvrtc_soname == "libnvrtc.so.13" and served_ccs(record)[0].sm == "75"
    report = inspect_wheel(wheel)
    (ext,) = [e for e in report.elfs if e.name.endswith(".so")]
    # NVRTC is opened at run time (dlopen), never a link-time dependency; the kernels are not compiled by nvcc.
    assert not any(n.startswith("libnvrtc") for n in ext.needed) and ext.fatbins == ()
    assert ext.sections["slimwheel_nvrtc"] >= record.record_bytes
    # The pipeline knows such wheels (issue 15 item 4): NVRTC required and preloaded, coverage from the sources.
    assert any(r.startswith("nvidia-cuda-nvrtc>=13.0,<14") for r in report.requires_dist), report.requires_dist
    loader = zipfile.ZipFile(wheel).read("topk_runtime/_slimwheel_loader.py").decode()
    assert "libnvrtc.so.13" in loader
    assert not [cc for cc in report.coverage.none if cc.major >= 8 or str(cc) == "7.5"], report.coverage.none
    assert "9.0" in [str(cc) for cc in report.coverage.native] and report.driver_floor == "580.65.06"
    assert "all 9 required" in proc.stdout or "required compute capabilities are served" in proc.stdout
    # The runtime header parses numbers with std::from_chars: C's strtol family becomes __isoc23_* (GLIBC_2.38) when
    # compiled against glibc >= 2.38, which made the H200-built wheel manylinux_2_38 (lab/gpu/build_here.sh).
    module = tmp_path / "module.so"
    with zipfile.ZipFile(wheel) as z:
        module.write_bytes(z.read(member))
    undefined = set().union(*imports_by_library(module).values())
    assert not [n for n in undefined if n.startswith(("__isoc23_", "strto", "atoi", "atol"))], sorted(undefined)
