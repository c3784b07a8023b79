"""Issue 22 item 3: CUDA libraries that come with an extra (cupy-cuda13x 14.2.0: `ctk`, through the `cuda-toolkit`
metapackage) get a verdict that says which extra provides what and what happens without it."""

from __future__ import annotations

import dataclasses

from slimwheel.deps import dependency_problems
from slimwheel.inspect.dynamic import ElfInfo
from testkit.binsynth import nvidia_runpath

TAGS = ["cp311-cp311-manylinux_2_28_x86_64"]
CTK = 'cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.*; extra == "ctk"'


def _elf(path: str, *needed: str) -> ElfInfo:
    return ElfInfo(path=path, soname=None, needed=(*needed, "libc.so.6"), rpath=(), runpath=())


def _reaching(e: ElfInfo) -> ElfInfo:
    """The file with the RUNPATH repair writes: a requirement provides a library only where the search path reaches
    it (deps.reach)."""
    return dataclasses.replace(e, runpath=tuple(filter(None, nvidia_runpath(e.path, e.needed).split(":"))))


ELFS = [
    _elf("cupy/cuda/cufft.so", "libcufft.so.12"),
    _elf("cupy_backends/cuda/libs/cublas.so", "libcublas.so.13", "libcublasLt.so.13"),
    _elf("cupy_backends/cuda/libs/nccl.so", "libnccl.so.2"),
]


def test_libraries_through_the_metapackage_under_an_extra_are_a_note() -> None:
    v = dependency_problems(ELFS[:2], cuda_major=13, requires=[CTK], tags=TAGS, name="cupy-cuda13x")
    assert v.problems == ()
    assert v.extras == ("ctk",)
    assert {p.soname for p in v.from_extras} == {"libcufft.so.12", "libcublas.so.13", "libcublasLt.so.13"}
    (note,) = [n for n in v.notes if "extra" in n]
    assert "cupy-cuda13x[ctk]" in note and "libcufft.so.12" in note and "without the extra" in note


def test_the_extra_note_says_when_no_search_path_reaches_the_extras_folder() -> None:
    # onnxruntime-gpu 1.31's CUDA provider has no RUNPATH: with the extra installed, its libraries are found only once
    # loaded (onnxruntime.preload_dlls(), or torch's import)
    (note,) = [n for n in dependency_problems(ELFS[:2], cuda_major=13, requires=[CTK], tags=TAGS).notes if "extra" in n]
    assert note.endswith(
        "with it, no search path of those files reaches nvidia/cu13/lib, so the libraries are found only once loaded "
        "(by the package's own preloading, or torch's import)"
    )
    reaching = [
        ElfInfo(path=e.path, soname=None, needed=e.needed, rpath=(), runpath=("$ORIGIN/../../nvidia/cu13/lib",))
        for e in ELFS[:2]
    ]
    (note,) = [n for n in dependency_problems(reaching, cuda_major=13, requires=[CTK], tags=TAGS).notes if "extra" in n]
    assert "no search path" not in note


def test_a_library_no_extra_installs_stays_a_problem() -> None:
    v = dependency_problems(ELFS, cuda_major=13, requires=[CTK], tags=TAGS)
    (p,) = v.problems
    assert "libnccl.so.2" in p and "nvidia-nccl-cu13" in p


def test_the_metapackage_must_pin_the_major() -> None:
    loose = 'cuda-toolkit[cufft]>=12; extra == "ctk"'
    v = dependency_problems(ELFS[:1], cuda_major=13, requires=[loose], tags=TAGS)
    assert v.problems and v.from_extras == ()


def test_the_metapackage_unconditionally_provides_its_extras_libraries() -> None:
    v = dependency_problems([_reaching(ELFS[0])], cuda_major=13, requires=["cuda-toolkit[cufft]==13.*"], tags=TAGS)
    assert v.problems == () and v.from_extras == ()
    v = dependency_problems(ELFS[1:2], cuda_major=13, requires=["cuda-toolkit[cufft]==13.*"], tags=TAGS)
    assert any("libcublas.so.13" in p for p in v.problems)


