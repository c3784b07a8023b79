"""inspect_wheel and `slimwheel size-report` on synthetic wheels; bad input as one-line errors with exit code 3."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from slimwheel.cli import main
from slimwheel.cuda.arch import CC
from slimwheel.errors import BadInputError
from slimwheel.inspect.report import report_to_json, target_totals
from slimwheel.inspect.scan import inspect_binary, inspect_file, inspect_wheel
from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel

FB13 = fatbin(
    [
        fatbin_entry(sm=75, flags=0x8011, payload=b"\1" * 40, compressed_size=40, uncompressed_size=400),
        fatbin_entry(sm=90, flags=0x108011, payload=b"\2" * 48, compressed_size=48, uncompressed_size=500),
        fatbin_entry(
            kind="ptx",
            sm=120,
            flags=0x8011,
            payload=b"\3" * 32,
            compressed_size=30,
            uncompressed_size=900,
            ptx_isa=(9, 0),
            header_size=80,
        ),
    ]
)
EXT13 = elf(
    sections={".text": b"\x90" * 2000, ".nv_fatbin": FB13},
    needed=("libcudart.so.13", "libc.so.6"),
    runpath="$ORIGIN/../nvidia/cu13/lib",
)


def cuda13_wheel(tmp_path: Path) -> Path:
    files = {"demo/_ext.abi3.so": EXT13, "demo/__init__.py": b"from ._ext import *\n" * 50}
    return make_wheel(tmp_path, files=files, requires=("nvidia-cuda-runtime==13.*",))


def test_report_of_a_cuda13_wheel(tmp_path: Path) -> None:
    w = cuda13_wheel(tmp_path)
    r = inspect_wheel(w)
    assert (r.name, r.version, r.size) == ("demo", "1.0", w.stat().st_size)
    assert {f.name for f in r.files} >= {"demo/_ext.abi3.so", "demo/__init__.py", "demo-1.0.dist-info/RECORD"}
    assert 0.5 < sum(f.share for f in r.files) < 1.0  # the rest is zip headers and the directory
    (e,) = r.elfs
    assert e.name == "demo/_ext.abi3.so" and e.needed == ("libcudart.so.13", "libc.so.6")
    assert [str(t) for t in r.targets] == ["sm_75", "sm_90a", "compute_120"]
    assert r.cuda_major == 13 and "libcudart.so.13" in r.cuda_major_why
    assert r.driver_floor == "580.65.06" and r.ptx_driver_floor == "580.65.06"
    assert r.compression == ("zstd",)
    # sm_75 serves 7.5 only (no cubin crosses a major), sm_90a exactly 9.0, PTX 120 the 12.x GPUs.
    assert r.coverage.native == (CC(7, 5), CC(9, 0)) and r.coverage.ptx_only == (CC(12, 0), CC(12, 1))
    assert CC(8, 0) in r.coverage.none and CC(10, 0) in r.coverage.none and CC(7, 0) in r.coverage.none
    totals = {(t.kind, t.arch): (t.count, t.stored, t.uncompressed) for t in target_totals(r.fatbin_entries)}
    assert totals == {("sass", "75"): (1, 40, 400), ("sass", "90a"): (1, 48, 500), ("ptx", "120"): (1, 30, 900)}


def test_cuda12_zstd_raises_the_driver_floor(tmp_path: Path) -> None:
    so = elf(
        sections={".nv_fatbin": fatbin([fatbin_entry(sm=80, flags=0x8011, compressed_size=10, uncompressed_size=99)])},
        needed=("libcudart.so.12",),
    )
    r = inspect_wheel(make_wheel(tmp_path, files={"m/x.so": so}))
    assert r.cuda_major == 12 and r.driver_floor == "550.54.14" and r.ptx_driver_floor is None
    assert any("550.54.14" in w for w in r.driver_why)


def test_ptx_isa_gives_the_ptx_jit_driver(tmp_path: Path) -> None:
    so = elf(
        sections={".nv_fatbin": fatbin([fatbin_entry(sm=70), fatbin_entry(kind="ptx", sm=90, ptx_isa=(8, 5))])},
        needed=("libcudart.so.12",),
    )
    r = inspect_wheel(make_wheel(tmp_path, files={"m/x.so": so}))
    assert str(r.ptx_release) == "12.5" and r.ptx_driver_floor == "555.42.02" and r.driver_floor == "525.60.13"


def test_json_is_versioned_and_complete(tmp_path: Path) -> None:
    doc = report_to_json(inspect_wheel(cuda13_wheel(tmp_path)))
    assert doc["schema"] == 1
    json.dumps(doc)
    (elf_doc,) = doc["elfs"]
    assert elf_doc["fatbins"][0]["entries"][1] == {
        "kind": "sass",
        "arch": "90a",
        "compression": "zstd",
        "stored_bytes": 48,
        "uncompressed_bytes": 500,
    }
    cov = {c["cc"]: c["served_by"] for c in doc["coverage"]}
    assert (cov["7.5"], cov["9.0"], cov["12.0"], cov["5.0"]) == ("sass", "sass", "ptx", "none")


def test_inspect_binary_reads_a_loose_library(tmp_path: Path) -> None:
    p = tmp_path / "libx.so"
    p.write_bytes(EXT13)
    assert len(inspect_binary(p).fatbins) == 1


def test_size_report_takes_a_loose_binary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A built extension or object file, before packaging: reported as a wheel of one file."""
    p = tmp_path / "_ext.so"
    p.write_bytes(EXT13)
    r = inspect_file(p)
    assert r.name == "_ext.so" and r.size == len(EXT13) and [f.name for f in r.files] == ["_ext.so"]
    assert [e.name for e in r.elfs] == ["_ext.so"] and r.targets == inspect_wheel(cuda13_wheel(tmp_path)).targets
    assert main(["-q", "size-report", "--format", "json", str(p)]) == 0
    assert json.loads(capsys.readouterr().out)["wheels"][0]["wheel"]["name"] == "_ext.so"
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert main(["-q", "size-report", str(bad)]) == 3
    assert "notes.txt" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_size_report_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    w = cuda13_wheel(tmp_path)
    assert main(["-q", "size-report", "--format", fmt, str(w)]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out)["schema"] == 1 and json.loads(out)["wheels"][0]["wheel"]["name"] == "demo"
    else:
        # Markdown escapes the units note: raw, "2**20 bytes, MB = 10**" rendered bold
        note = (
            "MiB = 2**20 bytes, MB = 10**6 bytes" if fmt == "table" else "MiB = 2\\*\\*20 bytes, MB = 10\\*\\*6 bytes"
        )
        assert "sm_90a" in out and "compute_120" in out and note in out
        assert "PTX JIT" in out and "580.65.06" in out
    if fmt == "markdown":
        assert out.startswith(f"### `{w.name}`") and "| 12.0 | Blackwell (RTX 50xx, RTX PRO) | PTX JIT |" in out


