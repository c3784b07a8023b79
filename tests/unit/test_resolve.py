"""deps.resolve: who provides each library of each file, as typed values, and the verdict worded from them alone
(issue 36 item 2). The wording's own assertions live beside each rule (test_extras, test_pyimports, test_torchext,
test_reqgraph, ...); these pin the resolution that repair plans from."""

from __future__ import annotations

import textwrap

from slimwheel.deps import How, Use, dependency_problems, resolve, word
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.pyimports import PythonImports

TAGS = ["cp311-cp311-manylinux_2_28_x86_64"]
CTK = 'cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.*; extra == "ctk"'
NCCL = "pkg/libs/nccl.cpython-311-x86_64-linux-gnu.so"


def _elf(path: str, *needed: str, loads: tuple[str, ...] = (), opens: tuple[str, ...] = ()) -> ElfInfo:
    return ElfInfo(
        path=path, soname=None, needed=(*needed, "libc.so.6"), rpath=(), runpath=(), loads=loads, opens=opens
    )


def _guarded() -> PythonImports:
    src = "try:\n    from pkg.libs import nccl\nexcept ImportError:\n    nccl = None\n"
    return PythonImports.from_sources({"pkg/__init__.py": textwrap.dedent(src).encode()})


def test_each_library_has_one_provider() -> None:
    elfs = [
        _elf("pkg/_core.so", "libcublas.so.13", "libcuda.so.1", "libm.so.6", "libfoo.so.1"),
        _elf(NCCL, "libnccl.so.2"),
    ]
    got = resolve(
        elfs, cuda_major=13, requires=[CTK, "nvidia-cuda-runtime==13.*"], tags=TAGS, files=(), imports=_guarded()
    )
    how = {(r.file, r.soname): r.how for r in got.libraries()}
    assert how == {
        ("pkg/_core.so", "libcublas.so.13"): How.EXTRA,
        ("pkg/_core.so", "libcuda.so.1"): How.DRIVER,
        ("pkg/_core.so", "libm.so.6"): How.SYSTEM,
        ("pkg/_core.so", "libc.so.6"): How.SYSTEM,
        ("pkg/_core.so", "libfoo.so.1"): How.NOTHING,
        (NCCL, "libnccl.so.2"): How.OPTIONAL,
        (NCCL, "libc.so.6"): How.SYSTEM,
    }
    assert got.extras() == ("ctk",)
    assert got.from_extras() == {"libcublas.so.13"}
    assert got.only_optional() == ("libnccl.so.2",)
    (fault,) = got.by(How.NOTHING)
    assert fault.policy == "manylinux_2_28" and not fault.required_fault


def test_a_library_an_optional_part_and_a_required_part_need_is_not_optional() -> None:
    elfs = [_elf("pkg/_core.so", "libnccl.so.2"), _elf(NCCL, "libnccl.so.2")]
    got = resolve(elfs, cuda_major=13, requires=[], tags=TAGS, imports=_guarded())
    assert [r.how for r in got.libraries() if r.soname == "libnccl.so.2"] == [How.NOTHING, How.OPTIONAL]
    assert got.only_optional() == ()
    v = word(got)
    assert v.optional == () and len(v.problems) == 1


def test_a_wrong_pin_is_a_fault_of_the_metadata_even_in_an_optional_part() -> None:
    got = resolve([_elf(NCCL, "libcudart.so.13")], cuda_major=13, requires=["nvidia-cuda-runtime"], tags=TAGS)
    (r,) = got.by(How.NOTHING)
    assert r.required_fault and r.cuda is not None and r.cuda.requirement is not None
    (problem,) = word(got).problems
    assert "does not pin nvidia-cuda-runtime to 13.*" in problem


def test_run_time_loads_are_their_own_use() -> None:
    got = resolve([_elf("pkg/_core.so", loads=("libnvrtc.so.13",))], cuda_major=13, requires=[], tags=TAGS)
    (r,) = got.by(How.NOTHING)
    assert r.use is Use.LOADS
    (problem,) = word(got).problems
    assert problem.startswith("pkg/_core.so loads at run time libnvrtc.so.13: ")


def test_the_verdict_is_the_wording_of_the_resolution() -> None:
    elfs = [_elf("pkg/_core.so", "libcublas.so.13", "libfoo.so.1"), _elf(NCCL, "libnccl.so.2")]
    v = dependency_problems(elfs, cuda_major=13, requires=[CTK], tags=TAGS, name="pkg", imports=_guarded())
    w = word(resolve(elfs, cuda_major=13, requires=[CTK], tags=TAGS, name="pkg", imports=_guarded()))
    assert (v.problems, v.notes, v.from_extras, v.optional) == (w.problems, w.notes, w.from_extras, w.optional)
    assert v.resolved is not None and v.resolved.only_optional() == v.optional
