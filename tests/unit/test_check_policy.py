"""check_wheel on synthetic wheels: budget, coverage, dependency consistency, exit codes, config precedence."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from slimwheel.check import (
    CheckPolicy,
    Verdict,
    check_wheel,
    exit_code_for,
    make_policy,
    raise_for,
    required_ccs,
)
from slimwheel.cli import main
from slimwheel.config import DEFAULT_BUDGET
from slimwheel.cuda.arch import CC, parse_require_arch
from slimwheel.deps import system_policy
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.fatbin import FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC
from slimwheel.inspect.report import coverage_detail
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.units import parse_size
from testkit.binsynth import FLAG_64BIT_LINUX, elf, fatbin, fatbin_entry, nvidia_runpath
from testkit.wheelmaker import make_wheel

FB = fatbin([fatbin_entry(sm=80), fatbin_entry(kind="ptx", sm=80, ptx_isa=(8, 0))])


def wheel(
    tmp_path: Path,
    *,
    needed: tuple[str, ...] = ("libcudart.so.12", "libc.so.6"),
    requires: tuple[str, ...] = ("nvidia-cuda-runtime-cu12",),
    extra: dict[str, bytes] | None = None,
    tag: str = "cp312-abi3-manylinux_2_28_x86_64",
    fb: bytes = FB,
) -> Path:
    # the RUNPATH repair writes: a requirement or a member provides a library only where the search path reaches it
    own = ":".join(f"$ORIGIN/../{m.rsplit('/', 1)[0]}" for m in extra or {} if m.rsplit("/", 1)[-1] in needed)
    runpath = ":".join(filter(None, (nvidia_runpath("pkg/_ext.abi3.so", needed), own)))
    ext = elf(sections={".nv_fatbin": fb}, needed=needed, runpath=runpath)
    files = {"pkg/_ext.abi3.so": ext, **(extra or {})}
    return make_wheel(tmp_path, name="pkg", files=files, requires=requires, tag=tag)


def verdict(path: Path, *, budget: str = DEFAULT_BUDGET, require_arch: str = "") -> Verdict:
    """The verdict on `path` with the options as a command line gives them, parsed as the CLI's config parses them."""
    r = inspect_wheel(path)
    policy = make_policy(r, budget=parse_size(budget, what="budget"), require_arch=parse_require_arch(require_arch))
    return check_wheel(r, policy)


def test_a_consistent_wheel_passes(tmp_path: Path) -> None:
    v = verdict(wheel(tmp_path), require_arch="8.0-12.0")
    assert v.ok and v.failures == ()
    assert any("PTX JIT" in n and "9.0" in n for n in v.notes)
    raise_for([v])


def test_over_budget(tmp_path: Path) -> None:
    v = verdict(wheel(tmp_path, extra={"pkg/blob.bin": random.Random(0).randbytes(1_100_000)}), budget="1MB")
    (f,) = v.failures
    assert f.kind == "budget" and f.exit_code is ExitCode.OVER_BUDGET and "1.00 MB" in f.message
    with pytest.raises(CheckFailed) as e:
        raise_for([v])
    assert e.value.exit_code == 10


def test_missing_coverage_names_the_cc(tmp_path: Path) -> None:
    sass_only = fatbin([fatbin_entry(sm=70), fatbin_entry(sm=80)])
    v = verdict(wheel(tmp_path, fb=sass_only), require_arch="7.0-9.0")
    (f,) = v.failures
    assert f.kind == "coverage" and f.exit_code == 11 and "9.0 (Hopper" in f.message and "8.0" not in f.message


def test_require_toolkit_is_every_cc_of_the_major_without_integrated_gpus_for_x86(tmp_path: Path) -> None:
    r = inspect_wheel(wheel(tmp_path))
    req, left_out = required_ccs("toolkit", r)
    assert CC(5, 0) in req and CC(12, 1) not in req and CC(8, 7) not in req and CC(12, 0) in req
    assert CC(8, 7) in left_out and CC(12, 1) in left_out
    arm = inspect_wheel(wheel(tmp_path / "arm", tag="cp312-abi3-manylinux_2_28_aarch64"))
    assert CC(8, 7) in required_ccs("toolkit", arm)[0]
    v = check_wheel(r, make_policy(r, require_arch="toolkit"))
    assert [f.kind for f in v.failures] == ["coverage"] and "5.0" in v.failures[0].message


