"""deps.reach: a provider counts only where the loader, by its own rules, reaches it (issue 41 S1, issue 37 item 3).
Wheels and ELF files are synthesized; nothing is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimwheel.check import check_wheel, make_policy
from slimwheel.check.policy import Verdict
from slimwheel.deps import dependency_problems
from slimwheel.deps.reach import LOADER_FILE, entry_to_add, reached_member, reaching
from slimwheel.errors import ExitCode
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.runtime.generate import LOADER_NAME
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

TAGS = ["cp312-cp312-manylinux_2_28_x86_64"]
CU12 = "nvidia-cuda-runtime-cu12>=12,<13"


def _info(path: str, *needed: str, rpath: tuple[str, ...] = (), runpath: tuple[str, ...] = ()) -> ElfInfo:
    return ElfInfo(path=path, soname=None, needed=(*needed, "libc.so.6"), rpath=rpath, runpath=runpath)


def _verdict(tmp_path: Path, files: dict[str, bytes], requires: list[str]) -> Verdict:
    w = make_wheel(tmp_path, name="pkg", files=files, requires=requires, tag="cp312-abi3-manylinux_2_28_x86_64")
    r = inspect_wheel(w)
    return check_wheel(r, make_policy(r))


def test_the_loader_file_name_is_the_one_repair_ships() -> None:
    assert f"{LOADER_NAME}.py" == LOADER_FILE


def test_origin_is_expanded_from_where_the_file_installs() -> None:
    for entry in ("$ORIGIN/../../nvidia/cuda_runtime/lib", "${ORIGIN}/../../nvidia/cuda_runtime/lib"):
        info = _info("pkg/sub/_x.so", runpath=(entry,))
        assert reaching(info, ["nvidia/cuda_runtime/lib"]) == entry
        assert reaching(info, ["pkg/nvidia/cuda_runtime/lib"]) == ""
    # a .data/platlib file installs where its path after the scheme says
    info = _info("pkg-1.data/platlib/pkg/_x.so", runpath=("$ORIGIN/../nvidia/cu13/lib",))
    assert reaching(info, ["nvidia/cu13/lib"]) == "$ORIGIN/../nvidia/cu13/lib"
    assert entry_to_add(_info("pkg/sub/_x.so"), "nvidia/cuda_runtime/lib") == "$ORIGIN/../../nvidia/cuda_runtime/lib"


def test_runpath_hides_rpath_and_entries_are_searched_in_order() -> None:
    both = _info("pkg/_x.so", rpath=("$ORIGIN/../a",), runpath=("$ORIGIN/../b",))
    assert reaching(both, ["a"]) == "" and reaching(both, ["b"]) == "$ORIGIN/../b"
    only_rpath = _info("pkg/_x.so", rpath=("$ORIGIN/../a",))
    assert reaching(only_rpath, ["a"]) == "$ORIGIN/../a"
    members = ["a/libq.so.1", "b/libq.so.1"]
    first_a = _info("pkg/_x.so", "libq.so.1", runpath=("$ORIGIN/../a", "$ORIGIN/../b"))
    first_b = _info("pkg/_x.so", "libq.so.1", runpath=("$ORIGIN/../b", "$ORIGIN/../a"))
    assert reached_member(first_a, "libq.so.1", members) == "a/libq.so.1"
    assert reached_member(first_b, "libq.so.1", members) == "b/libq.so.1"
    # by file name, never a member's SONAME; the folder the file sits in is not searched unless named
    assert reached_member(_info("a/_x.so", "libq.so.1"), "libq.so.1", members) == ""
    assert reached_member(_info("pkg/_x.so", runpath=("$ORIGIN/../a",)), "./libq.so.1", members) == ""


def test_a_dummy_member_claiming_a_path_soname_does_not_pass(tmp_path: Path) -> None:
    """41 S1: `/tmp/x/libevil.so` and `./libevil.so` in DT_NEEDED, a dummy member whose SONAME is that name."""
    for evil in ("/tmp/x/libevil.so", "./libevil.so"):
        ext = elf(needed=(evil, "libc.so.6"), runpath="$ORIGIN")
        dummy = elf(soname=evil)
        v = _verdict(tmp_path / evil.replace("/", "_"), {"pkg/_ext.abi3.so": ext, "pkg/libevil.so": dummy}, [])
        (f,) = v.failures
        assert f.message.startswith(f"pkg/_ext.abi3.so needs {evil}: a NEEDED entry with a '/'"), f.message
        assert ("on the user's machine" if evil.startswith("/") else "from the current directory") in f.message


def test_a_member_the_search_path_does_not_reach_is_not_in_the_wheel() -> None:
    files = ["pkg/_x.so", "pkg.libs/libfoo.so.1"]
    lost = [_info("pkg/_x.so", "libfoo.so.1", runpath=("$ORIGIN",)), _info("pkg.libs/libfoo.so.1")]
    (p,) = dependency_problems(lost, cuda_major=None, requires=[], tags=TAGS, files=files).problems
    assert p == (
        "pkg/_x.so needs libfoo.so.1: the wheel carries it as pkg.libs/libfoo.so.1, but no entry of its search path "
        "(DT_RUNPATH, else DT_RPATH, from where it installs) reaches pkg.libs, and nothing the package loads first "
        "brings it: add $ORIGIN/../pkg.libs to its RUNPATH"
    )
    found = [_info("pkg/_x.so", "libfoo.so.1", runpath=("$ORIGIN/../pkg.libs",)), lost[1]]
    assert dependency_problems(found, cuda_major=None, requires=[], tags=TAGS, files=files).problems == ()


def test_a_direct_requirement_no_search_path_reaches_fails_with_the_entry_to_add(tmp_path: Path) -> None:
    """37 item 3: RUNPATH into a folder of the wheel that does not exist, libcudart.so.12, and exactly the
    requirement the verdict asked for: import fails in a fresh venv, so check fails and says what to add."""
    nowhere = elf(needed=("libcudart.so.12", "libc.so.6"), runpath="$ORIGIN/lib")
    v = _verdict(tmp_path / "a", {"pkg/_ext.abi3.so": nowhere}, [CU12])
    (f,) = v.failures
    assert f.kind == "dependencies" and f.exit_code == 12
    assert "installs it in nvidia/cuda_runtime/lib" in f.message
    assert f.message.endswith("add $ORIGIN/../nvidia/cuda_runtime/lib to its RUNPATH"), f.message
    right = elf(needed=("libcudart.so.12", "libc.so.6"), runpath="$ORIGIN/lib:$ORIGIN/../nvidia/cuda_runtime/lib")
    assert _verdict(tmp_path / "b", {"pkg/_ext.abi3.so": right}, [CU12]).ok
    # DT_RPATH is searched where there is no DT_RUNPATH, and ignored where there is one
    rpath = elf(needed=("libcudart.so.12", "libc.so.6"), rpath="$ORIGIN/../nvidia/cuda_runtime/lib")
    assert _verdict(tmp_path / "c", {"pkg/_ext.abi3.so": rpath}, [CU12]).ok
    hidden = elf(
        needed=("libcudart.so.12", "libc.so.6"), rpath="$ORIGIN/../nvidia/cuda_runtime/lib", runpath="$ORIGIN/lib"
    )
    assert not _verdict(tmp_path / "d", {"pkg/_ext.abi3.so": hidden}, [CU12]).ok


def test_the_index_does_not_excuse_a_direct_requirement_no_search_path_reaches() -> None:
    """37 item 3 with the index read, as `slimwheel check` reads it by default: the index names the very
    nvidia-cuda-runtime-cu12 the wheel requires, which loads nothing at import, so the fault stands (it was a note
    saying the copy is found "when it is loaded before these files"). A library a requirement's requirement installs
    (RAPIDS' library wheels, which load theirs at import) is still such a note."""
    from helpers.fakeindex import FakeIndex, facts

    from slimwheel.deps import Installs
    from slimwheel.reqgraph import RequirementGraph

    index = FakeIndex(
        {
            "nvidia-cuda-runtime-cu12": facts(
                "nvidia-cuda-runtime-cu12", "12.9.79", ("nvidia/cuda_runtime/lib/libcudart.so.12",)
            ),
            "libfoo": facts("libfoo", "1.0", ("libfoo/lib/libfoo.so",)),
        }
    )
    envs = Installs.from_tags(TAGS).environments()
    nowhere = _info("pkg/_x.so", "libcudart.so.12", runpath=("$ORIGIN/lib",))
    graph = RequirementGraph([CU12], envs, index)
    v = dependency_problems([nowhere], cuda_major=12, requires=[CU12], tags=TAGS, files=["pkg/_x.so"], graph=graph)
    (p,) = v.problems
    assert p.endswith("add $ORIGIN/../nvidia/cuda_runtime/lib to its RUNPATH"), p
    assert not any("loaded before these files" in n for n in v.notes), v.notes
    foo = _info("pkg/_y.so", "libfoo.so")
    graph = RequirementGraph(["libfoo>=1"], envs, index)
    v = dependency_problems([foo], cuda_major=None, requires=["libfoo>=1"], tags=TAGS, files=["pkg/_y.so"], graph=graph)
    assert v.problems == () and any("loaded before these files" in n for n in v.notes), (v.problems, v.notes)


def test_what_the_package_loads_first_reaches_it() -> None:
    bare = _info("pkg/_x.so", "libcudart.so.12")
    files = ["pkg/_x.so", "pkg/__init__.py"]
    assert dependency_problems([bare], cuda_major=12, requires=[CU12], tags=TAGS, files=files).problems
    # slimwheel's loader, in the file's package, loads the nvidia-* wheels' libraries by absolute path first
    loaded = [*files, f"pkg/{LOADER_FILE}"]
    assert dependency_problems([bare], cuda_major=12, requires=[CU12], tags=TAGS, files=loaded).problems == ()
    # another package's loader does not run before this one's file
    other = [*files, f"other/{LOADER_FILE}"]
    assert dependency_problems([bare], cuda_major=12, requires=[CU12], tags=TAGS, files=other).problems


def test_a_folder_taken_on_trust_offline_is_not_a_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """41 S12: with the index unreachable (here: --offline), RPATH into a required project's folder passed (exit 0)
    and failed with the index (exit 12). Not knowing is exit 19, or a note where the user chose so."""
    from slimwheel.cli import main

    ext = elf(needed=("libscipy_openblas.so", "libc.so.6"), runpath="$ORIGIN/../scipy_openblas32/lib")
    w = make_wheel(tmp_path, name="pkg", files={"pkg/_ext.abi3.so": ext}, requires=["scipy-openblas32"])
    monkeypatch.chdir(tmp_path)  # no pyproject.toml of this repository's
    monkeypatch.delenv("SLIMWHEEL_UNKNOWN", raising=False)
    assert int(ExitCode.UNKNOWN) == 19
    assert main(["-q", "check", "--offline", str(w)]) == ExitCode.UNKNOWN
    assert main(["-q", "check", "--offline", "--unknown", "note", str(w)]) == 0
    monkeypatch.setenv("SLIMWHEEL_UNKNOWN", "note")
    assert main(["-q", "check", "--offline", str(w)]) == 0
    assert main(["-q", "check", "--offline", "--unknown", "fail", str(w)]) == 19  # the flag beats the variable


def test_dt_rpath_is_lent_down_the_loading_chain_and_dt_runpath_is_not() -> None:
    """faiss-gpu 1.15.1: the extension's DT_RPATH `$ORIGIN/../faiss_gpu.libs` finds the grafted libopenblas's own
    libgfortran, which has no search path of its own; a DT_RUNPATH lends nothing."""
    files = ["faiss/_ext.so", "faiss.libs/libblas.so", "faiss.libs/libgfortran.so.5"]
    blas = ElfInfo(path=files[1], soname="libblas.so", needed=("libgfortran.so.5",), rpath=(), runpath=())
    fortran = ElfInfo(path=files[2], soname="libgfortran.so.5", needed=(), rpath=(), runpath=())
    for lends in (True, False):
        entries = ("$ORIGIN/../faiss.libs",)
        ext = ElfInfo(
            path=files[0],
            soname=None,
            needed=("libblas.so",),
            rpath=entries if lends else (),
            runpath=() if lends else entries,
        )
        v = dependency_problems([ext, blas, fortran], cuda_major=None, requires=[], tags=TAGS, files=files)
        assert (v.problems == ()) is lends, v.problems
        if not lends:
            (p,) = v.problems
            assert p.startswith("faiss.libs/libblas.so needs libgfortran.so.5: the wheel carries it") and p.endswith(
                "add $ORIGIN to its RUNPATH"
            )


def test_python_code_that_loads_the_nvidia_libraries_first_reaches_them() -> None:
    """faiss-gpu 1.15.1's `_preload_gpu_libs`: ctypes.CDLL of the nvidia-* wheels' files before the extension."""
    from slimwheel.inspect.pyimports import PythonImports

    bare = _info("faiss/_x.so", "libcudart.so.12")
    files = ["faiss/_x.so", "faiss/__init__.py"]
    preload = b"import ctypes, os\nctypes.CDLL(os.path.join(sp, 'nvidia', 'cuda_runtime', 'lib', 'libcudart.so.12'))\n"
    for source, ok in ((preload, True), (b"import ctypes\nctypes.CDLL('libm.so.6')\n", False)):
        imports = PythonImports.from_sources({"faiss/__init__.py": source, "other/__init__.py": preload})
        v = dependency_problems([bare], cuda_major=12, requires=[CU12], tags=TAGS, files=files, imports=imports)
        assert (v.problems == ()) is ok, v.problems
        # said, not silent: the files load only after that source has run
        said = [n for n in v.notes if "found because faiss/__init__.py loads those libraries first" in n]
        assert len(said) == ok, v.notes


def test_a_loader_that_opens_installed_distributions_files_reaches_them() -> None:
    """faiss-gpu-cu12 1.14.1.post1: faiss/loader.py opens the files of distributions named in a JSON file
    (`distribution(name).files`, ctypes.CDLL) before `from ._loader import *`; its own text never says "nvidia". That
    loads what faiss/_swigfaiss.so and the auditwheel folder's libfaiss need; with the index read, the direct
    requirement left unreached was a note by accident (test above), and is now seen as loaded first."""
    from slimwheel.inspect.pyimports import PythonImports

    loader = (
        b"import ctypes\nfrom importlib.metadata import distribution\n"
        b"for file in distribution(target['package']).files:\n"
        b"    if file.name == target['library']:\n        ctypes.CDLL(str(file.locate()), mode=ctypes.RTLD_GLOBAL)\n"
    )
    elfs = [
        _info("faiss/_swigfaiss.so", "libcudart.so.12"),
        _info("faiss_gpu_cu12.libs/libfaiss.so", "libcudart.so.12"),
    ]
    files = ["faiss/_swigfaiss.so", "faiss_gpu_cu12.libs/libfaiss.so", "faiss/__init__.py", "faiss/loader.py"]
    for source, ok in ((loader, True), (loader.replace(b"ctypes.CDLL", b"print"), False)):
        imports = PythonImports.from_sources(
            {"faiss/__init__.py": b"from .loader import *\n", "faiss/loader.py": source}
        )
        v = dependency_problems(elfs, cuda_major=12, requires=[CU12], tags=TAGS, files=files, imports=imports)
        assert (v.problems == ()) is ok, v.problems
        assert len([n for n in v.notes if "found because faiss/loader.py loads those libraries first" in n]) == ok


def test_the_package_loading_its_own_library_by_path_first_reaches_it() -> None:
    """dgl 0.6.1, hidet 0.6.1, bitblas 0.1.0: the package's Python code opens its own library by path (ctypes.CDLL in
    one source, the file name in another) before the module that needs it, which has no search path to it and takes
    the loaded copy by SONAME. Not when nothing opens libraries, when only another package names it, or when the
    carrier has no SONAME (the dynamic loader matches a loaded library by SONAME, not by file name)."""
    from slimwheel.inspect.pyimports import PythonImports

    files = ["dgl/_ffi/_cy3/core.so", "dgl/libdgl.so", "dgl/_ffi/base.py", "dgl/_ffi/libinfo.py"]
    core = _info("dgl/_ffi/_cy3/core.so", "libdgl.so")
    lib = ElfInfo(path="dgl/libdgl.so", soname="libdgl.so", needed=("libc.so.6",), rpath=(), runpath=())
    opens = b"import ctypes\nfrom . import libinfo\nlib = ctypes.CDLL(libinfo.find_lib_path()[0])\n"
    names = b"def find_lib_path():\n    return [os.path.join(here, '..', 'libdgl.so')]\n"
    cases = [
        ({"dgl/_ffi/base.py": opens, "dgl/_ffi/libinfo.py": names}, lib, True),
        ({"dgl/_ffi/base.py": opens.replace(b"ctypes.CDLL", b"print"), "dgl/_ffi/libinfo.py": names}, lib, False),
        ({"dgl/_ffi/base.py": opens, "other/libinfo.py": names}, lib, False),
        (
            {"dgl/_ffi/base.py": opens, "dgl/_ffi/libinfo.py": names},
            ElfInfo(path=lib.path, soname=None, needed=(), rpath=(), runpath=()),
            False,
        ),
    ]
    for sources, carrier, ok in cases:
        imports = PythonImports.from_sources(sources)
        v = dependency_problems([core, carrier], cuda_major=None, requires=[], tags=TAGS, files=files, imports=imports)
        assert (v.problems == ()) is ok, (sources, v.problems)
        said = [n for n in v.notes if "loads its own library by path first (ctypes; dgl/_ffi/libinfo.py names it)" in n]
        assert len(said) == ok, v.notes
        if not ok:
            assert "the wheel carries it as dgl/libdgl.so" in v.problems[0]


def test_what_importing_an_extension_module_loads_reaches_the_plugins_it_opens() -> None:
    """nixl-cu12 1.5.1 (meson-python): `nixl_cu12/_bindings` loads libnixl.so from .nixl_cu12.mesonpy.libs, which
    loads libnixl_common.so; the plugins in nixl_cu12.libs/nixl, opened at run time and needed by no file, need
    libnixl_common.so and no search path of theirs reaches it: the loader takes the copy already loaded. An executable
    beside them runs in a process of its own, and a library no module's import loads stays unreached."""
    libs = ".pkg.mesonpy.libs"
    module = ElfInfo(
        path="pkg/_bindings.cpython-312-x86_64-linux-gnu.so",
        soname=None,
        needed=("libcore.so",),
        rpath=(f"$ORIGIN/../{libs}",),
        runpath=(),
    )
    core = ElfInfo(
        path=f"{libs}/libcore.so", soname="libcore.so", needed=("libcommon.so",), rpath=("$ORIGIN",), runpath=()
    )
    common = ElfInfo(path=f"{libs}/libcommon.so", soname="libcommon.so", needed=(), rpath=(), runpath=())
    utils = ElfInfo(path=f"{libs}/libutils.so", soname="libutils.so", needed=(), rpath=(), runpath=())
    plugin = ElfInfo(
        path="pkg.libs/plugins/libplugin_x.so", soname=None, needed=("libcommon.so",), rpath=(), runpath=("$ORIGIN",)
    )
    posix = ElfInfo(
        path="pkg.libs/plugins/libplugin_posix.so", soname=None, needed=("libutils.so",), rpath=(), runpath=("$ORIGIN",)
    )
    tool = ElfInfo(path="pkg.scripts/tool", soname=None, needed=("libcommon.so",), rpath=(), runpath=("$ORIGIN",))
    elfs = [module, core, common, utils, plugin, posix, tool]
    v = dependency_problems(elfs, cuda_major=None, requires=[], tags=TAGS, files=[e.path for e in elfs])
    unreached = sorted(p.split(" needs ")[0] for p in v.problems)
    assert unreached == ["pkg.libs/plugins/libplugin_posix.so", "pkg.scripts/tool"], v.problems
    (note,) = [n for n in v.notes if "libplugin_x.so" in n]
    assert f"found because importing {module.path} loads those libraries first" in note, note
    # a module that does not load it (no search path to libcore.so) excuses nothing
    cut = ElfInfo(path=module.path, soname=None, needed=("libcore.so",), rpath=(), runpath=())
    v = dependency_problems([cut, *elfs[1:]], cuda_major=None, requires=[], tags=TAGS, files=[e.path for e in elfs])
    assert any(p.startswith("pkg.libs/plugins/libplugin_x.so needs libcommon.so") for p in v.problems), v.problems
    # an extension module's own SONAME counts (Python opens it by path). A module has a Python ABI tag in its name or
    # defines PyInit_<name> (triton 3.9's _C/libtriton.so, SONAME libtriton.so, which its plugins need); a plain x.so
    # that defines none is a library the package opens with ctypes (dgl's libdgl.so), loaded at no import
    for name, pyinit, counts in (
        ("_C/_ext.cpython-312-x86_64-linux-gnu.so", False, True),
        ("_C/libext.so", True, True),
        ("_C/libext.so", False, False),
    ):
        ext = ElfInfo(path=f"pkg/{name}", soname="libext.so", needed=(), rpath=(), runpath=(), python_module=pyinit)
        user = ElfInfo(path="pkg/plugins/libuser.so", soname=None, needed=("libext.so",), rpath=(), runpath=())
        paths = [ext.path, user.path]
        v = dependency_problems([ext, user], cuda_major=None, requires=[], tags=TAGS, files=paths)
        assert (v.problems == ()) is counts, (name, pyinit, v.problems)
        assert any(f"importing {ext.path} loads" in n for n in v.notes) is counts, v.notes
    # a file another file needs is loaded with that one, not opened after the import: not excused either
    opener = ElfInfo(
        path="pkg.libs/libopener.so",
        soname="libopener.so",
        needed=("libplugin_x.so",),
        rpath=(),
        runpath=("$ORIGIN/plugins",),
    )
    v = dependency_problems(
        [*elfs, opener], cuda_major=None, requires=[], tags=TAGS, files=[*(e.path for e in elfs), opener.path]
    )
    assert any(p.startswith("pkg.libs/plugins/libplugin_x.so needs libcommon.so") for p in v.problems), v.problems


def test_repair_refuses_a_needed_path_before_auditwheel_copies_it(tmp_path: Path) -> None:
    """41 S1: auditwheel grafted /tmp/x/libevil.so from the build machine into the released wheel. Repair refuses
    first (unit tests forbid subprocesses: auditwheel never ran)."""
    from slimwheel.errors import CheckFailed
    from slimwheel.repair import repair_wheel

    evil = tmp_path / "x" / "libevil.so"
    evil.parent.mkdir()
    evil.write_bytes(elf(soname="libevil.so"))
    ext = elf(needed=(str(evil), "libc.so.6"))
    w = make_wheel(tmp_path, name="pkg", files={"pkg/_ext.abi3.so": ext}, tag="cp312-abi3-linux_x86_64")
    with pytest.raises(CheckFailed, match=r"pkg/_ext\.abi3\.so needs .*libevil\.so by path: auditwheel would copy"):
        repair_wheel(w, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_repair_refuses_a_relative_needed_path_before_auditwheel_copies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """41 S1: `./libevil.so` names a file in whatever the current directory is; one is planted in repair's."""
    from slimwheel.errors import CheckFailed
    from slimwheel.repair import repair_wheel

    monkeypatch.chdir(tmp_path)
    (tmp_path / "libevil.so").write_bytes(elf(soname="libevil.so"))
    ext = elf(needed=("./libevil.so", "libc.so.6"))
    w = make_wheel(tmp_path / "in", name="pkg", files={"pkg/_ext.abi3.so": ext}, tag="cp312-abi3-linux_x86_64")
    calls: list[Path] = []
    monkeypatch.setattr("slimwheel.repair.run_auditwheel", lambda wheel, *a, **k: calls.append(wheel))
    with pytest.raises(CheckFailed, match=r"pkg/_ext\.abi3\.so needs \./libevil\.so by path: auditwheel would copy"):
        repair_wheel(w, tmp_path / "out")
    assert calls == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("member", "soname", "driver"),
    [
        ("pkg.libs/libcuda-43c1b388.so.570.124.06", "libcuda.so.1", "libcuda.so.1"),  # nixl 0.3.0 shipped this
        ("pkg/lib/libnvidia-ml.so.1", None, "libnvidia-ml.so.1"),
        ("pkg/lib/libcuda.so", None, "libcuda.so.1"),  # the toolkit's stub: as wrong in a wheel as the driver
    ],
)
def test_a_copy_of_the_driver_library_in_the_wheel_fails(
    tmp_path: Path, member: str, soname: str | None, driver: str
) -> None:
    """The NVIDIA driver's user-space libraries are the installed driver's own: a copy in the wheel, reached by the
    extension's search path, passed as "in the wheel"."""
    name = member.rsplit("/", 1)[-1]
    folder = "$ORIGIN/../pkg.libs" if member.startswith("pkg.libs/") else "$ORIGIN/lib"
    ext = elf(needed=(name, "libc.so.6"), runpath=folder)
    v = _verdict(tmp_path, {"pkg/_ext.abi3.so": ext, member: elf(soname=soname or name)}, [])
    (f,) = v.failures
    assert f.exit_code is ExitCode.INCONSISTENT_DEPENDENCIES
    assert f.message.startswith(f"{member} is a copy of the NVIDIA driver's {driver}: "), f.message
    assert f"--exclude {driver}" in f.message
    # the same extension linked against the driver by its SONAME, with nothing bundled, passes
    ok = _verdict(tmp_path / "ok", {"pkg/_ext.abi3.so": elf(needed=("libcuda.so.1", "libc.so.6"))}, [])
    assert ok.ok, ok.failures
