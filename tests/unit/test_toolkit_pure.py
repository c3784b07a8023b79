"""The parts of toolkit finding and assembly that need no program: requests, pins, the prefix layout, the lock."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import NoReturn

import pytest

from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ExitCode, ToolError
from slimwheel.fsutil import file_lock as locked
from slimwheel.toolkit import ensure_toolkit, find_toolkit, parse_request
from slimwheel.toolkit.find import _flag_dirs, candidates, version_matches
from slimwheel.toolkit.pypi13 import MANIFEST, MANIFEST_SCHEMA, _make_prefix, read_manifest, requirements


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("13.0", CudaVersion(13, 0)),
        ("13", CudaVersion(13, 0)),
        ("12.4", CudaVersion(12, 4)),
        ("11.8", CudaVersion(11, 8)),
        ("auto", None),
        ("", None),
    ],
)
def test_parse_request(text: str, want: CudaVersion | None) -> None:
    assert parse_request(text) == want


@pytest.mark.parametrize("text", ["14.0", "10.2", "11.7", "thirteen"])
def test_parse_request_rejects(text: str) -> None:
    with pytest.raises(BadInputError):
        parse_request(text)


def test_version_matches() -> None:
    assert version_matches(CudaVersion(13, 0), None)
    assert version_matches(CudaVersion(13, 0), CudaVersion(13, 0))
    assert not version_matches(CudaVersion(13, 2), CudaVersion(13, 0))
    assert not version_matches(CudaVersion(12, 4), CudaVersion(13, 0))


def test_requirements_pin_the_release() -> None:
    reqs = requirements(CudaVersion(13, 0))
    for pkg in (
        "nvidia-cuda-nvcc",
        "nvidia-cuda-crt",
        "nvidia-nvvm",
        "nvidia-cuda-cccl",
        "nvidia-cuda-runtime",
        "nvidia-nvjitlink",
        "nvidia-cuda-culibos",
        "nvidia-cublas",
    ):
        assert f"{pkg}==13.0.*" in reqs
    assert "nvidia-curand==10.4.0.*" in reqs
    # cuobjdump has no 13.0 wheel: any of the major (a newer cuobjdump reads older fatbins)
    assert "nvidia-cuda-cuobjdump>=13,<14" in reqs
    assert "nvidia-cuda-nvcc==13.2.*" in requirements(CudaVersion(13, 2))


@pytest.mark.parametrize(
    ("minor", "cccl", "published"),
    # `pip index versions nvidia-cuda-cccl` (2026-12-01): a wheel version each spec must select, and one it must not
    [(0, "13.0.*", "13.0.85"), (2, "13.2.*", "13.2.86"), (3, "13.3.3.*", "13.3.3.4.1"), (5, "13.3.5.*", "13.3.5.0.6")],
)
def test_cccl_follows_its_own_numbering_from_13_3(minor: int, cccl: str, published: str) -> None:
    from packaging.requirements import Requirement

    reqs = {Requirement(r).name: Requirement(r) for r in requirements(CudaVersion(13, minor))}
    spec = reqs["nvidia-cuda-cccl"].specifier
    assert str(spec) == f"=={cccl}"
    assert spec.contains(published)
    assert not spec.contains("13.3.4.3.1" if minor != 4 else "13.3.5.0.6")
    assert reqs["nvidia-cuda-nvcc"].specifier.contains(f"13.{minor}.1")


def test_requirements_refuse_cuda12() -> None:
    with pytest.raises(BadInputError, match="only for CUDA 13"):
        requirements(CudaVersion(12, 4))


def _fake_wheel_tree(prefix: Path) -> Path:
    cu13 = prefix / "site" / "nvidia" / "cu13"
    for d in ("bin/crt", "include/cccl", "lib/cmake", "nvvm/bin", "nvvm/libdevice"):
        (cu13 / d).mkdir(parents=True)
    for tool in ("nvcc", "ptxas", "fatbinary", "nvlink", "cudafe++", "cuobjdump"):
        (cu13 / "bin" / tool).write_text("#!/bin/sh\n")
        (cu13 / "bin" / tool).chmod(0o755)
    (cu13 / "bin" / "nvcc.profile").write_text("TOP = $(_HERE_)/..\n")
    for lib in (
        "libcudart.so.13",
        "libcublas.so.13",
        "libcublasLt.so.13",
        "libnvJitLink.so.13",
        "libcudart_static.a",
        "libnvvm.so.4",
    ):
        (cu13 / "lib" / lib).write_bytes(b"\x7fELF")
    (cu13 / "include" / "cuda_runtime.h").write_text("")
    return cu13


def test_prefix_layout_is_relative_and_survives_a_rename(tmp_path: Path) -> None:
    tmp = tmp_path / ".cuda-13.0.tmp-x"
    cu13 = _fake_wheel_tree(tmp)
    _make_prefix(tmp)
    final = tmp_path / "cuda-13.0"
    os.replace(tmp, final)  # what assemble() does after the check
    cu13 = final / "site" / "nvidia" / "cu13"
    # tools are relative symlinks; the profile is slimwheel's own, with TOP = the prefix and libraries in lib64
    nvcc = final / "bin" / "nvcc"
    assert nvcc.is_symlink() and not os.readlink(nvcc).startswith("/")
    assert nvcc.resolve() == (cu13 / "bin" / "nvcc").resolve()
    profile = (final / "bin" / "nvcc.profile").read_text()
    assert not (final / "bin" / "nvcc.profile").is_symlink()
    assert '"-L$(TOP)/lib64"' in profile and '"-I$(TOP)/include"' in profile
    assert (final / "include" / "cuda_runtime.h").is_file()
    assert (final / "nvvm" / "libdevice").is_dir() and (final / "nvvm" / "bin").is_dir()
    # nvlink loads <bin>/../nvvm/lib64/libnvvm.so for device LTO; the wheel keeps it in lib/
    assert (final / "nvvm" / "lib64" / "libnvvm.so").resolve() == (cu13 / "lib" / "libnvvm.so.4").resolve()
    assert not os.readlink(final / "nvvm" / "lib64" / "libnvvm.so").startswith("/")
    # every library under its own name and, for shared ones, the unversioned link name -l and find_library want
    for name in (
        "libcudart.so",
        "libcudart.so.13",
        "libcublas.so",
        "libcublasLt.so",
        "libnvJitLink.so.13",
        "libcudart_static.a",
    ):
        assert (final / "lib64" / name).exists(), name
    assert (final / "lib64" / "libcublas.so").resolve() == (cu13 / "lib" / "libcublas.so.13").resolve()
    assert (final / "lib" / "libcudart.so").exists()
    assert stat.S_ISDIR((final / "lib64" / "cmake").stat().st_mode)


def test_prefix_without_nvcc_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "site" / "nvidia" / "cu13" / "bin").mkdir(parents=True)
    with pytest.raises(ToolError, match="bin/nvcc"):
        _make_prefix(tmp_path)


def test_manifest_must_be_complete(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("")
    (tmp_path / MANIFEST).write_text(json.dumps({"schema": MANIFEST_SCHEMA, "check": {"ok": False}}))
    assert read_manifest(tmp_path) is None
    (tmp_path / MANIFEST).write_text(json.dumps({"schema": MANIFEST_SCHEMA, "check": {"ok": True}}))
    assert read_manifest(tmp_path) == {"schema": MANIFEST_SCHEMA, "check": {"ok": True}}
    # a prefix of the layout before nvvm/lib64 (schema 1) is not current: it is assembled again
    (tmp_path / MANIFEST).write_text(json.dumps({"schema": 1, "check": {"ok": True}}))
    assert read_manifest(tmp_path) is None
    (tmp_path / MANIFEST).write_text("{not json")
    assert read_manifest(tmp_path) is None


def test_lock_serialises_holders(tmp_path: Path) -> None:
    order: list[str] = []

    def hold(name: str) -> None:
        with locked(tmp_path / ".lock"):
            order.append(f"{name}+")
            time.sleep(0.05)
            order.append(f"{name}-")

    threads = [threading.Thread(target=hold, args=(n,)) for n in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # flock is per open file description, so threads with their own open() exclude each other like processes do
    assert all(order[i][0] == order[i + 1][0] for i in range(0, len(order), 2)), order


def test_candidates_order(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    onpath = tmp_path / "p"
    onpath.mkdir()
    (onpath / "nvcc").write_text("#!/bin/sh\n")
    (onpath / "nvcc").chmod(0o755)
    got = candidates(None, {"CUDA_HOME": str(home), "PATH": str(onpath)})
    assert [(c.origin, c.nvcc) for c in got] == [("CUDA_HOME", home / "bin" / "nvcc"), ("PATH", onpath / "nvcc")]
    assert [c.origin for c in candidates(tmp_path, {"CUDA_HOME": str(home)})] == ["--root"]


def test_root_without_nvcc_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as e:
        ensure_toolkit(CudaVersion(13, 0), root=tmp_path, env={"PATH": "", "SLIMWHEEL_CACHE": str(tmp_path / "c")})
    assert e.value.exit_code == ExitCode.TOOL_FAILED
    assert str(tmp_path) in e.value.message and "nvcc" in e.value.message
    with pytest.raises(ToolError):
        find_toolkit(CudaVersion(13, 0), root=tmp_path, env={})


def test_find_toolkit_does_not_assemble(tmp_path: Path) -> None:
    assert find_toolkit(CudaVersion(13, 0), env={"PATH": "", "SLIMWHEEL_CACHE": str(tmp_path)}) is None
    assert not (tmp_path / "toolkits").exists()


def test_flag_dirs(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    value = f'"-I{tmp_path}/bin/../inc"  "-isystem" "{tmp_path}/missing" -I{tmp_path}/inc'
    assert _flag_dirs(value, "-I") == [tmp_path / "inc"]


def test_find_toolkit_refuses_a_root_of_another_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `plan --toolkit ROOT --cuda 13.0` must not plan for the CUDA 11.8 that ROOT holds (build refuses it too).
    import slimwheel.toolkit as tkmod
    from slimwheel.toolkit.model import Toolkit

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("")
    nvcc = tmp_path / "bin" / "nvcc"
    old = Toolkit(root=tmp_path, nvcc=nvcc, version=CudaVersion(11, 8), source="system", supported=())
    monkeypatch.setattr(tkmod, "describe", lambda nvcc, *, source: old)
    with pytest.raises(BadInputError, match=r"holds CUDA 11.8, but CUDA 13.0 was asked for"):
        find_toolkit(CudaVersion(13, 0), root=tmp_path, env={})
    assert find_toolkit(CudaVersion(11, 8), root=tmp_path, env={}) is old
    assert find_toolkit(None, root=tmp_path, env={}) is old


def test_an_nvcc_that_cannot_be_run_is_a_tool_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bin/nvcc without the execute bit gave PermissionError, i.e. "internal error", not exit 4.
    import subprocess

    from slimwheel.tools import run_tool

    def not_executable(*args: object, **kwargs: object) -> NoReturn:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(subprocess, "run", not_executable)
    with pytest.raises(ToolError, match="cannot run .*nvcc: Permission denied"):
        run_tool([str(tmp_path / "bin" / "nvcc"), "--version"], what="nvcc")
