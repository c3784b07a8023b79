"""Issue 22 item 5: a wheel that carries copies of CUDA runtime libraries (renamed by auditwheel, as spconv and cumm
ship `libcudart-<hash>.so.12` under `<name>.libs/`, or not) comes out of `repair` requiring the nvidia-* wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.fakeindex import FakeIndex, facts
from helpers.wheels_repair import build_extension, build_fake_lib, ext_suffix, make_wheel, stub_dir

from slimwheel.analysis import analyze, requirements_graph
from slimwheel.check import CheckPolicy, check_wheel, judge, make_policy
from slimwheel.cli import main
from slimwheel.errors import CheckFailed
from slimwheel.inspect.dynamic import scan_elfs
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.repair import repair_wheel

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def vendoring_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel as a project that let auditwheel bundle its CUDA runtime publishes it: auditwheel (real) renames the
    copy to libcudart-<hash>.so.12.0.107 under fakespconv.libs/."""
    tmp = tmp_path_factory.mktemp("vendor")
    stubs = stub_dir(tmp, {"libcudart.so.12": 12000}, version_nodes=True)  # cudart's own version node, as NVIDIA's
    # the real file name carries the release, as the toolkit's does
    os.rename(stubs / "libcudart.so.12", stubs / "libcudart.so.12.0.107")
    (stubs / "libcudart.so.12").symlink_to("libcudart.so.12.0.107")
    ext = build_extension(tmp / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs], libs=["cudart"])
    plain = make_wheel(
        tmp / "dist",
        name="fakespconv",
        version="0.1",
        files={"fakespconv/__init__.py": b"", f"fakespconv/_ext{ext_suffix()}": ext},
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(stubs), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", "-w", str(tmp / "aw"), str(plain)],
        env=env,
        check=True,
        capture_output=True,
    )
    (made,) = (tmp / "aw").glob("*.whl")
    names = zipfile.ZipFile(made).namelist()
    assert any(n.startswith("fakespconv.libs/libcudart-") and n.endswith(".so.12.0.107") for n in names), names
    return made


def test_vendored_cudart_is_replaced_by_the_runtime_wheel(vendoring_wheel: Path, tmp_path: Path) -> None:
    res = repair_wheel(vendoring_wheel, tmp_path / "out")
    (u,) = res.unvendored
    assert u.replaced_by == "libcudart.so.12" and u.package == "nvidia-cuda-runtime-cu12" and u.installed > 0
    assert res.cuda_major == 12
    assert res.requires == ("nvidia-cuda-runtime-cu12>=12.0,<13",)  # floor: the release of the copy, 12.0.107
    assert res.loader  # the loader preloads the wheel's libcudart
    with zipfile.ZipFile(res.wheel) as z:
        assert not any("libcudart" in n for n in z.namelist())
        z.extractall(tmp_path / "x")
    info = scan_elfs(tmp_path / "x")[f"fakespconv/_ext{ext_suffix()}"]
    assert "libcudart.so.12" in info.needed and not any("-" in n and "cudart" in n for n in info.needed)
    assert "$ORIGIN/../nvidia/cuda_runtime/lib" in info.search_path
    r = inspect_wheel(res.wheel)
    assert check_wheel(r, make_policy(r, require_arch="none")).ok
    assert res.unvendored_bytes == (u.compressed, u.installed)  # stand-in library: the loader outweighs it here


def test_check_notes_the_copy_and_keep_vendored_refuses(vendoring_wheel: Path, tmp_path: Path) -> None:
    r = inspect_wheel(vendoring_wheel)
    v = check_wheel(r, make_policy(r, require_arch="none"))
    assert any("is a copy of libcudart.so.12.0.107 (nvidia-cuda-runtime-cu12)" in n for n in v.notes), v.notes
    assert main(["repair", "--keep-vendored", "-w", str(tmp_path), str(vendoring_wheel)]) == 12
    assert not list(tmp_path.glob("*.whl"))


def test_a_copy_renamed_with_dots_and_needed_by_its_file_name_is_replaced(tmp_path: Path) -> None:
    # torchvision 0.26.0: torchvision.libs/libnvjpeg.36e11081.so.13 keeps SONAME libnvjpeg.so.13, and image.so
    # needs it by its file name; repair used to stop at "needs libnvjpeg.36e11081.so.13, which is neither bundled ..."
    from slimwheel.tools import patchelf

    stubs = stub_dir(tmp_path, {"libcudart.so.12": 12000}, version_nodes=True)
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs], libs=["cudart"], runpath=["$ORIGIN/../faketv.libs"]
    )
    renamed = "libcudart.0123abcd.so.12"
    subprocess.run([patchelf(), "--replace-needed", "libcudart.so.12", renamed, str(ext)], check=True)
    whl = make_wheel(
        tmp_path / "dist",
        name="faketv",
        version="0.1",
        files={
            "faketv/__init__.py": b"",
            f"faketv/_ext{ext_suffix()}": ext.read_bytes(),
            f"faketv.libs/{renamed}": (stubs / "libcudart.so.12").read_bytes(),
        },
    )
    r = inspect_wheel(whl)
    v = check_wheel(r, make_policy(r, require_arch="none"))
    assert any(f"faketv.libs/{renamed} is a copy of libcudart.so.12" in n for n in v.notes), v.notes
    res = repair_wheel(whl, tmp_path / "out")
    (u,) = res.unvendored
    assert u.file == f"faketv.libs/{renamed}" and u.replaced_by == "libcudart.so.12"
    with zipfile.ZipFile(res.wheel) as z:
        z.extractall(tmp_path / "x")
    info = scan_elfs(tmp_path / "x")[f"faketv/_ext{ext_suffix()}"]
    assert "libcudart.so.12" in info.needed and renamed not in info.needed
    r = inspect_wheel(res.wheel)
    assert check_wheel(r, make_policy(r, require_arch="none")).ok


