"""Verdicts on device code (issue 37 items 2 and 7, issue 40 item 4): a wheel with no device code, code for GPUs
newer than any it names (--require-arch 7.5+), and per-file GPU intent from [tool.slimwheel]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slimwheel.cli import main
from testkit.binsynth import cubin, elf, fatbin, fatbin_entry, nvidia_runpath, pad8, ptx
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    # coverage is what these judge: the synthesized files need no search path to their CUDA libraries
    code = main(["-q", "check", "--offline", "--no-dependencies", "--format", "json", *args])
    verdict = json.loads(capsys.readouterr().out)["verdicts"][0]
    return code, verdict["notes"], [f["message"] for f in verdict["failures"]]


def _nvrtc_wheel(tmp_path: Path) -> Path:
    lib = elf(
        sections={".text": b"\xc3" * 64},
        needed=("libnvrtc.so.12", "libcudart.so.12", "libc.so.6"),
        runpath=nvidia_runpath("jitpkg/_ext.abi3.so", ("libnvrtc.so.12", "libcudart.so.12")),
    )
    return make_wheel(
        tmp_path,
        name="jitpkg",
        files={"jitpkg/_ext.abi3.so": lib},
        requires=("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12"),
        tag=TAG,
    )


def test_a_wheel_that_compiles_at_run_time_passes_require_arch_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _nvrtc_wheel(tmp_path)
    code, notes, failures = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0 and not failures
    said = "no device code: kernels, if any, are built at run time (jitpkg/_ext.abi3.so loads libnvrtc.so.12)"
    assert any(n.startswith(said) and "--strict-device-code fails it" in n for n in notes), notes
    code, _notes, failures = _check(capsys, "--require-arch", "7.5-12.0", "--strict-device-code", str(w))
    assert code == 11 and "no device code" in failures[0]
    monkeypatch.setenv("SLIMWHEEL_STRICT_DEVICE_CODE", "true")
    assert _check(capsys, "--require-arch", "7.5-12.0", str(w))[0] == 11
    assert _check(capsys, "--require-arch", "7.5-12.0", "--no-strict-device-code", str(w))[0] == 0


def test_a_wheel_with_no_device_code_at_all_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # torch-memory-saver: allocation hooks, no kernels and no runtime compiler
    lib = elf(
        sections={".text": b"\xc3" * 64},
        needed=("libcudart.so.12", "libc.so.6"),
        runpath=nvidia_runpath("hooks/_h.so", ("libcudart.so.12",)),
    )
    w = make_wheel(tmp_path, name="hooks", files={"hooks/_h.so": lib}, requires=("nvidia-cuda-runtime-cu12",), tag=TAG)
    code, notes, _f = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0 and any(n.startswith("no device code: --require-arch 7.5-12.0 passes") for n in notes), notes


def test_modules_with_no_kernels_only_are_no_device_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # cuda-cccl 1.2.1: every module empty, its kernels compiled at run time through CUDA Python
    empty = pad8(fatbin([fatbin_entry(sm=75, payload=pad8(cubin(75, text=None)))]))
    lib = elf(sections={".nv_fatbin": empty}, needed=("libcudart.so.12",))
    w = make_wheel(
        tmp_path,
        name="cccl",
        files={"cuda/compute/_bindings.so": lib},
        requires=("cuda-bindings>=12", "nvidia-cuda-runtime-cu12"),
        tag=TAG,
    )
    code, notes, _f = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0
    assert any(
        "no device code: kernels, if any, are built at run time (it requires cuda-bindings>=12)" in n for n in notes
    )
    assert main(["size-report", str(w)]) == 0
    assert "no device code: kernels, if any, are built at run time" in capsys.readouterr().out


def _code_wheel(tmp_path: Path, *containers: list[bytes], name: str = "pkg") -> Path:
    fat = b"".join(pad8(fatbin(c)) for c in containers)
    lib = elf(sections={".nv_fatbin": fat}, needed=("libcudart.so.12",))
    return make_wheel(
        tmp_path / name,
        name=name,
        files={f"{name}/_ext.abi3.so": lib},
        requires=("nvidia-cuda-runtime-cu12",),
        tag=TAG,
    )


def _sass(sm: int) -> bytes:
    return fatbin_entry(sm=sm, payload=pad8(cubin(sm)))


def _ptx(sm: int) -> bytes:
    return fatbin_entry(kind="ptx", sm=sm, payload=pad8(ptx(sm)), ptx_isa=(8, 5))


def test_gpus_newer_than_the_newest_sass_are_a_line_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with_ptx = _code_wheel(tmp_path, [_sass(75), _sass(90), _ptx(75)], [_sass(75), _sass(80), _sass(90), _ptx(90)])
    code, notes, _f = _check(capsys, "--require-arch", "7.5-9.0", str(with_ptx))
    assert code == 0, _f
    assert "GPUs newer than 9.0: served through PTX JIT (every CUDA module carries PTX) or runtime compilation" in notes
    # faiss 1.15 slim: SASS 7.5-12.0 and no PTX (issue 40)
    every = [_sass(sm) for sm in (75, 80, 90, 100, 120)]
    sass_only = _code_wheel(tmp_path, every, [*every, _ptx(120)], name="slimfaiss")
    code, notes, _f = _check(capsys, "--require-arch", "7.5-12.0", str(sass_only))
    assert code == 0
    said = "GPUs newer than 12.0: not served: 1 of 2 CUDA modules carry SASS only, no PTX and no kernel sources"
    assert any(n.startswith(said) for n in notes), notes


def test_an_open_ended_request_fails_a_wheel_with_no_way_to_newer_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sass_only = _code_wheel(tmp_path, [_sass(75), _sass(80), _sass(90), _sass(100), _sass(120)])
    code, _notes, failures = _check(capsys, "--require-arch", "7.5+", str(sass_only))
    assert code == 11
    assert failures == [
        "--require-arch 7.5+ asks for GPUs not yet made; GPUs newer than 12.0: not served: 1 of 1 CUDA modules carry "
        "SASS only, no PTX and no kernel sources (in pkg/_ext.abi3.so): add PTX of the oldest architecture they "
        "should run from (e.g. CUDA_ARCHITECTURES ...;75-virtual), or compile kernels at run time"
    ]
    # the same request is met by PTX of any architecture it covers
    ptx = _code_wheel(tmp_path, [_sass(75), _sass(80), _sass(90), _sass(100), _sass(120), _ptx(75)], name="ptxpkg")
    assert _check(capsys, "--require-arch", "7.5+", str(ptx))[0] == 0
    # a closed range does not ask for newer GPUs
    assert _check(capsys, "--require-arch", "7.5-12.0", str(sass_only))[0] == 0
    # kernels compiled at run time serve them
    assert _check(capsys, "--require-arch", "7.5+", str(_nvrtc_wheel(tmp_path / "jit")))[0] == 0


def _intent_wheel(tmp_path: Path) -> Path:
    everyone = pad8(fatbin([*(_sass(sm) for sm in (75, 80, 90, 100, 120)), _ptx(120)]))
    ampere_up = pad8(fatbin([*(_sass(sm) for sm in (80, 90, 100, 120)), _ptx(120)]))
    rp = nvidia_runpath("mypkg/_core.abi3.so", ("libcudart.so.12",))  # both files in one folder
    return make_wheel(
        tmp_path / "w",
        name="mypkg",
        files={
            "mypkg/_core.abi3.so": elf(sections={".nv_fatbin": everyone}, needed=("libcudart.so.12",), runpath=rp),
            "mypkg/_sm80_only_attn.abi3.so": elf(
                sections={".nv_fatbin": ampere_up}, needed=("libcudart.so.12",), runpath=rp
            ),
        },
        requires=("nvidia-cuda-runtime-cu12",),
        tag=TAG,
    )


def test_gpu_intent_judges_a_file_for_the_gpus_it_is_meant_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _intent_wheel(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _check(capsys, "--require-arch", "7.5-12.0", str(w))[0] == 11  # 7.5 missing in the Ampere-only file
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\ngpu-intent = {"mypkg/_sm80_only*.so" = "8.0+"}\n')
    code, notes, failures = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 0, failures
    assert (
        "mypkg/_sm80_only_attn.abi3.so (gpu-intent 'mypkg/_sm80_only*.so' = '8.0+', instead of --require-arch): "
        "all 7 intended compute capabilities are served" in notes
    )
    # the intent is judged as strictly as --require-arch: 7.5 asked of the same file fails, naming the intent
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\ngpu-intent = {"mypkg/_sm80_only*.so" = "7.5-9.0"}\n')
    code, _notes, failures = _check(capsys, "--require-arch", "7.5-12.0", str(w))
    assert code == 11 and failures == [
        "mypkg/_sm80_only_attn.abi3.so (gpu-intent 'mypkg/_sm80_only*.so' = '7.5-9.0', instead of --require-arch): "
        "neither SASS nor PTX for 7.5"
    ]
    # from the environment too
    (tmp_path / "pyproject.toml").unlink()
    monkeypatch.setenv("SLIMWHEEL_GPU_INTENT", "mypkg/_sm80_only*.so=8.0-12.0")
    assert _check(capsys, "--require-arch", "7.5-12.0", str(w))[0] == 0


def test_bad_gpu_intent_names_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _intent_wheel(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.slimwheel]\ngpu-intent = {"mypkg/a*.so" = "banana", "mypkg/b*.so" = 8, "" = "8.0+"}\n'
    )
    capsys.readouterr()
    assert main(["-q", "check", "--offline", str(w)]) == 3
    err = capsys.readouterr().err
    assert (
        "pyproject.toml" in err and 'gpu-intent."mypkg/a*.so"' in err and "'banana' is not a compute capability" in err
    )
    assert 'gpu-intent."mypkg/b*.so": expected compute capabilities' in err
    assert 'gpu-intent."": a file glob must be a non-empty string' in err
    monkeypatch.setenv("SLIMWHEEL_GPU_INTENT", "no-equals-sign")
    (tmp_path / "pyproject.toml").unlink()
    assert main(["-q", "check", "--offline", str(w)]) == 3
    assert "environment SLIMWHEEL_*: gpu-intent: 'no-equals-sign' is not GLOB=REQUEST" in capsys.readouterr().err


def test_gpu_intent_is_applied_alike_by_check_build_slim_and_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One set of settings for every verdict (`check.PolicySettings.of`): `build`'s check phase once judged without
    the project's gpu-intent, and `slim`/`variants` without it too. A slimmed wheel's files are judged for the GPUs
    they are meant for among those the wheel is made for (`coverage.intent_within`)."""
    from slimwheel import build
    from slimwheel import config as cfgmod

    w = _intent_wheel(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.slimwheel]\nrequire-arch = "7.5-12.0"\ngpu-intent = {"mypkg/_sm80_only*.so" = "8.0+"}\n'
    )
    env = {"SLIMWHEEL_OFFLINE": "1"}
    cfg = cfgmod.load(tmp_path, env, {})
    _analysis, built = build.judge_built(w, cfg, None, env=env)
    capsys.readouterr()
    code = main(["-q", "check", "--offline", "--format", "json", str(w)])
    checked = json.loads(capsys.readouterr().out)["verdicts"][0]
    assert code == 0 and built.ok, [f.message for f in built.failures]
    assert [f["message"] for f in checked["failures"]] == [f.message for f in built.failures]
    assert [n for n in built.notes if "gpu-intent" in n] == [n for n in checked["notes"] if "gpu-intent" in n] != []

    # slim to 7.5-9.0: the Ampere-only file must serve 8.0-9.0 (not 10.0+, which the slimmed wheel is not for)
    capsys.readouterr()
    code = main(
        ["-q", "slim", "--offline", "--archs", "7.5-9.0", "-o", str(tmp_path / "s"), "--format", "json", str(w)]
    )
    slimmed = json.loads(capsys.readouterr().out)["check"]
    assert code == 0, slimmed["failures"]
    assert any(
        "gpu-intent 'mypkg/_sm80_only*.so' = '8.0+, of the GPUs this wheel is made for'" in n
        and "intended compute capabilities are served" in n
        for n in slimmed["notes"]
    ), slimmed["notes"]

    # variants: each variant's Ampere-only file is judged for its own family's GPUs within the intent (8.x: 8.0,
    # 8.6, 8.9), not for every GPU from 8.0 up, which no one variant holds
    capsys.readouterr()
    code = main(["-q", "variants", "--offline", "-o", str(tmp_path / "v"), "--format", "json", str(w)])
    made = json.loads(capsys.readouterr().out)
    assert code == 0, [v["check"]["failures"] for v in made["variants"]]
    sm8x = next(v for v in made["variants"] if v["label"] == "sm8x")
    assert any("all 3 intended compute capabilities are served" in n for n in sm8x["check"]["notes"]), sm8x["check"]

    # without the intent, the same slim fails 7.5 for that file: the setting is what changed the verdict
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\nrequire-arch = "7.5-12.0"\n')
    code = main(
        ["-q", "slim", "--offline", "--archs", "7.5-9.0", "-o", str(tmp_path / "s2"), "--format", "json", str(w)]
    )
    assert code == 11


