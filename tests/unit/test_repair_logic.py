"""repair's pure decisions: CUDA major, exclusions, requirement bounds, METADATA, RPATH, loader placement."""

from __future__ import annotations

import ast
import base64
import hashlib
import sys
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.requirements import Requirement

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.versions import CudaVersion
from slimwheel.deps import dependency_problems, exclusions, floor_for, requirement_for, requirements, system_policy
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.repair import major_for as infer_cuda_major
from slimwheel.repair import wanted_rpath
from slimwheel.rpath import deepen as deepen_rpath
from slimwheel.rpath import install_dir
from slimwheel.runtime import generate
from slimwheel.runtime.place import driver_floor, plan_loader
from slimwheel.wheelfile import add_requires_dist, record_line


def elf(
    path: str, *needed: str, runpath: tuple[str, ...] = (), rpath: tuple[str, ...] = (), soname: str | None = None
) -> ElfInfo:
    return ElfInfo(path=path, soname=soname, needed=tuple(needed), rpath=rpath, runpath=runpath)


def test_major_from_needed_sonames() -> None:
    assert infer_cuda_major({"a.so": elf("a.so", "libcudart.so.13", "libc.so.6")}) == 13
    assert infer_cuda_major({"a.so": elf("a.so", "libcublas.so.12")}) == 12
    assert infer_cuda_major({"a.so": elf("a.so", "libc.so.6")}) is None


def test_two_majors_are_inconsistent() -> None:
    elfs = {"a.so": elf("a.so", "libcudart.so.13"), "b.so": elf("b.so", "libcublas.so.12")}
    with pytest.raises(CheckFailed) as e:
        infer_cuda_major(elfs)
    assert e.value.exit_code == ExitCode.INCONSISTENT_DEPENDENCIES
    assert "libcublas.so.12" in str(e.value) and "libcudart.so.13" in str(e.value)


def test_shared_soname_alone_needs_cuda_flag() -> None:
    # libcurand.so.10 is the SONAME in both CUDA 12 and 13: no way to tell.
    with pytest.raises(BadInputError, match="--cuda"):
        infer_cuda_major({"a.so": elf("a.so", "libcurand.so.10")})


def test_a_shared_soname_the_wheel_carries_is_its_own_not_a_need() -> None:
    """nvidia-cudnn-cu13 9.28.1.4: its libraries need libcudnn_graph.so.9 and libcudnn_ops.so.9 (SONAMEs of CUDA 12's
    cuDNN too), which the wheel itself carries; repair refused it as if it needed them from outside."""
    lib = "nvidia/cudnn/lib/"
    elfs = {
        f"{lib}libcudnn_graph.so.9": elf(f"{lib}libcudnn_graph.so.9", "libc.so.6", soname="libcudnn_graph.so.9"),
        f"{lib}libcudnn_ops.so.9": elf(f"{lib}libcudnn_ops.so.9", "libcudnn_graph.so.9", soname="libcudnn_ops.so.9"),
        f"{lib}libcudnn_cnn.so.9": elf(f"{lib}libcudnn_cnn.so.9", "libcudnn_ops.so.9", "libcudnn_graph.so.9"),
    }
    assert infer_cuda_major(elfs) is None
    # the control: the same SONAME needed from outside the wheel still cannot tell the major
    with pytest.raises(BadInputError, match=r"libcudnn_ops\.so\.9, which CUDA 12 and 13 share"):
        infer_cuda_major({"a.so": elf("a.so", "libcudnn_ops.so.9")})


def test_exclusions_are_versioned_and_cover_the_driver() -> None:
    ex = exclusions(13)
    assert set(ex) >= {lib.soname for lib in cudalibs.libs_for(13)}
    assert "libcuda.so.1" in ex
    assert all(".so." in s for s in ex)  # an unversioned pattern would not match libcublas.so.13
    assert not any(s.endswith(".so.12") and s.startswith("libcublas") for s in ex)
    assert exclusions(None) == cudalibs.DRIVER_SONAMES


