"""slimwheel.prune and slimwheel.toolkit.debian11 without running any tool: keep sets, cache keys, parsing, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slimwheel.cuda.arch import CC, Kind, Target, parse_targets
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, ToolError
from slimwheel.prune import (
    PruneResult,
    cache_key,
    check_targets,
    file_digest,
    gpus_for,
    keep_targets,
    nvprune_args,
    parse_cuobjdump_list,
    prune_libraries,
    resolve_components,
    static_toolkit_hint,
)
from slimwheel.toolkit import debian11
from slimwheel.toolkit.model import Toolkit

# What cuBLAS 11.8's static libraries ship (cuobjdump --list-elf / --list-ptx, measured).
CUBLAS_118 = parse_targets("35-real;50-real;60-real;61-real;70-real;75-real;80-real;86-real;90")


def sass(*nums: int) -> set[Target]:
    return {Target(CC.parse(str(n)), Kind.SASS) for n in nums}


def test_components_get_their_dependencies_in_link_order() -> None:
    assert resolve_components(["cublas"]) == ("cublas", "cublasLt", "culibos", "cudart")
    assert resolve_components(["CUDART", "cublaslt"]) == ("cublasLt", "culibos", "cudart")
    assert resolve_components(["cudart"]) == ("cudart",)


def test_unknown_component_is_named() -> None:
    with pytest.raises(BadInputError, match="'cufft' is not a static CUDA library"):
        resolve_components(["cudart", "cufft"])
    with pytest.raises(BadInputError):
        resolve_components([])


def test_nvprune_args_spell_sass_and_ptx() -> None:
    args = nvprune_args(parse_targets("80-real;90"))
    assert args == (
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-gencode",
        "arch=compute_90,code=compute_90",
    )


def test_turing_keeps_the_volta_cubins_it_runs() -> None:
    # nvprune keeps exact matches only; cuBLAS 11.8 has sm_75 cubins for 2 objects, sm_70 for 182.
    kept, unserved = keep_targets(parse_targets("75-real"), CUBLAS_118)
    assert set(kept) == sass(70, 75)
    assert unserved == ()


def test_sm80_target_keeps_the_tuned_sm86_cubins() -> None:
    kept, _ = keep_targets(parse_targets("80-real"), CUBLAS_118)
    assert set(kept) == sass(80, 86)  # 8.6 and 8.9 GPUs run the sm_80 target; 8.6 prefers the library's sm_86


def test_ptx_serves_newer_gpus_with_the_library_ptx() -> None:
    kept, unserved = keep_targets(parse_targets("75-real;80-real;90"), CUBLAS_118)
    assert set(kept) == sass(70, 75, 80, 86, 90) | {Target(CC(9, 0), Kind.PTX)}
    assert unserved == ()
    # Without PTX in the plan, the library's PTX goes too.
    kept, _ = keep_targets(parse_targets("90-real"), CUBLAS_118)
    assert set(kept) == sass(90)


def test_gpus_the_library_cannot_serve_are_reported() -> None:
    library = parse_targets("80-real")
    kept, unserved = keep_targets(parse_targets("75-real;80-real"), library)
    assert set(kept) == sass(80)
    assert unserved == (CC(7, 5),)


def test_cache_key_depends_on_every_input_but_not_target_order() -> None:
    t = parse_targets("80-real;90")
    base = cache_key("d" * 64, t, "11.8.86")
    assert cache_key("d" * 64, tuple(reversed(t)), "11.8.86") == base
    assert cache_key("e" * 64, t, "11.8.86") != base
    assert cache_key("d" * 64, t[:1], "11.8.86") != base
    assert cache_key("d" * 64, t, "12.4.131") != base


def test_cuobjdump_listing_is_parsed() -> None:
    text = (
        "member libcublas_static.a:cublas.cpp.o:\n"
        "ELF file    1: libcublas_static.1.sm_35.cubin\n"
        "ELF file   15: libcublas_static.15.sm_75.cubin\n"
        "PTX file    2: libcublas_static.2.sm_90.ptx\n"
        "ELF file    3: x.3.sm_90a.cubin\n"
    )
    assert parse_cuobjdump_list(text) == (
        Target(CC(3, 5)),
        Target(CC(7, 5)),
        Target.parse("sm_90a"),
        Target(CC(9, 0), Kind.PTX),
    )


def _toolkit(
    tmp_path: Path,
    *,
    nvprune: Path | None = None,
    cuobjdump: Path | None = None,
    static_libs: dict[str, Path] | None = None,
) -> Toolkit:
    return Toolkit(
        root=tmp_path,
        nvcc=tmp_path / "nvcc",
        version=CudaVersion(11, 8),
        source="debian",
        supported=(CC(7, 5), CC(8, 0), CC(9, 0)),
        nvprune=nvprune,
        cuobjdump=cuobjdump,
        static_libs=static_libs or {},
    )


def test_arch_beyond_the_toolkit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="cannot target sm_100") as e:
        check_targets(_toolkit(tmp_path), parse_targets("90-real;100-real"))
    assert "9.0" in (e.value.hint or "")


def test_missing_nvprune_and_missing_library_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="has no nvprune") as e:
        prune_libraries(_toolkit(tmp_path), parse_targets("90-real"), ("cublas",), cache=tmp_path)
    assert "setup-cuda11.sh" in (e.value.hint or "") and "--cuda 11.8" in (e.value.hint or "")
    tool = tmp_path / "tool"
    tool.write_text("")
    lib = tmp_path / "libcublas_static.a"
    tk = _toolkit(tmp_path, nvprune=tool, cuobjdump=tool, static_libs={"cublas": lib})
    with pytest.raises(ToolError, match=r"has no static cublas library \(.*libcublas_static.a is missing\)"):
        prune_libraries(tk, parse_targets("90-real"), ("cublas",), cache=tmp_path)


def test_digest_is_remembered_by_path_size_and_mtime(tmp_path: Path) -> None:
    lib = tmp_path / "lib.a"
    lib.write_bytes(b"a" * 1000)
    first = file_digest(lib, tmp_path / "cache")
    st = lib.stat()
    # Same size and mtime: the remembered digest is used (the file is not read again).
    lib.write_bytes(b"b" * 1000)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert file_digest(lib, tmp_path / "cache") == first
    # A new mtime: hashed again.
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert file_digest(lib, tmp_path / "cache") != first


def test_missing_cuda118_names_the_setup_script(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="nvcc not found") as e:
        debian11.find_cuda118(tmp_path)
    assert "scripts/setup-cuda11.sh" in str(e.value)


def test_missing_static_library_is_named(tmp_path: Path) -> None:
    for rel in (debian11.NVCC, "usr/bin/nvprune", "usr/bin/cuobjdump", debian11.HOST_COMPILER):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    with pytest.raises(ToolError, match="libcublas_static.a"):
        debian11.find_cuda118(tmp_path)


def test_nvcc_output_parsing() -> None:
    out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 11.8, V11.8.89\n"
    assert debian11.parse_nvcc_version(out) == CudaVersion(11, 8)
    assert debian11.parse_gpu_arch_list("compute_35\ncompute_90\ncompute_86\n") == (CC(3, 5), CC(8, 6), CC(9, 0))
    with pytest.raises(ToolError):
        debian11.parse_gpu_arch_list("")


def test_toolkit_folders_come_first_on_path() -> None:
    path = debian11.tool_path(Path("/"), "/usr/local/bin:/usr/bin:/bin")
    assert path.split(":") == ["/usr/lib/nvidia-cuda-toolkit/bin", "/usr/bin", "/usr/local/bin", "/bin"]


def test_prune_command_refuses_archs_and_targets_together(capsys: pytest.CaptureFixture[str]) -> None:
    from slimwheel.cli import main

    assert main(["prune", "--archs", "9.0", "--targets", "90-real"]) == 2
    assert "--archs or --targets, not both" in capsys.readouterr().err


def test_concurrent_prunes_run_nvprune_once_per_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads take the same per-entry flock as processes do (one open file description each)."""
    import threading
    import time

    from slimwheel import prune as prune_mod

    calls: list[str] = []

    def fake_nvprune(nvprune: Path, targets: object, src: Path, dst: Path) -> None:
        calls.append(src.name)
        time.sleep(0.2)  # long enough for the other threads to reach the lock
        dst.write_bytes(src.read_bytes()[:10])

    monkeypatch.setattr(prune_mod, "_run_nvprune", fake_nvprune)
    monkeypatch.setattr(prune_mod, "nvprune_version", lambda nvprune: "11.8.86")
    monkeypatch.setattr(prune_mod, "library_targets", lambda cuobjdump, lib, digest, cache: CUBLAS_118)
    libs = {}
    for comp, name in (
        ("cublas", "libcublas_static.a"),
        ("cublasLt", "libcublasLt_static.a"),
        ("culibos", "libculibos.a"),
        ("cudart", "libcudart_static.a"),
    ):
        libs[comp] = tmp_path / name
        libs[comp].write_bytes(name.encode() * 100)
    tool = tmp_path / "tool"
    tool.write_text("")
    tk = _toolkit(tmp_path, nvprune=tool, cuobjdump=tool, static_libs=libs)
    results: list[PruneResult] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(prune_libraries(tk, parse_targets("90-real"), ("cublas",), cache=tmp_path / "cache"))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(calls) == ["libcublasLt_static.a", "libcublas_static.a"]
    assert len({r.libdir for r in results}) == 1
    misses = [lib.component for r in results for lib in r.libs if not lib.cache_hit and not lib.host_only]
    assert sorted(misses) == ["cublas", "cublasLt"]
    pruned = {lib.component: lib.pruned for lib in results[0].libs}
    assert pruned["cublas"].read_bytes() == libs["cublas"].read_bytes()[:10]