def test_a_folder_is_tied_to_the_project_without_its_cuda_suffix() -> None:
    from slimwheel.external import check_can_tie, external_lib, folder_of_project

    assert folder_of_project("cutensor", "cutensor-cu13") and folder_of_project("cupy", "cupy-cuda12x")
    assert not folder_of_project("torch", "torchvision") and not folder_of_project(".", "x")
    ext = external_lib("libfoo.so.1", "foo-cu13>=1", "foo/lib", where="--external")
    assert check_can_tie(ext) is None
    info = ElfInfo(path="pkg/_x.so", soname=None, needed=("libfoo.so.1",), rpath=(), runpath=("$ORIGIN/../foo/lib",))
    v = dependency_problems([info], cuda_major=None, requires=["foo-cu13>=1"], tags=TAGS)
    # offline the folder is taken on trust: what is not known (DependencyVerdict.unknown), not a note of a pass
    assert v.problems == () and any("foo/lib" in n and "not known" in n for n in v.unknown)


def test_cuda_libraries_torchs_requirements_install_are_a_note_when_every_admitted_torch_has_them() -> None:
    """A torch extension that needs libcudart.so.12 and requires torch: PyPI's torch 2.9 and 2.10 (CUDA 12.8) require
    nvidia-cuda-runtime-cu12 and load it at import; torch 2.11 is CUDA 13, so a requirement admitting it does not."""
    ext = [_elf("ext/_C.so", "libcudart.so.12", "libcublas.so.12")]
    v = dependency_problems(ext, cuda_major=12, requires=["torch>=2.9,<2.11"], tags=TAGS)
    assert v.problems == ()
    (cudart,) = [n for n in v.notes if "libcudart.so.12" in n]
    assert "torch 2.9.1, 2.10.0 from PyPI require(s) nvidia-cuda-runtime-cu12" in cudart
    v = dependency_problems(ext, cuda_major=12, requires=["torch>=2.9"], tags=TAGS)
    assert any("libcudart.so.12" in p for p in v.problems)  # pip may install torch 2.11, which brings CUDA 13
    v = dependency_problems(ext, cuda_major=12, requires=[], tags=TAGS)
    assert any("libcudart.so.12" in p for p in v.problems)  # the control: no torch, no provider


def test_a_per_cuda_alternative_needs_one_admitted_torch_of_its_major() -> None:
    """bitsandbytes' shape: one library per CUDA version, loaded for the CUDA torch brings."""
    alts = [
        _elf("bnb/libbnb_cuda128.so", "libcudart.so.12"),
        _elf("bnb/libbnb_cuda130.so", "libcudart.so.13"),
        _elf("bnb/libbnb_cuda118.so", "libcudart.so.11.0"),
    ]
    v = dependency_problems(alts, cuda_major=None, requires=["torch>=2.4,<3"], tags=TAGS)
    assert [p for p in v.problems if "cuda118" in p] and not [p for p in v.problems if "cuda128" in p or "cuda130" in p]
    assert any("libcudart.so.13" in n and "torch 2.11.0" in n for n in v.notes)