@pytest.mark.parametrize(
    ("component", "major", "cuda", "expected"),
    [
        ("cublas", 13, CudaVersion(13, 0), "nvidia-cublas>=13.0,<14"),
        # cuBLAS's versions no longer follow the release (13.5 ships cuBLAS 13.10): without evidence, the major's first
        ("cublas", 13, CudaVersion(13, 2), "nvidia-cublas>=13.0,<14"),
        ("cudart", 12, CudaVersion(12, 4), "nvidia-cuda-runtime-cu12>=12.4,<13"),
        ("cublas", 12, None, "nvidia-cublas-cu12>=12.0,<13"),
        ("curand", 13, CudaVersion(13, 0), "nvidia-curand>=10,<11"),  # cuRAND's versions do not follow CUDA's
        ("cusparse", 13, CudaVersion(13, 0), "nvidia-cusparse>=12,<13"),
    ],
)
def test_requirement_bounds(component: str, major: int, cuda: CudaVersion | None, expected: str) -> None:
    req = requirement_for(cudalibs.lookup(component, major), cuda=cuda, versions=None)
    assert req == expected
    Requirement(req)


def test_recorded_versions_win() -> None:
    lib = cudalibs.lookup("cublas", 13)
    assert requirement_for(lib, cuda=CudaVersion(13, 0), versions={"nvidia-cublas": "13.1.0.3"}) == (
        "nvidia-cublas>=13.1,<14"
    )
    # dist-info spelling of the name works too
    assert requirement_for(lib, cuda=None, versions={"nvidia_cublas": "13.0.2.14"}) == "nvidia-cublas>=13.0,<14"
    with pytest.raises(BadInputError):
        requirement_for(lib, cuda=None, versions={"nvidia-cublas": "not a version"})


def _imports(**by_lib: tuple[str, ...]) -> dict[str, frozenset[str]]:
    return {k.replace("_", ".").replace("lib.", "lib"): frozenset(v) for k, v in by_lib.items()}


def test_floor_is_the_first_release_when_it_exports_every_symbol_used() -> None:
    # Issue 14: a wheel built with CUDA 13.5 (cuBLAS 13.10) that uses only old symbols must install beside torch's
    # CUDA 13.0 pins (nvidia-cublas==13.1.0.3): its floor is CUDA 13.0's cuBLAS, not the one it was built against.
    lib = cudalibs.lookup("cublas", 13)
    built = {"nvidia-cublas": "13.10.0.20"}
    old = {"libcublas.so.13": frozenset({"cublasSgemm_v2", "cublasCreate_v2"})}
    assert requirement_for(lib, cuda=CudaVersion(13, 5), versions=built, imports=old) == "nvidia-cublas>=13.0,<14"
    new = {"libcublas.so.13": frozenset({"cublasSgemm_v2", "cublasSomethingFrom13_10"})}
    assert requirement_for(lib, cuda=CudaVersion(13, 5), versions=built, imports=new) == "nvidia-cublas>=13.10,<14"
    floor = floor_for(lib, cuda=None, versions=built, imports=new)
    assert "cublasSomethingFrom13_10" in floor.why and "13.10.0.20" in floor.why
    # no symbol versions to tell where a symbol comes from: the version built against
    assert requirement_for(lib, cuda=None, versions=built, imports={}) == "nvidia-cublas>=13.10,<14"
    # cuBLASLt symbols count for the nvidia-cublas requirement too, and the higher floor of the two wins
    libs = [cudalibs.lookup("cublasLt", 13), lib]
    lt_new = {"libcublas.so.13": frozenset({"cublasCreate_v2"}), "libcublasLt.so.13": frozenset({"cublasLtNew"})}
    assert requirements(libs, cuda=None, versions=built, imports=lt_new) == {
        "nvidia-cublas": "nvidia-cublas>=13.10,<14"
    }