# `nvcc --list-gpu-arch` of Debian's CUDA 11.8 (measured)
CUDA_118 = tuple(
    CC.parse(c)
    for c in [
        "3.5",
        "3.7",
        "5.0",
        "5.2",
        "5.3",
        "6.0",
        "6.1",
        "6.2",
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
    ]
)


def test_kepler_cubins_stay_when_the_plan_targets_kepler() -> None:
    # issue 12 item 15: the "all" plan of CUDA 11.8 has 35-real, but 3.5 is in no generation table, and prune dropped
    # all of cuBLAS's sm_35 cubins: 17 of 119 modules of the static knn ran nowhere on 3.5/3.7.
    gpus = gpus_for(CUDA_118)
    assert {CC(3, 5), CC(3, 7)} <= set(gpus) and not {CC(5, 3), CC(6, 2), CC(7, 2), CC(8, 7)} & set(gpus)
    plan = parse_targets("35-real;50-real;60-real;70-real;80-real;90")
    kept, unserved = keep_targets(plan, CUBLAS_118, gpus)
    assert set(kept) == set(CUBLAS_118) and unserved == ()
    kept, _ = keep_targets(parse_targets("50-real;90"), CUBLAS_118, gpus)
    assert Target(CC(3, 5), Kind.SASS) not in kept  # only GPUs a plan target serves


def test_static_hint_names_cuda_118_installed_or_not(tmp_path: Path) -> None:
    hint = static_toolkit_hint(tmp_path)
    assert (
        hint
        == "static linking needs CUDA 11.8: run `sudo bash scripts/setup-cuda11.sh` (Debian 12), then pass --cuda 11.8"
    )
    for _, path in debian11.missing_files(tmp_path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    assert debian11.missing_files(tmp_path) == []
    assert static_toolkit_hint(tmp_path) == (
        'CUDA 11.8 with static libraries is installed (scripts/setup-cuda11.sh): pass --cuda 11.8 (or cuda = "11.8")'
    )
