"""Read the shared libraries the PyPI CUDA wheels install, from the wheels themselves (repository tool).

For each package of the CUDA family (CUDA 11's few rows, both majors of 12 and 13), the newest release's manylinux
x86_64 wheel is read through HTTP range requests, by slimwheel's own index reader (`pypindex`): only the end of its zip
(a few kB of a wheel of up to 500 MB), which lists every file it installs. The result, tests/data/cuda-wheel-files.json, is what `slimwheel/cuda/libs.py` is checked against
(tests/unit/test_cuda_libs_facts.py): every row's folder and SONAME must be a file that row's wheel installs.

    python -m devtools.cuda_wheel_files            # rewrites the JSON (needs PyPI)
    python -m devtools.cuda_wheel_files KEY...     # reads those packages only (a new row), keeps the rest
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from slimwheel import fsutil, pypindex
from slimwheel.cuda import libs as cudalibs
from slimwheel.reqgraph import LookupFailed

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "cuda-wheel-files.json"
# Packages of the family that install no shared library slimwheel links or loads (headers, compilers, metapackage)
# are read too when a row names them; every package of a row is read.
# The family members read besides the table's rows: the metapackage whose extras name the component wheels, and the
# wheels of each component of both majors (package names from PyPI's project list), so that a new row starts from
# what its wheel installs.
EXTRA = (
    "cuda-toolkit",
    "cuda-toolkit==12.*",  # the metapackage's newest release of the other major (RAPIDS' cu12 wheels require it)
    *(
        f"{name}-cu12"
        for name in (
            "nvidia-nccl",
            "cutensor",
            "nvidia-cudnn",
            "nvidia-cusparselt",
            "nvidia-nvshmem",
            "nvidia-cufile",
            "nvidia-nvtx",
            "nvidia-cuda-cupti",
            "nvidia-npp",
            "nvidia-nvjpeg",
            "nvidia-nvfatbin",
            "nvidia-cudss",
            "nvidia-nvjpeg2k",
            "nvidia-nvcomp",
        )
    ),
    *(
        f"{name}-cu13"
        for name in (
            "nvidia-nccl",
            "cutensor",
            "nvidia-cudnn",
            "nvidia-cusparselt",
            "nvidia-nvshmem",
            "nvidia-cudss",
            "nvidia-nvjpeg2k",
            "nvidia-nvcomp",
        )
    ),
    "nvidia-cufile",
    "nvidia-nvtx",
    "nvidia-cuda-cupti",
    "nvidia-npp",
    "nvidia-nvjpeg",
    "nvidia-nvfatbin",
)


def read_package(package: str) -> dict[str, Any]:
    """The newest wheel of `package` (a name, or `name==12.*`) for Linux x86_64, read the way `check` reads a
    requirement's wheel (slimwheel.pypindex: the simple API and one range request for the zip's end; PyPI's per-version
    JSON API answered 404 from this machine)."""
    with tempfile.TemporaryDirectory() as cache:
        lookup = pypindex.IndexLookup(machines=("x86_64",), pythons=("3.12",), cache=Path(cache))
        try:
            facts = lookup(Requirement(package))
        except LookupFailed as exc:
            raise SystemExit(f"{package}: {exc}") from None
    libs = sorted(n for n in facts.files if re.search(r"\.so(\.\d+)*$", posixpath.basename(n)))
    return {
        "version": facts.version,
        "wheel": facts.filename,
        "shared_libraries": libs,
        "requires_dist": list(facts.requires),
    }


def facts_key(lib: cudalibs.RuntimeLib) -> str:
    """The wheel a row is read from: its package's newest, or the newest before the release that dropped the library
    (`nvidia-nvtx-cu12<12.9` for libnvToolsExt.so.1)."""
    return f"{lib.package}<{lib.until}" if lib.until else lib.package


def main(only: list[str] | None = None) -> int:
    """Rewrites the JSON; with keys given (`python -m devtools.cuda_wheel_files 'nvidia-nvtx-cu12<12.9'`), reads those
    only and keeps the rest as they were read."""
    packages = sorted(
        {facts_key(lib) for lib in cudalibs.RUNTIME_LIBS} | {lib.package for lib in cudalibs.RUNTIME_LIBS} | set(EXTRA)
    )
    out: dict[str, Any] = json.loads(OUT.read_text(encoding="utf-8"))["packages"] if only else {}
    for p in only or packages:
        print(p, file=sys.stderr)
        out[p] = read_package(p)
    with fsutil.atomic_path(OUT) as tmp:
        tmp.write_text(json.dumps({"schema": 1, "packages": out}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(out)} packages)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or None))