def test_an_intent_that_shares_no_gpu_with_the_wheel_judges_its_files_for_none(tmp_path: Path) -> None:
    from slimwheel import check as checkmod
    from slimwheel.check.coverage import intent_within
    from slimwheel.cuda.arch import CC, parse_cc_request

    narrowed = intent_within((("mypkg/_sm80_only*.so", parse_cc_request("8.0+")),), (CC(7, 5),))
    assert narrowed[0][1].items == ()
    settings = checkmod.PolicySettings(intent=(("mypkg/_sm80_only*.so", parse_cc_request("8.0+")),))
    analysis = checkmod.analyze(_intent_wheel(tmp_path))
    policy = checkmod.policy_for(analysis.report, settings, require_arch=parse_cc_request("7.5"), made_for=(CC(7, 5),))
    verdict = checkmod.judge(analysis, policy)
    assert verdict.ok, verdict.failures
    assert any(n.endswith("meant for none of the GPUs asked for, not judged") for n in verdict.notes), verdict.notes
    # the same intent unnarrowed (check of the whole wheel): the file is judged for 8.0 and up, and serves them
    wide = checkmod.judge(
        analysis, checkmod.policy_for(analysis.report, settings, require_arch=parse_cc_request("7.5"))
    )
    assert wide.ok and any("all 7 intended compute capabilities are served" in n for n in wide.notes), wide.notes


