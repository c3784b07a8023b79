"""doctor and footprint on a machine with an NVIDIA GPU (skipped elsewhere: there is nothing to measure)."""

from __future__ import annotations

import pytest

from slimwheel.doctor import run_doctor
from slimwheel.footprint import measure
from slimwheel.runtime.driver import CudaDriver, Nvml

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(CudaDriver.open() is None, reason="no NVIDIA driver (libcuda.so.1) on this machine"),
]


def test_doctor_sees_the_gpus_and_driver() -> None:
    report = run_doctor(None)
    assert report.driver_cuda is not None and int(report.driver_cuda.split(".")[0]) >= 12
    assert report.gpus, report.notes
    for g in report.gpus:
        major, minor = (int(x) for x in g.cc.split("."))
        assert major >= 5 and minor >= 0


def test_footprint_bare_context_is_measured_in_both_modes() -> None:
    # `json` imports without touching CUDA: its "module" figure must equal a bare context's, give or take
    report = measure("json", modes=("EAGER", "LAZY"))
    assert [r.mode for r in report.runs] == ["EAGER", "LAZY"]
    for run in report.runs:
        ctx = run.bare[-1]
        assert ctx.stage == "context" and ctx.device_used and ctx.device_used > 0
        if Nvml.open() is not None:
            assert ctx.nvml_process is not None and ctx.nvml_process > 100 * 2**20
