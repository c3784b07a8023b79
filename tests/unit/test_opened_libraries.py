"""CUDA libraries a file opens with dlopen by name rather than through DT_NEEDED: ctranslate2 4.8.5's
libctranslate2 opens libcublas.so.12 and libnccl.so.2 so, and requires neither; its check passed without a word."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path

from slimwheel.check import Verdict
from slimwheel.deps import dependency_problems
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.elf import read_elf
from testkit.binsynth import elf

TAGS = ["cp311-cp311-manylinux_2_28_x86_64"]
RODATA = b"\0cannot load %s\0libcublas.so.12\0libnccl.so.2\0libfoo.so.1\0"


def test_names_of_cuda_libraries_in_rodata_with_dlopen_are_opened() -> None:
    got = read_elf(elf(sections={".rodata": RODATA}, undefined=("dlopen",), needed=("libc.so.6",)), "x.so")
    assert got.opens == ("libcublas.so.12", "libnccl.so.2")  # libfoo is no CUDA library of the table


def test_a_name_that_starts_the_section_is_read() -> None:
    """The first string of .rodata has no NUL before it: it was skipped (a name at offset 0 was never opened)."""
    first = b"libcublas.so.12\0libnccl.so.2\0"
    got = read_elf(elf(sections={".rodata": first}, undefined=("dlopen",), needed=("libc.so.6",)), "x.so")
    assert got.opens == ("libcublas.so.12", "libnccl.so.2")
    # a name runs to the section's start only when it is that close: a longer run of bytes is no name
    long = b"x" * 200 + b"libcublas.so.12\0"
    assert read_elf(elf(sections={".rodata": long}, undefined=("dlopen",)), "x.so").opens == ()


def test_without_dlopen_or_as_part_of_another_string_nothing_is_opened() -> None:
    assert read_elf(elf(sections={".rodata": RODATA}, needed=("libc.so.6",)), "x.so").opens == ()
    parts = b"\0xlibcublas.so.12\0libcublas.so.12.9\0message libnccl.so.2 missing\0"
    assert read_elf(elf(sections={".rodata": parts}, undefined=("dlopen",)), "x.so").opens == ()
    data = b"\0libcublas.so.12\0"
    assert read_elf(elf(sections={".data": data}, undefined=("dlopen",)), "x.so").opens == ()  # .rodata only
    needed = read_elf(elf(sections={".rodata": RODATA}, undefined=("dlopen",), needed=("libnccl.so.2",)), "x.so")
    assert needed.opens == ("libcublas.so.12",)
    assert ElfInfo.from_report(needed).opens == ("libcublas.so.12",)


def _info(*opens: str) -> ElfInfo:
    return ElfInfo(path="ct/libct.so", soname=None, needed=("libc.so.6",), rpath=(), runpath=(), opens=opens)


def test_an_opened_library_nothing_installs_is_a_note_not_a_failure() -> None:
    v = dependency_problems([_info("libcublas.so.12")], cuda_major=12, requires=["numpy"], tags=TAGS)
    assert v.problems == ()
    (note,) = v.notes
    assert "ct/libct.so opens libcublas.so.12 at run time" in note and "nvidia-cublas-cu12, CUDA 12" in note


def test_an_opened_library_a_requirement_installs_is_not_mentioned() -> None:
    for requires in (
        ["nvidia-nccl-cu12; platform_system == 'Linux'"],  # as xgboost 3.2.0 requires it
        ['nvidia-nccl-cu12; extra == "multi"'],
        ["cuda-toolkit[cublas]==12.*", "nvidia-nccl-cu12"],
    ):
        v = dependency_problems([_info("libnccl.so.2")], cuda_major=12, requires=requires, tags=TAGS)
        assert v.problems == () and v.notes == () and v.from_extras == (), requires
    carried = ElfInfo(path="ct/libnccl.so.2", soname="libnccl.so.2", needed=(), rpath=(), runpath=())
    (note,) = dependency_problems([_info("libnccl.so.2"), carried], cuda_major=12, requires=[], tags=TAGS).notes
    assert "is a copy of libnccl.so.2 (nvidia-nccl-cu12)" in note  # of the wheel's CUDA major, and no "opens" note


def test_an_opened_library_an_unpinned_requirement_installs_says_the_pin_is_missing() -> None:
    # nvidia-cudnn-cu13 9.28.1.4 opens libcublasLt.so.13 and requires plain `nvidia-cublas`; nvidia-cufft 12.5.0.14
    # opens libnvJitLink.so.13 and requires plain `nvidia-nvjitlink`. Both were told "no requirement installs it".
    lib = ElfInfo(
        path="nvidia/cudnn/lib/libcudnn_adv.so.9",
        soname="libcudnn_adv.so.9",
        needed=("libc.so.6",),
        rpath=("$ORIGIN/../../cu13/lib",),
        runpath=(),
        opens=("libcublasLt.so.13",),
    )
    v = dependency_problems([lib], cuda_major=13, requires=["nvidia-cublas"], tags=TAGS)
    assert v.problems == ()
    (note,) = v.notes
    assert "no requirement" not in note
    assert "Requires-Dist 'nvidia-cublas' installs it, but does not pin nvidia-cublas to CUDA 13" in note
    assert "found through its RPATH entry $ORIGIN/../../cu13/lib" in note
    pinned = dependency_problems([lib], cuda_major=13, requires=["nvidia-cublas==13.*"], tags=TAGS)
    assert pinned.notes == () and pinned.problems == ()


def test_the_json_report_lists_what_each_file_opens(tmp_path: Path) -> None:
    from slimwheel.inspect.report import report_to_json
    from slimwheel.inspect.scan import inspect_wheel
    from testkit.wheelmaker import make_wheel

    so = elf(sections={".rodata": RODATA}, undefined=("dlopen",), needed=("libc.so.6",))
    report = inspect_wheel(
        make_wheel(tmp_path, name="ct", files={"ct/libct.so": so}, tag="py3-none-manylinux_2_28_x86_64")
    )
    (e,) = report_to_json(report)["elfs"]
    assert e["opens"] == ["libcublas.so.12", "libnccl.so.2"]


def test_names_of_another_cuda_major_are_fallbacks_not_noted() -> None:
    # onnxruntime-gpu 1.31.1's CUDA 13 provider names libcudart.so.12 beside .13, libnvrtc.so.12 beside .13
    v = dependency_problems([_info("libcudart.so.12", "libnvrtc.so.12")], cuda_major=13, requires=[], tags=TAGS)
    assert v.notes == () and v.problems == ()
    (note,) = dependency_problems([_info("libnvrtc.so.12")], cuda_major=None, requires=[], tags=TAGS).notes
    assert "nvidia-cuda-nvrtc-cu12" in note  # major unknown: every major's


# --- plugins: files of the wheel that another one opens by name, and nothing needs ---------------------------------

PLUGIN_RODATA = (
    b"\0providers %s\0libprov_trt.so\0nvshmem_bootstrap_mpi.so\0nvshmem_transport_%s.so.%d\0libcublas.so.12\0"
)


def test_other_shared_object_names_are_kept_templates_included() -> None:
    got = read_elf(elf(sections={".rodata": PLUGIN_RODATA}, undefined=("dlopen",), needed=("libc.so.6",)), "h.so")
    assert got.opens == ("libcublas.so.12",)
    assert got.names == ("libprov_trt.so", "nvshmem_bootstrap_mpi.so", "nvshmem_transport_%s.so.%d")
    assert ElfInfo.from_report(got).names == got.names
    assert read_elf(elf(sections={".rodata": PLUGIN_RODATA}), "h.so").names == ()  # no dlopen: nothing opened


def _file(path: str, needed: tuple[str, ...] = (), names: tuple[str, ...] = (), soname: str | None = None) -> ElfInfo:
    return ElfInfo(path=path, soname=soname, needed=needed, rpath=(), runpath=(), names=names)


HOST = _file(
    "pkg/libhost.so.3",
    ("libc.so.6",),
    ("libprov_trt.so", "nvshmem_bootstrap_mpi.so", "nvshmem_transport_%s.so.%d"),
    soname="libhost.so.3",
)


def test_a_plugin_that_needs_what_nothing_installs_is_a_note() -> None:
    files = [
        HOST,
        _file("pkg/libprov_trt.so", ("libnvinfer.so.10", "libhost.so.3")),
        _file("pkg/nvshmem_bootstrap_mpi.so.3", ("libmpi.so.40",)),
        _file("pkg/nvshmem_transport_ucx.so.7", ("libucs.so.0", "libucp.so.0")),
    ]
    v = dependency_problems(files, cuda_major=13, requires=[], tags=TAGS)
    assert v.problems == ()
    assert [n.split(":")[0] for n in v.notes] == [
        "pkg/libprov_trt.so is a plugin",
        "pkg/nvshmem_bootstrap_mpi.so.3 is a plugin",
        "pkg/nvshmem_transport_ucx.so.7 is a plugin",
    ]
    assert "pkg/libhost.so.3 opens it by name" in v.notes[2] and "needs libucs.so.0, libucp.so.0, which" in v.notes[2]


def test_no_plugin_when_a_file_needs_it_or_it_is_a_module_or_nobody_names_it() -> None:
    needed_by_host = _file("pkg/libhost.so.3", ("libprov_trt.so",), HOST.names)
    for files in (
        [needed_by_host, _file("pkg/libprov_trt.so", ("libnvinfer.so.10",))],  # loaded with the host: no plugin
        [HOST, _file("pkg/libother.so", ("libnvinfer.so.10",))],  # named by nobody
        [  # a Python module, named by another file: imported, not a plugin
            _file("pkg/a.cpython-311-x86_64-linux-gnu.so", ("libnvinfer.so.10",)),
            _file("pkg/b.so", (), ("a.cpython-311-x86_64-linux-gnu.so",)),
        ],
    ):
        v = dependency_problems(files, cuda_major=13, requires=[], tags=TAGS)
        assert any("libnvinfer.so.10" in p for p in v.problems), files
    # a template's holes match only the whole name: nvshmem_transport_ucx.so.7 yes, xnvshmem_transport_ucx.so.7 no
    odd = _file("pkg/xnvshmem_transport_ucx.so.7", ("libucs.so.0",))
    assert dependency_problems([HOST, odd], cuda_major=13, requires=[], tags=TAGS).problems


def test_a_template_that_names_no_library_makes_no_plugin() -> None:
    # mooncake-transfer-engine 0.3.14 bundles OpenSSL's libcrypto, whose .rodata holds "lib%s.so" (engine file
    # names) and which imports dlopen: libmooncake_pg.so, needed by no file, was called a plugin libcrypto opens, and
    # the libraries it needs and nothing installs became a note instead of a failure.
    crypto = _file("pkg.libs/libcrypto-64b40125.so.1.1.1k", ("libc.so.6",), ("lib%s.so", "libcrypto.so.1.1"))
    for generic in ("lib%s.so", "lib%s.so.%d", "%s.so", "lib%s%s.so"):
        files = [dataclasses.replace(crypto, names=(generic,)), _file("pkg/libpg.so", ("libibverbs.so.1",))]
        v = dependency_problems(files, cuda_major=13, requires=[], tags=TAGS)
        assert any("libibverbs.so.1" in p for p in v.problems), generic
        assert not any("is a plugin" in n for n in v.notes), generic
    # in the wheel's own library it shows a plugin mechanism (cuda-quantum's libcudaq-common.so opens its backends,
    # lib/libnvqir-*.so, by "lib%s.so"); in a program (triton's ptxas-blackwell) it shows none
    for opener, plugin in (("lib/libcudaq-common.so", True), ("pkg/bin/ptxas-blackwell", False)):
        files = [
            dataclasses.replace(crypto, path=opener, names=("lib%s.so",)),
            _file("lib/libnvqir-custatevec-fp32.so", ("libibverbs.so.1",)),
        ]
        v = dependency_problems(files, cuda_major=13, requires=[], tags=TAGS)
        assert (v.problems == ()) is plugin, (opener, v.problems)
        assert any(n.startswith("lib/libnvqir-custatevec-fp32.so is a plugin") for n in v.notes) is plugin, opener
    # a template with a name of its own still finds its plugins: libnccl-net-%s.so and lib%s_plugin.so
    for named, base in (("libnccl-net-%s.so", "libnccl-net-ofi.so"), ("lib%s_plugin.so", "libtrt_plugin.so")):
        files = [dataclasses.replace(crypto, names=(named,)), _file(f"pkg/{base}", ("libibverbs.so.1",))]
        v = dependency_problems(files, cuda_major=13, requires=[], tags=TAGS)
        assert v.problems == () and [n.split(":")[0] for n in v.notes] == [f"pkg/{base} is a plugin"], named


def _gpu(sms: tuple[int, ...], *, undefined: Iterable[str] = (), extra: Mapping[str, bytes] = {}) -> bytes:
    from testkit.binsynth import fatbin, fatbin_entry

    return elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=sm) for sm in sms]), **extra}, undefined=undefined)


def _verdict(tmp_path: Path, files: dict[str, bytes], require: str) -> Verdict:
    from slimwheel.check import check_wheel, make_policy
    from slimwheel.cuda.arch import parse_require_arch
    from slimwheel.inspect.scan import inspect_wheel
    from testkit.wheelmaker import make_wheel

    r = inspect_wheel(make_wheel(tmp_path, name="te", files=files, tag="py3-none-manylinux_2_28_x86_64"))
    return check_wheel(r, make_policy(r, require_arch=parse_require_arch(require)))


def test_a_plugin_without_code_for_a_gpu_is_a_note_when_the_rest_serves_it(tmp_path: Path) -> None:
    # transformer-engine 2.20's shape: the main library serves 7.0-12.0; libnccl_ep.so, opened by name for one API,
    # only 9.0 and newer
    main = _gpu((70, 80, 90), undefined=("dlopen",), extra={".rodata": b"\0libnccl_ep.so\0"})
    files = {"te/libte.so": main, "te/libnccl_ep.so": _gpu((90,))}
    v = _verdict(tmp_path, files, "7.0-9.0")
    assert v.ok, v.failures
    (note,) = [n for n in v.notes if "has neither SASS nor PTX" in n]
    assert note.startswith(
        "te/libnccl_ep.so (a plugin te/libte.so opens by name) has neither SASS nor PTX for 7.0, 7.5, 8.0, 8.6"
    )


def test_a_plugin_with_all_the_wheels_kernels_is_judged(tmp_path: Path) -> None:
    # onnxruntime-gpu's shape: the CUDA provider is a plugin and the only file with device code
    host = elf(sections={".rodata": b"\0libprov_cuda.so\0"}, undefined=("dlopen",))
    v = _verdict(tmp_path / "a", {"te/libhost.so": host, "te/libprov_cuda.so": _gpu((90,))}, "8.0-9.0")
    assert [f.kind for f in v.failures] == ["coverage"]
    # and one the main library does not serve either still fails the wheel
    main = _gpu((90,), undefined=("dlopen",), extra={".rodata": b"\0libnccl_ep.so\0"})
    v = _verdict(tmp_path / "b", {"te/libte.so": main, "te/libnccl_ep.so": _gpu((90,))}, "8.0-9.0")
    assert [f.kind for f in v.failures] == ["coverage"]


def test_the_opened_library_note_says_whether_installing_its_wheel_would_help() -> None:
    # ctranslate2 4.8.5: RUNPATH $ORIGIN only, so installing nvidia-cublas-cu12 alone does not let dlopen find it
    (alone,) = dependency_problems([_info("libcublas.so.12")], cuda_major=12, requires=[], tags=TAGS).notes
    assert "no search path of ct/libct.so reaches that wheel's folder (nvidia/cublas/lib)" in alone
    reaching = ElfInfo(
        path="ct/libct.so",
        soname=None,
        needed=(),
        rpath=(),
        runpath=("$ORIGIN", "$ORIGIN/../nvidia/cublas/lib"),
        opens=("libcublas.so.12",),
    )
    (note,) = dependency_problems([reaching], cuda_major=12, requires=[], tags=TAGS).notes
    assert "installed, that wheel is found through its RPATH entry $ORIGIN/../nvidia/cublas/lib" in note


def test_names_of_one_library_for_several_majors_are_one_chain() -> None:
    """A file of no known CUDA major that names libcudart.so.13 and .12 (cudnn-frontend 1.32) takes whichever it
    finds: one note naming both when nothing installs either, none when a requirement installs one."""
    (note,) = dependency_problems(
        [_info("libcudart.so.12", "libcudart.so.13")], cuda_major=None, requires=[], tags=TAGS
    ).notes
    assert note.count("opens libcudart.so.13 or libcudart.so.12 at run time") == 1
    assert "nvidia-cuda-runtime, CUDA 13 or nvidia-cuda-runtime-cu12, CUDA 12" in note
    assert "those wheels' folders (nvidia/cu13/lib, nvidia/cuda_runtime/lib)" in note
    one = dependency_problems(
        [_info("libcudart.so.12", "libcudart.so.13")], cuda_major=None, requires=["nvidia-cuda-runtime-cu12"], tags=TAGS
    )
    assert not [n for n in one.notes if "libcudart" in n] and not one.problems


def test_a_file_that_defines_pyinit_of_its_name_is_a_python_module() -> None:
    # triton 3.9's _C/libtriton.so is imported as triton._C.libtriton (PyInit_libtriton) though its name has no ABI
    # tag; dgl's libdgl.so, named alike, defines no PyInit and is opened with ctypes
    for name, symbols, undefined, module in (
        ("triton/_C/libtriton.so", ("PyInit_libtriton",), (), True),
        ("pkg/_ext.cpython-312-x86_64-linux-gnu.so", ("PyInit__ext",), (), True),
        ("dgl/libdgl.so", ("DGLInit",), (), False),
        ("pkg/libuser.so", (), ("PyInit_libuser",), False),  # taken from elsewhere, not defined
        ("pkg/libother.so", ("PyInit_libuser",), (), False),  # another module's name
    ):
        got = read_elf(elf(symbols=symbols, undefined=undefined, needed=("libc.so.6",)), name)
        assert got.python_module is module, name
        assert ElfInfo.from_report(got).python_module is module, name
