"""One verdict: the same wheel and the same settings get the same verdict from every command that judges one (issue
36). `check` (the CLI), `build`'s check phase (`build.judge_built`), and the judging paths of `slim` and `variants`
(their outputs judged through `check.analyze` + `check.judge`, variants with the input's Python sources) are run on
synthesized wheels and real PyPI wheels of the corpus; their failures and notes must be identical. The wheel that
split them before: an optional extension module that needs NCCL (imported only under try/except ImportError), which
`check` passed and `build` failed (it judged without the Python sources)."""

from __future__ import annotations

import json
import shutil
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from slimwheel import build, config
from slimwheel import check as checkmod
from slimwheel.cli import main
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.scan import inspect_wheel
from testkit import corpus
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

pytestmark = pytest.mark.integration

OFFLINE = {"SLIMWHEEL_OFFLINE": "1"}
EXT = "pkg/libs/nccl.cpython-311-x86_64-linux-gnu.so"
GUARDED = textwrap.dedent(
    """
    try:
        from pkg.libs import nccl
    except ImportError:
        nccl = None
    """
).encode()


def _synthesized(out: Path) -> list[Path]:
    tag = "cp311-cp311-manylinux_2_28_x86_64"
    # the RUNPATH repair writes: a requirement provides libcudart only where the search path reaches it (deps.reach)
    core = elf(needed=["libcudart.so.13", "libc.so.6"], soname=None, runpath="$ORIGIN/../nvidia/cu13/lib")
    wheels = [
        # the optional part: NCCL is required by nothing, and the package runs without the module
        make_wheel(
            out / "optional",
            name="pkg",
            files={"pkg/__init__.py": GUARDED, EXT: elf(needed=["libnccl.so.2", "libc.so.6"]), "pkg/_core.so": core},
            requires=["nvidia-cuda-runtime==13.*"],
            tag=tag,
        ),
        # the same module imported without a guard: a failure everywhere
        make_wheel(
            out / "required",
            name="pkg",
            files={
                "pkg/__init__.py": b"from pkg.libs import nccl\n",
                EXT: elf(needed=["libnccl.so.2", "libc.so.6"]),
                "pkg/_core.so": core,
            },
            requires=["nvidia-cuda-runtime==13.*"],
            tag=tag,
        ),
        # a CUDA library with no requirement at all
        make_wheel(out / "unrequired", name="pkg", files={"pkg/_core.so": core}, tag=tag),
        # a clean wheel
        make_wheel(
            out / "clean",
            name="pkg",
            files={"pkg/_core.so": core},
            requires=["nvidia-cuda-runtime==13.*"],
            tag=tag,
        ),
    ]
    # RECORD that does not match: a member changed after the build
    tampered = out / "tampered" / wheels[-1].name
    tampered.parent.mkdir()
    with zipfile.ZipFile(wheels[-1]) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data + b"\0" if info.filename == "pkg/_core.so" else data)
    return [*wheels, tampered]


def _cli_verdict(wheel: Path, out: Path, budget: str, require: str) -> dict[str, Any]:
    """`slimwheel check` as users run it (the CLI's error boundary included), its verdict read from its JSON."""
    report = out / "check.json"
    args = ["check", "--offline", "--format", "json", "-o", str(report), "--budget", budget, "--require-arch", require]
    status = main([*args, str(wheel)])
    data = json.loads(report.read_text(encoding="utf-8"))
    (v,) = data["verdicts"]
    assert (status == 0) == v["ok"], status
    return {"failures": v["failures"], "notes": v["notes"], "ok": v["ok"]}


def _as_json(v: checkmod.Verdict) -> dict[str, Any]:
    d = checkmod.verdict_to_json(v)
    return {"failures": d["failures"], "notes": d["notes"], "ok": d["ok"]}


