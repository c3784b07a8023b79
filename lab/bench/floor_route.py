#!/usr/bin/env python3
"""The platform floor of each build route, measured on this machine, and the README's manylinux/distro lines.

    python lab/bench/floor_route.py [--faiss-src TARBALL] [--pypi-faiss WHEEL] [--out lab/results/floor-route.json]
    python lab/bench/floor_route.py --table lab/results/floor-route.json     # the README lines, from the JSON
    python lab/bench/floor_route.py --judge-release WHEEL --name TEXT        # add one release wheel to the JSON

Routes for examples/knn (one target, 7.5, so each build takes ~30 s on 2 cores): `host` (this machine's GCC and
glibc) and `sysroot-debian11` (`[tool.slimwheel] sysroot = "debian11"`). For each: build seconds, the tag repair
gave, the floor slimwheel reads, `auditwheel show`'s tag, `check --manylinux 2_28` and `2_31`, and the load probe in
the Debian 11 root (its own ld.so, glibc, libstdc++). The sysroot's assembly (seconds, bytes) is measured in a fresh
folder. The container's repair and audit commands (`slimwheel.container`, as cibuildwheel would run them) are run
on the sysroot route's raw wheel, as a stand-in for the manylinux_2_28 image.

With --faiss-src: ten of faiss 1.15's CPU sources and one CUDA source compiled with the sysroot (g++ and nvcc
-ccbin), linked into one library: whether GCC 10 builds faiss and which symbol versions faiss's code needs.
With --pypi-faiss: PyPI's faiss-gpu 1.15.1 wheel checked the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slimwheel import floor
from slimwheel.inspect.elf import read_elf_file
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.toolkit.sysroot import ensure_sysroot

CLI = [sys.executable, "-m", "slimwheel"]
# glibc of the distributions GPU servers run (each distribution's own package version): what a manylinux_2_X wheel
# installs on is every one with glibc >= 2.X (pip compares the glibc version; libstdc++ of these is new enough).
DISTROS = {
    "RHEL/Rocky 8": "2.28",
    "Debian 11": "2.31",
    "Ubuntu 20.04": "2.31",
    "RHEL/Rocky 9": "2.34",
    "Amazon Linux 2023": "2.34",
    "Ubuntu 22.04": "2.35",
    "Debian 12": "2.36",
    "Ubuntu 24.04": "2.39",
}
FAISS_FILES = [
    "faiss/IndexFlat.cpp",
    "faiss/utils/distances.cpp",
    "faiss/impl/ProductQuantizer.cpp",
    "faiss/IndexIVFPQ.cpp",
    "faiss/utils/utils.cpp",
    "faiss/IndexHNSW.cpp",
    "faiss/index_factory.cpp",
    "faiss/Clustering.cpp",
    "faiss/utils/random.cpp",
    "faiss/impl/ScalarQuantizer.cpp",
]


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def installs_on(tag_glibc: str) -> list[str]:
    need = tuple(int(x) for x in tag_glibc.split("."))
    return [d for d, g in DISTROS.items() if tuple(int(x) for x in g.split(".")) >= need]


def judge_wheel(wheel: Path, sysroot: Any, lib_dirs: list[Path]) -> dict[str, Any]:
    report = inspect_wheel(wheel)
    f = floor.wheel_floor(report.elfs)
    show = _run([sys.executable, "-m", "auditwheel", "show", str(wheel)])
    text = " ".join(show.stdout.split())
    import re

    m = re.search(r'"(manylinux_\d+_\d+)_x86_64"', text)
    out: dict[str, Any] = {
        "wheel": wheel.name,
        "bytes": wheel.stat().st_size,
        "floor": f.name if f else None,
        "auditwheel_show": m.group(1) if m else f"(none: rc {show.returncode})",
    }
    for target in ("2_28", "2_31"):
        chk = _run([*CLI, "check", "--no-dependencies", "--require-arch", "none", "--manylinux", target, str(wheel)])
        out[f"check_manylinux_{target}"] = {
            "rc": chk.returncode,
            "failures": [ln.strip() for ln in chk.stdout.splitlines() if "platform (exit" in ln][:8],
        }
    with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(wheel) as z:
        z.extractall(d)
        probes = {}
        for so in sorted(Path(d).rglob("*.so*")):
            if so.is_file() and read_elf_file(so, so.name, fatbins=False) is not None:
                probes[str(so.relative_to(d))] = sysroot.load_probe(so, [*lib_dirs, so.parent])
        out["debian11_load_probe"] = probes
    return out


def build_knn(route: str, toolkit_root: Path, work: Path) -> tuple[Path, float, str]:
    out = work / route
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    if route != "host":
        env["SLIMWHEEL_SYSROOT"] = route.removeprefix("sysroot-")
    t = time.monotonic()
    proc = _run(
        [
            *CLI,
            "build",
            str(REPO / "examples" / "knn"),
            "--archs",
            "7.5",
            "--cuda",
            "13.0",
            "--toolkit",
            str(toolkit_root),
            "--out-dir",
            str(out),
        ],
        env=env,
    )
    secs = round(time.monotonic() - t, 1)
    if proc.returncode != 0:
        raise SystemExit(f"{route}: build failed\n{proc.stdout}\n{proc.stderr}")
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        mod = next(n for n in z.namelist() if n.endswith(".so"))
        z.extract(mod, work / f"{route}-mod")
    comment = _run(["readelf", "-p", ".comment", str(work / f"{route}-mod" / mod)]).stdout
    compiler = next((ln.split("]", 1)[1].strip() for ln in comment.splitlines() if "GCC:" in ln), "?")
    return wheel, secs, compiler


def container_standin(sysroot: Any, toolkit_root: Path, work: Path) -> dict[str, Any]:
    """The container's repair-wheel-command and audit-command (cibuildwheel's placeholders filled) on the raw wheel
    of examples/knn built with the sysroot's compiler."""
    from slimwheel import build as buildmod
    from slimwheel import config as cfgmod
    from slimwheel import container
    from slimwheel.cuda.versions import CudaVersion

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIMWHEEL_") or k == "SLIMWHEEL_CACHE"}
    env.update(CMAKE_BUILD_PARALLEL_LEVEL="2")
    project = REPO / "examples" / "knn"
    cfg = cfgmod.load(
        project, env, {"cuda": "13.0", "toolkit": str(toolkit_root), "archs": "7.5", "sysroot": "debian11"}
    )
    raw_dir, dest = work / "container-raw", work / "container-repaired"
    setup = buildmod.prepare(project, cfg, env=env, wheel_dir=raw_dir, build_dir=work / "container-build")
    run_env = dict(env)
    run_env.update(setup.env)
    proc = _run(list(setup.command), env=run_env)
    if proc.returncode != 0:
        raise SystemExit(f"container stand-in: raw build failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (raw,) = raw_dir.glob("*.whl")
    repair = container.repair_command(cfg, CudaVersion(13, 0))
    audits = container.audit_commands(cfg, setup.plan.arch.wanted)
    dest.mkdir(parents=True, exist_ok=True)
    slim = f"{sys.executable} -m slimwheel"
    r = _run(
        [
            "bash",
            "-c",
            repair.replace("{dest_dir}", str(dest)).replace("{wheel}", str(raw)).replace("slimwheel ", slim + " ", 1),
        ]
    )
    (fixed,) = dest.glob("*.whl") if r.returncode == 0 else (raw,)
    a = _run(["bash", "-c", audits[0].replace("{wheel}", str(fixed)).replace("slimwheel ", slim + " ", 1)])
    return {
        "raw_wheel": raw.name,
        "repair_command": repair,
        "repair_rc": r.returncode,
        "repaired_wheel": fixed.name,
        "audit_command": audits[0],
        "audit_rc": a.returncode,
        "audit_output": a.stdout.strip().splitlines()[-4:],
        "not_run": "before-all (cuda13.sh: needs the image's /opt/python/cp312-cp312 and installs slimwheel with pip "
        "inside it; its toolkit step, `slimwheel toolkit --cuda 13.0`, is what the builds above used), abi3audit "
        "(the wheel is cp311, not abi3), the test-command in a container",
    }


def faiss_probe(src: Path, sysroot: Any, toolkit_root: Path, work: Path) -> dict[str, Any]:
    tree = work / "faiss"
    with tarfile.open(src) as t:
        t.extractall(tree, filter="data")
    (root,) = [p for p in tree.iterdir() if p.is_dir()]
    objs: list[str] = []
    failed: list[str] = []
    t0 = time.monotonic()
    for f in FAISS_FILES:
        o = work / (f.replace("/", "_") + ".o")
        p = _run(
            [
                str(sysroot.cxx),
                "-std=c++17",
                "-O3",
                "-fPIC",
                "-fopenmp",
                "-mavx2",
                "-mfma",
                "-DFINTEGER=int",
                "-I.",
                "-c",
                f,
                "-o",
                str(o),
            ],
            cwd=root,
        )
        (objs if p.returncode == 0 else failed).append(str(o) if p.returncode == 0 else f)
    host_s = round(time.monotonic() - t0, 1)
    cu = work / "DeviceUtils.o"
    t1 = time.monotonic()
    p = _run(
        [
            str(toolkit_root / "bin" / "nvcc"),
            "-ccbin",
            str(sysroot.cxx),
            "-std=c++17",
            "-O3",
            "-Xcompiler",
            "-fPIC",
            "-arch=sm_75",
            "-I.",
            f"-I{toolkit_root / 'include'}",
            "-c",
            "faiss/gpu/utils/DeviceUtils.cu",
            "-o",
            str(cu),
        ],
        cwd=root,
    )
    nvcc_s = round(time.monotonic() - t1, 1)
    if p.returncode != 0:
        failed.append("faiss/gpu/utils/DeviceUtils.cu")
    lib = work / "libfaiss_probe.so"
    link = _run(
        [
            str(sysroot.cxx),
            "-shared",
            "-fopenmp",
            "-o",
            str(lib),
            *objs,
            *([str(cu)] if cu.exists() else []),
            f"-L{toolkit_root / 'lib'}",
            "-lcudart",
        ]
    )
    out: dict[str, Any] = {
        "files": [*FAISS_FILES, "faiss/gpu/utils/DeviceUtils.cu"],
        "failed": failed,
        "host_seconds": host_s,
        "nvcc_seconds": nvcc_s,
        "link_rc": link.returncode,
    }
    if link.returncode == 0:
        r = read_elf_file(lib, lib.name, fatbins=False)
        assert r is not None
        found = floor.wheel_floor([r])
        out["floor"] = found.name if found else None
        out["over_2_28"] = [o.message("manylinux_2_28") for o in floor.offenders([r], floor.parse_target("2_28"))]
        out["versions"] = sorted({v.version for v in r.version_needs})
    return out


def installed_probe(wheel: Path, beside: list[Path], nvidia: Path, sysroot: Any) -> dict[str, list[str]]:
    """Debian 11's loader on every ELF file of `wheel` as installed: the wheel and `beside` (its requirements' wheels,
    scipy-openblas32) unpacked into one site-packages, `nvidia/` linked to the CUDA 13.0 toolkit's nvidia-* wheels,
    so that each file's own RPATH ($ORIGIN/../nvidia/cu13/lib, $ORIGIN/../scipy_openblas32/lib) finds them."""
    with tempfile.TemporaryDirectory(prefix="installed-") as d:
        site = Path(d)
        for w in [wheel, *beside]:
            with zipfile.ZipFile(w) as z:
                z.extractall(site)
        (site / "nvidia").symlink_to(nvidia)
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if ".so" in n.rsplit("/", 1)[-1]]
        return {n: sysroot.load_probe(site / n) for n in sorted(names) if read_elf_file(site / n, n, fatbins=False)}


