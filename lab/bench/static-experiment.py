#!/usr/bin/env python3
"""The seed experiment, reproduced: how large is a statically linked cuBLAS library, and what makes it smaller?

Builds, in one run, link variants of one small cuBLAS-calling CUDA library (tests/packages/static-knn/src/knn.cu)
with CUDA 11.8 (scripts/setup-cuda11.sh) and g++-11, for the same GPU targets:

    dynamic                  libcublas.so.11 + libcudart.so.11.0 (the wheel then requires nvidia-*-cu11)
    static, unpruned         CMake's usual static link: archives as shipped, default visibility, no section GC
    static, unpruned, group  the same inside --start-group/--end-group (does link order matter?)
    static, unpruned, tuned  dependency order, --exclude-libs,ALL, --gc-sections, --as-needed, strip
    static, pruned           nvprune'd archives (slimwheel.prune), usual link
    static, pruned, tuned    nvprune'd archives, tuned link (what `slimwheel build --link static` does)
    + the tuned, pruned link for narrower plans (--extra-plans), to show what the GPU list costs

Each .so is checked with readelf/nm (DT_NEEDED, exported symbols, cuBLAS symbols present but local) and with
slimwheel.inspect (fatbin entries per target); each is packed into a real wheel (`wheel pack`) and its size taken.
Writes lab/results/static-experiment.json and prints a Markdown table. Run: python lab/bench/static-experiment.py
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slimwheel import fsutil
from slimwheel.cuda.arch import ArchPlan, explicit_plan
from slimwheel.cuda.versions import CudaVersion
from slimwheel.inspect.report import target_totals
from slimwheel.inspect.scan import inspect_binary
from slimwheel.prune import PruneResult, prune_libraries, result_to_json
from slimwheel.toolkit import ensure_toolkit
from slimwheel.toolkit.model import Toolkit

log = logging.getLogger("static-experiment")

SOURCE = REPO / "tests/packages/static-knn/src/knn.cu"
PACKAGE_INIT = REPO / "tests/packages/static-knn/src/static_knn/__init__.py"
ARCHIVES = ("libcublas_static.a", "libcublasLt_static.a", "libculibos.a", "libcudart_static.a")
SYSTEM_LIBS = ("-ldl", "-lrt", "-lpthread")
TUNED_FLAGS = ("-Wl,--exclude-libs,ALL", "-Wl,--gc-sections", "-Wl,--as-needed")
# The dynamic wheel's run-time dependencies (the -cu11 wheels of the CUDA 11.8 libraries it links).
DYNAMIC_REQUIRES = ("nvidia-cublas-cu11==11.11.3.6", "nvidia-cuda-runtime-cu11==11.8.89")


@dataclass
class Variant:
    name: str
    link: str  # dynamic | static
    pruned: bool
    flags: str  # plain | group | tuned
    targets: str
    so_bytes: int = 0
    wheel_bytes: int = 0
    link_seconds: float = 0.0
    needed: list[str] = field(default_factory=list)
    exported: int = 0
    exported_cuda: list[str] = field(default_factory=list)
    cublas_symbols: int = 0  # cuBLAS C API symbols defined in .symtab (before strip): the static copy is there
    cublas_symbols_local: int = 0  # ... of which local (not visible to other libraries in the process)
    fatbin_bytes: int = 0
    fatbin_entries: list[dict[str, object]] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, float]:
    """Runs cmd (niced: the build machine is shared), returns (stdout, seconds); raises with stderr on failure."""
    t0 = time.monotonic()
    proc = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, env=env, cwd=cwd, check=False)
    dt = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"static-experiment: {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    log.debug("%.1f s: %s", dt, " ".join(cmd))
    return proc.stdout, dt


def compile_object(tk: Toolkit, plan: ArchPlan, out: Path, env: dict[str, str]) -> float:
    cmd = [
        str(tk.nvcc),
        "-ccbin",
        str(tk.host_compiler),
        "-O2",
        "-Xfatbin=-compress-all",
        "-Xcompiler=-fPIC,-fvisibility=hidden,-ffunction-sections,-fdata-sections",
        *plan.nvcc_gencode,
        "-c",
        str(SOURCE),
        "-o",
        str(out),
    ]
    return run(cmd, env=env)[1]


def link(tk: Toolkit, v: Variant, obj: Path, libdir: Path, out: Path) -> float:
    """Links one variant; a tuned link is stripped afterwards (timed with it), after nm has seen its symbols."""
    cxx = str(tk.host_compiler)
    libs = [str(libdir / a) for a in ARCHIVES]
    if v.link == "dynamic":
        cmd = [cxx, "-shared", "-o", str(out), str(obj), f"-L{libdir}", "-lcublas", "-lcudart", "-Wl,--no-undefined"]
    elif v.flags == "group":
        cmd = [cxx, "-shared", "-o", str(out), str(obj), "-Wl,--start-group", *libs, "-Wl,--end-group", *SYSTEM_LIBS]
    elif v.flags == "plain":
        cmd = [cxx, "-shared", "-o", str(out), str(obj), *libs, *SYSTEM_LIBS]
    else:
        # --no-undefined proves the dependency order needs no --start-group.
        cmd = [cxx, "-shared", "-o", str(out), str(obj), *TUNED_FLAGS, "-Wl,--no-undefined", *libs, *SYSTEM_LIBS]
    return run(cmd)[1]


def check_symbols(v: Variant, so: Path) -> None:
    """DT_NEEDED, exported symbols (and any CUDA ones among them), cuBLAS symbols in .symtab that are local."""
    dyn, _ = run(["readelf", "-dW", str(so)])
    v.needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    exported, _ = run(["nm", "-D", "--defined-only", str(so)])
    names = [line.split()[-1] for line in exported.splitlines() if line.strip()]
    v.exported = len(names)
    v.exported_cuda = sorted(n for n in names if re.match(r"_*(cublas|cuda|cudart|cuLibOs|cublasLt)", n))[:20]
    if v.link == "static":
        symtab, _ = run(["nm", "--defined-only", str(so)])
        defined = [ln for ln in symtab.splitlines() if re.search(r" [TtDdBbRr] cublas", ln)]
        v.cublas_symbols = len(defined)
        v.cublas_symbols_local = sum(1 for ln in defined if re.search(r" [tdbr] cublas", ln))


def inspect_fatbins(v: Variant, so: Path) -> None:
    rep = inspect_binary(so)
    v.sections = {k: s for k, s in rep.sections.items() if s > 100_000}
    v.fatbin_bytes = rep.sections.get(".nv_fatbin", 0)
    entries = [e for fb in rep.fatbins for e in fb.entries]
    v.fatbin_entries = [
        {"kind": t.kind, "arch": t.arch, "count": t.count, "stored": t.stored, "uncompressed": t.uncompressed}
        for t in target_totals(entries)
    ]


def pack_wheel(v: Variant, so: Path, work: Path, python: str) -> int:
    """A real wheel of the static-knn package around this .so (`wheel pack` writes RECORD); returns its size."""
    root = work / f"wheel-{v.name}"
    shutil.rmtree(root, ignore_errors=True)
    pkg = root / "static_knn"
    info = root / "static_knn-0.1.0.dist-info"
    pkg.mkdir(parents=True)
    info.mkdir()
    shutil.copy2(PACKAGE_INIT, pkg / "__init__.py")
    shutil.copy2(so, pkg / "_static_knn.so")
    requires = "".join(f"Requires-Dist: {r}\n" for r in DYNAMIC_REQUIRES) if v.link == "dynamic" else ""
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: static-knn\nVersion: 0.1.0\n{requires}")
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: static-experiment\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
    )
    dest = work / "wheels" / v.name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    run([python, "-m", "wheel", "pack", "-d", str(dest), str(root)])
    (whl,) = dest.glob("*.whl")
    with zipfile.ZipFile(whl) as z:
        assert any(i.filename == "static_knn/_static_knn.so" for i in z.infolist())
    return whl.stat().st_size


def markdown(variants: list[Variant], meta: Mapping[str, object]) -> str:
    def mb(n: int) -> str:
        return f"{n / 1e6:.1f}" if n >= 10**6 else f"{n / 1e6:.3f}"

    lines = [
        (
            f"CUDA {meta['cuda']} (nvcc, nvprune {meta['nvprune']}), host compiler {meta['host_compiler']}; "
            f"measured on {meta['machine']} by `python lab/bench/static-experiment.py` (MB = 10^6 bytes)."
        ),
        "",
        (
            "| variant | targets | .so (MB) | .nv_fatbin (MB) | wheel (MB) | link (s) | DT_NEEDED CUDA "
            "| exported symbols | cublas* symbols (local) |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for v in variants:
        cuda_needed = ", ".join(n for n in v.needed if re.match(r"lib(cu|nv)", n)) or "none"
        lines.append(
            f"| {v.name} | {v.targets} | {mb(v.so_bytes)} | {mb(v.fatbin_bytes)} | {mb(v.wheel_bytes)} | "
            f"{v.link_seconds:.1f} | {cuda_needed} | {v.exported} | {v.cublas_symbols} ({v.cublas_symbols_local}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--targets", default="75-real;80-real;90", help="GPU targets, CMake style (default: Turing+PTX 9.0)"
    )
    ap.add_argument(
        "--extra-plans", default="80-real;90|90", help="narrower target lists for the tuned, pruned link, '|'-separated"
    )
    ap.add_argument("--out", type=Path, default=REPO / "lab/results/static-experiment.json")
    ap.add_argument("--work", type=Path, default=None, help="build folder (default: a temporary one, removed)")
    ap.add_argument("--keep", type=Path, default=None, help="copy the tuned, pruned .so of --targets here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")

    t_all = time.monotonic()
    tk = ensure_toolkit(CudaVersion(11, 8))
    env = {**os.environ, **tk.env}
    work = args.work or Path(tempfile.mkdtemp(prefix="static-experiment-"))
    work.mkdir(parents=True, exist_ok=True)
    sysdir = tk.lib_dirs[0]
    variants: list[Variant] = []
    prunes: dict[str, PruneResult] = {}
    timings: dict[str, float] = {}
    try:
        plans = [args.targets, *[p for p in args.extra_plans.split("|") if p]]
        objs: dict[str, Path] = {}
        for spec in plans:
            plan = explicit_plan(spec, supported=tk.supported)
            obj = work / f"knn-{re.sub(r'[^0-9a-z]+', '_', spec)}.o"
            timings[f"compile {spec}"] = compile_object(tk, plan, obj, env)
            objs[spec] = obj
            t0 = time.monotonic()
            prunes[spec] = prune_libraries(tk, plan.targets, ("cublas", "cudart"))
            timings[f"prune {spec}"] = time.monotonic() - t0
            log.info(
                "%s: compiled in %.1f s, pruned in %.1f s", spec, timings[f"compile {spec}"], timings[f"prune {spec}"]
            )

        main_spec = args.targets
        variants = [
            Variant("dynamic", "dynamic", False, "plain", main_spec),
            Variant("static, unpruned", "static", False, "plain", main_spec),
            Variant("static, unpruned, group", "static", False, "group", main_spec),
            Variant("static, unpruned, tuned link", "static", False, "tuned", main_spec),
            Variant("static, pruned", "static", True, "plain", main_spec),
            Variant("static, pruned, tuned link", "static", True, "tuned", main_spec),
            *[Variant(f"static, pruned, tuned link ({s})", "static", True, "tuned", s) for s in plans[1:]],
        ]
        for v in variants:
            libdir = prunes[v.targets].libdir if v.pruned else sysdir
            so = work / f"{re.sub(r'[^0-9a-z]+', '_', v.name)}.so"
            v.link_seconds = link(tk, v, objs[v.targets], libdir, so)
            check_symbols(v, so)
            if v.flags == "tuned":
                _, dt = run(["strip", "--strip-all", str(so)])
                v.link_seconds += dt
            v.so_bytes = so.stat().st_size
            inspect_fatbins(v, so)
            v.wheel_bytes = pack_wheel(v, so, work, sys.executable)
            log.info(
                "%-45s .so %7.1f MB  wheel %7.1f MB  link %5.1f s  needed %s  exported %d",
                v.name,
                v.so_bytes / 1e6,
                v.wheel_bytes / 1e6,
                v.link_seconds,
                ",".join(v.needed),
                v.exported,
            )
            if args.keep and v.name == "static, pruned, tuned link":
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy2(so, args.keep / "_static_knn.so")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    nvprune_v = next(iter(prunes.values())).nvprune_version
    meta = {
        "cuda": str(tk.version),
        "nvprune": nvprune_v,
        "host_compiler": Path(str(tk.host_compiler)).name,
        "machine": f"{platform.machine()} Debian 12, {os.cpu_count()} cores (shared)",
    }
    data = {
        "schema": 1,
        "meta": meta,
        "source": str(SOURCE.relative_to(REPO)),
        "seconds_total": round(time.monotonic() - t_all, 1),
        "timings": {k: round(s, 2) for k, s in timings.items()},
        "prune": {spec: result_to_json(r) for spec, r in prunes.items()},
        "variants": [
            {**{k: getattr(v, k) for k in v.__dataclass_fields__}, "link_seconds": round(v.link_seconds, 2)}
            for v in variants
        ],
    }
    fsutil.write_text_atomic(args.out, json.dumps(data, indent=1) + "\n")
    print(markdown(variants, meta))
    print(f"\nwritten: {args.out} ({data['seconds_total']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
