"""Issue 22 item 3: THE table of CUDA libraries (slimwheel/cuda/libs.py) against what the real wheels install.

tests/data/cuda-wheel-files.json lists the shared libraries of the newest manylinux x86_64 wheel of every package of
the PyPI CUDA family, read from the wheels' own zip directories by devtools/cuda_wheel_files.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from devtools.cuda_wheel_files import facts_key
from slimwheel.cuda import libs as cudalibs

FACTS = json.loads((Path(__file__).resolve().parents[2] / "tests/data/cuda-wheel-files.json").read_text())["packages"]


@pytest.mark.parametrize("lib", cudalibs.RUNTIME_LIBS, ids=lambda lib: f"{lib.cuda_major}-{lib.component}")
def test_every_row_is_a_file_its_wheel_installs(lib: cudalibs.RuntimeLib) -> None:
    key = facts_key(lib)  # a row with `until` is read from the newest wheel before that release
    assert key in FACTS, f"{key}: run python -m devtools.cuda_wheel_files {key!r}"
    assert f"{lib.folder}/{lib.soname}" in FACTS[key]["shared_libraries"]
    if lib.until is not None:  # and the release that dropped it really has not got it
        assert Version(FACTS[lib.package]["version"]) >= Version(lib.until)
        assert f"{lib.folder}/{lib.soname}" not in FACTS[lib.package]["shared_libraries"]


def test_the_family_is_covered() -> None:
    # every library a family wheel installs with a versioned SONAME (not a plugin, stub or Python module) has a row
    rows = {(facts_key(lib), f"{lib.folder}/{lib.soname}") for lib in cudalibs.RUNTIME_LIBS}
    missing = []
    for package, facts in FACTS.items():
        for f in facts["shared_libraries"]:
            name = f.rsplit("/", 1)[-1]
            if "stub" in f or not name.startswith("lib") or not re.search(r"\.so\.\d+$", name):
                continue
            if "builtins" in name or ".alt." in name or name == "libOpenCL.so.1":
                continue  # loaded by libnvrtc itself / an alternative build / the ICD loader (not linked by wheels)
            if name.startswith("libcudss_") or (name.startswith("libnvshmem_") and "host" not in name):
                continue  # cuDSS's communication/threading layers and NVSHMEM's transports are plug-ins it dlopens
            if (package, f) not in rows:
                missing.append(f"{package}: {f}")
    assert not missing, missing


def test_package_versions_share_the_pinned_major() -> None:
    # the requirement pins `<version_major + 1`: the newest wheel's version must have that major
    for lib in cudalibs.RUNTIME_LIBS:
        if lib.package in FACTS and lib.cuda_major >= 12:
            assert int(FACTS[lib.package]["version"].split(".")[0]) == lib.version_major, lib


@pytest.mark.parametrize(("major", "key"), [(13, cudalibs.TOOLKIT_PACKAGE), (12, "cuda-toolkit==12.*")])
def test_toolkit_extras_are_the_metapackage_s(major: int, key: str) -> None:
    got: dict[str, set[str]] = {}
    for text in FACTS[key]["requires_dist"]:
        r = Requirement(text)
        found = re.search(r"extra == [\"']([^\"']+)[\"']", str(r.marker))
        assert found, text
        extra = found.group(1)
        got.setdefault(extra, set()).add(r.name)
    known = {lib.package for lib in cudalibs.libs_for(major)}
    assert int(FACTS[key]["version"].split(".")[0]) == major
    for extra, packages in cudalibs.TOOLKIT_EXTRAS[major].items():
        assert set(packages) == got[extra] & known, extra
    assert set(cudalibs.toolkit_packages(major, frozenset({"all"}))) == got["all"] & known


def test_what_library_wheels_require_is_their_own_metadata() -> None:
    known = {lib.package for lib in cudalibs.RUNTIME_LIBS}
    got = {}
    for package, facts in FACTS.items():
        if package in known:
            names = [Requirement(t).name for t in facts["requires_dist"] if "extra ==" not in t]
            if deps := tuple(dict.fromkeys(n for n in names if n in known)):
                got[package] = deps
    assert {k: set(v) for k, v in cudalibs.WHEEL_REQUIRES.items()} == {k: set(v) for k, v in got.items()}


def test_copies_are_told_by_name_and_originals_by_their_folder() -> None:
    v = cudalibs.vendored("cumm_cu120.libs/libcudart-5a077122.so.12.0.107")
    assert v is not None and [lib.soname for lib in v.candidates] == ["libcudart.so.12"] and v.version == "12.0.107"
    b = cudalibs.vendored("cumm_cu120.libs/libnvrtc-builtins-8cb4db2d.so.12.0.140")
    assert b is not None and b.companion and b.candidates[0].component == "nvrtc"
    assert cudalibs.vendored("pkg/libcublas.so.12") is not None  # a plain copy, not renamed
    assert cudalibs.vendored("pkg.libs/libcublasLt-0123abcd.so.12.1.3.1") is not None
    assert cudalibs.vendored("pkg.libs/libfoo-0123abcd.so.1") is None
    # torchvision 0.26.0: the hash between dots
    t = cudalibs.vendored("torchvision.libs/libcudart.faf08d9a.so.13")
    assert t is not None and [lib.soname for lib in t.candidates] == ["libcudart.so.13"] and t.version is None
    n = cudalibs.vendored("torchvision.libs/libnvjpeg.36e11081.so.13")
    assert n is not None and n.real_name == "libnvjpeg.so.13"
    assert cudalibs.vendored("torchvision.libs/libpng16.60f56faa.so.16") is None
    for package, facts in FACTS.items():  # the wheels' own libraries are originals
        for f in facts["shared_libraries"]:
            assert cudalibs.vendored(f) is None, (package, f)


def test_a_moved_folder_raises_the_floor() -> None:
    from slimwheel.deps import requirement_for

    lib = cudalibs.lookup("cusparseLt", 13)
    assert lib.folder == "nvidia/cu13/lib" and lib.since == "0.9.0"
    assert requirement_for(lib, cuda=None, versions=None) == "nvidia-cusparselt-cu13>=0.9.0,<1"
    assert requirement_for(cudalibs.lookup("cufile", 13), cuda=None, versions=None) == "nvidia-cufile>=1,<2"


def test_load_order_pulls_in_only_what_the_row_s_wheel_brings() -> None:
    # the loader fails on any library of the list it cannot find: cuTENSOR's and NCCL's wheels bring no cuBLAS
    for component in ("cutensorMg", "nccl", "cusparseLt", "nvshmem", "nvjpeg2k"):
        order = [lib.component for lib in cudalibs.load_order([cudalibs.lookup(component, 13)])]
        assert order[-1] == component and "cublas" not in order and "cudart" not in order, order
    # cuDNN's wheel requires nvidia-cublas (tests/data/cuda-wheel-files.json)
    assert "nvidia-cublas" in FACTS["nvidia-cudnn-cu13"]["requires_dist"]