def judge_release(wheel: Path, name: str, release_check: str, beside: list[Path]) -> dict[str, Any]:
    """judge_wheel for one release wheel, probed as installed beside its requirements (`installed_probe`), and the
    release's own check, verbatim."""
    from slimwheel.cuda.versions import CudaVersion
    from slimwheel.toolkit import ensure_toolkit

    tk = ensure_toolkit(CudaVersion(13, 0))
    sysroot = ensure_sysroot("debian11")
    out = {"name": name, **judge_wheel(wheel, sysroot, [Path(d) for d in tk.lib_dirs])}
    nvidia = tk.root / "site" / "nvidia"  # the toolkit's nvidia-* wheels, installed as pip lays them out
    if not (nvidia / "cu13" / "lib").is_dir():
        raise SystemExit(f"{nvidia}/cu13/lib missing: the CUDA 13.0 toolkit of this machine is not from PyPI wheels")
    out["debian11_load_probe"] = installed_probe(wheel, beside, nvidia, sysroot)
    out["debian11_load_probe_beside"] = [w.name for w in beside]
    cmd = [*CLI, "check", *release_check.split(), str(wheel)]
    chk = _run(cmd)
    out["release_check"] = {
        "command": "slimwheel check " + release_check + " " + wheel.name,
        "rc": chk.returncode,
        "output": chk.stdout.splitlines() + chk.stderr.splitlines(),
    }
    return out


