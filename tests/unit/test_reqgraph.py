"""reqgraph: the walk over requirements' requirements, and what `deps.dependency_problems` makes of it. The index is
a dict here (a fake `Lookup`); tests/unit/test_pypindex.py reads a real one over HTTP."""

from __future__ import annotations

import pytest
from helpers.fakeindex import FakeIndex, facts

from slimwheel.deps import Installs, dependency_problems
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.reqgraph import RequirementGraph, Unread, Why, install_path, is_library

TAGS = ("cp311-abi3-manylinux_2_28_x86_64",)
ENVS = Installs.from_tags(TAGS).environments()


# rmm-cu12 26.10's shape: the library of its name and the logger come through librmm-cu12.
INDEX = {
    "librmm-cu12": facts(
        "librmm-cu12",
        "26.10.0",
        ("librmm/lib64/librmm.so", "librmm/__init__.py"),
        ("rapids-logger==0.3.*", "pytest; extra == 'test'"),
    ),
    "rapids-logger": facts("rapids-logger", "0.3.0", ("rapids_logger/lib64/librapids_logger.so",)),
    "cuda-toolkit": facts(
        "cuda-toolkit",
        "12.9.1",
        (),
        (
            'nvidia-cusolver-cu12==11.7.5.82.*; sys_platform == "linux" and extra == "cusolver"',
            'nvidia-cufft-cu12==11.4.1.4.*; sys_platform == "linux" and extra == "cufft"',
        ),
    ),
    "nvidia-cusolver-cu12": facts("nvidia-cusolver-cu12", "11.7.5.82", ("nvidia/cusolver/lib/libcusolver.so.11",)),
    "nvidia-cufft-cu12": facts("nvidia-cufft-cu12", "11.4.1.4", ("nvidia/cufft/lib/libcufft.so.11",)),
    "pytest": facts("pytest", "9.0", ("pytest/__init__.py",)),
    "windows-only": facts("windows-only", "1.0", ("w/libwin.so",)),
}


def test_a_requirements_requirement_provides_with_its_chain() -> None:
    g = RequirementGraph(["librmm-cu12==26.10.*", "numpy>=2"], ENVS, FakeIndex(INDEX))
    p = g.provider("librapids_logger.so")
    assert p is not None
    assert (p.project, p.version, p.path) == ("rapids-logger", "0.3.0", "rapids_logger/lib64/librapids_logger.so")
    assert p.chain == ("librmm-cu12==26.10.*", "rapids-logger==0.3.*")
    assert p.how() == "requires librmm-cu12==26.10.*, which requires rapids-logger==0.3.*"
    assert g.provider("libnothing.so") is None
    assert g.unread == ("numpy: no wheel of numpy",)


def test_extras_reach_only_what_they_name_and_markers_must_hold_everywhere() -> None:
    index = FakeIndex(INDEX)
    g = RequirementGraph(["cuda-toolkit[cusolver]==12.*", 'windows-only; sys_platform == "win32"'], ENVS, index)
    assert g.provider("libcusolver.so.11") is not None
    assert g.provider("libcufft.so.11") is None  # the extra cufft was not asked for
    assert g.provider("libwin.so") is None
    assert "windows-only" not in index.asked and "nvidia-cufft-cu12" not in index.asked


def test_an_extra_asked_later_walks_only_what_it_adds() -> None:
    index = FakeIndex(INDEX)
    g = RequirementGraph(["cuda-toolkit[cusolver]==12.*", "cuda-toolkit[cufft]==12.*"], ENVS, index)
    assert g.provider("libcufft.so.11") is not None and g.provider("libcusolver.so.11") is not None
    assert index.asked.count("cuda-toolkit") == 1


def test_the_walk_starts_on_first_use_and_runs_once() -> None:
    index = FakeIndex(INDEX)
    g = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, index)
    assert index.asked == []
    g.provider("librmm.so")
    g.provider("librapids_logger.so")
    assert index.asked == ["librmm-cu12", "rapids-logger"]


def test_extras_of_a_project_are_not_walked_unasked() -> None:
    g = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX))
    g.provider("x")
    assert not any(u.startswith("pytest") for u in g.unread)


