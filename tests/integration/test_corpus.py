"""Issue 22 item 8: real GPU wheels from PyPI (testkit/corpus.py pins them; downloaded once into the cache, a
failed download fails), read by slimwheel and by NVIDIA's cuobjdump container by container, and judged with the
verdicts their maintainers would accept as true. cuFFT keeps its 18,227 containers in .data, where whole-file
cuobjdump sees none: each is cut out and listed alone."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from slimwheel.check import Verdict, check_wheel, check_wheel_file, make_policy
from slimwheel.cuda.arch import parse_require_arch
from slimwheel.cuda.versions import MAJOR_DRIVER
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit import Toolkit
from testkit import corpus

BY_NAME = {w.requirement.split("==")[0]: w for w in corpus.CORPUS}
# cuobjdump 13.5 stops at the device-link container of this library ("Invalid ELF") after its first cubin.
CUOBJDUMP_FAILS = {("bitsandbytes", "bitsandbytes/libbitsandbytes_cuda121.so")}


@cache
def wheel(name: str) -> Path:
    return corpus.ensure(BY_NAME[name])


@cache
def report(name: str) -> WheelReport:
    return inspect_wheel(wheel(name))


def verdict(name: str, require: str = "7.5-12.0") -> Verdict:
    r = report(name)
    return check_wheel(r, make_policy(r, debug_symbols=False, budget=2**30, require_arch=parse_require_arch(require)))


def failures(v: Verdict, kind: str) -> list[str]:
    return [f.message for f in v.failures if f.kind == kind]


def _agreement_ids() -> list[str]:
    return [w.requirement.split("==")[0] for w in corpus.CORPUS]


@pytest.mark.parametrize("name", _agreement_ids())
def test_containers_agree_with_cuobjdump(name: str) -> None:
    a = corpus.agreement(wheel(name))
    for c in a.checked:
        if (name, c.file) in CUOBJDUMP_FAILS and c.cuobjdump_status != 0:
            assert "Invalid ELF" in c.cuobjdump_error and set(c.theirs) <= set(c.ours)  # what it listed, then stopped
            continue
        assert c.agrees, (c.file, c.offset, c.ours, c.theirs, c.cuobjdump_error)
    if name == "nvidia-cufft":
        assert a.containers == 18227, a.containers  # in .data and .ldata, found by their header
    assert a.containers == a.by_magic and not a.files_disagreeing, (a.containers, a.by_magic, a.files_disagreeing)


# ------------------------------------------------------------------------------------------- verdicts, one by one


def test_cupy_nccl_and_cutensor_are_optional_parts_and_cuda_comes_with_its_extra() -> None:
    v = verdict("cupy-cuda13x")
    deps = failures(v, "dependencies")
    # one line per library wheel: libcutensor.so.2 and libcutensorMg.so.2 share one
    assert sorted(lib for m in deps for lib in m.split(" needs ")[1].split(":")[0].split(", ")) == [
        "libcutensor.so.2",
        "libcutensorMg.so.2",
        "libnccl.so.2",
    ], deps
    assert all("cutensor-cu13" in m or "nvidia-nccl-cu13" in m for m in deps)
    # Read with its Python sources, as `slimwheel check` reads it: CuPy imports both bindings only under
    # try/except ImportError (cupy/cuda/nccl.py, cupy/cuda/cutensor.py) and runs without them, so they are optional
    # parts, each named in a note with the guard and the package that turns it on; the control above fails them.
    r = report("cupy-cuda13x")
    v = check_wheel(
        r,
        make_policy(r, debug_symbols=False, budget=2**30, require_arch=parse_require_arch("7.5-12.0")),
        imports=PythonImports.from_wheel(wheel("cupy-cuda13x")),
    )
    assert not failures(v, "dependencies"), failures(v, "dependencies")
    optional = {n.split(" needs ")[0]: n for n in v.notes if "optional part" in n}
    assert sorted(optional) == [
        "cupy_backends/cuda/libs/cutensor.cpython-311-x86_64-linux-gnu.so",
        "cupy_backends/cuda/libs/nccl.cpython-311-x86_64-linux-gnu.so",
    ], v.notes
    nccl = optional["cupy_backends/cuda/libs/nccl.cpython-311-x86_64-linux-gnu.so"]
    assert "cupy/cuda/nccl.py:16" in nccl and "pip install nvidia-nccl-cu13" in nccl
    cutensor = optional["cupy_backends/cuda/libs/cutensor.cpython-311-x86_64-linux-gnu.so"]
    assert "libcutensor.so.2, libcutensorMg.so.2" in cutensor and "cupy/cuda/cutensor.py:12" in cutensor
    (note,) = [n for n in v.notes if "extra 'ctk'" in n]
    for so in (
        "libcublas.so.13",
        "libcufft.so.12",
        "libcurand.so.10",
        "libcusolver.so.12",
        "libcusparse.so.12",
        "libnvrtc.so.13",
    ):
        assert so in note
    assert not failures(v, "coverage")


def test_cupy_runs_without_its_optional_parts(tmp_path: Path) -> None:
    """What the optional-part note claims, seen: the real wheel in a fresh venv with its requirements from PyPI (no
    NCCL, no cuTENSOR, no CUDA at all here) imports, and reports both features off; the binding itself does not."""
    import subprocess
    import sys

    from helpers.wheels_repair import clean_env

    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, env=clean_env())
    py = str(env_dir / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel("cupy-cuda13x"))], check=True, env=clean_env())
    probe = (
        "import cupy, cupy.cuda.nccl as n, cupy.cuda.cutensor as t\n"
        "print('imported', n.available, t.available)\n"
        "try:\n    import cupy_backends.cuda.libs.nccl\nexcept ImportError as e:\n    print('binding:', e)\n"
    )
    proc = subprocess.run([py, "-W", "ignore", "-c", probe], capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "imported False False" in proc.stdout, proc.stdout
    assert "binding: libnccl.so.2" in proc.stdout, proc.stdout


def test_cupy_repairs_into_a_wheel_that_check_passes(tmp_path: Path) -> None:
    from slimwheel.repair import repair_wheel

    res = repair_wheel(wheel("cupy-cuda13x"), tmp_path)
    assert res.extra == "ctk" and res.loader == ()
    # NCCL and cuTENSOR serve optional parts (the test above): left unrequired, as CuPy has them, not put under ctk
    assert res.requires == ()
    assert sorted(res.optional) == ["libcutensor.so.2", "libcutensorMg.so.2", "libnccl.so.2"]
    r = inspect_wheel(res.wheel)
    from slimwheel.inspect.pyimports import PythonImports

    # judged as `slimwheel check` judges it: with the package's Python sources
    imports = PythonImports.from_wheel(res.wheel)
    v = check_wheel(
        r,
        make_policy(r, debug_symbols=False, budget=2**30, require_arch=parse_require_arch("7.5-12.0")),
        imports=imports,
    )
    assert v.ok, v.failures
    assert sum("optional part" in n for n in v.notes) == 2  # nccl and cutensor's modules


def test_jax_plugin_rpath_reaches_the_cu13_folder() -> None:
    v = verdict("jax-cuda13-plugin")
    assert not failures(v, "dependencies"), failures(v, "dependencies")
    notes = [n for n in v.notes if "RPATH" in n]
    so_files = [e.name for e in report("jax-cuda13-plugin").elfs]
    assert len(notes) == len(so_files) == 11  # one per file, not one per repeated entry
    assert all("<site-packages>/../nvidia/cu13/lib" in n for n in notes)


def test_jax_pjrt_passes() -> None:
    v = verdict("jax-cuda13-pjrt")
    assert v.ok, v.failures


def test_faiss_gpu_cu12_cannot_run_on_hopper_and_newer() -> None:
    (msg,) = failures(verdict("faiss-gpu-cu12"), "coverage")
    assert "9.0 (Hopper" in msg and "10.0 " in msg and "12.0 " in msg and "8.9" not in msg


def test_faiss_gpu_serves_blackwell_through_ptx() -> None:
    # with its Python sources, as `slimwheel check` reads it: faiss/__init__.py loads the nvidia-* wheels' libraries
    # (ctypes.CDLL) before the extension, whose search path reaches none of them
    r = report("faiss-gpu")
    v = check_wheel_file(
        r, make_policy(r, debug_symbols=False, budget=1 << 30, require_arch=parse_require_arch("7.5-12.0"))
    )
    assert v.ok, v.failures
    assert any("10.0, 10.3, 12.0 only through PTX JIT" in n for n in v.notes)


def test_bitsandbytes_alternatives_are_stated_one_by_one() -> None:
    r = report("bitsandbytes")
    alts = [(a.file.rsplit("_", 1)[1], a.cuda_major, a.driver_floor) for a in r.alternatives]
    assert alts == [
        ("cuda118.so", 11, MAJOR_DRIVER[11]),
        ("cuda121.so", 12, MAJOR_DRIVER[12]),
        ("cuda124.so", 12, MAJOR_DRIVER[12]),
        ("cuda126.so", 12, MAJOR_DRIVER[12]),
        ("cuda128.so", 12, MAJOR_DRIVER[12]),
        ("cuda130.so", 13, MAJOR_DRIVER[13]),
        ("cuda132.so", 13, MAJOR_DRIVER[13]),
    ]


def test_cufft_serves_turing_to_blackwell() -> None:
    """cuFFT 12.5 ships most of its kernels as PTX only (compute_75 alone: 7,190 modules) and the rest as SASS per
    architecture: served everywhere, some modules through the JIT. The note says how many, not "only through PTX"."""
    v = verdict("nvidia-cufft")
    assert not failures(v, "coverage"), failures(v, "coverage")
    (note,) = [n for n in v.notes if "required compute capabilities are served" in n]
    assert "some modules only through PTX JIT, the others SASS: 7.5: 7190 of 11654" in note, note
    assert "only through PTX JIT;" not in note and "(7.5, 8.0" not in note


def test_cudnn_serves_turing_to_blackwell_and_names_what_it_did_not_judge() -> None:
    """cuDNN 9.28's precompiled engines: modules per GPU generation (arch- and family-specific SASS). check said 9.0
    and newer were not served."""
    v = verdict("nvidia-cudnn-cu13")
    assert not failures(v, "coverage"), failures(v, "coverage")
    excused = [n for n in v.notes if "carry no code for it beside modules that run it natively" in n]
    assert {n.split(":")[0] for n in excused} >= {"9.0", "10.0", "12.0"}
    assert all("libcudnn_engines_precompiled.so.9" in n for n in excused)


def test_cublaslt_per_generation_modules_do_not_fail_hopper_or_blackwell(toolkit13: Toolkit) -> None:
    """NVIDIA's cuBLASLt 13.0 (nvidia-cublas 13.0.2.14, the toolkit's copy): FP8 modules for Ada and consumer
    Blackwell (sm_89 sm_120f compute_120) skip Hopper, which runs its own sm_90a ones. check said 9.0, 10.0, 10.3 and
    12.0 were served by nothing; it serves them, and says which modules it did not judge."""
    from slimwheel.cuda.arch import CC
    from slimwheel.inspect.report import coverage_detail
    from slimwheel.inspect.scan import inspect_binary

    (lib,) = [d / "libcublasLt.so.13" for d in toolkit13.lib_dirs if (d / "libcublasLt.so.13").is_file()]
    elf = inspect_binary(lib)
    ccs = tuple(CC.parse(c) for c in ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0"))
    d = coverage_detail((elf,), ccs)
    assert d.coverage.none == (), d.coverage
    assert {CC(8, 0), CC(8, 9), CC(9, 0), CC(12, 0)} <= set(d.coverage.native)
    excused = {e.cc: e for e in d.excused}
    assert ("sm_89", "sm_120f", "compute_120") in excused[CC(9, 0)].targets
    assert excused[CC(10, 0)].fatbins > 1000  # Ampere-to-Hopper modules beside Blackwell's own


def test_curand_passes_and_is_no_copy_of_itself(tmp_path: Path) -> None:
    from slimwheel.repair import repair_wheel

    v = verdict("nvidia-curand", require="auto")
    assert not failures(v, "dependencies") and not failures(v, "coverage"), v.failures
    assert not any("copy of" in n for n in v.notes)
    res = repair_wheel(wheel("nvidia-curand"), tmp_path, loader=False)
    assert res.unvendored == () and res.requires == ()


def test_bitsandbytes_repair_refuses_for_its_rocm_backends(tmp_path: Path) -> None:
    # its CUDA alternatives would get an extra each (test_repair_alternatives.py); its ROCm and XPU backends need
    # libraries (libhipblas, libsycl) that neither a PyPI wheel slimwheel knows nor the manylinux policy provides
    from slimwheel.errors import SlimwheelError
    from slimwheel.repair import repair_wheel

    with pytest.raises(SlimwheelError, match="libhip"):
        repair_wheel(wheel("bitsandbytes"), tmp_path)
    assert not list(tmp_path.glob("*.whl"))


def test_cumm_repair_requires_the_runtime_wheels_instead_of_its_copies(tmp_path: Path) -> None:
    from slimwheel.repair import repair_wheel

    res = repair_wheel(wheel("cumm-cu120"), tmp_path)
    assert {(u.replaced_by, u.package) for u in res.unvendored} == {
        ("libcudart.so.12", "nvidia-cuda-runtime-cu12"),
        ("libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12"),
        (None, "nvidia-cuda-nvrtc-cu12"),  # libnvrtc-builtins: libnvrtc loads its own
    }
    assert sorted(res.requires) == ["nvidia-cuda-nvrtc-cu12>=12.0,<13", "nvidia-cuda-runtime-cu12>=12.0,<13"]
    saved = wheel("cumm-cu120").stat().st_size - res.wheel.stat().st_size
    assert saved > 20 * 2**20 and res.unvendored_bytes[0] > saved  # the loader adds a few kB
    r = inspect_wheel(res.wheel)
    v = check_wheel(r, make_policy(r, debug_symbols=False, budget=2**30, require_arch="none"))
    assert v.ok, v.failures


def test_cupy_is_judged_by_the_manylinux_policy_of_its_file_name() -> None:
    # named manylinux2014_x86_64, WHEEL file says linux_x86_64: pip installs it by the name
    assert report("cupy-cuda13x").platforms == ("manylinux2014_x86_64",)
    assert not any("no manylinux platform tag" in n for n in verdict("cupy-cuda13x").notes)


def test_ctranslate2_notes_the_libraries_it_opens_and_nothing_installs() -> None:
    (lib,) = [e for e in report("ctranslate2").elfs if e.opens]
    assert lib.name.startswith("ctranslate2.libs/libctranslate2-") and lib.opens == ("libcublas.so.12", "libnccl.so.2")
    v = verdict("ctranslate2", "7.0-12.0")
    assert v.ok, v.failures
    opened = [n for n in v.notes if " opens " in n]
    assert len(opened) == 2 and "nvidia-cublas-cu12, CUDA 12" in opened[0] and "nvidia-nccl-cu12" in opened[1]


def test_torchvision_copies_are_noted_and_replaced_by_the_nvidia_wheels(tmp_path: Path) -> None:
    from slimwheel.repair import repair_wheel

    v = verdict("torchvision")
    copies = sorted(n.split(" is a copy of ")[1].split(" ")[0] for n in v.notes if " is a copy of " in n)
    assert copies == ["libcudart.so.13", "libnvjpeg.so.13"], v.notes
    # torch's own libraries, needed with no search path into torch/lib: `import torch` (2.11.0, which it pins)
    # loads all six first, so one note; the absolute conda RPATH of its build machine is its only failure
    (deps,) = failures(v, "dependencies")
    assert "/__w/_temp/conda_environment" in deps and "unsafe" in deps
    (torch_note,) = [n for n in v.notes if "at `import torch`" in n and "libc10.so" in n]
    for so in (
        "libc10.so",
        "libtorch.so",
        "libtorch_cpu.so",
        "libtorch_python.so",
        "libc10_cuda.so",
        "libtorch_cuda.so",
    ):
        assert so in torch_note
    res = repair_wheel(wheel("torchvision"), tmp_path)  # the build it pins itself to: torch==2.11.0, CUDA 13.0
    assert {(u.replaced_by, u.package) for u in res.unvendored} == {
        ("libcudart.so.13", "nvidia-cuda-runtime"),
        ("libnvjpeg.so.13", "nvidia-nvjpeg"),
    }
    r = inspect_wheel(res.wheel)
    from slimwheel.inspect.pyimports import PythonImports

    # judged as `slimwheel check` judges it: with the package's Python sources
    imports = PythonImports.from_wheel(res.wheel)
    v = check_wheel(
        r,
        make_policy(r, debug_symbols=False, budget=2**30, require_arch=parse_require_arch("7.5-12.0")),
        imports=imports,
    )
    assert v.ok, v.failures


def test_onnxruntime_gets_cublas_with_cudnn_and_cannot_run_on_blackwell_10() -> None:
    v = verdict("onnxruntime-gpu")
    (cov,) = failures(v, "coverage")
    assert "10.0 (" in cov and "10.3 (" in cov and "12.0" not in cov and "9.0" not in cov
    # The TensorRT provider needs TensorRT, which nothing installs; onnxruntime opens it by name only when asked for
    # the TensorRT execution provider, so it is a plugin: a note, not a failure.
    assert failures(v, "dependencies") == []
    (trt,) = [n for n in v.notes if n.startswith("onnxruntime/capi/libonnxruntime_providers_tensorrt.so is a plugin")]
    assert "it needs libnvinfer.so.10, libnvonnxparser.so.10, which neither the wheel nor" in trt
    (cudnn,) = [n for n in v.notes if "extra 'cudnn'" in n]
    assert "libcublas.so.13" in cudnn and "libcublasLt.so.13" in cudnn and "nvidia-cudnn-cu13" in cudnn
    assert not any("at run time (dlopen;" in n for n in v.notes)  # its CUDA 12 names: fallbacks beside the 13 ones


# ------------------------------------------------------------------ issue 37: the third round of the world's wheels


def _notes_with(v: Verdict, *words: str) -> list[str]:
    return [n for n in v.notes if all(w in n for w in words)]


def test_npp_serves_turing_to_blackwell_beside_two_containers_with_no_kernels() -> None:
    """nvidia-npp 13.2.0.93: 208 of 210 containers carry SASS for 7.5 to 12.1; two (in libnppc and libnppisu) hold one
    1,888-byte sm_75 cubin each that defines no function. check failed 8.0-12.0 for those two (exit 11)."""
    v = verdict("nvidia-npp")
    assert not failures(v, "coverage"), failures(v, "coverage")
    # the report names the two among its containers with no kernels (most libraries have such helper modules)
    empty = {e.name.rsplit("/", 1)[-1] for e in report("nvidia-npp").elfs if e.kernelless_fatbins}
    assert {"libnppc.so.13", "libnppisu.so.13"} <= empty, empty
    assert not _notes_with(v, "only through PTX JIT")


def test_deepspeed_kernels_serves_blackwell_through_ptx_beside_an_empty_container() -> None:
    """deepspeed-kernels: SASS 8.0-9.0 and PTX 8.0-9.0; one container of libdeepspeedft.so has no kernels, and check
    failed 10.0-12.0 for it alone."""
    v = verdict("deepspeed-kernels", "8.0-12.0")
    assert not failures(v, "coverage"), failures(v, "coverage")
    empty = {e.name for e in report("deepspeed-kernels").elfs if e.kernelless_fatbins}
    assert any(n.endswith("libdeepspeedft.so") for n in empty), empty
    assert _notes_with(v, "10.0", "only through PTX JIT"), v.notes


def test_cccl_cu12_and_cu13_folders_are_alternatives_stated_apart() -> None:
    """cuda-cccl 1.2.1 ships cuda/compute/cu12/ and cuda/compute/cu13/ and imports one by the CUDA it finds; its
    modules hold no kernels (it compiles them at run time with NVRTC/nvJitLink). It was "CUDA 12" with the SASS floor
    of the cu13 file's zstd entries (550.54.14) and the PTX floor of its ISA (590.44.01)."""
    r = report("cuda-cccl")
    by_major = {
        a.cuda_major: a for a in r.alternatives if a.file.endswith("libcccl.c.parallel.so") and a.cuda_major is not None
    }
    assert sorted(by_major) == [12, 13], r.alternatives
    assert "/cu12/" in by_major[12].file and "/cu13/" in by_major[13].file
    for major, a in by_major.items():
        assert a.driver_floor in (None, MAJOR_DRIVER[major]), a
        assert a.ptx_only == (), a  # empty modules: nothing served through the JIT
    assert r.driver_floor != "550.54.14" and r.ptx_driver_floor != "590.44.01", (r.driver_floor, r.ptx_driver_floor)
    v = verdict("cuda-cccl")
    assert not failures(v, "coverage"), failures(v, "coverage")
    assert not _notes_with(v, "only through PTX JIT"), v.notes
    assert _notes_with(v, "built at run time"), v.notes