def measure(a: argparse.Namespace) -> dict[str, Any]:
    from slimwheel.cuda.versions import CudaVersion
    from slimwheel.toolkit import ensure_toolkit

    tk = ensure_toolkit(CudaVersion(13, 0))
    lib_dirs = [Path(d) for d in tk.lib_dirs]
    data: dict[str, Any] = {
        "schema": 1,
        "machine": f"this machine: 2-core Debian 12 CPU box (glibc {os.confstr('CS_GNU_LIBC_VERSION')})",
        "distros_glibc": DISTROS,
    }
    with tempfile.TemporaryDirectory(prefix="floor-route-") as d:
        work = Path(d)
        t = time.monotonic()
        fresh = ensure_sysroot("debian11", into=work / "fresh-sysroot")
        size = sum(p.stat().st_size for p in fresh.root.rglob("*") if p.is_file() and not p.is_symlink())
        data["sysroot"] = {
            **fresh.to_json(),
            "assemble_seconds": round(time.monotonic() - t, 1),
            "unpacked_bytes": size,
        }
        data["sysroot"].pop("root"), data["sysroot"].pop("env")
        sysroot = ensure_sysroot("debian11")
        data["routes"] = {}
        for route in ("host", "sysroot-debian11"):
            wheel, secs, compiler = build_knn(route, tk.root, work)
            data["routes"][route] = {
                "project": "examples/knn (--archs 7.5)",
                "build_seconds": secs,
                "compiler": compiler,
                **judge_wheel(wheel, sysroot, lib_dirs),
            }
        data["container_standin"] = container_standin(sysroot, tk.root, work)
        if a.faiss_src:
            data["faiss_sysroot_probe"] = faiss_probe(a.faiss_src, sysroot, tk.root, work)
        if a.pypi_faiss:
            data["pypi_faiss_gpu_1_15_1"] = judge_wheel(a.pypi_faiss, sysroot, lib_dirs)
    return data