def _every_command(wheel: Path, tmp: Path, budget: str, require: str) -> dict[str, dict[str, Any]]:
    cfg = config.load(None, OFFLINE, {"budget": budget, "require_arch": require})
    _, built = build.judge_built(wheel, cfg, None, env=OFFLINE)
    report = inspect_wheel(wheel)
    # as the slim and variants commands build theirs: the project's budget and debug-symbols rule, the GPUs asked
    policy = checkmod.make_policy(
        report,
        budget=cfg.parsed.budget_bytes,
        require_arch=cfg.require_arch_for(None),
        debug_symbols=cfg.debug_symbols,
    )
    # slim judges its output where it lies; variants judges each output under a temporary name, with the input's
    # Python sources read once
    slim = checkmod.judge(checkmod.analyze(report.path, report=report), policy)
    moved = tmp / "variant.tmp"
    shutil.copyfile(wheel, moved)
    variants = checkmod.judge(
        checkmod.analyze(report.path, report=report, file=moved, imports=PythonImports.from_wheel(wheel)), policy
    )
    return {
        "check": _cli_verdict(wheel, tmp, budget, require),
        "build": _as_json(built),
        "slim": _as_json(slim),
        "variants": _as_json(variants),
    }


def _assert_one(got: dict[str, dict[str, Any]]) -> dict[str, Any]:
    first = got["check"]
    for command, v in got.items():
        assert v == first, f"{command} and check disagree:\n{command}: {v}\ncheck: {first}"
    return first


def test_synthesized_wheels_get_one_verdict_from_every_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLIMWHEEL_OFFLINE", "1")
    outcomes = {}
    for wheel in _synthesized(tmp_path / "in"):
        v = _assert_one(_every_command(wheel, tmp_path, "60MiB", "none"))
        outcomes[wheel.parent.name] = sorted({f["kind"] for f in v["failures"]})
    # the verdicts themselves, so that agreeing on a wrong answer fails too
    assert outcomes == {
        "optional": [],
        "required": ["dependencies"],
        "unrequired": ["dependencies"],
        "clean": [],
        "tampered": ["record"],
    }


@pytest.mark.parametrize("name", ["cupy-cuda13x", "bitsandbytes", "jax-cuda13-plugin", "nvidia-curand", "torchvision"])
def test_corpus_wheels_get_one_verdict_from_every_command(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLIMWHEEL_OFFLINE", "1")
    (w,) = [c for c in corpus.CORPUS if c.requirement.split("==")[0] == name]
    _assert_one(_every_command(corpus.ensure(w), tmp_path, "1GiB", w.require))


def test_cupy_optional_nccl_passes_in_build_as_in_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disagreement of issue 36, on the real wheel: CuPy's NCCL binding is an optional part for every command."""
    monkeypatch.setenv("SLIMWHEEL_OFFLINE", "1")
    (w,) = [c for c in corpus.CORPUS if c.requirement.startswith("cupy-cuda13x==")]
    got = _every_command(corpus.ensure(w), tmp_path, "1GiB", w.require)
    v = _assert_one(got)
    assert not [f for f in v["failures"] if f["kind"] == "dependencies"], v["failures"]
    assert any("nccl" in n and "optional part" in n for n in v["notes"])


@pytest.mark.parametrize("wheel", [corpus.RMM, corpus.PYLIBRAFT], ids=lambda w: w.requirement.split("==")[0])
def test_repair_writes_what_check_passes_reading_the_index(wheel: corpus.CorpusWheel, tmp_path: Path) -> None:
    """RAPIDS' wheels need libraries their requirements' requirements install (librapids_logger.so through
    librmm-cu12 -> rapids-logger). `check`, reading the index, passes them; `repair` reads the same graph, leaves those
    libraries to the requirements (nothing bundled) and writes a wheel `check` passes too. It refused all six RAPIDS
    wheels tried (rmm, pylibraft, pylibcudf, pylibcugraph, kvikio, ucxx) with "needs librapids_logger.so, which is
    neither bundled, provided by an nvidia-* wheel, nor allowed". Reads PyPI (or the index pip is configured with)."""
    path = corpus.ensure(wheel)
    assert main(["-q", "check", str(path)]) == 0
    out = tmp_path / "out"
    assert main(["-q", "repair", "--format", "json", "-w", str(out), str(path)]) == 0
    (written,) = out.glob("*.whl")
    report = tmp_path / "check.json"
    assert main(["-q", "check", "--format", "json", "-o", str(report), str(written)]) == 0
    (v,) = json.loads(report.read_text(encoding="utf-8"))["verdicts"]
    assert v["ok"] and v["failures"] == []
    # nothing bundled (pylibraft carries its own libgomp copy already): the requirements' libraries are theirs
    assert _bundled(written) == _bundled(path)


def _bundled(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {
            n.split("/", 1)[1] for n in z.namelist() if n.split("/", 1)[0].endswith(".libs") and not n.endswith("/")
        }