@pytest.mark.parametrize(
    ("component", "major", "used", "built", "expected"),
    [
        # cuFFT 13 of CUDA 13.5 is 12.x: a wheel that uses only CUDA 13.0.0's symbols installs beside 13.0's pins
        ("cufft", 13, "cufftPlan1d", "12.2.0.37", "nvidia-cufft>=12.0,<13"),
        ("cusolver", 13, "cusolverDnCreate", "12.1.0.51", "nvidia-cusolver>=12.0,<13"),
        ("cusparse", 13, "cusparseCreate", "12.7.3.1", "nvidia-cusparse>=12.6,<13"),
        ("nppc", 13, "nppGetLibVersion", "13.1.1.62", "nvidia-npp>=13.0,<14"),
        ("nvrtc", 13, "nvrtcCompileProgram", "13.2.51", "nvidia-cuda-nvrtc>=13.0,<14"),
        # CUDA 12: the cu12 wheels of CUDA 12.0.0
        ("cudart", 12, "cudaMalloc", "12.8.90", "nvidia-cuda-runtime-cu12>=12.0,<13"),
        ("cublas", 12, "cublasSgemm_v2", "12.8.4.1", "nvidia-cublas-cu12>=12.0,<13"),
        ("cufft", 12, "cufftExecC2C", "11.3.3.83", "nvidia-cufft-cu12>=11.0,<12"),
    ],
)
def test_the_first_release_floor_covers_the_toolkits_libraries(
    component: str, major: int, used: str, built: str, expected: str
) -> None:
    """resources/cuda-baseline.json holds every library of the table that CUDA X.0.0's cuda-toolkit pins (it held
    four CUDA 13 libraries, none of CUDA 12): a wheel built with a later release that uses only X.0.0's symbols
    gets X.0.0's version as its floor, not the one it was built against."""
    lib = cudalibs.lookup(component, major)
    imports = {lib.soname: frozenset({used})}
    assert requirement_for(lib, cuda=None, versions={lib.package: built}, imports=imports) == expected
    newer = {lib.soname: frozenset({used, f"{used}_fromALaterRelease"})}
    assert requirement_for(lib, cuda=None, versions={lib.package: built}, imports=newer) != expected


def test_one_requirement_per_package() -> None:
    libs = [cudalibs.lookup(c, 13) for c in ("cudart", "cublasLt", "cublas")]
    assert requirements(libs, cuda=CudaVersion(13, 0)) == {
        "nvidia-cuda-runtime": "nvidia-cuda-runtime>=13.0,<14",
        "nvidia-cublas": "nvidia-cublas>=13.0,<14",
    }


META = """Metadata-Version: 2.1
Name: demo
Version: 1.0
Summary: demo
Description-Content-Type: text/markdown
Requires-Dist: numpy>=1.24
Requires-Dist: nvidia-cublas>=13.1; extra == "gpu"

# demo

Body text.
"""


def test_requires_dist_added_and_metadata_valid() -> None:
    text, added, kept = add_requires_dist(META, {"nvidia-cublas": "nvidia-cublas>=13.0,<14"}, path="METADATA")
    assert added == ("nvidia-cublas>=13.0,<14",) and kept == ()
    meta = Metadata.from_email(text, validate=True)
    assert [str(r) for r in meta.requires_dist or []][-1] == "nvidia-cublas<14,>=13.0"
    assert "numpy>=1.24" in [str(r) for r in meta.requires_dist or []]
    assert text.endswith("# demo\n\nBody text.\n")  # description untouched


def test_maintainers_own_requirement_is_kept() -> None:
    meta = META.replace("Requires-Dist: numpy>=1.24", "Requires-Dist: nvidia-cublas==13.0.2.14")
    text, added, kept = add_requires_dist(meta, {"nvidia-cublas": "nvidia-cublas>=13.0,<14"}, path="METADATA")
    assert added == () and kept == ("nvidia-cublas==13.0.2.14",)  # what is reported is what stays written
    assert "nvidia-cublas>=13.0,<14" not in text and "Requires-Dist: nvidia-cublas==13.0.2.14" in text