def test_torch_libraries_go_to_the_torch_rules_first_and_the_walk_answers_past_their_tables() -> None:
    torch_index = {
        "torch": facts("torch", "2.14.0", ("torch/lib/libc10.so",), ("cuda-toolkit[cudart]==13.*",)),
        "cuda-toolkit": facts("cuda-toolkit", "13.2.0", (), ('nvidia-cuda-runtime==13.2.*; extra == "cudart"',)),
        "nvidia-cuda-runtime": facts("nvidia-cuda-runtime", "13.2.51", ("nvidia/cu13/lib/libcudart.so.13",)),
    }
    ext = [elf("ext/_C.so", ("libc10.so", "libcudart.so.13"))]
    # a release the tables know: torch's notes, not the walk's
    known = RequirementGraph(["torch==2.11.0"], ENVS, FakeIndex(torch_index))
    v = dependency_problems(ext, cuda_major=13, requires=["torch==2.11.0"], tags=TAGS, graph=known)
    assert v.problems == ()
    assert all("a requirement of the wheel installs" not in n for n in v.notes), v.notes
    # one newer than the tables: torch's own library is assumed in torch/lib; its cudart comes through the walk
    newer = RequirementGraph(["torch==2.14.0"], ENVS, FakeIndex(torch_index))
    v = dependency_problems(ext, cuda_major=13, requires=["torch==2.14.0"], tags=TAGS, graph=newer)
    assert v.problems == ()
    assert any(
        "libc10.so" in n and "releases after 2.11 from PyPI" in n and "torch's own library, in every release" in n
        for n in v.notes
    )
    assert any(
        "libcudart.so.13, which a requirement's requirement installs: the wheel requires torch==2.14.0, which "
        "requires cuda-toolkit[cudart]==13.*, which requires nvidia-cuda-runtime==13.2.*" in n
        for n in v.notes
    ), v.notes


def test_a_torch_extension_without_a_torch_requirement_is_one_problem() -> None:
    # torchao 0.18's shape: two extensions need torch's libraries and CUDA 13's runtime, and nothing requires torch
    ext = [
        elf("ao/_C_a.so", ("libc10.so", "libtorch_cuda.so", "libcudart.so.13", "libc.so.6")),
        elf("ao/_C_b.so", ("libc10.so", "libtorch_cuda.so", "libcudart.so.13")),
    ]
    v = dependency_problems(ext, cuda_major=13, requires=["numpy"], tags=TAGS)
    assert v.problems == (
        "ao/_C_a.so, ao/_C_b.so need torch's libraries (libc10.so, libtorch_cuda.so) and libcudart.so.13, which "
        "PyPI's torch 2.11.0 installs, but the wheel has no Requires-Dist on torch: pip may install it without "
        "torch, or beside a torch it cannot load",
    )
    # a library torch does not bring is still its own problem; a file that is no torch extension is judged alone
    other = [elf("ao/_C_a.so", ("libc10.so", "libfoo.so.1")), elf("ao/plain.so", ("libcudart.so.13",))]
    v = dependency_problems(other, cuda_major=13, requires=[], tags=TAGS)
    assert len(v.problems) == 3, v.problems
    assert any(p.startswith("ao/_C_a.so needs libfoo.so.1: not in the wheel") for p in v.problems)
    assert any(p.startswith("ao/plain.so needs libcudart.so.13: not in the wheel") for p in v.problems)
    assert any(p.startswith("ao/_C_a.so needs torch's libraries (libc10.so), but") for p in v.problems)
    # a requirement's requirement that installs torch answers it: a note, no problem
    torch_index = {
        "xformers": facts("xformers", "0.1", (), ("torch==2.11.0",)),
        "torch": facts("torch", "2.11.0", ("torch/lib/libc10.so", "torch/lib/libtorch_cuda.so"), ("cudart==13",)),
        "cudart": facts("cudart", "13", ("nvidia/cu13/lib/libcudart.so.13",)),
    }
    walk = RequirementGraph(["xformers==0.1"], ENVS, FakeIndex(torch_index))
    v = dependency_problems(ext[:1], cuda_major=13, requires=["xformers==0.1"], tags=TAGS, graph=walk)
    assert not any("no Requires-Dist on torch" in p for p in v.problems), v.problems


