"""Issue 22 item 2: one rule for relative RPATH/RUNPATH entries, resolved from where the file installs (the layouts of
jax-cuda13-plugin and jax-cuda13-pjrt 0.12.0.1), each problem reported once per file with the resolved target."""

from __future__ import annotations

from pathlib import Path

import pytest

from slimwheel.check import Verdict, check_wheel, make_policy
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.rpath import install_dir, resolve_entry
from testkit.binsynth import elf
from testkit.wheelmaker import make_wheel

CU13 = "nvidia-cuda-runtime>=13.0,<14"


@pytest.mark.parametrize(
    ("entry", "elf_path", "kind", "target"),
    [
        # jax-cuda13-pjrt: jax_plugins/xla_cuda13/xla_cuda_plugin.so -> site-packages/nvidia/cu13/lib
        ("$ORIGIN/../../nvidia/cu13/lib", "jax_plugins/xla_cuda13/xla_cuda_plugin.so", "inside", "nvidia/cu13/lib"),
        # jax-cuda13-plugin: jax_cuda13_plugin/_linalg.so, one folder shallower
        ("$ORIGIN/../nvidia/cu13/lib", "jax_cuda13_plugin/_linalg.so", "inside", "nvidia/cu13/lib"),
        (
            "$ORIGIN/../../nvidia/cu13/lib",
            "jax_cuda13_plugin/_linalg.so",
            "python-lib",
            "<site-packages>/../nvidia/cu13/lib",
        ),
        ("$ORIGIN/../../..", "pkg/_x.so", "outside", "<site-packages>/../.."),
        ("$ORIGIN/..", "pkg/_x.so", "inside", "."),
        ("$ORIGIN/../lib", "pkg-1.data/data/bin/tool", "outside", "<site-packages>/../../../lib"),
        ("$ORIGIN/../x", "pkg-1.data/platlib/a/b.so", "inside", "x"),
        # 37 item 3: a system toolkit location (root-owned) is not a build machine's path
        ("/usr/local/cuda/lib64", "pkg/_x.so", "system", "/usr/local/cuda/lib64"),
        (
            "/usr/local/cuda-12.4/targets/x86_64-linux/lib",
            "pkg/_x.so",
            "system",
            "/usr/local/cuda-12.4/targets/x86_64-linux/lib",
        ),
        ("/usr/lib/x86_64-linux-gnu", "pkg/_x.so", "system", "/usr/lib/x86_64-linux-gnu"),
        ("/opt/nvidia/hpc_sdk/lib", "pkg/_x.so", "system", "/opt/nvidia/hpc_sdk/lib"),
        ("/home/runner/work/x/build/lib", "pkg/_x.so", "absolute", "/home/runner/work/x/build/lib"),
        ("/usr/local/cuda/../../../tmp/x", "pkg/_x.so", "absolute", "/usr/local/cuda/../../../tmp/x"),
        ("/tmp/x", "pkg/_x.so", "absolute", "/tmp/x"),
        ("lib", "pkg/_x.so", "relative", "./lib"),
        ("", "pkg/_x.so", "empty", "the current directory"),
    ],
)
def test_entries_are_resolved_from_where_the_file_installs(entry: str, elf_path: str, kind: str, target: str) -> None:
    r = resolve_entry(entry, elf_path)
    assert (r.kind, r.target) == (kind, target)
    assert r.safe is (kind in ("inside", "python-lib"))


def test_data_scheme_files_install_under_the_prefix() -> None:
    assert install_dir("pkg-1.data/data/lib/libx.so") == "../../../lib"
    assert install_dir("pkg-1.data/scripts/tool") == "../../../bin"
    assert install_dir("pkg-1.data/platlib/a/b.so") == "a"


def _verdict(tmp_path: Path, files: dict[str, bytes]) -> Verdict:
    w = make_wheel(tmp_path, files=files, requires=[CU13], tag="cp312-cp312-manylinux_2_27_x86_64")
    r = inspect_wheel(w)
    return check_wheel(r, make_policy(r, require_arch="none"))


def test_jax_plugin_layout_passes_with_one_note_per_file(tmp_path: Path) -> None:
    # jax-cuda13-plugin 0.12.0.1 repeats both entries five times in each module
    rp = ":".join(["$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN/../nvidia/cu13/lib"] * 5)
    so = elf(needed=("libcudart.so.13", "libc.so.6"), rpath=rp)
    v = _verdict(tmp_path, {"jax_cuda13_plugin/_linalg.so": so, "jax_cuda13_plugin/_prng.so": so})
    assert v.ok, v.failures
    notes = [n for n in v.notes if "RPATH" in n]
    assert len(notes) == 2 and all("<site-packages>/../nvidia/cu13/lib" in n for n in notes), notes


def test_an_unsafe_entry_is_reported_once_per_file_with_its_target(tmp_path: Path) -> None:
    rp = ":".join(
        [
            "$ORIGIN/../nvidia/cu13/lib",  # first: a system entry before it shadows it, another failure (deps)
            "$ORIGIN/../../../../lib",
            "/opt/cuda/lib64",
            "$ORIGIN/../../../../lib",
            "$ORIGIN",
        ]
    )
    v = _verdict(tmp_path, {"pkg/_x.so": elf(needed=("libcudart.so.13", "libc.so.6"), runpath=rp)})
    msgs = [f.message for f in v.failures]
    assert len(msgs) == 1, msgs
    assert "<site-packages>/../../../lib" in msgs[0] and "'/opt/cuda/lib64'" in msgs[0]
    assert msgs[0].count("../../../../lib'") == 1