def test_bad_requires_dist_names_the_file() -> None:
    with pytest.raises(BadInputError, match="x.whl:METADATA"):
        add_requires_dist("Name: a\nRequires-Dist: !!bad\n\n", {}, path="x.whl:METADATA")


def test_record_line_is_urlsafe_sha256_without_padding() -> None:
    data = b"hello"
    expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    assert record_line("a/b.py", data) == ["a/b.py", f"sha256={expect}", "5"]


def test_rpath_gets_nvidia_folders_back_after_auditwheel() -> None:
    cu13 = [cudalibs.lookup("cudart", 13), cudalibs.lookup("cublas", 13)]
    before = elf("pkg/_ext.so", "libcudart.so.13", "libcublas.so.13", runpath=("$ORIGIN/../nvidia/cu13/lib",))
    after = elf("pkg/_ext.so", "libcudart.so.13", "libcublas.so.13", "libfoo-1a2b.so.1", rpath=("$ORIGIN/../pkg.libs",))
    assert wanted_rpath(after, before, cu13) == ("$ORIGIN/../pkg.libs", "$ORIGIN/../nvidia/cu13/lib")
    # already right: nothing to do
    assert wanted_rpath(before, before, cu13) is None


def test_rpath_for_wheels_built_without_one_cu12_layout() -> None:
    cu12 = [cudalibs.lookup("cudart", 12), cudalibs.lookup("cublas", 12)]
    info = elf("a/b/_ext.so", "libcudart.so.12", "libcublas.so.12")
    assert wanted_rpath(info, None, cu12) == (
        "$ORIGIN/../../nvidia/cuda_runtime/lib",
        "$ORIGIN/../../nvidia/cublas/lib",
    )
    top = elf("_ext.so", "libcudart.so.12")
    assert wanted_rpath(top, None, cu12) == ("$ORIGIN/nvidia/cuda_runtime/lib",)


def test_data_platlib_installs_at_the_root() -> None:
    assert install_dir("demo-1.0.data/platlib/pkg/_ext.so") == "pkg"
    assert install_dir("pkg/sub/_ext.so") == "pkg/sub"
    assert install_dir("_ext.so") == ""


def test_deepen_rpath_for_a_moved_extension() -> None:
    assert deepen_rpath(("$ORIGIN/nvidia/cu13/lib", "$ORIGIN", "/abs")) == (
        "$ORIGIN/../nvidia/cu13/lib",
        "$ORIGIN/..",
        "/abs",
    )


def test_loader_goes_to_the_outermost_regular_package_or_a_shim() -> None:
    files = [
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "pkg/sub/_ext.cpython-311-x86_64-linux-gnu.so",
        "top.abi3.so",
        "ns/inner.cpython-312-x86_64-linux-gnu.so",
        "pkg.libs/libfoo.so.1",
    ]
    elfs = {f: elf(f, "libcudart.so.13") for f in files if ".so" in f}
    plan = plan_loader(files, elfs)
    assert plan.packages == ("pkg",)
    assert set(plan.shims) == {("top.abi3.so", "top"), ("ns/inner.cpython-312-x86_64-linux-gnu.so", "ns.inner")}


def test_loader_import_goes_after_docstring_and_future() -> None:
    src = '"""Doc."""\nfrom __future__ import annotations\n\nimport os\nfrom ._ext import f\n'
    out = generate.insert_loader_import(src, path="pkg/__init__.py")
    tree = ast.parse(out)
    kinds = [type(n).__name__ for n in tree.body]
    assert kinds[:3] == ["Expr", "ImportFrom", "ImportFrom"]
    imported = tree.body[2]
    assert isinstance(imported, ast.ImportFrom)
    assert imported.names[0].name == generate.LOADER_NAME and imported.level == 1
    assert generate.insert_loader_import(out, path="pkg/__init__.py") == out  # idempotent
    assert generate.insert_loader_import("", path="x").startswith("from . import _slimwheel_loader")