def test_require_auto_is_no_newer_gpu_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto (a standalone check's default): from the oldest CC the wheel has code for up to the newest its CUDA major
    can target. SASS 8.0 + PTX 8.0 serves everything newer; SASS 8.0 alone loses Hopper and Blackwell."""
    r = inspect_wheel(wheel(tmp_path / "ptx"))
    req, _ = required_ccs("auto", r)
    assert min(req) == CC(8, 0) and CC(7, 5) not in req and CC(12, 0) in req and CC(12, 1) not in req
    assert check_wheel(r, make_policy(r, require_arch="auto")).ok
    sass_only = inspect_wheel(wheel(tmp_path / "sass", fb=fatbin([fatbin_entry(sm=80)])))
    v = check_wheel(sass_only, make_policy(sass_only, require_arch="auto"))
    assert [f.kind for f in v.failures] == ["coverage"]
    assert "9.0 (Hopper" in v.failures[0].message and "12.0" in v.failures[0].message
    # no device code, or no telling the CUDA major: nothing to require
    host_only = inspect_wheel(wheel(tmp_path / "host", fb=b"", needed=("libc.so.6",), requires=()))
    assert required_ccs("auto", host_only) == ((), ())
    # the CLI: no setting means auto; "none" switches coverage off
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLIMWHEEL_REQUIRE_ARCH", raising=False)
    w = wheel(tmp_path / "cli", fb=fatbin([fatbin_entry(sm=80)]))
    assert main(["-q", "check", str(w)]) == 11
    assert main(["-q", "check", "--require-arch", "none", str(w)]) == 0
    assert main(["-q", "check", "--require-arch", "8.0-8.9", str(w)]) == 0


def test_require_toolkit_needs_a_cuda_major(tmp_path: Path) -> None:
    r = inspect_wheel(wheel(tmp_path, needed=("libc.so.6",), requires=(), fb=fatbin([fatbin_entry(sm=80)])))
    assert r.cuda_major is None
    with pytest.raises(BadInputError, match="cannot tell the wheel's CUDA major"):
        required_ccs("toolkit", r)


@pytest.mark.parametrize(
    ("needed", "requires", "extra", "problem"),
    [
        (
            ("libcudart.so.12", "libm.so.6", "libcuda.so.1", "ld-linux-x86-64.so.2"),
            ("nvidia-cuda-runtime-cu12",),
            {},
            None,
        ),
        (("libfoo.so.1",), (), {"pkg.libs/libfoo.so.1": b"x" * 20}, None),
        (("libcudart.so.13",), ("nvidia-cuda-runtime>=13.0,<14",), {}, None),
        (("libcudart.so.13",), ("nvidia-cuda-runtime==13.*",), {}, None),
        (("libcudart.so.13",), ("nvidia-cuda-runtime==13.0.96",), {}, None),
        (("libcudart.so.13",), ("nvidia-cuda-runtime>=13.0.48,<13.0.90",), {}, None),
        (("libcudart.so.13",), ("nvidia-cuda-runtime==12.8.90",), {}, "does not pin nvidia-cuda-runtime to 13.*"),
        (("libfoo.so.1",), (), {}, "needs libfoo.so.1: not in the wheel, not a CUDA runtime library"),
        (("libcublas.so.12",), ("nvidia-cuda-runtime-cu12",), {}, "no Requires-Dist on nvidia-cublas-cu12"),
        (("libcudart.so.13",), ("nvidia-cuda-runtime",), {}, "does not pin nvidia-cuda-runtime to 13.*"),
        (("libcudart.so.13",), ("nvidia-cuda-runtime>=12",), {}, "does not pin nvidia-cuda-runtime to 13.*"),
        # issue 22: a CUDA library under an extra is installed on request: a note, not a failure (test_extras.py)
        (("libcudart.so.12",), ('nvidia-cuda-runtime-cu12; extra == "gpu"',), {}, None),
        (
            ("libcudart.so.13",),
            ('nvidia-cuda-runtime>=12; extra == "gpu"',),
            {},
            "no Requires-Dist on nvidia-cuda-runtime",
        ),
        (("libcudart.so.12",), ("nvidia-cuda-runtime-cu11",), {}, "no Requires-Dist on nvidia-cuda-runtime-cu12"),
    ],
)
def test_dependency_consistency(
    tmp_path: Path, needed: tuple[str, ...], requires: tuple[str, ...], extra: dict[str, bytes], problem: str | None
) -> None:
    v = verdict(wheel(tmp_path, needed=needed, requires=requires, extra=extra))
    if problem is None:
        assert v.ok, v.failures
    else:
        (f,) = v.failures
        assert (
            f.kind == "dependencies" and f.exit_code == 12 and problem in f.message and "pkg/_ext.abi3.so" in f.message
        )


def test_whitelist_comes_from_auditwheels_policy_for_the_oldest_tag(tmp_path: Path) -> None:
    r = inspect_wheel(wheel(tmp_path, tag="cp312-abi3-manylinux_2_17_x86_64.manylinux_2_28_x86_64"))
    p = system_policy(r.platforms)
    assert p.name == "manylinux_2_17" and "libstdc++.so.6" in p.whitelist and p.note is None
    plain = inspect_wheel(wheel(tmp_path / "l", tag="cp312-abi3-linux_x86_64"))
    assert "no manylinux platform tag" in (system_policy(plain.platforms).note or "")


def test_the_file_name_says_where_the_wheel_installs(tmp_path: Path) -> None:
    # cupy-cuda12x 14.2.0: named manylinux2014_x86_64 (what pip reads), WHEEL file still says linux_x86_64
    files = {"pkg/_ext.abi3.so": elf(sections={".nv_fatbin": FB}, needed=("libcudart.so.12", "libc.so.6"))}
    path = make_wheel(
        tmp_path,
        name="pkg",
        files=files,
        requires=("nvidia-cuda-runtime-cu12",),
        tag="cp311-cp311-linux_x86_64",
        filename="pkg-1.0-cp311-cp311-manylinux2014_x86_64.whl",
    )
    r = inspect_wheel(path)
    assert r.tags == ("cp311-cp311-manylinux2014_x86_64",)
    assert system_policy(r.platforms).name == "manylinux_2_17" and system_policy(r.platforms).note is None
    assert not any("no manylinux platform tag" in n for n in verdict(path).notes)
    odd = make_wheel(tmp_path / "odd", name="pkg", files=files, tag="cp311-cp311-linux_x86_64", filename="x.whl")
    assert inspect_wheel(odd).tags == ("cp311-cp311-linux_x86_64",)  # not named as a wheel: its WHEEL file


def test_several_kinds_of_failure_give_13(tmp_path: Path) -> None:
    v = verdict(
        wheel(tmp_path, needed=("libfoo.so.1",), fb=fatbin([fatbin_entry(sm=70)])), budget="100", require_arch="9.0"
    )
    assert {f.kind for f in v.failures} == {"budget", "coverage", "dependencies"}
    assert exit_code_for([v]) is ExitCode.CHECK_FAILED
    ok = check_wheel(inspect_wheel(wheel(tmp_path / "ok")), CheckPolicy())
    assert exit_code_for([ok]) is ExitCode.OK and exit_code_for([ok, v]) is ExitCode.CHECK_FAILED


def test_cli_precedence_cli_over_env_over_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = wheel(tmp_path / "w")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLIMWHEEL_BUDGET", raising=False)
    monkeypatch.delenv("SLIMWHEEL_REQUIRE_ARCH", raising=False)
    assert main(["-q", "check", str(w)]) == 0  # default 60 MiB
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nbudget = "100B"\nrequire-arch = "9.0"\n')
    assert main(["-q", "check", str(w)]) == 10  # PTX 8.0 serves 9.0, so only the budget fails
    out = capsys.readouterr().out
    assert "budget" in out
    monkeypatch.setenv("SLIMWHEEL_BUDGET", "10MiB")
    assert main(["-q", "check", str(w)]) == 0
    assert main(["-q", "check", "--budget", "1KB", str(w)]) == 10
    assert main(["-q", "check", "--require-arch", "7.0", str(w)]) == 11
    capsys.readouterr()
    assert main(["-q", "check", "--format", "json", "--require-arch", "7.0", str(w)]) == 11
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == 1 and doc["verdicts"][0]["failures"][0]["kind"] == "coverage"


def test_cli_reports_config_problems_with_did_you_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = wheel(tmp_path / "w")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nbudgett = "1MiB"\n')
    assert main(["-q", "check", str(w)]) == 3
    assert 'did you mean "budget"' in capsys.readouterr().err


def test_markdown_check_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    w = wheel(tmp_path / "w")
    assert main(["-q", "check", "--format", "markdown", "--require-arch", "7.0", str(w)]) == 11
    out = capsys.readouterr().out
    assert "**check: FAILED**" in out and "coverage: required compute capabilities" in out


def test_coverage_is_the_weakest_modules(tmp_path: Path) -> None:
    """One library with sm_90, one without: Hopper runs the first, not the second, so the wheel does not cover 9.0."""
    full = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=80), fatbin_entry(sm=90)])}, needed=("libc.so.6",))
    partial = elf(
        sections={".nv_fatbin": fatbin([fatbin_entry(sm=80), fatbin_entry(kind="ptx", sm=80)])}, needed=("libc.so.6",)
    )
    w = make_wheel(tmp_path, files={"p/a.so": full, "p/b.so": partial})
    r = inspect_wheel(w)
    assert CC(9, 0) in r.coverage.ptx_only and [str(t) for t in r.targets] == ["sm_80", "sm_90", "compute_80"]
    (gap,) = [g for g in r.coverage_gaps if g.cc == CC(9, 0)]
    assert (gap.how, gap.fatbins, gap.total, gap.elfs) == ("ptx", 1, 2, ("p/b.so",))
    # Some modules by PTX beside SASS for the others is said so, with counts; all of them by PTX is "only through".
    v = verdict(w, require_arch="9.0")
    assert v.ok and any(
        "(some modules only through PTX JIT, the others SASS: 9.0: 1 of 2 modules)" in n for n in v.notes
    )
    only = make_wheel(tmp_path / "o", files={"p/b.so": partial})
    v = verdict(only, require_arch="9.0")
    assert v.ok and any("(9.0 only through PTX JIT)" in n for n in v.notes), v.notes
    no_ptx = make_wheel(
        tmp_path / "n",
        files={
            "p/a.so": full,
            "p/b.so": elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=80)])}, needed=("libc.so.6",)),
        },
    )
    v = verdict(no_ptx, require_arch="9.0")
    (f,) = v.failures
    assert f.kind == "coverage" and "1 of 2 fatbins run not at all (in p/b.so)" in f.message


def test_required_ccs_outside_the_known_table_are_judged_too(tmp_path: Path) -> None:
    """8.8 is a CC nvcc 13 accepts but no product slimwheel knows has; sm_80 serves it, sm_90 does not."""
    assert verdict(wheel(tmp_path, fb=fatbin([fatbin_entry(sm=80)])), require_arch="8.8").ok
    v = verdict(wheel(tmp_path / "b", fb=fatbin([fatbin_entry(sm=90)])), require_arch="8.8")
    assert [f.kind for f in v.failures] == ["coverage"] and "8.8" in v.failures[0].message


_VARIANT_FLAGS = {"": 0, "a": FLAG_ARCH_SPECIFIC, "f": FLAG_FAMILY_SPECIFIC}


# One fatbin section's entries: (kind, sm) or (kind, sm, "a" | "f") for arch- and family-specific SASS.
Module = list[tuple[str, int] | tuple[str, int, str]]


def _one_lib(tmp_path: Path, *modules: Module) -> Path:
    """A wheel with one library holding one fatbin section per module; a module is [(kind, sm[, "a"|"f"]), ...]."""
    blob = b"".join(
        fatbin(
            [
                fatbin_entry(kind=e[0], sm=e[1], flags=FLAG_64BIT_LINUX | _VARIANT_FLAGS[e[2] if len(e) > 2 else ""])
                for e in m
            ]
        )
        for m in modules
    )
    return make_wheel(tmp_path, files={"p/lib.so": elf(sections={".nv_fatbin": blob}, needed=("libc.so.6",))})


def test_modules_made_for_newer_gpus_or_one_other_generation_do_not_count_against_a_gpu(tmp_path: Path) -> None:
    """Static cuBLAS: generic modules next to Ampere-and-newer and Hopper-only ones. Turing runs the generic ones."""
    w = _one_lib(
        tmp_path,
        [("sass", 75), ("sass", 80), ("ptx", 80)],  # the project's own kernels
        [("sass", 80), ("sass", 90)],  # tensor-core kernels for Ampere and newer
        [("sass", 90)],  # Hopper only
    )
    r = inspect_wheel(w)
    assert CC(7, 5) in r.coverage.native and CC(8, 6) in r.coverage.native
    assert CC(9, 0) in r.coverage.ptx_only  # cuBLAS has sm_90, but the project's own kernels only PTX 8.0
    assert CC(7, 0) in r.coverage.none  # nothing in the file is for Volta


def test_modules_of_newer_gpus_ptx_included_do_not_count_against_an_older_gpu(tmp_path: Path) -> None:
    """cuFFT and cuBLASLt: one module per architecture, some PTX for a newer GPU only (compute_90 alone, sm_107 alone,
    sm_100 sm_120 compute_120). They said 7.5, 8.0 and 10.0 were served by nothing; the library loads another."""
    w = _one_lib(
        tmp_path,
        [("sass", 75)],
        [("ptx", 75)],
        [("ptx", 90)],
        [("sass", 80)],
        [("sass", 100)],
        [("sass", 107)],
        [("sass", 100), ("sass", 120), ("ptx", 120)],
    )
    r = inspect_wheel(w)
    # Served, each at worst through the PTX 7.5 module (kept on its own, as cuFFT keeps it beside its sm_75 one).
    assert {CC(7, 5), CC(8, 0), CC(9, 0), CC(10, 0), CC(12, 0)} <= set(r.coverage.ptx_only)
    assert CC(7, 0) in r.coverage.none


def test_a_file_of_only_newer_gpu_code_does_not_serve_older_gpus(tmp_path: Path) -> None:
    r = inspect_wheel(_one_lib(tmp_path, [("sass", 90)], [("sass", 90), ("sass", 100)]))
    assert CC(8, 0) in r.coverage.none and CC(9, 0) in r.coverage.native and CC(12, 0) in r.coverage.none


def test_a_module_of_older_generations_only_is_a_gap_for_a_new_gpu(tmp_path: Path) -> None:
    """faiss-gpu-cu12's shape: cubins for 7.0 and 8.0 only and no PTX cannot run on Hopper."""
    r = inspect_wheel(_one_lib(tmp_path, [("sass", 70), ("sass", 80)], [("sass", 70), ("sass", 80), ("sass", 90)]))
    assert CC(9, 0) in r.coverage.none
    (gap,) = [g for g in r.coverage_gaps if g.cc == CC(9, 0)]
    assert (gap.how, gap.fatbins, gap.total) == ("none", 1, 2)


@pytest.mark.parametrize("component", ["cudart", "cublas", "curand", "cufft", "cusparse", "cusolver", "nvrtc"])
def test_check_accepts_the_requirements_repair_writes(tmp_path: Path, component: str) -> None:
    # nvidia-curand for CUDA 13 is version 10.x (its SONAME major), so "pinned to 13.*" would reject repair's output.
    from slimwheel.cuda.libs import load_order, lookup
    from slimwheel.deps import requirements

    libs = load_order([lookup("cudart", 13), lookup(component, 13)])
    reqs = requirements(libs, cuda=None)
    v = verdict(wheel(tmp_path, needed=tuple(lib.soname for lib in libs), requires=tuple(reqs.values())))
    assert v.ok, v.failures


def test_ptx_older_than_the_isa_table_is_reported_not_a_crash(tmp_path: Path) -> None:
    # PTX ISA 6.4 is CUDA 10.1's: older than every release slimwheel has a driver table for.
    old = fatbin([fatbin_entry(sm=70), fatbin_entry(kind="ptx", sm=70, ptx_isa=(6, 4))])
    r = inspect_wheel(wheel(tmp_path, needed=("libc.so.6",), requires=(), fb=old))
    assert r.ptx_release is None and r.ptx_driver_floor is None
    assert any("PTX ISA 6.4" in w for w in r.driver_why)
    assert CC(9, 0) in r.coverage.ptx_only


def test_text_from_the_wheel_is_printed_verbatim_not_as_rich_markup(tmp_path: Path) -> None:
    # A requirement with an extra ("[gpu]") was swallowed as a style tag, and "[/x]" crashed the table.
    from rich.console import Console

    from slimwheel import render

    w = wheel(tmp_path, needed=("libcudart.so.13",), requires=("nvidia-cuda-runtime[gpu]>=12",))
    r = inspect_wheel(w)
    v = check_wheel(r, make_policy(r))
    assert not v.ok
    console = Console(record=True, width=400)
    render.render_verdicts([v], console)
    assert "nvidia-cuda-runtime[gpu]>=12" in console.export_text()
    odd = wheel(tmp_path / "odd", needed=("libc.so.6",), requires=(), extra={"pkg/[/x].txt": b"data"})
    assert "pkg/[/x].txt" in render.report_text(inspect_wheel(odd), width=400, color=False)


def test_distcheck_findings_through_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 14 item 8: installed-size budget, unstripped objects, and the release total, through `slimwheel check`
    big = elf(
        sections={".nv_fatbin": FB, ".debug_info": b"\1" * 4096},
        needed=("libcudart.so.12", "libc.so.6"),
        runpath="$ORIGIN/../nvidia/cuda_runtime/lib",
    )
    w = make_wheel(
        tmp_path,
        name="pkg",
        files={"pkg/_ext.abi3.so": big, "pkg/blob.bin": b"\0" * 300_000},
        requires=("nvidia-cuda-runtime-cu12",),
    )
    # debug info fails by default (issue 38 item 5), with its own exit code and how to strip
    assert main(["check", str(w), "--require-arch", "none"]) == ExitCode.DEBUG_INFO
    out = capsys.readouterr().out
    assert "not stripped: 4.0 KiB of .debug_* sections" in out and "slimwheel repair --strip" in out
    assert main(["check", str(w), "--require-arch", "none", "--no-debug-symbols"]) == 0
    assert (
        main(["check", str(w), "--require-arch", "none", "--no-debug-symbols", "--installed-budget", "100KiB"])
        == ExitCode.OVER_BUDGET
    )
    assert "installed size" in capsys.readouterr().out
    assert main(["check", str(w), "--require-arch", "none", "--installed-budget", "100KiB"]) == ExitCode.CHECK_FAILED
    capsys.readouterr()
    assert main(["check", str(w), "--require-arch", "none", "--no-debug-symbols", "--release-total"]) == 0
    assert "release total: 1 wheel" in capsys.readouterr().err


def test_per_generation_modules_of_a_library_that_dispatches_by_gpu_are_not_judged(tmp_path: Path) -> None:
    """cuBLASLt 13.0's shape: Hopper's sm_90a modules, Ada/Blackwell FP8 modules that skip Hopper (sm_89 sm_120f
    compute_120), Ampere-to-Blackwell ones without sm_100 beside Blackwell's own sm_100 ones. It said 9.0 and 10.0
    were not served (a false failure on NVIDIA's own wheel); the library never launches those modules there."""
    lib: list[Module] = [
        [("sass", 90, "a")],
        [("sass", 89), ("sass", 120, "f"), ("ptx", 120)],
        [("sass", 80), ("sass", 89), ("sass", 90, "a"), ("sass", 120, "f")],
        [("sass", 100)],
        [("sass", 75), ("sass", 80), ("sass", 86), ("sass", 90), ("sass", 100), ("sass", 120), ("ptx", 120)],
    ]
    w = _one_lib(tmp_path, *lib)
    r = inspect_wheel(w)
    assert {CC(7, 5), CC(8, 0), CC(8, 9), CC(9, 0), CC(10, 0), CC(12, 0)} <= set(r.coverage.native)
    d = coverage_detail(r.elfs, (CC(9, 0), CC(10, 0)))
    by_cc = {e.cc: e for e in d.excused}
    assert by_cc[CC(9, 0)].fatbins == 1 and by_cc[CC(9, 0)].targets == (("sm_89", "sm_120f", "compute_120"),)
    assert by_cc[CC(10, 0)].fatbins == 2  # the sm_90a-only module is for an older GPU alone: _made_for_others
    v = verdict(w, require_arch="7.5-12.0")
    assert v.ok, v.failures
    assert any("9.0: 1 modules of p/lib.so carry no code for it" in n for n in v.notes)


def test_a_plain_build_missing_a_gpu_in_some_modules_is_still_a_gap(tmp_path: Path) -> None:
    """The control: the same module shapes without arch- or family-specific code (a project's own build, where one
    target was compiled for fewer GPUs) still fail for the GPU those modules skip."""
    w = _one_lib(
        tmp_path,
        [("sass", 89), ("sass", 120), ("ptx", 120)],
        [("sass", 75), ("sass", 80), ("sass", 90), ("sass", 100), ("sass", 120), ("ptx", 120)],
    )
    r = inspect_wheel(w)
    assert CC(9, 0) in r.coverage.none and coverage_detail(r.elfs, (CC(9, 0),)).excused == ()
    v = verdict(w, require_arch="9.0")
    assert [f.kind for f in v.failures] == ["coverage"]


def test_a_dispatching_file_with_no_native_module_for_a_gpu_is_judged(tmp_path: Path) -> None:
    """Arch-specific code alone excuses nothing: with no module running 9.0 natively, the skipping module counts."""
    w = _one_lib(tmp_path, [("sass", 89), ("sass", 120, "f")], [("sass", 100, "a")], [("sass", 80), ("ptx", 80)])
    r = inspect_wheel(w)
    assert CC(9, 0) in r.coverage.none


def _module_blob(*modules: Module) -> bytes:
    return b"".join(
        fatbin(
            [
                fatbin_entry(kind=e[0], sm=e[1], flags=FLAG_64BIT_LINUX | _VARIANT_FLAGS[e[2] if len(e) > 2 else ""])
                for e in m
            ]
        )
        for m in modules
    )


def _libs(tmp_path: Path, **libs: bytes) -> Path:
    files = {f"p/{n}.so": elf(sections={".nv_fatbin": b}, needed=("libc.so.6",)) for n, b in libs.items()}
    return make_wheel(tmp_path, files=files)


def test_a_component_file_for_newer_gpus_only_is_not_judged_where_other_files_run_natively(tmp_path: Path) -> None:
    """sgl-kernel 0.3.21: flashmla_ops carries sm_90a and sm_100a alone, a component the package loads on Hopper and
    Blackwell; its other files run Ampere natively. It said 8.0, 8.6 and 8.9 were not served."""
    main_ = _module_blob([("sass", 80), ("sass", 90, "a"), ("sass", 100, "a")])
    mla = _module_blob([("sass", 90, "a"), ("sass", 100, "a")], [("sass", 90, "a")])
    r = inspect_wheel(_libs(tmp_path, ops=main_, mla=mla))
    assert CC(8, 0) in r.coverage.native and CC(8, 6) in r.coverage.native
    (ex,) = coverage_detail(r.elfs, (CC(8, 0),)).excused
    assert ex.elfs == ("p/mla.so",) and ex.fatbins == 2
    v = verdict(_libs(tmp_path / "v", ops=main_, mla=mla), require_arch="8.0-9.0")
    assert v.ok and any("8.0: p/mla.so carries code for other GPUs only (sm_90a; sm_90a sm_100a)" in n for n in v.notes)


def test_files_for_other_gpus_in_a_wheel_that_picks_kernels_by_gpu(tmp_path: Path) -> None:
    """torchao 0.18: _C_cutlass_90a carries sm_90a alone, _C_mxfp8 sm_100 and compute_120: parts for Hopper and for
    Blackwell. Each GPU is served by one of them; check failed 9.0 on the one and 10.0, 10.3 and 12.0 on the other."""
    hopper = _module_blob([("sass", 90, "a")], [("sass", 90, "a")])
    blackwell = _module_blob([("sass", 100), ("ptx", 120)])
    r = inspect_wheel(_libs(tmp_path / "w", hopper=hopper, blackwell=blackwell))
    ccs = (CC(9, 0), CC(10, 0), CC(10, 3), CC(12, 0))
    assert set(ccs) <= set(r.coverage.native) | set(r.coverage.ptx_only)
    left = {ex.cc: (ex.elfs, ex.whole) for ex in coverage_detail(r.elfs, ccs).excused}
    assert left == {
        CC(9, 0): (("p/blackwell.so",), True),
        CC(10, 0): (("p/hopper.so",), True),
        CC(10, 3): (("p/hopper.so",), True),
        CC(12, 0): (("p/hopper.so",), True),  # 12.0 runs the other file's PTX: served, so the part is left out
    }
    v = verdict(_libs(tmp_path / "v", hopper=hopper, blackwell=blackwell), require_arch="9.0-12.0")
    assert v.ok, v
    # the Blackwell part alone, in a wheel with no code for other GPUs at all, is judged: 9.0 is not served
    alone = inspect_wheel(_libs(tmp_path / "a", blackwell=blackwell))
    assert CC(9, 0) in alone.coverage.none
    # and plain SASS for older GPUs (no PTX) in such a wheel is a library missing a GPU, not a part for others
    old = _module_blob([("sass", 75), ("sass", 80), ("sass", 90)])
    r = inspect_wheel(_libs(tmp_path / "o", hopper=hopper, blackwell=blackwell, old=old))
    assert CC(10, 0) in r.coverage.none


def test_a_component_file_alone_or_of_a_plain_build_is_still_judged(tmp_path: Path) -> None:
    mla = _module_blob([("sass", 90, "a"), ("sass", 100, "a")])
    alone = inspect_wheel(_libs(tmp_path / "a", mla=mla))  # nothing else runs 8.0: a Hopper-and-newer wheel
    assert CC(8, 0) in alone.coverage.none
    # transformer-engine-cu12 2.20.2's libnccl_ep: plain sm_90 sm_100 sm_120, no arch-specific code: a gap
    plain = _module_blob([("sass", 90), ("sass", 100), ("sass", 120)])
    main_ = _module_blob([("sass", 80), ("sass", 90), ("ptx", 90)])
    r = inspect_wheel(_libs(tmp_path / "p", ops=main_, ep=plain))
    assert CC(8, 0) in r.coverage.none and coverage_detail(r.elfs, (CC(8, 0),)).excused == ()
    # a component that has code for the GPU is judged as any file
    half = _module_blob([("sass", 90, "a")], [("sass", 75)])
    r = inspect_wheel(_libs(tmp_path / "h", ops=main_, half=half))
    assert CC(8, 0) in r.coverage.none


def test_a_wheel_that_is_a_cuda_library_of_one_major_tells_its_major() -> None:
    """nvidia-cuda-cupti-cu12 12.8.90 needs no CUDA library, requires nothing and has SASS only: "nothing in the wheel
    tells its major", so its GPU coverage went unjudged. The wheel ships libcupti.so.12, CUDA 12's alone. Last in
    order: what the wheel needs, requires or compiles decides first."""
    from slimwheel.cuda.major import cuda_major
    from slimwheel.cuda.versions import CudaVersion

    ships = [("nvidia/cuda_cupti/lib/libcupti.so.12", "libcupti.so.12"), ("nvidia/cuda_cupti/lib/libx.so", None)]
    e = cuda_major([("nvidia/cuda_cupti/lib/libcupti.so.12", ("libc.so.6",))], ships=ships)
    assert e.major == 12 and e.why == "nvidia/cuda_cupti/lib/libcupti.so.12 is libcupti.so.12, CUDA 12's"
    assert cuda_major([], ptx_release=CudaVersion(13, 0), ships=ships).major == 13  # the PTX decides first
    assert cuda_major([], ships=[("a.so", "libcurand.so.10")]).major is None  # shared by 12 and 13: says nothing
    both = [("a.so", "libcudart.so.12"), ("b.so", "libcudart.so.13")]
    assert cuda_major([], ships=both).major is None  # two majors shipped: no answer from this rule


def test_a_project_name_that_states_its_major_decides_before_the_ptx() -> None:
    """nvidia-cufile-cu12 1.14.1.1 carries PTX ISA 7.1 (CUDA 11.1's toolkit wrote it) and needs no CUDA library: it
    was reported "CUDA 11". Its name says 12; what the files need or require still decides first."""
    from slimwheel.cuda.major import cuda_major, named_major
    from slimwheel.cuda.versions import CudaVersion

    cases = {
        "nvidia-cufile-cu12": 12,
        "spconv-cu126": 12,
        "mxnet-cu112": 11,
        "cupy-cuda13x": 13,
        "nvidia-dali-cuda130": 13,
        "jax-cuda12-pjrt": 12,
        "nvidia_cudnn_cu13": 13,
        "cuda-bindings": None,
        "cucim": None,
        "mxnet-cu92": None,  # CUDA 9.2: no two-digit major after cu
        "pkg-cu1234": None,
        "both-cu12-cu13": None,  # two majors named: no answer
    }
    assert {name: named_major(name) for name in cases} == cases
    e = cuda_major([], ptx_release=CudaVersion(11, 1), name="nvidia-cufile-cu12")
    assert (e.major, e.why) == (12, "the project's name, nvidia-cufile-cu12")
    assert cuda_major([("a.so", ("libcudart.so.13",))], name="pkg-cu12").major == 13  # what a file needs: first
    assert cuda_major([], ["nvidia-cublas-cu13"], name="pkg-cu12").major == 13  # a requirement: before the name
    assert cuda_major([], ptx_release=CudaVersion(11, 1), name="pkg").major == 11  # no name evidence: the PTX