def test_an_rpath_into_a_required_projects_folder_is_checked_against_its_files() -> None:
    """pennylane-lightning-gpu 0.45: RPATH $ORIGIN/../scipy_openblas32/lib made libcustatevec.so.1 "found" there.
    With the index read, the requirement that installs it answers, and whether a search path reaches its folder."""
    index = {
        "scipy-openblas32": facts("scipy-openblas32", "0.3.30", ("scipy_openblas32/lib/libscipy_openblas.so",)),
        "custatevec-cu12": facts("custatevec-cu12", "1.15.0", ("cuquantum/lib/libcustatevec.so.1",)),
    }
    reqs = ["scipy-openblas32>=0.3", "custatevec-cu12"]
    ext = [
        elf("pl/ops.so", ("libcustatevec.so.1", "libscipy_openblas.so"), ("$ORIGIN/../scipy_openblas32/lib",)),
        elf("pl/both.so", ("libcustatevec.so.1",), ("$ORIGIN/../scipy_openblas32/lib", "$ORIGIN/../cuquantum/lib")),
    ]
    v = dependency_problems(
        ext, cuda_major=12, requires=reqs, tags=TAGS, graph=RequirementGraph(reqs, ENVS, FakeIndex(index))
    )
    assert v.problems == ()
    (alone,) = [n for n in v.notes if n.startswith("pl/ops.so need(s) libcustatevec.so.1")]
    assert "installs cuquantum/lib/libcustatevec.so.1; the loader finds that copy when it is loaded before" in alone
    (reached,) = [n for n in v.notes if n.startswith("pl/both.so need(s) libcustatevec.so.1")]
    assert reached.endswith("found through its RPATH entry $ORIGIN/../cuquantum/lib")
    assert any(n.startswith("pl/ops.so need(s) libscipy_openblas.so") for n in v.notes), v.notes
    # the index read every requirement's files and none installs it: a problem, not a note
    lost = [elf("pl/ops.so", ("libmissing.so.1",), ("$ORIGIN/../scipy_openblas32/lib",))]
    v = dependency_problems(
        lost, cuda_major=12, requires=reqs, tags=TAGS, graph=RequirementGraph(reqs, ENVS, FakeIndex(index))
    )
    assert len(v.problems) == 1 and "libmissing.so.1" in v.problems[0], v


@pytest.mark.parametrize(("limit", "depth"), [(1, 6), (64, 1)])
def test_limits_bound_the_walk(limit: int, depth: int) -> None:
    g = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX), max_projects=limit, max_depth=depth)
    assert g.provider("librmm.so") is not None
    assert g.provider("librapids_logger.so") is None
    if limit == 1:
        assert g.unread == ("rapids-logger: not read, 1 projects were read already",)


def test_a_cycle_ends() -> None:
    index = FakeIndex({"a": facts("a", "1", ("liba.so",), ("b",)), "b": facts("b", "1", ("libb.so",), ("a",))})
    g = RequirementGraph(["a"], ENVS, index)
    assert g.provider("libb.so") is not None and index.asked == ["a", "b"]


def test_the_nearest_provider_wins() -> None:
    index = FakeIndex(
        {
            "deep": facts("deep", "1", (), ("far",)),
            "far": facts("far", "1", ("far/libx.so",)),
            "near": facts("near", "1", ("near/libx.so",)),
        }
    )
    p = RequirementGraph(["deep", "near"], ENVS, index).provider("libx.so")
    assert p is not None and p.project == "near"


@pytest.mark.parametrize(
    ("member", "path"),
    [
        ("pkg/lib/libx.so", "pkg/lib/libx.so"),
        ("pkg-1.0.data/platlib/pkg/libx.so", "pkg/libx.so"),
        ("pkg-1.0.data/purelib/x.py", "x.py"),
        ("pkg-1.0.data/scripts/tool", None),
        ("pkg-1.0.data/data/lib/libx.so", None),
        ("pkg-1.0.dist-info/RECORD", None),
        ("pkg/", None),
    ],
)
def test_install_path(member: str, path: str | None) -> None:
    assert install_path(member) == path


# --- what the dependency rules make of it -------------------------------------------------------------------------


def elf(path: str, needed: tuple[str, ...], search: tuple[str, ...] = ()) -> ElfInfo:
    return ElfInfo(path=path, soname=None, needed=needed, rpath=(), runpath=search)


def test_a_library_a_requirements_requirement_installs_is_a_note() -> None:
    elfs = [elf("rmm/a.so", ("librapids_logger.so", "libc.so.6")), elf("rmm/b.so", ("librapids_logger.so",))]
    reqs = ["librmm-cu12==26.10.*"]
    offline = dependency_problems(elfs, cuda_major=12, requires=reqs, tags=TAGS, name="rmm-cu12")
    # offline, what librmm-cu12's wheels install is not known: never a pass, and not a definite failure (exit 19)
    assert offline.problems == ()
    (unknown,) = offline.unknown  # one line for the library and the files that need it
    assert unknown.startswith("rmm/a.so, rmm/b.so need librapids_logger.so: not in the wheel, not a CUDA runtime")
    assert unknown.endswith("the index was not read (`slimwheel check` without --offline reads it)")
    graph = RequirementGraph(reqs, ENVS, FakeIndex(INDEX))
    v = dependency_problems(elfs, cuda_major=12, requires=reqs, tags=TAGS, name="rmm-cu12", graph=graph)
    assert v.problems == ()
    (note,) = [n for n in v.notes if "librapids_logger.so" in n]
    assert note.startswith("rmm/a.so, rmm/b.so need(s) librapids_logger.so, which a requirement's requirement")
    assert "rmm-cu12 requires librmm-cu12==26.10.*, which requires rapids-logger==0.3.*" in note
    assert "rapids-logger 0.3.0 (the version the index offers now) installs rapids_logger/lib64/" in note


