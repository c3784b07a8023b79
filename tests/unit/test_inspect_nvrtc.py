"""inspect.nvrtc on records built here (the layout SlimWheelNvrtc.cmake writes) and on hostile bytes."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import embedded_sources
from slimwheel.inspect.nvrtc import MAGIC, SECTION, describe, parse_section, served_ccs
from slimwheel.inspect.scan import wheel_embedded_sources
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel


def record(files: dict[str, bytes], *, major: int = 13, sources: int = 1, manifest: object = None) -> bytes:
    """One record as the CMake generator lays it out, the compiler's terminating NUL included."""
    entries, offset = [], 0
    for name, text in files.items():
        entries.append({"name": name, "offset": offset, "bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()})
        offset += len(text)
    m = manifest or {
        "schema": 1,
        "bundle": "kernels",
        "cuda_major": major,
        "nvrtc": {"soname": f"libnvrtc.so.{major}", "folder": "nvidia/cu13/lib", "package": "nvidia-cuda-nvrtc"},
        "sources": sources,
        "files": entries,
    }
    text = json.dumps(m, separators=(",", ":")).encode()
    return MAGIC + b"%010d\n" % len(text) + text + b"".join(files.values()) + b"\0"


FILES = {"topk.cuh": b'#include "sort.cuh"\nR"x()x"\r\n', "sort.cuh": bytes(range(1, 256))}


def test_one_record_round_trip() -> None:
    (r,) = parse_section(record(FILES), where="lib.so")
    assert (r.bundle, r.cuda_major, r.sources, r.nvrtc_soname) == ("kernels", 13, 1, "libnvrtc.so.13")
    assert [(f.name, f.size) for f in r.files] == [(n, len(t)) for n, t in FILES.items()]
    assert r.source_bytes == sum(map(len, FILES.values()))
    assert r.record_bytes == len(record(FILES))


def test_several_records_with_alignment_padding() -> None:
    a, b = record(FILES), record({"x.cuh": b"int x;\n"})
    records = parse_section(a + b"\0" * 13 + b + b"\0" * 7, where="lib.so")
    assert [r.files[0].name for r in records] == ["topk.cuh", "x.cuh"]


def test_in_a_shared_library_section() -> None:
    data = elf(sections={".text": b"\x90" * 64, SECTION: record(FILES)}, needed=("libc.so.6",))
    (r,) = embedded_sources(data, "pkg/_ext.so")
    assert r.files[1].sha256 == hashlib.sha256(FILES["sort.cuh"]).hexdigest()
    assert embedded_sources(elf(sections={".text": b"\x90"}), "plain.so") == ()
    assert embedded_sources(b"not an elf", "x.txt") == ()


def test_a_changed_byte_is_reported() -> None:
    data = bytearray(record(FILES))
    data[-5] ^= 1
    with pytest.raises(BadInputError, match="sort.cuh.*SHA-256"):
        parse_section(bytes(data), where="lib.so")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r[: len(MAGIC) + 5], "not a slimwheel NVRTC record"),
        (lambda r: b"SLWNVRTC9" + r[9:], "not a slimwheel NVRTC record"),
        (lambda r: MAGIC + b"9999999999\n" + r[len(MAGIC) + 11 :], "does not fit"),
        (lambda r: MAGIC + b"0000000003\n{x}", "not JSON"),
        (lambda r: r[:-40], "ends past the section"),
    ],
)
def test_malformed_records(mutate: Callable[[bytes], bytes], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        parse_section(mutate(record(FILES)), where="lib.so")


@pytest.mark.parametrize(
    "manifest",
    [
        {"schema": 1},
        {
            "schema": 2,
            "bundle": "k",
            "cuda_major": 13,
            "nvrtc": {"soname": "", "folder": "", "package": ""},
            "sources": 0,
            "files": [],
        },
        {"schema": 1, "bundle": "k", "cuda_major": -1, "nvrtc": {}, "sources": 1, "files": []},
        {
            "schema": 1,
            "bundle": "k",
            "cuda_major": True,
            "nvrtc": {"soname": "a", "folder": "b", "package": "c"},
            "sources": 1,
            "files": [],
        },
        ["not", "an", "object"],
    ],
)
def test_bad_manifests_are_bad_input(manifest: object) -> None:
    with pytest.raises(BadInputError):
        parse_section(record({}, manifest=manifest), where="lib.so")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    with contextlib.suppress(BadInputError):
        parse_section(data, where="fuzz")


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0), st.binary(min_size=1, max_size=8))
def test_corrupted_records_are_bad_input_or_consistent(position: int, junk: bytes) -> None:
    data = bytearray(record(FILES))
    at = position % len(data)
    data[at : at + len(junk)] = junk
    try:
        records = parse_section(bytes(data), where="fuzz")
    except BadInputError:
        return
    # Anything accepted must still describe files whose hashes match the bytes it claims.
    for r in records:
        assert all(len(f.sha256) == 64 for f in r.files)


def test_served_ccs_follow_the_nvrtc_of_the_major() -> None:
    (r13,) = parse_section(record(FILES, major=13), where="a")
    assert served_ccs(r13)[0] == CC(7, 5) and CC(12, 0) in served_ccs(r13) and CC(7, 0) not in served_ccs(r13)
    (r12,) = parse_section(record(FILES, major=12), where="b")
    assert CC(5, 0) in served_ccs(r12) and CC(10, 0) not in served_ccs(r12)
    assert CC(10, 0) in served_ccs(r12, nvrtc=CudaVersion(12, 8))
    with pytest.raises(BadInputError, match="NVRTC of CUDA 13"):
        served_ccs(r13, nvrtc=CudaVersion(12, 8))
    row = describe([r13])[0]
    assert (
        row["requires"] == "nvidia-cuda-nvrtc"
        and row["serves"] == [str(cc) for cc in served_ccs(r13)]
        and row["source_bytes"] == sum(map(len, FILES.values()))
    )


def test_wheel_members_with_records(tmp_path: Path) -> None:
    with_sources = elf(sections={".text": b"\x90" * 32, SECTION: record(FILES)})
    without = elf(sections={".text": b"\x90" * 32})
    wheel = make_wheel(tmp_path, files={"pkg/_a.so": with_sources, "pkg/_b.so": without, "pkg/x.py": b"pass\n"})
    found = wheel_embedded_sources(wheel)
    assert list(found) == ["pkg/_a.so"] and found["pkg/_a.so"][0].files[0].name == "topk.cuh"


def test_build_summary_names_what_embedded_sources_serve(tmp_path: Path) -> None:
    from slimwheel.commands.build import targets_line
    from slimwheel.inspect.scan import inspect_wheel
    from testkit.binsynth import fatbin, fatbin_entry

    runtime = make_wheel(tmp_path / "rt", files={"pkg/_a.so": elf(sections={".text": b"\x90", SECTION: record(FILES)})})
    line = targets_line(inspect_wheel(runtime))
    served = " ".join(f"sm_{cc.sm}" for cc in served_ccs(parse_section(record(FILES), where="x")[0]))
    assert line.startswith("none precompiled; at run time by NVRTC 13: ") and served in line and "compute_" in line
    plain = make_wheel(
        tmp_path / "fb", files={"pkg/_b.so": elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)])})}
    )
    assert targets_line(inspect_wheel(plain)) == "sm_90"
    cpu = make_wheel(tmp_path / "cpu", files={"pkg/_c.so": elf(sections={".text": b"\x90"})})
    assert targets_line(inspect_wheel(cpu)) == "none"
