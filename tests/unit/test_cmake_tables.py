"""SlimWheelTables.cmake is a committed rendering of the Python tables: it must not drift from them."""

from __future__ import annotations

import re

from devtools import cmake_tables as tables
from slimwheel.cuda.libs import libs_for


def _cmake_sets(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip('"') for m in re.finditer(r"^set\((\S+) (.*)\)$", text, re.MULTILINE)}


def test_committed_file_matches_the_python_tables() -> None:
    committed = tables.TABLES_FILE.read_text(encoding="utf-8")
    assert committed == tables.render(), "stale: run `python -m devtools.cmake_tables` and commit the result"


def test_every_runtime_library_has_soname_and_folder() -> None:
    sets = _cmake_sets(tables.render())
    for major in (12, 13):
        assert sets[f"_SLIMWHEEL_LIBS_{major}"].split() == [lib.component for lib in libs_for(major)]
        for lib in libs_for(major):
            assert sets[f"_SLIMWHEEL_LIB_{major}_{lib.component}_SONAME"] == lib.soname
            assert sets[f"_SLIMWHEEL_LIB_{major}_{lib.component}_FOLDER"] == lib.folder


def test_wheel_folders_follow_the_nvidia_layouts() -> None:
    # shared/cuda-facts.md section 1: one folder per component on 12, one shared nvidia/cu13/lib on 13.
    sets = _cmake_sets(tables.render())
    assert sets["_SLIMWHEEL_LIB_12_cublas_FOLDER"] == "nvidia/cublas/lib"
    assert sets["_SLIMWHEEL_LIB_12_cudart_FOLDER"] == "nvidia/cuda_runtime/lib"
    assert sets["_SLIMWHEEL_LIB_13_cublas_FOLDER"] == "nvidia/cu13/lib"


def test_default_architectures_cover_every_discrete_gpu_of_cuda_13() -> None:
    archs = _cmake_sets(tables.render())["_SLIMWHEEL_DEFAULT_ARCHS_13.0"].split(";")
    # One cubin per major from Turing on (7.5 is CUDA 13's oldest), PTX of the newest; never "native".
    assert archs[0] == "75-real"
    assert {"80-real", "90-real", "100-real"} <= set(archs)
    assert archs[-1] == "120"
    assert "native" not in archs
