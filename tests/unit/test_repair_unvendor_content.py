"""Issue 41 S3 and issue 37 item 5: a vendored CUDA copy is recognised by its SONAME as well as its file name (cuFile's
libcufile.so.0 ships as libcufile.so.1.15.1), and removed only when its content shows it is the library that
replaces it; a file that only carries the name is refused, naming it, before auditwheel runs. A copy a requirement
ships too (the same auditwheel copy) is not split from it unless asked."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from helpers.fakeindex import FakeIndex, facts

from slimwheel.cli import main
from slimwheel.cuda import libs as cudalibs
from slimwheel.deps import Installs, dependency_problems
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.repair import repair_wheel
from slimwheel.repair.source import read_input
from slimwheel.repair.unvendor import Unvendored, find_copies, shared_copies
from slimwheel.reqgraph import RequirementGraph
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

COPY = "demo.libs/libcudart-0123abcd.so.13.0.96"
TAG = "cp311-cp311-linux_x86_64"
ENVS = Installs.from_tags([TAG]).environments()


def _wheel(tmp: Path, copy_symbols: Iterable[str], taken: Iterable[str], *, unversioned: Iterable[str] = ()) -> Path:
    """A CUDA 13 wheel whose extension takes `taken` from its copy of cudart under cudart's version node (as a link
    against the real library records them) and `unversioned` with no version."""
    ext = elf(
        needed=("libcudart-0123abcd.so.13.0.96", "libc.so.6"),
        imports={"libcudart-0123abcd.so.13.0.96": [(s, "libcudart.so.13") for s in taken]},
        undefined=unversioned,
    )
    lib = elf(soname="libcudart-0123abcd.so.13.0.96", needed=("libc.so.6",), symbols=copy_symbols)
    return make_wheel(tmp, files={"demo/_ext.so": ext, COPY: lib}, tag=TAG)


def _copies(tmp: Path, wheel: Path) -> tuple[Unvendored, ...]:
    src = read_input(wheel, tmp / "in", rewrite_record=False)
    return find_copies(tmp / "in", src)


def test_a_copy_whose_symbols_are_cudarts_is_a_copy(tmp_path: Path) -> None:
    w = _wheel(tmp_path, ["cudaMalloc", "cudaFree", "cudaRuntimeGetVersion"], ["cudaMalloc", "cudaFree"])
    (u,) = _copies(tmp_path, w)
    assert (u.file, u.replaced_by, u.package, u.release) == (COPY, "libcudart.so.13", "nvidia-cuda-runtime", "13.0.96")


@pytest.mark.parametrize(
    ("copy_symbols", "taken", "unversioned", "why"),
    [
        # S3: a library of the project's own under cudart's name
        (["demo_solve"], [], ["demo_solve"], "defines none of that library's symbols"),
        # cudart's symbols, and one of its own that the extension takes
        (["cudaMalloc", "demo_solve"], ["cudaMalloc"], ["demo_solve"], "takes demo_solve from it, which nvidia-cuda"),
        # linked against cudart's version node, but the file does not define what was linked
        (["cudaMalloc"], ["cudaMalloc", "cudaFree"], [], "takes cudaFree from it, which it does not define"),
    ],
)
def test_a_file_that_only_carries_the_name_is_refused_naming_it(
    tmp_path: Path, copy_symbols: list[str], taken: list[str], unversioned: list[str], why: str
) -> None:
    w = _wheel(tmp_path, copy_symbols, taken, unversioned=unversioned)
    with pytest.raises(BadInputError, match=rf"{COPY}: named as a copy of libcudart\.so\.13 .*{why}"):
        _copies(tmp_path / "a", w)
    out = tmp_path / "out"
    assert main(["repair", "-w", str(out), str(w)]) == ExitCode.BAD_INPUT
    assert not out.exists() or not list(out.iterdir())


def test_repair_refuses_before_auditwheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr("slimwheel.repair.run_auditwheel", lambda wheel, *a, **k: calls.append(wheel))
    w = _wheel(tmp_path, ["demo_solve"], [], unversioned=["demo_solve"])
    with pytest.raises(BadInputError, match="defines none of that library's symbols"):
        repair_wheel(w, tmp_path / "out")
    assert calls == []


def test_a_copy_is_recognised_by_its_soname_not_its_file_version() -> None:
    # issue 37: cuFile's libcufile.so.0 is nvidia-cufile 1.x; its file version, 1.15.1, is the package's
    by_soname = cudalibs.vendored("kvik.libs/libcufile-0123abcd.so.1.15.1", "libcufile.so.0")
    assert by_soname is not None and {c.soname for c in by_soname.candidates} == {"libcufile.so.0"}
    assert by_soname.version == "1.15.1"
    plain = cudalibs.vendored("kvik.libs/libcufile.so.1.15.1")  # the file name alone carries the package's major
    assert plain is not None and plain.candidates == by_soname.candidates
    # an unrenamed file whose SONAME is cudart's, whatever its file is called
    assert cudalibs.vendored("pkg/libmystery.so", "libcudart.so.12") is not None
    assert cudalibs.vendored("kvik.libs/libcufile.so.2.0.0") is None  # neither the SONAME's nor the package's major
    assert cudalibs.vendored("pkg/libfoo.so.1", "libfoo.so.1") is None


def test_own_version_node_names_the_library() -> None:
    v = cudalibs.vendored("cumm.libs/libcudart-5a077122.so.12.0.107")
    assert v is not None and v.own_version_node("libcudart.so.12") and not v.own_version_node("libcudart.so.13")
    b = cudalibs.vendored("cumm.libs/libnvrtc-builtins-8cb4db2d.so.12.0.140")
    assert b is not None and b.companion and b.own_version_node("libnvrtc-builtins.so.12.0")
    assert not b.own_version_node("libnvrtc-builtins.so.13.0")


# spconv-cu126 2.3.8 and its requirement cumm-cu126 ship the same auditwheel copy of cudart (issue 37 item 5); the
# same shape in CUDA 13, with the index a dict (tests/helpers/fakeindex.py).
SHARED = "libcudart-53d54daa.so.13.0.96"


def _spconv_like(tmp: Path, requires: tuple[str, ...] = ("cumm-like>=1",)) -> Path:
    ext = elf(needed=(SHARED, "libc.so.6"), imports={SHARED: [("cudaMalloc", "libcudart.so.13")]})
    lib = elf(soname=SHARED, needed=("libc.so.6",), symbols=["cudaMalloc", "cudaFree"])
    files = {"spc/_ext.so": ext, f"spc.libs/{SHARED}": lib}
    return make_wheel(tmp, name="spc", files=files, requires=requires, tag=TAG)


def test_graph_names_a_requirement_that_ships_the_same_hashed_copy() -> None:
    index = FakeIndex({"cumm-like": facts("cumm-like", "1.0", (f"cumm_like.libs/{SHARED}",), ("deeper>=1",))})
    g = RequirementGraph(["cumm-like>=1"], ENVS, index)
    p = g.shared_copy(f"spc.libs/{SHARED}")
    assert p is not None and (p.project, p.path) == ("cumm-like", f"cumm_like.libs/{SHARED}")
    assert g.shared_copy("spc.libs/libcudart-0badc0de.so.13.0.96") is None  # another content hash: another copy
    # a name without auditwheel's hash tells nothing of the bytes
    plain = RequirementGraph(
        ["cumm-like>=1"], ENVS, FakeIndex({"cumm-like": facts("cumm-like", "1.0", ("x/libcudart.so.13",))})
    )
    assert plain.shared_copy("spc/libcudart.so.13") is None


def test_unvendoring_a_shared_copy_is_refused_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr("slimwheel.repair.run_auditwheel", lambda wheel, *a, **k: calls.append(wheel))
    w = _spconv_like(tmp_path)
    index = FakeIndex({"cumm-like": facts("cumm-like", "1.0", (f"cumm_like.libs/{SHARED}",))})
    with pytest.raises(CheckFailed, match=rf"spc.libs/{SHARED} is also cumm_like.libs/{SHARED} of cumm-like 1.0") as e:
        repair_wheel(w, tmp_path / "out", index=lambda installs: index)
    assert e.value.exit_code == ExitCode.INCONSISTENT_DEPENDENCIES and "--split-shared-copies" in e.value.message
    assert calls == [] and not (tmp_path / "out").exists()


def test_copies_no_requirement_ships_are_compared_and_the_unknown_said(tmp_path: Path) -> None:
    w = _spconv_like(tmp_path, requires=("cumm-like>=1", "gone>=1"))
    src = read_input(w, tmp_path / "in", rewrite_record=False)
    copies = find_copies(tmp_path / "in", src)
    index = FakeIndex({"cumm-like": facts("cumm-like", "1.0", ("cumm_like.libs/libcudart-0badc0de.so.13.0.96",))})
    shared, unknown = shared_copies(copies, RequirementGraph(src.requires, ENVS, index))
    assert shared == () and unknown == ("gone: no wheel of gone",)


# cuFile as NVIDIA builds it: SONAME libcufile.so.0, file version 1.15.1 (nvidia-cufile's), 543 exports and no GNU
# symbol version at all (read from nvidia-cufile 1.15.1.6's libcufile.so.0); auditwheel names the copy by the file.
CUFILE = "libcufile-0123abcd.so.1.15.1"


def _kvik_like(tmp: Path, copy_symbols: Iterable[str], taken: Iterable[str]) -> Path:
    ext = elf(needed=(CUFILE, "libc.so.6"), undefined=taken)
    lib = elf(soname=CUFILE, needed=("libc.so.6",), symbols=copy_symbols)
    files = {"kvik/_ext.so": ext, f"kvik.libs/{CUFILE}": lib}
    return make_wheel(tmp, name="kvik", files=files, requires=("nvidia-cufile>=1",), tag=TAG)


def test_a_cufile_copy_with_no_symbol_versions_is_unvendored(tmp_path: Path) -> None:
    w = _kvik_like(
        tmp_path,
        ["cuFileDriverOpen", "cuFileRead", "_Z15cuFileLoggerDbgPKcS0_"],
        ["cuFileDriverOpen", "cuFileRead"],
    )
    (u,) = _copies(tmp_path, w)
    assert (u.file, u.replaced_by, u.package, u.release) == (
        f"kvik.libs/{CUFILE}",
        "libcufile.so.0",
        "nvidia-cufile",
        "1.15.1",
    )


@pytest.mark.parametrize(
    ("copy_symbols", "taken", "why"),
    [
        # S3 again: the project's own library under cuFile's name, no symbol named after cuFile
        (["kvik_solve"], ["kvik_solve"], "defines none of that library's symbols"),
        # cuFile's entry points, and one of the project's own that the extension takes
        (["cuFileDriverOpen", "kvik_solve"], ["cuFileDriverOpen", "kvik_solve"], "takes kvik_solve from it"),
    ],
)
def test_a_cufile_named_file_that_is_not_cufile_is_refused(
    tmp_path: Path, copy_symbols: list[str], taken: list[str], why: str
) -> None:
    w = _kvik_like(tmp_path, copy_symbols, taken)
    with pytest.raises(BadInputError, match=why) as e:
        _copies(tmp_path, w)
    assert f"kvik.libs/{CUFILE}" in e.value.message


def _info(path: str, soname: str | None, *needed: str) -> ElfInfo:
    return ElfInfo(path=path, soname=soname, needed=needed, rpath=(), runpath=())


def test_check_names_a_copy_by_its_soname_as_repair_does() -> None:
    # the file name alone (libcufile.so.1) is neither cuFile's SONAME nor its package version; the SONAME is
    copy = _info("kvik.libs/libcufile-0123abcd.so.1", "libcufile-0123abcd.so.0", "libc.so.6")
    ext = _info("kvik/_ext.so", None, "libcufile-0123abcd.so.0", "libc.so.6")
    v = dependency_problems([ext, copy], cuda_major=13, requires=["nvidia-cufile>=1"], tags=[TAG])
    (note,) = [n for n in v.notes if " is a copy of " in n]
    assert note.startswith("kvik.libs/libcufile-0123abcd.so.1 is a copy of") and "nvidia-cufile" in note


def test_check_notes_a_copy_shared_with_a_requirement() -> None:
    index = FakeIndex({"cumm-like": facts("cumm-like", "1.0", (f"cumm_like.libs/{SHARED}",))})
    elfs = [_info(f"spc.libs/{SHARED}", SHARED, "libc.so.6"), _info("spc/_ext.so", None, SHARED, "libc.so.6")]
    graph = RequirementGraph(["cumm-like>=1"], ENVS, index)
    v = dependency_problems(elfs, cuda_major=13, requires=["cumm-like>=1"], tags=[TAG], graph=graph)
    (note,) = [n for n in v.notes if " is a copy of " in n]
    assert f"cumm-like 1.0 ships the same copy (cumm_like.libs/{SHARED}; the wheel requires cumm-like>=1)" in note
    assert "--split-shared-copies" in note and "replaces it with that wheel" not in note
    # without a requirement that ships it, repair replaces it
    alone = dependency_problems(elfs, cuda_major=13, requires=[], tags=[TAG], graph=RequirementGraph([], ENVS, index))
    (note,) = [n for n in alone.notes if " is a copy of " in n]
    assert note.endswith("`slimwheel repair` replaces it with that wheel")