def test_generated_loader_carries_its_table() -> None:
    libs = cudalibs.load_order([cudalibs.lookup("cublas", 13)])
    cfg = generate.loader_config(
        dist="demo",
        libs=libs,
        needed={"libcublas.so.13"},
        requirements={"nvidia-cublas": "nvidia-cublas>=13.0,<14"},
        depth=1,
        driver=dict(driver_floor(13, None)),  # as runtime.place passes it
    )
    src = generate.loader_source(cfg)
    tree = ast.parse(src)
    assigned = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "CONFIG"
    ]
    shipped = ast.literal_eval(assigned[0].value)
    assert shipped == cfg
    assert [r["soname"] for r in shipped["libs"]] == [lib.soname for lib in libs]
    assert [r["needed"] for r in shipped["libs"]][-1] is True and not shipped["libs"][0]["needed"]
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names)  # self-contained: runs where slimwheel is not installed


def test_driver_floor_from_report() -> None:
    assert driver_floor(13, None)["min_cuda"] == 13000
    f = driver_floor(12, "550.54.14", "zstd fatbins")
    assert f["min_cuda"] == 12040 and f["min_driver"] == "550.54.14" and f["why"] == "zstd fatbins"


def test_policy_whitelist_and_unaccounted() -> None:
    wl = system_policy(("manylinux_2_28_x86_64",)).whitelist
    assert "libc.so.6" in wl and "libstdc++.so.6" in wl and "libcudart.so.13" not in wl
    elfs = [
        elf(
            "pkg/_ext.so",
            *("libc.so.6", "libcudart.so.13", "libcuda.so.1", "libfoo-ab12.so.1", "libmissing.so.3"),
            runpath=("$ORIGIN/../pkg.libs", "$ORIGIN/../nvidia/cu13/lib"),  # what repair writes (deps.reach)
        ),
        elf("pkg.libs/libfoo-ab12.so.1", "libm.so.6", soname="libfoo-ab12.so.1"),
    ]
    tags = ["cp311-cp311-manylinux_2_28_x86_64"]
    v = dependency_problems(elfs, cuda_major=13, requires=["nvidia-cuda-runtime>=13.0,<14"], tags=tags)
    assert [p.split(":")[0] for p in v.problems] == ["pkg/_ext.so needs libmissing.so.3"]
    # without the requirement, the CUDA runtime is not accounted for
    v = dependency_problems(elfs, cuda_major=13, requires=[], tags=tags)
    assert any(p.startswith("pkg/_ext.so needs libcudart.so.13") for p in v.problems)


def test_a_shimmed_extension_is_not_shimmed_again() -> None:
    files = ["topmod.py", "topmod.slimwheel/topmod.abi3.so", "topmod.slimwheel/_slimwheel_loader.py"]
    plan = plan_loader(
        files, {"topmod.slimwheel/topmod.abi3.so": elf("topmod.slimwheel/topmod.abi3.so", "libcudart.so.13")}
    )
    assert plan.packages == () and plan.shims == ()


def test_a_shared_library_named_like_a_module_is_not_put_behind_a_shim(tmp_path: Path) -> None:
    # Top-level _ext.so links libhelper.so through $ORIGIN; moving libhelper.so into a shim folder breaks _ext.
    from slimwheel.inspect.dynamic import read_dynamic
    from testkit.binsynth import elf as synth_elf

    (tmp_path / "_ext.so").write_bytes(synth_elf(needed=("libhelper.so", "libcudart.so.13"), symbols=("PyInit__ext",)))
    (tmp_path / "libhelper.so").write_bytes(synth_elf(soname="libhelper.so", symbols=("helper_fn",)))
    files = ["_ext.so", "libhelper.so"]
    elfs = {name: info for name in files if (info := read_dynamic(tmp_path / name, name)) is not None}
    assert elfs["_ext.so"].python_module  # it defines PyInit__ext
    assert not elfs["libhelper.so"].python_module  # no PyInit_libhelper
    # what install_loader asks: the scan's answer, not a second read of the file
    plan = plan_loader(files, elfs, lambda path, _module: elfs[path].python_module)
    assert plan.shims == (("_ext.so", "_ext"),)