def test_a_library_torch_ships_and_loads_at_import_is_a_note_when_every_admitted_torch_does() -> None:
    """bitsandbytes' libbitsandbytes_cpu.so needs libgomp.so.1, which PyPI's x86_64 torch 2.7-2.11 ship in torch/lib
    and load at import (libtorch_global_deps.so needs it); 2.4-2.6 ship auditwheel's libgomp-a34b3233.so.1, another
    name (resources/torch-lib.json)."""
    cpu = [_elf("bnb/libbnb_cpu.so", "libgomp.so.1")]
    v = dependency_problems(cpu, cuda_major=None, requires=["torch>=2.7,<3"], tags=TAGS)
    assert v.problems == ()
    (note,) = [n for n in v.notes if "libgomp.so.1" in n]
    assert "torch 2.7.1 ... 2.11.0 (5 releases) from PyPI ship(s) torch/lib/libgomp.so.1" in note
    assert "libtorch_global_deps.so" in note
    v = dependency_problems(cpu, cuda_major=None, requires=["torch>=2.4,<3"], tags=TAGS)
    (p,) = v.problems
    assert "needs libgomp.so.1" in p and "2.4.1 (loads libgomp-a34b3233.so.1)" in p and "2.6.0 (loads" in p
    assert "2.7.1" in p  # the releases that would bring it are named
    # older than the table: not read, so not counted as bringing it
    v = dependency_problems(cpu, cuda_major=None, requires=["torch>=2.3,<2.8"], tags=TAGS)
    assert any("releases before 2.4 (torch/lib not read)" in p for p in v.problems)


def test_what_torch_does_not_ship_or_load_stays_a_failure() -> None:
    """The controls: a library no torch/lib holds; one torch ships but import does not load; no torch requirement;
    a machine whose torch wheels do not ship it (PyPI's aarch64 torch 2.7-2.9 has no libgomp in torch/lib)."""
    ok = ["torch>=2.7,<3"]
    rocm = [_elf("bnb/libbnb_rocm64.so", "libhipblas.so.2")]
    assert any(
        "libhipblas.so.2" in p for p in dependency_problems(rocm, cuda_major=None, requires=ok, tags=TAGS).problems
    )
    test_lib = [_elf("x/_x.so", "libjitbackend_test.so")]  # shipped by aarch64 torch 2.10, needed by nothing
    arm = ["cp312-cp312-manylinux_2_28_aarch64"]
    v = dependency_problems(test_lib, cuda_major=None, requires=["torch==2.10.*"], tags=arm)
    assert any("libjitbackend_test.so" in p for p in v.problems)
    cpu = [_elf("bnb/libbnb_cpu.so", "libgomp.so.1")]
    v = dependency_problems(cpu, cuda_major=None, requires=[], tags=TAGS)
    assert any("libgomp.so.1" in p for p in v.problems) and not any("torch" in n for n in v.notes)
    v = dependency_problems(cpu, cuda_major=None, requires=["torch>=2.7,<2.10"], tags=arm)
    assert any("libgomp.so.1" in p for p in v.problems) and not any("libgomp" in n for n in v.notes)
    v = dependency_problems(cpu, cuda_major=None, requires=["torch>=2.10"], tags=arm)  # 2.10, 2.11 ship it there
    assert v.problems == () and any("libtorch_cpu.so needs" in n for n in v.notes)


# onnxruntime-gpu 1.31.1: its CUDA provider needs cuBLAS 13, which neither extra names; `cudnn` brings it, because
# nvidia-cudnn-cu13 requires nvidia-cublas.
ORT = [
    'nvidia-cuda-runtime~=13.0; extra == "cuda"',
    'nvidia-curand~=10.0; extra == "cuda"',
    'nvidia-cudnn-cu13~=9.0; extra == "cudnn"',
]
ORT_ELF = _elf(
    "onnxruntime/capi/libonnxruntime_providers_cuda.so",
    "libcublasLt.so.13",
    "libcublas.so.13",
    "libcudart.so.13",
    "libcudnn.so.9",
    "libcurand.so.10",
)


