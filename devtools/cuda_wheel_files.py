"""Read the shared libraries the PyPI CUDA wheels install, from the wheels themselves (repository tool).

For each package of the CUDA family (both majors), the newest release's manylinux x86_64 wheel is read through HTTP
range requests: only its zip central directory (a few kB of a wheel of up to 500 MB), which lists every file it
installs. The result, tests/data/cuda-wheel-files.json, is what `slimwheel/cuda/libs.py` is checked against
(tests/unit/test_cuda_libs_facts.py): every row's folder and SONAME must be a file that row's wheel installs.

    python -m devtools.cuda_wheel_files            # rewrites the JSON (needs PyPI)
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from slimwheel import fsutil
from slimwheel.cuda import libs as cudalibs

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


class _RangeFile(io.RawIOBase):
    """A read-only seekable file over HTTP range requests (zipfile reads the end, then the central directory)."""

    def __init__(self, url: str) -> None:
        self.url = url
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as r:
            self.size = int(r.headers["Content-Length"])
        self.pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            data: bytes = r.read()
        self.pos += len(data)
        return data


def _wheel_url(package: str) -> tuple[str, str, str]:
    """(version, file name, URL) of the newest release's wheel; `name==12.*`: the newest release that matches."""
    name, _, wanted = package.partition("==")
    api = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(api, timeout=60) as r:
        info = json.load(r)
    version = info["info"]["version"]
    if wanted:
        spec = SpecifierSet(f"=={wanted}")
        version = str(max(v for v in map(Version, info["releases"]) if v in spec))
        api = f"https://pypi.org/pypi/{name}/{version}/json"
        with urllib.request.urlopen(api, timeout=60) as r:
            info = json.load(r)
    for f in info["urls"]:
        if f["filename"].endswith(".whl") and re.search(r"(manylinux\w*_x86_64|-any)\.whl$", f["filename"]):
            return version, f["filename"], urllib.parse.urljoin(api, f["url"])
    raise SystemExit(f"{package} {version}: no manylinux x86_64 wheel")


def read_package(package: str) -> dict[str, Any]:
    version, filename, url = _wheel_url(package)
    with zipfile.ZipFile(_RangeFile(url)) as z:  # type: ignore[arg-type]
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in z.read(meta_name).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    libs = sorted(n for n in names if re.search(r"\.so(\.\d+)*$", posixpath.basename(n)) and ".dist-info/" not in n)
    return {"version": version, "wheel": filename, "shared_libraries": libs, "requires_dist": requires}


def main() -> int:
    packages = sorted({lib.package for lib in cudalibs.RUNTIME_LIBS} | set(EXTRA))
    out: dict[str, Any] = {}
    for p in packages:
        print(p, file=sys.stderr)
        out[p] = read_package(p)
    with fsutil.atomic_path(OUT) as tmp:
        tmp.write_text(json.dumps({"schema": 1, "packages": out}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(out)} packages)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
