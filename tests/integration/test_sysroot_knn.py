"""The low-floor route without a container, end to end: `slimwheel sysroot debian11` (Debian 11's GCC 10, glibc 2.31
and libstdc++ from Debian's archive, nothing installed), `[tool.slimwheel] sysroot`/`manylinux` honoured by `build`
of examples/knn, and the floor proven three ways: check --manylinux, auditwheel show, and the module loaded by the
old root's own dynamic loader, glibc and libstdc++ (which refuses a host-built library: the probe can fail)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from slimwheel import floor
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit import Toolkit
from slimwheel.toolkit.sysroot import Sysroot, ensure_sysroot

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "slimwheel"]


@pytest.fixture(scope="module")
def sysroot() -> Sysroot:
    return ensure_sysroot("debian11")


# The root's own policy, and one below it: there build uses the capped compilers (glibc symbol versions pinned,
# libstdc++'s GLIBCXX_3.4.26 string-stream constructors defined in the module) and repair bundles the root's libraries.
@pytest.fixture(scope="module", params=["2_31", "2_28"])
def target(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def built(
    repo_root: Path, toolkit13: Toolkit, sysroot: Sysroot, target: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("wheelhouse")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env.update(SLIMWHEEL_SYSROOT="debian11", SLIMWHEEL_MANYLINUX=target, CMAKE_BUILD_PARALLEL_LEVEL="2")
    proc = subprocess.run(
        [
            *CLI,
            "build",
            str(repo_root / "examples" / "knn"),
            "--archs",
            "7.5",
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit13.root),
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")
    return proc, wheel


def _module(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into)
    (mod,) = into.glob("knn/_knn*.so")
    return mod


def test_build_used_the_sysroots_compiler_and_stays_within_its_floor(
    built: tuple[subprocess.CompletedProcess[str], Path], sysroot: Sysroot, target: str, tmp_path: Path
) -> None:
    proc, wheel = built
    assert "[sysroot] done in" in proc.stderr and f"within manylinux_{target}" in proc.stdout
    capped = "glibc symbols capped at manylinux_2_28" in proc.stderr
    assert capped == (target == "2_28"), proc.stderr
    mod = _module(wheel, tmp_path)
    comment = subprocess.run(["readelf", "-p", ".comment", str(mod)], capture_output=True, text=True).stdout
    assert "Debian 10.2.1" in comment, comment
    check = subprocess.run(
        [*CLI, "check", "--manylinux", target, "--require-arch", "7.5", str(wheel)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_auditwheel_show_agrees_with_the_floor(
    built: tuple[subprocess.CompletedProcess[str], Path], target: str
) -> None:
    _, wheel = built
    show = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert show.returncode == 0, show.stdout + show.stderr
    m = re.search(r'"(manylinux_\d+_\d+)_x86_64"', " ".join(show.stdout.split()))
    assert m, show.stdout
    ours = floor.wheel_floor(inspect_wheel(wheel).elfs)
    assert ours is not None and ours.name == m.group(1)
    assert floor.parse_target(m.group(1)).priority >= floor.parse_target(target).priority  # the target or lower
    assert f"{m.group(1)}_x86_64" in wheel.name  # the tag repair gave


def test_the_module_loads_with_the_old_roots_glibc_and_libstdcxx(
    built: tuple[subprocess.CompletedProcess[str], Path], sysroot: Sysroot, toolkit13: Toolkit, tmp_path: Path
) -> None:
    _, wheel = built
    mod = _module(wheel, tmp_path)
    cuda_libs = [d for d in toolkit13.lib_dirs if (Path(d) / "libcublas.so.13").exists()]
    assert cuda_libs, toolkit13.lib_dirs
    assert sysroot.load_probe(mod, cuda_libs) == []
    # The control: a library the host's compiler links against the host's glibc 2.36 is refused by the same probe.
    src = tmp_path / "host.c"
    src.write_text("#include <stdlib.h>\nunsigned f(void) { return arc4random(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "host.so"), str(src)], check=True)
    problems = sysroot.load_probe(tmp_path / "host.so")
    assert any("GLIBC_2.36' not found" in p for p in problems), problems