def test_a_cuda_library_through_a_requirements_metapackage_is_a_note() -> None:
    elfs = [elf("pkg/x.so", ("libcusolver.so.11",))]
    index = dict(INDEX, libfoo=facts("libfoo", "1", ("libfoo/lib/libfoo.so",), ("cuda-toolkit[cusolver]==12.*",)))
    graph = RequirementGraph(["libfoo"], ENVS, FakeIndex(index))
    v = dependency_problems(elfs, cuda_major=12, requires=["libfoo"], tags=TAGS, graph=graph)
    assert v.problems == ()
    assert any("libcusolver.so.11, which a requirement's requirement installs" in n for n in v.notes)


def test_found_through_rpath_into_the_providers_folder() -> None:
    elfs = [elf("rmm/a.so", ("librapids_logger.so",), ("$ORIGIN/../rapids_logger/lib64",))]
    graph = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX))
    v = dependency_problems(elfs, cuda_major=12, requires=["librmm-cu12==26.10.*"], tags=TAGS, graph=graph)
    assert v.problems == ()
    assert any(n.endswith("found through its RPATH entry $ORIGIN/../rapids_logger/lib64") for n in v.notes)


def test_what_could_not_be_read_is_said_in_the_problem() -> None:
    elfs = [elf("rmm/a.so", ("librapids_logger.so",))]
    graph = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX, frozenset({"librmm-cu12"})))
    v = dependency_problems(elfs, cuda_major=12, requires=["librmm-cu12==26.10.*"], tags=TAGS, graph=graph)
    assert v.problems == ()  # the index could not tell: not known (exit 19 unless --unknown note)
    (problem,) = v.unknown
    assert problem.endswith(
        "(what 1 requirement(s) install could not be read from the index: librmm-cu12: no route to the index)"
    )


def test_a_wrongly_pinned_direct_requirement_is_not_excused_by_the_graph() -> None:
    elfs = [elf("pkg/x.so", ("libcusolver.so.12",))]
    reqs = ["nvidia-cusolver", "libfoo"]  # unpinned: pip may bring another SONAME major
    index = {
        "libfoo": facts("libfoo", "1", (), ("nvidia-cusolver==12.*",)),
        "nvidia-cusolver": facts("nvidia-cusolver", "12.0.9", ("nvidia/cu13/lib/libcusolver.so.12",)),
    }
    v = dependency_problems(
        elfs, cuda_major=13, requires=reqs, tags=TAGS, graph=RequirementGraph(reqs, ENVS, FakeIndex(index))
    )
    assert len(v.problems) == 1 and "does not pin nvidia-cusolver to 12.*" in v.problems[0]


def test_what_could_not_be_read_is_typed_for_the_verdict() -> None:
    # the lead's verdict weighs "unknown" by kind; `unread` keeps its strings for the notes
    g = RequirementGraph(
        ["librmm-cu12==26.10.*", "numpy>=2"], ENVS, FakeIndex(INDEX, failing=frozenset({"rapids-logger"}))
    )
    assert g.provider("librapids_logger.so") is None
    assert g.unknown == (
        Unread(project="numpy", why=Why.NOT_FOUND, detail="no wheel of numpy"),
        Unread(project="rapids-logger", why=Why.UNREACHABLE, detail="no route to the index"),
    )
    assert g.unread == ("numpy: no wheel of numpy", "rapids-logger: no route to the index")
    small = RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX), max_projects=1)
    assert [(u.project, u.why) for u in small.unknown] == [("rapids-logger", Why.NOT_READ)]
    assert RequirementGraph(["librmm-cu12==26.10.*"], ENVS, FakeIndex(INDEX)).unknown == ()


def test_only_library_files_count() -> None:
    assert is_library("librmm/lib64/librmm.so")
    assert is_library("nvidia/cu13/lib/libcublas.so.13")
    assert is_library("rmm/_lib.cpython-312-x86_64-linux-gnu.so")
    assert not is_library("rmm/__init__.py")
    assert not is_library("share/x.sopranos/readme.txt")