def test_files_with_the_same_unsafe_entry_share_one_line(tmp_path: Path) -> None:
    """nvidia-nvimgcodec-cu12 0.9: 17 files with RUNPATH /usr/local/cuda/lib64 were 17 lines. One per entry (and
    resolved target): files at another depth resolve a relative entry elsewhere, and get their own line."""
    so = elf(needed=("libcudart.so.13", "libc.so.6"), runpath="$ORIGIN/../nvidia/cu13/lib:/usr/local/cuda/lib64")
    deep = elf(needed=("libcudart.so.13", "libc.so.6"), runpath="$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../..")
    v = _verdict(tmp_path, {"pkg/a.so": so, "pkg/b.so": so, "pkg/c.so": so, "pkg/d.so": so, "pkg/e/f.so": deep})
    msgs = [f.message for f in v.failures]
    assert len(msgs) == 2, msgs
    assert msgs[0].startswith("pkg/a.so, pkg/b.so, pkg/c.so and 1 more: unsafe RPATH/RUNPATH entry: '/usr/local/cuda")
    assert msgs[1].startswith("pkg/e/f.so: unsafe RPATH/RUNPATH entry: '$ORIGIN/../../..' -> <site-packages>/..")


def test_a_system_toolkit_entry_before_the_wheels_own_cuda_folder_fails(tmp_path: Path) -> None:
    """37 item 3, nvidia-dali-cuda130 2.4.0: /usr/local/cuda/lib64 before $ORIGIN/../cu13/lib (nvidia/dali/ ->
    nvidia/cu13/lib): where the system has a CUDA toolkit, its libcudart wins over the nvidia-* wheel's."""
    needed = ("libcudart.so.13", "libc.so.6")
    dali = elf(needed=needed, runpath="/usr/local/cuda/lib64:$ORIGIN/../cu13/lib")
    v = _verdict(tmp_path / "a", {"nvidia/dali/libdali.so": dali})
    msgs = [f.message for f in v.failures]
    assert any("'/usr/local/cuda/lib64' (a system toolkit location (root-owned)" in m for m in msgs), msgs
    assert not any("build machine" in m for m in msgs), msgs
    (shadow,) = [m for m in msgs if "before" in m]
    assert shadow.startswith(
        "nvidia/dali/libdali.so: its search path names /usr/local/cuda/lib64 (a system toolkit location) before "
        "$ORIGIN/../cu13/lib (nvidia/cu13/lib, where the nvidia-* wheels install libcudart.so.13)"
    ), shadow
    # after the wheel's own folder it shadows nothing (the entry itself is still reported)
    last = elf(needed=needed, runpath="$ORIGIN/../cu13/lib:/usr/local/cuda/lib64")
    msgs = [f.message for f in _verdict(tmp_path / "b", {"nvidia/dali/libdali.so": last}).failures]
    assert len(msgs) == 1 and "before" not in msgs[0], msgs


def test_a_system_toolkit_entry_shadows_what_the_file_opens_by_name(tmp_path: Path) -> None:
    """The real nvidia-dali-cuda130 2.4.0 needs no CUDA library: libdali_operators.so opens libnppc.so.13 and
    libcufile.so.0 with dlopen, which searches the caller's DT_RUNPATH in order, /usr/local/cuda/lib64 first. The
    shadow was not said because only DT_NEEDED names were looked at."""
    runpath = "/usr/local/cuda/lib64:$ORIGIN/../cu13/lib"
    opener = elf(
        needed=("libc.so.6",),
        runpath=runpath,
        sections={".rodata": b"\0libnppc.so.13\0libcufile.so.0\0"},
        undefined=["dlopen"],
    )
    msgs = [f.message for f in _verdict(tmp_path / "a", {"nvidia/dali/libdali_operators.so": opener}).failures]
    (shadow,) = [m for m in msgs if "before" in m]
    assert shadow.startswith(
        "nvidia/dali/libdali_operators.so: its search path names /usr/local/cuda/lib64 (a system toolkit location) "
        "before $ORIGIN/../cu13/lib (nvidia/cu13/lib, where the nvidia-* wheels install libcufile.so.0, libnppc.so.13)"
    ), shadow
    # a file that opens nothing of those folders is shadowed in nothing (the entry itself is still reported)
    plain = elf(needed=("libc.so.6",), runpath=runpath)
    msgs = [f.message for f in _verdict(tmp_path / "b", {"nvidia/dali/libdali_core.so": plain}).failures]
    assert len(msgs) == 1 and "before" not in msgs[0], msgs


@pytest.mark.parametrize(
    ("entry", "cuda"),
    [
        ("/usr/local/cuda/lib64", True),
        ("/usr/local/cuda-12.4/targets/x86_64-linux/lib", True),
        ("/usr/lib64/boost1.78", False),  # mooncake-transfer-engine-cuda13 0.3.14's libmooncake_pg_device.so
        ("/usr/lib/x86_64-linux-gnu", False),
        ("/opt/rocm/lib", False),
    ],
)
def test_a_system_entry_is_worded_for_what_it_names(entry: str, cuda: bool) -> None:
    # Every root-owned folder is judged alike; only a CUDA toolkit's is said to hold a toolkit (a boost folder was)
    r = resolve_entry(entry, "pkg/_x.so")
    assert r.kind == "system"
    assert r.why.startswith("a system toolkit location (root-owned)") is cuda, r.why
    assert ("CUDA toolkit" in r.why) is cuda, r.why