def test_a_library_that_only_carries_cudarts_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 41, S3: a library of the project's own, linked under the name libcudart.so.12 and bundled by auditwheel
    # as libcudart-<hash>.so.12: removing it made the repaired wheel fail at import ("undefined symbol")
    stubs = stub_dir(tmp_path, {"libcudart.so.12": 12000})  # no cudart version node: not NVIDIA's build
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs], libs=["cudart"], runpath=["$ORIGIN/../fake.libs"]
    )
    from slimwheel.tools import patchelf

    renamed = "libcudart-0123abcd.so.12"
    subprocess.run([patchelf(), "--replace-needed", "libcudart.so.12", renamed, str(ext)], check=True)
    whl = make_wheel(
        tmp_path / "dist",
        name="fake",
        version="0.1",
        files={
            "fake/__init__.py": b"",
            f"fake/_ext{ext_suffix()}": ext.read_bytes(),
            f"fake.libs/{renamed}": (stubs / "libcudart.so.12").read_bytes(),
        },
    )
    assert main(["repair", "-w", str(tmp_path / "out"), str(whl)]) == 3
    err = capsys.readouterr().err
    assert f"fake.libs/{renamed}: named as a copy of libcudart.so.12" in err, err
    # what the extension takes from it that CUDA 12.0.0's libcudart does not export (resources/cuda-baseline.json
    # holds CUDA 12's first release too): the copy is no cudart
    assert f"_ext{ext_suffix()} takes " in err and "which nvidia-cuda-runtime-cu12 does not export" in err, err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def _repair_cli(wheel: Path, out: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """The command, reading the index for real (its cache the test's own), as a user runs it."""
    env = {**os.environ, "SLIMWHEEL_CACHE": str(cache)}
    env.pop("SLIMWHEEL_OFFLINE", None)
    cmd = [sys.executable, "-m", "slimwheel", "repair", "--format", "json", "-w", str(out), *flags, str(wheel)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)


def test_spconv_is_not_split_from_the_copy_cumm_ships_unless_asked(tmp_path: Path) -> None:
    # issue 37 item 5: spconv-cu126 2.3.8 requires cumm-cu126<0.8,>=0.7.11, and both ship
    # libcudart-53d54daa.so.12.6.68; unvendoring spconv alone made a process map two CUDA runtimes
    from testkit import corpus

    wheel = corpus.ensure(corpus.SPCONV)
    copy = "libcudart-53d54daa.so.12.6.68"
    proc = _repair_cli(wheel, tmp_path / "out", tmp_path / "cache")
    assert proc.returncode == 12, proc.stderr
    assert f"spconv_cu126.libs/{copy} is also cumm_cu126.libs/{copy} of cumm-cu126 0.7.11" in proc.stderr, proc.stderr
    assert "--split-shared-copies" in proc.stderr
    assert not list((tmp_path / "out").glob("*.whl"))
    proc = _repair_cli(wheel, tmp_path / "out", tmp_path / "cache", "--split-shared-copies")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [c["file"] for c in result["split_copies"]] == [f"spconv_cu126.libs/{copy}"]
    assert result["split_copies"][0]["project"] == "cumm-cu126" and result["copies_unknown"] == []
    assert [u["needed_as"] for u in result["unvendored"]] == ["libcudart.so.12"]


def test_what_repair_reports_is_the_requirement_it_wrote(tmp_path: Path) -> None:
    """faiss-gpu-cu11 1.12.0 (Requires-Dist `nvidia-cuda-runtime-cu11>=11.8.89`): repair keeps a CUDA requirement
    the wheel already has, as written, and said it required its own plan (`>=11.0,<12`) in the summary and the JSON.
    Now the summary, the JSON and the METADATA agree: nothing added, the wheel's own requirement kept, no floor."""
    stubs = stub_dir(tmp_path, {"libcudart.so.12": 12000}, version_nodes=True)
    ext = build_extension(tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[stubs], libs=["cudart"])
    own = "nvidia-cuda-runtime-cu12>=12.4.127"
    files: dict[str, bytes | Path] = {"owncuda/__init__.py": b"", f"owncuda/_ext{ext_suffix()}": ext}
    for requires, added, kept in (((own,), [], [own]), ((), ["nvidia-cuda-runtime-cu12>=12.0,<13"], [])):
        wheel = make_wheel(
            tmp_path / f"dist{len(requires)}", name="owncuda", version="0.1", files=files, requires=requires
        )
        out = tmp_path / f"out{len(requires)}"
        proc = subprocess.run(
            [sys.executable, "-m", "slimwheel", "repair", "--format", "json", "-w", str(out), str(wheel)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["requires"] == added and result["kept"] == kept
        assert [f["package"] for f in result["floors"]] == (["nvidia-cuda-runtime-cu12"] if added else [])
        (written,) = out.glob("*.whl")
        with zipfile.ZipFile(written) as z:
            meta = z.read("owncuda-0.1.dist-info/METADATA").decode()
        lines = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
        assert lines == [*kept, *added]


def test_a_library_the_wheel_carries_out_of_reach_is_said_so(tmp_path: Path) -> None:
    """hidet 0.6.1: libhidet.so needs libhidet_runtime.so, which the wheel carries beside it, reached only by a
    build-machine RPATH entry that repair drops. auditwheel then finds it nowhere, and repair said it was "neither
    bundled, provided by an nvidia-* wheel, nor allowed" and to pass --external: it names the member and the entry."""
    inner = build_fake_lib(tmp_path / "libs" / "libinner.so", "libinner.so", tag="inner", version=1)
    ext = build_extension(tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[inner.parent], libs=["inner"])
    files: dict[str, bytes | Path] = {
        "carried/__init__.py": b"",
        f"carried/_ext{ext_suffix()}": ext,
        "carried/lib/libinner.so": inner,
    }
    wheel = make_wheel(tmp_path / "dist", name="carried", version="0.1", files=files)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "slimwheel", "repair", "-w", str(out), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 12, proc.stderr
    assert (
        f"carried/_ext{ext_suffix()} needs libinner.so, which the wheel carries as carried/lib/libinner.so, but no "
        "entry of its search path reaches carried/lib: add $ORIGIN/lib to its RUNPATH"
    ) in proc.stderr, proc.stderr
    assert "--external" not in proc.stderr and not list(out.glob("*.whl"))


def test_a_library_a_requirements_requirement_installs_is_left_to_it(tmp_path: Path) -> None:
    """pylibraft-cu12 26.10: its extensions need librapids_logger.so, which libraft-cu12 installs through its
    requirement rapids-logger. check (reading the index) passes the wheel; repair left the library to auditwheel,
    which found it nowhere and refused the wheel (and, where it found one on the machine, would have bundled a second
    copy). Repair reads the same requirement graph: the library is excluded, the output gets the same verdict."""
    lib = build_fake_lib(tmp_path / "libs" / "liblogger_like.so", "liblogger_like.so", tag="logger", version=1)
    stubs = stub_dir(tmp_path, {"libcublas.so.12": 12090})
    ext = build_extension(
        tmp_path / f"_ext{ext_suffix()}", "_ext", lib_dirs=[lib.parent, stubs], libs=["logger_like", "cublas"]
    )
    files: dict[str, bytes | Path] = {"raftlike/__init__.py": b"", f"raftlike/_ext{ext_suffix()}": ext}
    wheel = make_wheel(tmp_path / "dist", name="raftlike", version="0.1", files=files, requires=("libraft-like>=1",))
    one = FakeIndex(
        {
            "libraft-like": facts("libraft-like", "1.0", (), ("logger-like>=0.3", "nvidia-cublas-cu12==12.9.*")),
            "nvidia-cublas-cu12": facts("nvidia-cublas-cu12", "12.9.1.4", ("nvidia/cublas/lib/libcublas.so.12",)),
            "logger-like": facts("logger-like", "0.3.0", ("logger_like/lib64/liblogger_like.so",)),
        }
    )

    res = repair_wheel(wheel, tmp_path / "out", index=lambda installs: one)
    assert "liblogger_like.so" in res.excluded and res.bundled == ()
    # cuBLAS comes through libraft-like's own pin: not required again (a floor of repair's could contradict that pin)
    assert res.requires == () and res.unknown == () and res.cuda_major == 12
    # the input and the output, judged by check with the same index: the same verdict, a pass
    for w in (wheel, res.wheel):
        a = analyze(w)
        graph = requirements_graph(a.report.requires_dist, a.report.tags, lambda installs: one)
        graded = judge(replace(a, graph=graph), CheckPolicy())
        assert graded.ok, (w.name, graded.failures)
    # offline, the requirements' requirements are not read: refused, and told what reading them would do
    with pytest.raises(CheckFailed, match="without --offline repair reads the index") as e:
        repair_wheel(wheel, tmp_path / "out2")
    assert "liblogger_like.so" in e.value.message and not list((tmp_path / "out2").glob("*.whl"))