def table(data: dict[str, Any]) -> str:
    """README lines: each faiss wheel's tag and the distributions it installs on."""
    rows = ["| faiss wheel | manylinux tag (auditwheel show) | installs on (glibc) |", "| --- | --- | --- |"]

    def line(name: str, tag: str, note: str = "") -> str:
        glibc = tag.removeprefix("manylinux_").replace("_", ".")
        on = ", ".join(f"{d} ({data['distros_glibc'][d]})" for d in installs_on(glibc)) or "none of these"
        return f"| {name} | `{tag}`{note} | {on} |"

    pypi = data.get("pypi_faiss_gpu_1_15_1")
    if pypi:
        plat = pypi["wheel"].removesuffix(".whl").split("-")[-1].replace("_x86_64", "").split(".")
        rows.append(
            line(
                "PyPI faiss-gpu 1.15.1 (Meta, manylinux_2_28 image)",
                pypi["auditwheel_show"],
                f" (file tags: {', '.join(plat)})",
            )
        )
    ours = data.get("ours_faiss")
    if ours:
        rows.append(line(ours["name"], ours["tag"]))
    for judged in data.get("judged", {}).values():  # --judge-release, in the order they were added
        rows.append(line(judged["name"], judged["auditwheel_show"]))
    # faiss_sysroot_probe (ten CPU files and one CUDA file linked, before the cap) stays in the JSON; a judged wheel
    # built the same way says more, so it is no row.
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faiss-src", type=Path)
    ap.add_argument("--pypi-faiss", type=Path)
    ap.add_argument(
        "--ours-faiss",
        nargs=2,
        metavar=("NAME", "TAG"),
        help="our faiss wheel's name and tag, from the GPU machine's results (its wheel is not here)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "lab" / "results" / "floor-route.json")
    ap.add_argument("--table", type=Path, help="print the README lines from this JSON and exit")
    ap.add_argument(
        "--judge-release",
        type=Path,
        metavar="WHEEL",
        help="judge one release wheel (auditwheel show, check --manylinux, Debian 11 load probe, the release check) "
        "and add it to --out under judged/<name>, leaving the rest of the JSON as it is",
    )
    ap.add_argument("--name", default="", help="with --judge-release: the table's name for the wheel")
    ap.add_argument(
        "--beside",
        type=Path,
        nargs="*",
        default=[],
        help="with --judge-release: wheels its requirements install (scipy-openblas32), unpacked beside it",
    )
    ap.add_argument(
        "--release-check",
        default="--budget 60MiB --require-arch 7.5-12.0 --manylinux 2_28",
        help="with --judge-release: the check options of the release",
    )
    a = ap.parse_args()
    if a.table:
        print(table(json.loads(a.table.read_text())))
        return
    if a.judge_release:
        data = json.loads(a.out.read_text())
        name = a.name or a.judge_release.name
        got = judge_release(a.judge_release, name, a.release_check, a.beside)
        data.setdefault("judged", {})[name] = got
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(a.out)
        print(json.dumps(got, indent=2))
        return
    data = measure(a)
    if a.ours_faiss:
        data["ours_faiss"] = {"name": a.ours_faiss[0], "tag": a.ours_faiss[1]}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(a.out)
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