def test_torch_memory_saver_has_no_device_code_and_passes_require_arch() -> None:
    """torch-memory-saver 0.0.10: allocation hooks, no kernels at all. `--require-arch 7.5-12.0` failed every GPU
    with "neither SASS nor PTX" (exit 11); one --require-arch over a project's wheels then fails its plugin."""
    assert report("torch-memory-saver").targets == ()
    v = verdict("torch-memory-saver")
    assert not failures(v, "coverage"), failures(v, "coverage")
    assert _notes_with(v, "no device code"), v.notes


def test_autoawq_kernels_serves_the_torch_minor_it_was_built_for() -> None:
    """autoawq-kernels 0.0.9: classic C++ API of torch (52 symbols), Requires-Dist torch>=2.5.1. A classic-ABI build
    serves the minor it was built against; check said "serves 2.5 to 3.13" and listed torch 2.12.x ... 3.13.x,
    releases that do not exist, in four notes of up to 830 characters."""
    from slimwheel.check import check_wheel_file

    r = report("autoawq-kernels")
    v = check_wheel_file(
        r, make_policy(r, debug_symbols=False, budget=1 << 30, require_arch=parse_require_arch("8.0-9.0"))
    )
    assert not failures(v, "coverage"), failures(v, "coverage")
    served = [n for n in v.notes if n.startswith("torch: serves")]
    assert served and served[0].startswith("torch: serves the one minor it was built against"), served
    torch_notes = _notes_with(v, "torch")
    assert not any("2.12.x" in n or "3.13" in n for n in torch_notes), torch_notes
    assert all(len(n) <= 400 for n in torch_notes), [len(n) for n in torch_notes]