def test_a_library_the_required_wheel_requires_comes_with_it() -> None:
    v = dependency_problems([ORT_ELF], cuda_major=13, requires=ORT, tags=TAGS, name="onnxruntime-gpu")
    assert v.problems == ()
    by_extra = {p.soname: p.extra for p in v.from_extras}
    assert by_extra["libcublas.so.13"] == by_extra["libcublasLt.so.13"] == by_extra["libcudnn.so.9"] == "cudnn"
    assert by_extra["libcudart.so.13"] == "cuda"
    (cudnn,) = [n for n in v.notes if "extra 'cudnn'" in n]
    assert "(nvidia-cudnn-cu13 requires nvidia-cublas)" in cudnn
    # required outright, nvidia-cudnn-cu12 brings cuBLAS 12 just as well; an unpinned unsuffixed provider does not
    cu12 = _elf("pkg/_x.so", "libcublas.so.12", "libcudnn.so.9")
    assert (
        dependency_problems([_reaching(cu12)], cuda_major=12, requires=["nvidia-cudnn-cu12"], tags=TAGS).problems == ()
    )
    cusolver = _elf("pkg/_y.so", "libcusparse.so.12", "libcusolver.so.12")
    v = dependency_problems([_reaching(cusolver)], cuda_major=13, requires=["nvidia-cusolver"], tags=TAGS)
    assert len(v.problems) == 2 and all("pip may install another CUDA major" in p for p in v.problems)
    v = dependency_problems([_reaching(cusolver)], cuda_major=13, requires=["nvidia-cusolver==12.*"], tags=TAGS)
    assert v.problems == ()


def test_a_library_the_required_wheel_does_not_require_stays_a_problem() -> None:
    v = dependency_problems(
        [_elf("pkg/_x.so", "libcufft.so.12")], cuda_major=13, requires=["nvidia-cudnn-cu13"], tags=TAGS
    )
    (p,) = v.problems
    assert "libcufft.so.12" in p and "no Requires-Dist on nvidia-cufft" in p


def test_cuda_12_s_metapackage_stands_for_its_extras_libraries() -> None:
    # libcuvs-cu12 26.10.0: `cuda-toolkit[cublas,curand,cusolver,cusparse,nvrtc]==12.*`
    reqs = ["cuda-toolkit[cublas,curand,cusolver,cusparse,nvrtc]==12.*"]
    elf = _elf("libcuvs/lib64/libcuvs.so", "libcublas.so.12", "libcusolver.so.11", "libcurand.so.10", "libnvrtc.so.12")
    assert dependency_problems([_reaching(elf)], cuda_major=12, requires=reqs, tags=TAGS).problems == ()
    (p,) = dependency_problems([_elf("x/_y.so", "libcufft.so.11")], cuda_major=12, requires=reqs, tags=TAGS).problems
    assert "libcufft.so.11" in p


def test_a_library_named_after_a_required_project_is_a_note() -> None:
    # libcudf-cu12 26.10.2: libcudf.so needs librmm.so etc. with RUNPATH $ORIGIN only; the wheels it requires load
    # them when imported (RAPIDS' load_library)
    from slimwheel.external import library_of_project

    assert library_of_project("librmm.so", "librmm-cu12") and library_of_project("libkvikio.so", "libkvikio-cu13")
    assert library_of_project("librapids_logger.so", "rapids-logger")
    assert library_of_project("libnvcomp.so.5", "nvidia-libnvcomp-cu12")
    assert not library_of_project("librmm.so", "rmm-cu12-tools") and not library_of_project("libfoo.so", "bar")
    assert not library_of_project("rmm.so", "rmm") and not library_of_project("lib.so", "lib")
    elf = _elf("libcudf/lib64/libcudf.so", "librmm.so", "librapids_logger.so", "libnvcomp.so.5")
    reqs = ["librmm-cu12==26.10.*", "rapids-logger==0.3.*", "nvidia-libnvcomp-cu12==5.3.0.16"]
    v = dependency_problems([elf], cuda_major=12, requires=reqs, tags=TAGS)
    assert v.problems == () and len(v.notes) == 3
    assert all("is named after it" in n for n in v.notes)
    # offline (no index here), whether librmm-cu12's or rapids-logger's wheels bring libnvcomp.so.5 is not known
    v = dependency_problems([elf], cuda_major=12, requires=reqs[:2], tags=TAGS)
    (p,) = v.unknown
    assert v.problems == () and "libnvcomp.so.5" in p
    # under an extra or only under a marker: not installed everywhere, no tie
    assert dependency_problems([elf], cuda_major=12, requires=[f'{r}; extra == "x"' for r in reqs], tags=TAGS).problems


