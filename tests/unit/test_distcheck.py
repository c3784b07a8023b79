"""slimwheel.distcheck: installed-size budget, debug symbols left in ELF files, the release total vs PyPI's limit.

Wheels and ELF files are generated here (testkit.binsynth / testkit.wheelmaker), never committed."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel import distcheck
from slimwheel.errors import ExitCode
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_wheel
from testkit.binsynth import cubin, elf
from testkit.wheelmaker import make_wheel

MiB = 2**20


def wheel_with(tmp_path: Path, files: dict[str, bytes], tag: str = "cp312-abi3-manylinux_2_28_x86_64") -> Path:
    return Path(make_wheel(tmp_path, name="pkg", files=files, tag=tag))


def test_installed_size_is_judged_on_the_uncompressed_files(tmp_path: Path) -> None:
    # 3 MiB of zeros deflate to a few KiB: small download, large install
    r = inspect_wheel(wheel_with(tmp_path, {"pkg/blob.bin": b"\0" * (3 * MiB)}))
    assert r.size < MiB < r.installed_size
    assert distcheck.installed_size(r, 4 * MiB) is None
    f = distcheck.installed_size(r, 2 * MiB)
    assert f is not None and f.kind == "installed-size" and f.exit_code is ExitCode.OVER_BUDGET
    assert "2.00 MiB" in f.message and f.bytes == r.installed_size
    assert distcheck.findings(r, installed_budget=None) == ()  # opt-in


@settings(max_examples=30, deadline=None)
@given(size=st.integers(min_value=0, max_value=200_000), budget=st.integers(min_value=0, max_value=400_000))
def test_installed_size_finding_iff_over(tmp_path_factory: pytest.TempPathFactory, size: int, budget: int) -> None:
    tmp = tmp_path_factory.mktemp("w")
    r = inspect_wheel(wheel_with(tmp, {"pkg/data.bin": os.urandom(size)}))
    assert (distcheck.installed_size(r, budget) is not None) == (r.installed_size > budget)


def test_debug_sections_and_a_large_symtab_are_found_per_file(tmp_path: Path) -> None:
    files = {
        "pkg/clean.so": elf(sections={".text": b"\x90" * 64}),
        "pkg/debug.so": elf(sections={".text": b"\x90" * 64, ".debug_info": b"d" * 5000, ".debug_line": b"l" * 1000}),
        "pkg/zdebug.so": elf(sections={".zdebug_info": b"z" * 100}),
        "pkg/symbols.so": elf(sections={".symtab": b"s" * (MiB // 2 + 1), ".strtab": b"t" * (MiB // 2)}),
        "pkg/few_symbols.so": elf(sections={".symtab": b"s" * 4096, ".strtab": b"t" * 4096}),
    }
    r = inspect_wheel(wheel_with(tmp_path, files))
    found = {f.message.split(":")[0]: f for f in distcheck.debug_symbols(r)}
    assert set(found) == {"pkg/debug.so", "pkg/zdebug.so", "pkg/symbols.so"}
    assert found["pkg/debug.so"].bytes == 6000 and ".debug_*" in found["pkg/debug.so"].message
    assert "symbol table" in found["pkg/symbols.so"].message and found["pkg/symbols.so"].bytes == MiB + 1
    assert all(f.kind == "debug-symbols" and f.exit_code is ExitCode.DEBUG_INFO for f in found.values())
    # a lower limit also flags the small table; the switch in `findings` is off by default
    assert "pkg/few_symbols.so" in {f.message.split(":")[0] for f in distcheck.debug_symbols(r, symtab_limit=100)}
    assert distcheck.findings(r) == () and len(distcheck.findings(r, debug=True)) == 3


def test_a_standalone_cubin_s_debug_frame_is_not_a_host_file_left_unstripped(tmp_path: Path) -> None:
    """flashinfer-cubin 0.6.13: 15,970 standalone cubins, each with nvcc's 544-byte .debug_frame, were 15,970
    debug-symbols failures telling the user to run host `strip` on device code. A cubin is the compiler's to leave
    debug info out of, as the cubins inside fatbins are; a host library with the same section still fails."""
    frame = {".debug_frame": b"f" * 544}
    files = {"pkg/cubins/k.cubin": cubin(100, extra=frame), "pkg/host.so": elf(sections={".text": b"\x90", **frame})}
    r = inspect_wheel(wheel_with(tmp_path, files))
    assert [f.message.split(":")[0] for f in distcheck.debug_symbols(r)] == ["pkg/host.so"]


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                ".debug_info",
                ".debug_str",
                ".zdebug_abbrev",
                ".symtab",
                ".strtab",
                ".text",
                ".rodata",
                ".debugger",
                ".comment",
            ]
        ),
        st.integers(min_value=1, max_value=3000),
        max_size=6,
    )
)
def test_debug_info_counts_exactly_the_strippable_sections(sections: dict[str, int]) -> None:
    blob = elf(sections={k: b"x" * n for k, n in sections.items()})
    info = distcheck.debug_info(read_elf(blob, "x.so"))
    assert info.debug_bytes == sum(n for k, n in sections.items() if k.startswith((".debug_", ".zdebug_")))
    assert info.symtab_bytes == sections.get(".symtab", 0) + sections.get(".strtab", 0)


def test_release_total_against_the_project_limit(tmp_path: Path) -> None:
    reports = [
        inspect_wheel(wheel_with(tmp_path / str(i), {"pkg/d.bin": os.urandom(20_000)}, tag=tag))
        for i, tag in enumerate(["cp312-abi3-manylinux_2_28_x86_64", "cp312-abi3-manylinux_2_28_aarch64"])
    ]
    total = distcheck.release_total(reports + reports[:1])  # the same file twice counts once
    assert len(total.wheels) == 2 and total.total == sum(r.size for r in reports)
    assert total.limit == 10 * 2**30 and not total.over and distcheck.release_finding(total) is None
    assert total.line().startswith("release total: 2 wheels, ") and "of the 10.00 GiB project limit" in total.line()
    tight = distcheck.release_total(reports, limit=total.total - 1)
    f = distcheck.release_finding(tight)
    assert f is not None and f.kind == "release-total" and f.exit_code is ExitCode.OVER_BUDGET
    # what earlier releases already take on the index counts too
    near = distcheck.release_total(reports, limit=total.total + 10, already_used=11)
    assert near.over and "already on the index" in near.line()


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> WheelReport:
    return inspect_wheel(wheel_with(tmp_path_factory.mktemp("t"), {"pkg/a.txt": b"a"}))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**34), max_size=8), st.integers(min_value=1, max_value=2**36))
def test_release_total_arithmetic(base_report: WheelReport, sizes: list[int], limit: int) -> None:
    reports = [replace(base_report, path=Path(f"w{i}.whl"), size=s) for i, s in enumerate(sizes)]
    t = distcheck.release_total(reports, limit=limit)
    assert t.total == sum(sizes) and t.over == (sum(sizes) > limit)
    assert (distcheck.release_finding(t) is None) == (not t.over)