def test_cumm_cu126_ships_the_very_copy_of_libcudart_that_spconv_ships() -> None:
    """cumm-cu126 0.7.11 (spconv-cu126 2.3.8 requires cumm-cu126<0.8,>=0.7.11): the same auditwheel copy of libcudart,
    same hashed SONAME and same bytes, so a process that imports both maps one. check names cumm's as a copy of the
    nvidia wheel's; test_repair_unvendor.py holds repair of spconv to not splitting it."""
    import hashlib
    import zipfile

    copy = "libcudart-53d54daa.so.12.6.68"
    with zipfile.ZipFile(wheel("cumm-cu126")) as a, zipfile.ZipFile(corpus.ensure(corpus.SPCONV)) as b:
        ours, theirs = a.read(f"cumm_cu126.libs/{copy}"), b.read(f"spconv_cu126.libs/{copy}")
    assert hashlib.sha256(ours).digest() == hashlib.sha256(theirs).digest()
    elf = {e.name: e for e in report("cumm-cu126").elfs}[f"cumm_cu126.libs/{copy}"]
    assert elf.soname == copy
    v = verdict("cumm-cu126", "none")
    assert _notes_with(v, f"cumm_cu126.libs/{copy} is a copy of libcudart.so.12.6.68"), v.notes


def test_spconv_modules_with_no_kernels_are_not_served_through_the_jit() -> None:
    """spconv-cu126 2.3.8: check called it "6.0-9.0 only through PTX JIT (195 of 606 modules)". Those 195 are among
    its 243 containers with no kernels (a sm_52 stub with its PTX, say); each of the 363 with a kernel has SASS for
    9.0 and PTX, so only Blackwell runs it through the JIT."""
    v = verdict("spconv-cu126")
    assert not failures(v, "coverage"), failures(v, "coverage")
    fatbins = [fb for e in report("spconv-cu126").elfs for fb in e.fatbins]
    empty = [fb for fb in fatbins if not fb.kernels]
    no_90 = [fb for fb in empty if not any(x.kind == "sass" and x.arch == "90" for x in fb.entries)]
    assert (len(fatbins), len(empty), len(no_90)) == (606, 243, 195)
    assert all(any(x.kind == "sass" and x.arch == "90" for x in fb.entries) for fb in fatbins if fb.kernels)
    (served,) = _notes_with(v, "required compute capabilities are served")
    assert "(10.0, 10.3, 12.0 only through PTX JIT)" in served, served
    assert not _notes_with(v, "9.0 only through") and not _notes_with(v, "of 606"), v.notes


