"""`slimwheel slim` and `slimwheel variants` on synthesized wheels: names, metadata, RECORD, the input untouched,
the check, the PEP 825 variant metadata, and bad input as one clear error."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import random
import zipfile
from pathlib import Path

import pytest

from slimwheel.cli import main
from slimwheel.cuda.arch import CC, parse_require_arch
from slimwheel.errors import BadInputError
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.postbuild.slim import local_version, parse_ptx, slim
from slimwheel.postbuild.variants import PROVIDER, families, make_variants
from testkit.binsynth import cubin, elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"


def _payload(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(1, 256) for _ in range(n))


def _module(seed: int, sass: tuple[int, ...], ptx: int | None) -> bytes:
    entries = [fatbin_entry(sm=sm, payload=_payload(seed + sm, 512)) for sm in sass]
    if ptx is not None:
        entries.append(fatbin_entry(kind="ptx", sm=ptx, payload=_payload(seed + 1000 + ptx, 768), ptx_isa=(9, 0)))
    return pad8(fatbin(entries))


# where the CUDA requirement installs libcudart, from pkg/: what repair writes (deps.reach)
CU13_RUNPATH = "$ORIGIN/../nvidia/cu13/lib"


def _lib(seed: int = 0) -> bytes:
    fat = _module(seed, (75, 80, 90, 100, 120), 120) + _module(seed + 7, (75, 80, 90, 100, 120), 120)
    return elf(
        sections={".text": b"\xc3" * 256, ".nv_fatbin": fat},
        needed=("libcudart.so.13", "libc.so.6"),
        runpath=CU13_RUNPATH,
        soname="_ext.abi3.so",
    )


def _wheel(tmp_path: Path, *, version: str = "1.2.0", lib: bytes | None = None) -> Path:
    return make_wheel(
        tmp_path / "in",
        name="pkg",
        version=version,
        tag=TAG,
        files={"pkg/_ext.abi3.so": lib if lib is not None else _lib(), "pkg/__init__.py": b"from ._ext import *\n"},
        requires=("nvidia-cuda-runtime>=13.0,<14",),
    )


def _record_ok(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        (record,) = [n for n in names if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(io.StringIO(zf.read(record).decode())))
        listed = {r[0] for r in rows}
        assert listed == set(names)
        for name, digest, size in rows:
            if name == record:
                continue
            data = zf.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), name
    return names


def test_slim_to_one_gpu(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    before_bytes = src.read_bytes()
    r = slim(src, tmp_path / "out", archs=parse_require_arch("9.0"))
    assert src.read_bytes() == before_bytes  # the input is only read
    assert r.rewritten.wheel.name == f"pkg-1.2.0+slim.sm90-{TAG}.whl"
    names = _record_ok(r.rewritten.wheel)
    assert "pkg-1.2.0+slim.sm90.dist-info/METADATA" in names
    with zipfile.ZipFile(r.rewritten.wheel) as zf:
        meta = zf.read("pkg-1.2.0+slim.sm90.dist-info/METADATA").decode()
        wheel_file = zf.read("pkg-1.2.0+slim.sm90.dist-info/WHEEL").decode()
    assert "\nVersion: 1.2.0+slim.sm90\n" in meta and "Requires-Dist: nvidia-cuda-runtime>=13.0,<14" in meta
    assert f"Tag: {TAG}" in wheel_file
    after = inspect_wheel(r.rewritten.wheel)
    assert after.version == "1.2.0+slim.sm90"
    assert [str(t) for t in after.targets] == ["sm_90"]
    assert r.verdict.ok, r.verdict.failures
    (f,) = r.rewritten.files
    # two modules, each losing sass 75/80/100/120 (64 + 512 bytes) and ptx 120 (64 + 768)
    assert f.by_arch() == {
        ("sass", "75"): (2, 1152),
        ("sass", "80"): (2, 1152),
        ("sass", "100"): (2, 1152),
        ("sass", "120"): (2, 1152),
        ("ptx", "120"): (2, 1664),
    }
    # the section keeps its size: the installed library is as large as before, its zip smaller
    size_of = {f.name: f.uncompressed for f in r.before.files}
    assert {f.name: f.uncompressed for f in after.files}["pkg/_ext.abi3.so"] == size_of["pkg/_ext.abi3.so"]
    assert after.size < r.before.size


def test_cli_json_and_exit_code_when_a_requested_gpu_loses_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = elf(sections={".nv_fatbin": _module(1, (80, 90), None)}, needed=("libcudart.so.13",), runpath=CU13_RUNPATH)
    src = _wheel(tmp_path, lib=lib)
    assert main(["slim", str(src), "--archs", "9.0", "-o", str(tmp_path / "o"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["targets_after"] == ["sm_90"] and data["check"]["ok"] is True
    assert data["sizes"]["after_fatbin_bytes"] < data["sizes"]["before_fatbin_bytes"]
    assert data["files"][0]["dropped"] == [{"kind": "sass", "arch": "80", "entries": 1, "bytes": 576}]
    # 12.0 has no code in this wheel: the slim wheel is written, and the check fails it with 11
    assert main(["slim", str(src), "--archs", "9.0,12.0", "-o", str(tmp_path / "o2")]) == 11
    out = capsys.readouterr()
    assert "FAIL" in out.out and "12.0" in out.out


def test_quiet_slim_prints_the_wheel_and_the_verdict(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    lib = elf(sections={".nv_fatbin": _module(1, (80, 90), None)}, needed=("libcudart.so.13",), runpath=CU13_RUNPATH)
    src = _wheel(tmp_path, lib=lib)
    assert main(["slim", str(src), "--archs", "9.0", "-o", str(tmp_path / "loud")]) == 0
    assert "dropped device code" in capsys.readouterr().out
    assert main(["-q", "slim", str(src), "--archs", "9.0", "-o", str(tmp_path / "q")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("slimmed: ") and lines[1].startswith("PASS "), lines


def test_an_x86_64_request_leaves_out_integrated_gpus(tmp_path: Path) -> None:
    r = slim(_wheel(tmp_path), tmp_path / "out", archs=parse_require_arch("8.0-9.0"))
    assert CC(8, 7) in r.left_out and CC(8, 7) not in r.request.ccs
    assert sorted(str(t) for t in inspect_wheel(r.rewritten.wheel).targets) == ["sm_80", "sm_90"]


def test_ptx_newest_keeps_the_newest_ptx(tmp_path: Path) -> None:
    r = slim(_wheel(tmp_path), tmp_path / "out", archs=parse_require_arch("9.0"), ptx=parse_ptx("newest"))
    assert r.rewritten.wheel.name.startswith("pkg-1.2.0+slim.sm90.ptx-")
    assert sorted(str(t) for t in r.after.targets) == ["compute_120", "sm_90"]


def test_local_version_labels() -> None:
    assert local_version("1.2.0", "slim.sm90") == "1.2.0+slim.sm90"
    assert local_version("2.11.0+cu130", "slim.sm90") == "2.11.0+cu130.slim.sm90"
    with pytest.raises(BadInputError):
        local_version("1.0", "slim/sm90")


def test_existing_local_version_is_extended(tmp_path: Path) -> None:
    r = slim(_wheel(tmp_path, version="2.1+cu130"), tmp_path / "out", archs=parse_require_arch("9.0"))
    assert r.rewritten.wheel.name == f"pkg-2.1+cu130.slim.sm90-{TAG}.whl"
    assert r.after.version == "2.1+cu130.slim.sm90"


@pytest.mark.parametrize("spec", ["bogus", "9.x"])
def test_bad_ptx_spec(spec: str) -> None:
    with pytest.raises(BadInputError, match="--ptx"):
        parse_ptx(spec)


def test_bad_inputs_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_zip = tmp_path / "pkg-1.0-py3-none-any.whl"
    not_zip.write_bytes(b"not a zip at all")
    assert main(["slim", str(not_zip), "--archs", "9.0", "-o", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err
    assert str(not_zip) in err and "Traceback" not in err
    # a fatbin whose header claims more bytes than the section holds
    broken = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)], fat_size=1 << 20)})
    src = _wheel(tmp_path, lib=broken)
    assert main(["slim", str(src), "--archs", "9.0", "-o", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err
    assert "pkg/_ext.abi3.so" in err and "run past the end" in err
    assert not list((tmp_path / "o").glob("*.whl"))  # nothing half-written
    pure = make_wheel(tmp_path / "pure", name="pure", files={"pure/__init__.py": b""}, tag="py3-none-any")
    assert main(["slim", str(pure), "--archs", "9.0", "-o", str(tmp_path / "o")]) == 3
    assert "nothing to slim" in capsys.readouterr().err
    # fatbins whose modules define no kernel (cuda-cccl 1.2.1's): kept whole, so nothing to slim either; it was
    # "no CUDA module of it runs on 9.0 (its code: none)", exit 11, as if the request were the fault
    empty = cubin(90, text=None)
    kernelless = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90, payload=empty)])})
    src = _wheel(tmp_path / "kernelless", lib=kernelless)
    assert main(["slim", str(src), "--archs", "9.0", "-o", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err
    assert "none of its 1 CUDA module(s) defines a kernel" in err and "nothing to slim" in err
    assert not list((tmp_path / "o").glob("*.whl"))


def test_variants_one_wheel_per_family(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    report = inspect_wheel(src)
    fams = families(report)
    assert [f.label for f in fams] == ["sm7x", "sm8x", "sm9x", "sm10x", "sm12x"]
    assert [f.request.ptx for f in fams] == ["needed"] * 4 + ["newest"]
    r = make_variants(src, tmp_path / "v")
    assert r.universal.read_bytes() == src.read_bytes()
    by_label = {v.family.label: v for v in r.variants}
    v90 = by_label["sm9x"]
    assert v90.rewritten.wheel.name == f"pkg-1.2.0-{TAG}-sm9x.whl"  # PEP 825: label after the platform tag
    assert [str(t) for t in v90.report.targets] == ["sm_90"] and inspect_wheel(v90.rewritten.wheel).version == "1.2.0"
    names = _record_ok(v90.rewritten.wheel)
    with zipfile.ZipFile(v90.rewritten.wheel) as zf:
        vj = json.loads(zf.read("pkg-1.2.0.dist-info/variant.json"))
    assert "pkg-1.2.0.dist-info/variant.json" in names
    # the schema uv 0.13.8 reads (0.1.0 it skips), and the provider it needs declared for the namespace
    assert vj["$schema"] == "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
    assert vj["default-priorities"] == {"namespace": ["nvidia"]}
    assert vj["providers"] == {"nvidia": PROVIDER}
    # CUDA 13 SASS loads on any CUDA 13 driver
    assert vj["variants"] == {"sm9x": {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["90_real"]}}}
    top = by_label["sm12x"]
    assert sorted(str(t) for t in top.report.targets) == ["compute_120", "sm_120"]
    # its PTX is ISA 9.0, CUDA 13.0's: JIT-compiled by any CUDA 13 driver (other ISAs: test_variant_cuda_lower_bound)
    assert top.properties == {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["120_real", "120_virtual"]}}
    assert [str(c) for c in by_label["sm8x"].family.request.ccs] == ["8.0", "8.6", "8.9"]  # 8.7 is Jetson
    index = json.loads(r.index_file.read_text())
    assert r.index_file.name == "pkg-1.2.0-variants.json"
    assert index["variants"] == {label: v.properties for label, v in by_label.items()}
    assert index["providers"] == vj["providers"]
    assert all(v.verdict.ok for v in r.variants)


def test_variants_of_a_wheel_without_sass(tmp_path: Path) -> None:
    lib = elf(sections={".nv_fatbin": _module(3, (), 90)}, needed=("libcudart.so.13",), runpath=CU13_RUNPATH)
    with pytest.raises(BadInputError, match="no SASS"):
        make_variants(_wheel(tmp_path, lib=lib), tmp_path / "v")


def _changed_after_build(src: Path) -> Path:
    """A copy of `src` whose __init__.py changed after its RECORD was written (what check fails with exit 14)."""
    out = src.parent / "changed" / src.name
    out.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for zi in zin.infolist():
            data = zin.read(zi)
            zout.writestr(zi, data + b"# changed\n" if zi.filename == "pkg/__init__.py" else data)
    return out


def test_slim_and_variants_refuse_a_wrong_record_unless_told(tmp_path: Path) -> None:
    w = _changed_after_build(_wheel(tmp_path))
    assert main(["check", "--require-arch", "none", str(w)]) == 14
    for argv in (["slim", "--archs", "9.0"], ["variants"]):
        assert main([*argv, "-o", str(tmp_path / "refused"), str(w)]) == 14, argv
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    r = slim(w, tmp_path / "out", archs=parse_require_arch("9.0"), rewrite_record=True)
    _record_ok(r.rewritten.wheel)
    assert r.verdict.ok
    v = make_variants(w, tmp_path / "variants", rewrite_record=True)
    assert all(x.verdict.ok for x in v.variants) and v.variants
    for x in v.variants:
        _record_ok(x.rewritten.wheel)


def test_slim_and_variants_judge_their_outputs_as_check_does(tmp_path: Path) -> None:
    """An optional part (a module the package imports under try/except ImportError) whose library nothing installs
    is a note for `check`, so for slim's and variants' own checks too (CuPy's NCCL: slim exited 12 on cupy-cuda13x);
    and the output's platform tag is its final name's, not the WHEEL file's."""
    nccl = elf(sections={".text": b"\xc3" * 64}, needed=("libnccl.so.2", "libc.so.6"), soname="nccl.abi3.so")
    w = make_wheel(
        tmp_path / "in",
        name="pkg",
        version="1.2.0",
        tag="cp312-abi3-linux_x86_64",  # the WHEEL file's tag; the name says manylinux (CuPy 14.2's wheels do)
        filename=f"pkg-1.2.0-{TAG}.whl",
        files={
            "pkg/_ext.abi3.so": _lib(),
            "pkg/nccl.abi3.so": nccl,
            "pkg/__init__.py": b"from ._ext import *\ntry:\n    from . import nccl\nexcept ImportError:\n    nccl = None\n",
        },
        requires=("nvidia-cuda-runtime>=13.0,<14",),
    )
    res = slim(w, tmp_path / "out", archs=parse_require_arch("9.0"))
    assert res.verdict.ok, res.verdict.failures
    assert any("optional part" in n and "libnccl.so.2" in n for n in res.verdict.notes)
    assert res.after.tags == (TAG,)
    made = make_variants(w, tmp_path / "variants")
    assert made.variants and all(v.verdict.ok for v in made.variants), [v.verdict.failures for v in made.variants]


def test_kepler_code_can_be_kept_and_gets_no_variant(tmp_path: Path) -> None:
    """dgl-cu111 0.6.1 has sm_35 and sm_37: `slim --archs 3.7` said "no GPU has compute capability 3.7", and
    `variants` stopped at "coverage request '3.0-3.9' names no compute capability". Kepler GPUs are real (CUDA 11.8
    targets them): slim keeps their code when asked, and variants leaves them to the universal wheel."""
    from slimwheel.cuda.arch import require_known

    lib = elf(
        sections={".text": b"\xc3" * 256, ".nv_fatbin": _module(3, (35, 37, 80), 80)},
        needed=("libcudart.so.11.0", "libc.so.6"),
        runpath="$ORIGIN/../nvidia/cuda_runtime/lib",
        soname="_ext.abi3.so",
    )
    src = make_wheel(
        tmp_path / "in",
        name="pkg",
        version="1.2.0",
        tag=TAG,
        files={"pkg/_ext.abi3.so": lib, "pkg/__init__.py": b"from ._ext import *\n"},
        requires=("nvidia-cuda-runtime-cu11>=11.0,<12",),
    )
    assert [f.label for f in families(inspect_wheel(src))] == ["sm8x"]
    assert main(["slim", str(src), "--archs", "3.7", "--offline", "-o", str(tmp_path / "o")]) == 0
    (out,) = (tmp_path / "o").glob("*.whl")
    assert [str(t) for t in inspect_wheel(out).targets] == ["sm_37"]
    with pytest.raises(BadInputError, match=r"no GPU has compute capability 3\.1") as e:
        require_known([CC(3, 1)], what="--archs '3.1'")
    assert "Kepler, up to CUDA 11.8: 3.0, 3.5, 3.7" in (e.value.hint or "")