def test_size_report_writes_atomically_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = cuda13_wheel(tmp_path)
    out = tmp_path / "out" / "report.json"
    assert main(["-q", "size-report", "--format", "json", "-o", str(out), str(w)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(out.read_text())["wheels"][0]["targets"] == ["sm_75", "sm_90a", "compute_120"]
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    not_zip = tmp_path / "a-1.0-py3-none-any.whl"
    not_zip.write_text("hello")
    plain_zip = tmp_path / "b-1.0-py3-none-any.whl"
    with zipfile.ZipFile(plain_zip, "w") as z:
        z.writestr("b/__init__.py", "")
    escaping = make_wheel(tmp_path / "e", files={"../evil.so": EXT13})
    truncated = make_wheel(tmp_path / "t", files={"demo/_ext.so": EXT13[:300]})
    past_end = make_wheel(
        tmp_path / "p", files={"demo/_ext.so": elf(sections={".nv_fatbin": fatbin([fatbin_entry()], fat_size=1 << 20)})}
    )
    corrupt = cuda13_wheel(tmp_path / "c")
    data = bytearray(corrupt.read_bytes())
    i = data.find(b"demo/_ext.abi3.so") + len("demo/_ext.abi3.so") + 100  # inside the deflated ELF
    data[i] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    return {
        "not a zip": (not_zip, "not a zip file"),
        "not a wheel": (plain_zip, "not a wheel: no top-level *.dist-info folder"),
        "escaping path": (escaping, "member '../evil.so' escapes the wheel's folder"),
        "truncated ELF": (truncated, "demo/_ext.so: truncated ELF file"),
        "fatbin past end": (past_end, "demo/_ext.so [.nv_fatbin]: fatbin at offset 0x"),
        "corrupt member": (corrupt, "demo/_ext.abi3.so: corrupt"),
        "missing": (tmp_path / "nope.whl", "no such file"),
    }


@pytest.mark.parametrize(
    "case",
    ["not a zip", "not a wheel", "escaping path", "truncated ELF", "fatbin past end", "corrupt member", "missing"],
)
@pytest.mark.parametrize("cmd", ["size-report", "check"])
def test_bad_input_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str, cmd: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path, problem = _bad_inputs(tmp_path)[case]
    assert main(["-q", cmd, str(path)]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"slimwheel: error: {path}") and problem in line


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_entries_flag_lists_every_fatbin_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    w = cuda13_wheel(tmp_path)
    assert main(["-q", "size-report", "--entries", "--format", fmt, str(w)]) == 0
    out = capsys.readouterr().out
    assert "fatbin 1" in out and "9.0" in out  # the PTX entry's ISA
    assert out.count("zstd") >= 3


@pytest.mark.parametrize("command", ["size-report", "check"])
def test_output_to_a_wheel_path_is_refused_and_the_wheel_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # `-o dist/*.whl` makes the first wheel the output file: it must not be replaced by a report.
    first = cuda13_wheel(tmp_path / "a")
    second = cuda13_wheel(tmp_path / "b")
    before = first.read_bytes()
    assert main([command, "--format", "json", "-o", str(first), str(second)]) == 3
    assert "refusing to overwrite a .whl file" in capsys.readouterr().err
    assert first.read_bytes() == before


def test_an_output_path_that_cannot_be_written_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = cuda13_wheel(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert main(["size-report", "--format", "json", "-o", str(blocker / "out.json"), str(w)]) == 3
    assert f"{blocker / 'out.json'}: cannot write here" in capsys.readouterr().err


def test_the_record_bound_spans_every_file_of_a_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file under its own bound, the wheel over it: refused, naming the wheel."""
    monkeypatch.setattr("slimwheel.inspect.fatbin.MAX_RECORDS", 10)
    so = elf(sections={".nv_fatbin": fatbin([fatbin_entry()] * 5)})  # six records
    assert inspect_wheel(make_wheel(tmp_path / "one", files={"m/a.so": so})).elfs
    w = make_wheel(tmp_path / "two", files={"m/a.so": so, "m/b.so": so})
    with pytest.raises(BadInputError, match=rf"^{w}: more than 10 fatbin containers and entries in the wheel"):
        inspect_wheel(w)
