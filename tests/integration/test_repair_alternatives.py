"""Issue 22 item 4: `repair` on a wheel of per-CUDA alternatives (bitsandbytes' layout: one library per CUDA version,
one loaded per process), real gcc-built libraries and real auditwheel. Each major's nvidia-* wheels come with an
extra of their own; each alternative's RPATH names its own major's folders; the output passes check."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from helpers.wheels_repair import build_extension, make_wheel, stub_dir

from slimwheel.check import check_wheel, make_policy
from slimwheel.inspect.dynamic import scan_elfs
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.repair import repair_wheel

pytestmark = pytest.mark.integration


def test_alternatives_of_two_majors_get_an_extra_each(tmp_path: Path) -> None:
    stubs = stub_dir(
        tmp_path,
        {"libcudart.so.12": 12040, "libcublas.so.12": 12040, "libcudart.so.13": 13000, "libcublas.so.13": 13000},
    )
    files = {"fakebnb/__init__.py": b""}
    for tag, so in (("cuda124", "12"), ("cuda130", "13")):
        d = tmp_path / tag
        d.mkdir()
        for lib in ("cudart", "cublas"):
            (d / f"lib{lib}.so").symlink_to(stubs / f"lib{lib}.so.{so}")
        out = build_extension(
            d / f"libfakebnb_{tag}.so",
            f"m{tag}",
            lib_dirs=[d],
            libs=["cudart", "cublas"],
            runpath=[f"/usr/local/cuda-{so}/lib64"],
        )
        files[f"fakebnb/libfakebnb_{tag}.so"] = out.read_bytes()
    wheel = make_wheel(tmp_path / "dist", name="fakebnb", version="0.1", files=files)
    res = repair_wheel(wheel, tmp_path / "out", loader=True)
    assert res.loader == ()  # the project loads the alternative itself
    assert sorted(res.requires) == [
        'nvidia-cublas-cu12>=12.0,<13; extra == "cuda12"',
        'nvidia-cublas>=13.0,<14; extra == "cuda13"',
        'nvidia-cuda-runtime-cu12>=12.0,<13; extra == "cuda12"',
        'nvidia-cuda-runtime>=13.0,<14; extra == "cuda13"',
    ]
    with zipfile.ZipFile(res.wheel) as z:
        z.extractall(tmp_path / "x")
    elfs = scan_elfs(tmp_path / "x")
    assert elfs["fakebnb/libfakebnb_cuda124.so"].search_path == (
        "$ORIGIN/../nvidia/cuda_runtime/lib",
        "$ORIGIN/../nvidia/cublas/lib",
    )
    assert elfs["fakebnb/libfakebnb_cuda130.so"].search_path == ("$ORIGIN/../nvidia/cu13/lib",)
    r = inspect_wheel(res.wheel)
    v = check_wheel(r, make_policy(r, require_arch="none"))
    assert v.ok, v.failures
    assert sum("extra 'cuda12'" in n for n in v.notes) == 1 and sum("extra 'cuda13'" in n for n in v.notes) == 1