def test_a_compiler_required_under_an_extra_is_said_with_the_extra() -> None:
    """cuda-core 1.2.2 requires cuda-bindings[all]==12.* under its extra cu12 (and ==13.* under cu13), nothing
    unconditionally: the note said "it requires cuda-bindings[all]==12.*", as if always."""
    from slimwheel.inspect.nvrtc import compiler_requirement

    reqs = ['cuda-bindings[all]==12.*; extra == "cu12"', 'cuda-bindings[all]==13.*; extra == "cu13"']
    assert compiler_requirement(reqs) == "cuda-bindings[all]==12.* with its extra cu12"
    assert compiler_requirement(["cuda-bindings>=12"]) == "cuda-bindings>=12"
    assert compiler_requirement(['cuda-bindings>=12; python_version >= "3.10"']) == (
        'cuda-bindings>=12 where python_version >= "3.10"'
    )
    assert compiler_requirement(["numpy"]) is None


def test_a_ptx_only_wheel_s_driver_floor_is_not_called_sass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gpt4all 2.8.2 carries PTX only (52 ... 75): size-report said "minimum driver: 520.61.05 (SASS); 520.61.05 for
    GPUs that JIT-compile the PTX"."""
    w = _code_wheel(tmp_path, [_ptx(75)])
    capsys.readouterr()
    assert main(["size-report", str(w)]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "minimum driver:" in x]
    assert "(its code is PTX only, JIT-compiled by the driver)" in line and "SASS" not in line, line
    w = _code_wheel(tmp_path / "both", [_sass(75), _ptx(75)])
    assert main(["size-report", str(w)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "minimum driver:" in x]
    assert "(SASS)" in line and "for GPUs that JIT-compile the PTX" in line, line
