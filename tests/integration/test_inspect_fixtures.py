"""The inspect readers on real nvcc output, cross-checked against cuobjdump; wheels of it through the CLI."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from helpers.cudafixtures import CUBIN_ARCHS, compile_fixtures, cuobjdump_list, find_cuobjdump

from slimwheel.cli import main
from slimwheel.cuda.arch import Variant
from slimwheel.inspect.scan import inspect_binary, inspect_wheel
from slimwheel.toolkit import Toolkit
from slimwheel.tools import set_rpath
from testkit.wheelmaker import make_wheel

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def binaries(toolkit13: Toolkit) -> dict[str, Path]:
    return compile_fixtures(toolkit13)


@pytest.fixture(scope="session")
def cuobjdump(toolkit13: Toolkit) -> Path:
    return find_cuobjdump(toolkit13)


def ours(path: Path) -> list[tuple[str, str]]:
    """Our (kind, arch) list, named as cuobjdump names them: it drops the `f` of family cubins (sm_100f -> sm_100)."""
    out = []
    for fb in inspect_binary(path).fatbins:
        for e in fb.entries:
            if e.kind == "lto-ir":
                continue
            fam = e.target is not None and e.target.variant is Variant.FAMILY and e.kind == "sass"
            out.append((e.kind, e.arch[:-1] if fam else e.arch))
    return out


@pytest.mark.parametrize("name", ["none.so", "size.so", "default.so", "rdc.o", "host.o", "kernels.fatbin"])
def test_entries_match_cuobjdump(binaries: dict[str, Path], cuobjdump: Path, name: str) -> None:
    expected = cuobjdump_list(cuobjdump, binaries[name])
    assert expected, f"cuobjdump found nothing in {name}"
    got = ours(binaries[name])
    # cuobjdump lists all cubins, then all PTX: compare per kind, each in file order.
    for kind in ("sass", "ptx"):
        assert [a for k, a in got if k == kind] == [a for k, a in expected if k == kind]


@pytest.mark.parametrize("arch", CUBIN_ARCHS)
def test_standalone_cubins_name_the_gpu_cuobjdump_names(binaries: dict[str, Path], cuobjdump: Path, arch: str) -> None:
    # nvcc 13.0 writes sm_90a and sm_100a with the e_flags of sm_90 and sm_100: the `a` is in .nv.compat alone.
    path = binaries[f"sm_{arch}.cubin"]
    assert cuobjdump_list(cuobjdump, path) == [("sass", arch.removesuffix("f"))]
    report = inspect_binary(path)
    assert report.kind == "cubin"
    assert ours(path) == [("sass", arch.removesuffix("f"))]


def test_compression_modes_and_sizes_match_extracted_payloads(
    binaries: dict[str, Path], cuobjdump: Path, tmp_path: Path
) -> None:
    import subprocess

    none = inspect_binary(binaries["none.so"])
    size = inspect_binary(binaries["size.so"])
    dflt = inspect_binary(binaries["default.so"])
    rdc = inspect_binary(binaries["rdc.o"])
    entries = {
        n: [e for fb in r.fatbins for e in fb.entries]
        for n, r in (("none", none), ("size", size), ("default", dflt), ("rdc", rdc))
    }
    assert {e.compression for e in entries["none"]} == {"none"}
    assert {e.compression for e in entries["size"]} == {"zstd"}
    assert {e.compression for e in entries["default"]} == {"zstd"}
    assert "lz4" in {e.compression for e in entries["rdc"]}
    for e in entries["size"]:
        assert e.stored_size < e.uncompressed_size
    # Size mode squeezes harder than the default mode; the uncompressed payloads are the same code.
    assert sum(e.stored_size for e in entries["size"]) < sum(e.stored_size for e in entries["default"])
    assert [e.uncompressed_size for e in entries["size"]] == [e.uncompressed_size for e in entries["default"]]
    # The uncompressed sizes from the headers are the sizes of what cuobjdump extracts.
    subprocess.run(
        [str(cuobjdump), "-xelf", "all", "-xptx", "all", str(binaries["size.so"])],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    cubins = sorted(p.stat().st_size for p in tmp_path.glob("*.cubin"))
    ptx = sorted(p.stat().st_size for p in tmp_path.glob("*.ptx"))
    assert cubins == sorted(e.uncompressed_size for e in entries["size"] if e.kind == "sass")
    ours_ptx = sorted(e.uncompressed_size for e in entries["size"] if e.kind == "ptx")
    # PTX text: the header counts its terminating NUL (and, stored plain, the padding), cuobjdump writes neither.
    assert len(ptx) == len(ours_ptx)
    assert all(0 <= o - x <= 8 for o, x in zip(ours_ptx, ptx, strict=True))


def test_variants_isa_and_object_layouts(binaries: dict[str, Path]) -> None:
    so = inspect_binary(binaries["size.so"])
    assert so.kind == "shared" and "libcudart.so.13" in so.needed and so.modules == len(so.fatbins) == 3
    # Two translation units and nvcc's device-link container (SASS only, no kernels): not a module to cover.
    assert [fb.device_link for fb in so.fatbins] == [True, False, False]
    assert {e.kind for e in so.fatbins[0].entries} == {"sass"}
    arches = {(e.kind, e.arch) for fb in so.fatbins for e in fb.entries}
    assert arches == {("sass", "75"), ("sass", "90a"), ("ptx", "120")}
    assert {e.ptx_isa for fb in so.fatbins for e in fb.entries if e.kind == "ptx"} == {(9, 0)}
    rdc = inspect_binary(binaries["rdc.o"])
    assert rdc.kind == "relocatable" and "__nv_relfatbin" in rdc.sections
    assert {e.arch for fb in rdc.fatbins for e in fb.entries} == {"100f", "80", "120a"}
    host = inspect_binary(binaries["host.o"])
    assert ".nv_fatbin" in host.sections and ".nvFatBinSegment" in host.sections and len(host.fatbins) == 1
    assert inspect_binary(binaries["kernels.fatbin"]).kind == "fatbin"


def _wheel(tmp_path: Path, binaries: dict[str, Path], variant: str, requires: tuple[str, ...]) -> Path:
    # nvcc links libcudart.so.13 with no search path: the copy given one that reaches the nvidia-* wheel's folder, as
    # a wheel that requires nvidia-cuda-runtime must (an unreached direct requirement fails, index or not)
    so = tmp_path / f"{variant}-ext" / "_kernels.abi3.so"
    so.parent.mkdir(parents=True)
    shutil.copyfile(binaries[f"{variant}.so"], so)
    set_rpath(so, ["$ORIGIN/../nvidia/cu13/lib"], use_rpath_tag=False, name=so.name)
    return make_wheel(
        tmp_path / variant,
        name=f"fix-{variant}",
        files={"fix/_kernels.abi3.so": so.read_bytes(), "fix/__init__.py": b"# fixture\n"},
        requires=requires,
    )


def test_size_report_and_check_on_real_wheels(
    binaries: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    none = _wheel(tmp_path, binaries, "none", ("nvidia-cuda-runtime==13.*",))
    size = _wheel(tmp_path, binaries, "size", ("nvidia-cuda-runtime==13.*",))
    assert main(["-q", "size-report", "--format", "json", str(none), str(size)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [w["targets"] for w in doc["wheels"]] == [["sm_75", "sm_90a", "compute_120"]] * 2
    assert [w["cuda"]["fatbin_compression"] for w in doc["wheels"]] == [["none"], ["zstd"]]
    assert doc["wheels"][1]["wheel"]["installed_bytes"] < doc["wheels"][0]["wheel"]["installed_bytes"]
    r = inspect_wheel(size)
    assert r.cuda_major == 13 and r.driver_floor == "580.65.06"
    assert main(["-q", "check", "--require-arch", "7.5,9.0,12.0", str(size)]) == 0
    assert main(["-q", "check", "--require-arch", "8.0", str(size)]) == 11
    unpinned = _wheel(tmp_path / "u", binaries, "size", ("nvidia-cuda-runtime",))
    # Coverage off: this wheel (SASS 7.5 + 9.0a + PTX 12.0) leaves 8.x to nothing, which the default `auto` reports.
    assert main(["-q", "check", "--require-arch", "none", str(unpinned)]) == 12
    assert main(["-q", "check", str(unpinned)]) == 13  # coverage and dependencies
    assert "does not pin nvidia-cuda-runtime to 13.*" in capsys.readouterr().out


def test_bad_real_binaries_are_one_line_errors(
    binaries: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = binaries["none.so"].read_bytes()
    truncated = make_wheel(tmp_path / "t", files={"fix/_k.so": data[: len(data) // 2]})
    # Make the first fatbin claim 1 GiB of entries.
    start = data.index(struct.pack("<I", 0xBA55ED50))
    past = bytearray(data)
    struct.pack_into("<Q", past, start + 8, 1 << 30)
    past_end = make_wheel(tmp_path / "p", files={"fix/_k.so": bytes(past)})
    for wheel, problem in (
        (truncated, "fix/_k.so: truncated ELF file"),
        (past_end, "fix/_k.so [.nv_fatbin]: fatbin at offset"),
    ):
        assert main(["-q", "size-report", str(wheel)]) == 3
        err = capsys.readouterr().err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"slimwheel: error: {wheel}") and problem in line and "Traceback" not in err