def test_dali_system_toolkit_entry_shadows_the_nvidia_wheels_it_opens() -> None:
    """nvidia-dali-cuda130 2.4.0: every module's RUNPATH puts /usr/local/cuda/lib64 before $ORIGIN/../cu13/lib. It is
    the standard root-owned toolkit location, not a path on the build machine; the risk is the order: where a CUDA
    toolkit is installed there, the libraries libdali_operators.so opens by name (NPP, cuFile) come from it and not
    from the nvidia-* wheels."""
    v = verdict("nvidia-dali-cuda130")
    deps = failures(v, "dependencies")
    assert not any("build machine" in m for m in deps), deps
    (entry,) = [m for m in deps if "unsafe RPATH/RUNPATH entry: '/usr/local/cuda/lib64'" in m]
    assert "a system toolkit location (root-owned)" in entry and "instead of the nvidia-* wheels'" in entry, entry
    (shadow,) = [m for m in deps if " before " in m]
    assert shadow.startswith(
        "nvidia/dali/libdali_operators.so: its search path names /usr/local/cuda/lib64 (a system toolkit location) "
        "before $ORIGIN/../cu13/lib (nvidia/cu13/lib, where the nvidia-* wheels install libcufile.so.0, libnppc.so.13"
    ), shadow
    assert "the loader takes its copies and not the wheels'" in shadow and "put it last" in shadow, shadow
    assert len(deps) == 2 and not failures(v, "coverage"), v.failures
