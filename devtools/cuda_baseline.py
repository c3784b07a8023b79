"""Renders slimwheel/resources/cuda-baseline.json: for each CUDA major, the component versions of its first release
(X.0.0, as that release's `cuda-toolkit` metapackage on PyPI pins them) and the dynamic symbols each library of
slimwheel's table (`cuda.libs`) exports there. `deps.floor_for` states a requirement's floor as that release when the
wheel uses nothing newer (issue 14: a build with CUDA 13.5 must still install beside torch's 13.0 pins), and repair's
unvendoring proves a vendored copy replaceable with it.

The libraries come from the release's own nvidia-* wheels (`pip download --no-deps`, into the slimwheel cache), so
every library of the table that the metapackage pins is covered, not only those a build toolkit installs (it held
four CUDA 13 libraries before: cudart, cuBLAS, cuBLASLt, cuRAND and nvJitLink of 13.0's latest update). Libraries
outside the toolkit (NCCL, cuDNN, cuSPARSELt, cuTENSOR, NVSHMEM, cuDSS, nvJPEG2000) have no CUDA release to be
the first of: they are left out, and their floors come from the build (docs/repair.md, rule 2).

Run from the repository root, with PyPI reachable (about 2.5 GB of wheels, cached):
    python -m devtools.cuda_baseline                # CUDA 12.0.0 and 13.0.0
    python -m devtools.cuda_baseline 13.0.0         # releases named
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda import libs as cudalibs
from slimwheel.fsutil import cache_dir, write_text_atomic
from slimwheel.inspect.dynamic import exported_symbols

OUT = Path(__file__).resolve().parents[1] / "slimwheel" / "resources" / "cuda-baseline.json"
RELEASES = ("12.0.0", "13.0.0")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def _download(requirement: str, into: Path) -> Path | None:
    """The one wheel of `requirement` (an exact pin) for Linux x86_64, downloaded once into `into`; None when the
    index has none (nvidia-cuda-cupti 13.0.48, which cuda-toolkit 13.0.0 pins, is not on PyPI)."""
    into.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *platforms]
    if subprocess.run([*cmd, "-d", str(into), requirement], check=False).returncode != 0:
        return None
    name = str(canonicalize_name(Requirement(requirement).name)).replace("-", "_")
    (wheel,) = [w for w in into.glob("*.whl") if str(canonicalize_name(w.name.split("-")[0])).replace("-", "_") == name]
    return wheel


def release_pins(release: str, cache: Path) -> dict[str, str]:
    """Package -> version that `cuda-toolkit==release[all]` pins (`==V.*`)."""
    meta = _download(f"cuda-toolkit=={release}", cache / f"cuda-toolkit-{release}")
    if meta is None:
        raise SystemExit(f"cuda-toolkit=={release}: not on the index")
    with zipfile.ZipFile(meta) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(name).decode("utf-8")
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or "extra" not in str(req.marker) or not req.marker.evaluate({"extra": "all"}):
            continue
        (spec,) = list(req.specifier)
        pins[str(canonicalize_name(req.name))] = spec.version.removesuffix(".*")
    return pins


def _exports(wheel: Path, soname: str) -> list[str] | None:
    """The sorted dynamic symbols library `soname` of `wheel` defines; None when the wheel has no such file."""
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == soname]
        if not members:
            return None
        with tempfile.TemporaryDirectory(prefix="slimwheel-baseline-") as tmp:
            path = Path(tmp) / soname
            with z.open(members[0]) as src, path.open("wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
            return sorted(exported_symbols(path))


def render_major(release: str, cache: Path) -> dict[str, object]:
    major = int(release.split(".")[0])
    pins = release_pins(release, cache)
    packages: dict[str, dict[str, object]] = {}
    for lib in cudalibs.libs_for(major):
        version = pins.get(str(canonicalize_name(lib.package)))
        if version is None:
            continue
        wheel = _download(f"{lib.package}=={version}", cache / f"{lib.package}-{version}")
        names = _exports(wheel, lib.soname) if wheel is not None else None
        if names is None:
            where = f"no {lib.soname} in {wheel.name}" if wheel is not None else "not on the index: left out"
            print(f"  {lib.package} {version}: {where}", file=sys.stderr)
            continue
        entry = packages.setdefault(lib.package, {"version": version, "libraries": {}})
        libraries = entry["libraries"]
        assert isinstance(libraries, dict)
        libraries[lib.soname] = names
        print(f"  {lib.package} {version}: {lib.soname}, {len(names)} symbols", file=sys.stderr)
    return {"release": release, "packages": packages}


def render(releases: tuple[str, ...], cache: Path) -> str:
    majors = {release.split(".")[0]: render_major(release, cache) for release in releases}
    return json.dumps({"schema": 1, "majors": majors}, indent=1, sort_keys=True) + "\n"


def main() -> None:
    releases = tuple(sys.argv[1:]) or RELEASES
    cache = cache_dir() / "cuda-baseline"
    write_text_atomic(OUT, render(releases, cache))
    print(f"wrote {OUT} from CUDA {', '.join(releases)} ({cache})")


if __name__ == "__main__":
    main()