def test_torch_s_libraries_are_not_tied_by_name() -> None:
    """torch's own libraries are torch's because `import torch` loads them (torch-lib.json), not because of a name:
    torchvision 0.26's _C.so needs them with no search path into torch/lib."""
    v = dependency_problems([_elf("ext/_C.so", "libtorch.so")], cuda_major=None, requires=["torch==2.11.0"], tags=TAGS)
    assert v.problems == ()
    (note,) = [n for n in v.notes if "libtorch.so" in n]
    assert "at `import torch`" in note and "named after it" not in note
    # a library of torch's name that no admitted release loads at import stays a failure
    v = dependency_problems(
        [_elf("ext/_C.so", "libtorch_nope.so")], cuda_major=None, requires=["torch==2.11.0"], tags=TAGS
    )
    assert v.problems
    v = dependency_problems([_elf("ext/_C.so", "libtorch.so")], cuda_major=None, requires=[], tags=TAGS)
    assert v.problems  # no torch requirement: nothing brings it


def test_the_library_wheel_itself_is_named_before_its_python_wheel() -> None:
    # pylibraft-cu12 26.10.0 requires rmm-cu12 and libraft-cu12; librmm.so is librmm-cu12's, which rmm-cu12 requires
    elf = _elf("pylibraft/common/cuda.abi3.so", "librmm.so")
    (note,) = dependency_problems([elf], cuda_major=12, requires=["rmm-cu12", "librmm-cu12"], tags=TAGS).notes
    assert "Requires-Dist 'librmm-cu12' is named after it" in note


def test_nvtx2_is_required_below_the_release_that_dropped_it() -> None:
    """dgl-cu111 0.6.1's torch adapters need libnvToolsExt.so.1, which was "not a CUDA runtime library from PyPI":
    nvidia-nvtx-cu11 and nvidia-nvtx-cu12 before 12.9 install it (12.9.79 ships libnvtx3interop.so.1 only). Repair
    bounds the requirement below 12.9; check passes a requirement that stays below it, and fails one that admits 12.9,
    which pip would take."""
    from slimwheel.cuda import libs as cudalibs
    from slimwheel.deps.bounds import requirements

    (nvtx2,) = [lib for lib in cudalibs.libs_for(12) if lib.soname == "libnvToolsExt.so.1"]
    nvtx3 = cudalibs.lookup("nvtx", 12)
    assert requirements([nvtx2], cuda=None).popitem()[1].endswith(",<12.9")
    # both libraries of the one wheel: the lower upper bound, one requirement
    (both,) = requirements([nvtx3, nvtx2], cuda=None).values()
    assert both.startswith("nvidia-nvtx-cu12>=") and both.endswith(",<12.9")
    ext = _reaching(_elf("dgl/tensoradapter/ta.so", "libnvToolsExt.so.1"))
    for req, ok in (
        ("nvidia-nvtx-cu12==12.1.105", True),
        ("nvidia-nvtx-cu12>=12.1,<12.9", True),
        ("nvidia-nvtx-cu12>=12.1", False),
        ("cuda-toolkit[nvtx]==12.*", False),
        ("cuda-toolkit[nvtx]==12.6.*", True),
    ):
        v = dependency_problems([ext], cuda_major=12, requires=[req], tags=TAGS)
        assert (v.problems == ()) is ok, (req, v.problems)
        if not ok:
            (p,) = v.problems
            name = req.split("[")[0].split(">")[0]
            assert f"admits {name} 12.9 and later, which no longer install it" in p and "below 12.9" in p, p
    (missing,) = dependency_problems([ext], cuda_major=11, requires=[], tags=TAGS).problems
    assert "no Requires-Dist on nvidia-nvtx-cu11 (CUDA 11)" in missing
