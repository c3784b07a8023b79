#!/usr/bin/env python3
"""On a GPU machine: which wheel uv 0.13.8 installs from a `slimwheel variants` folder by the real GPU (issue 38
item 1), with nothing forced: the NVIDIA provider built into uv reads the GPU and the driver itself.

    python3 lab/gpu/variants_uv.py DIR [--project NAME] [--uv PATH] [--out DIR]
    python3 lab/gpu/variants_uv.py --wheel nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64.whl DIR

DIR is the output folder of `slimwheel variants` (its simple/ pages, wheels and *-variants.json); with --wheel it is
made first (`python -m slimwheel variants`, the slimwheel this interpreter imports). uv: --uv, else the `uv` package
this interpreter imports (the test extras pin 0.13.8), else `uv` on PATH. The script:

- records the GPUs and the driver (nvidia-smi) and what the variants JSON says each variant needs;
- works out which variant the provider's rules give this machine (sm_arch X{Y..0}_real or X0_virtual of the GPU's
  compute capability X.Y, and cuda_version_lower_bound <= the driver's CUDA version), else the universal wheel;
- installs with `uv pip install --preview-features wheel-variants --index-url DIR/simple` into a fresh venv, with no
  NV_VARIANT_PROVIDER_* variable set, and with uv's debug log kept; then again without the preview flag;
- reads which wheel landed (the installed variant.json's label, none for the universal wheel);
- for nvidia-curand-cu12, runs lab/gpu/curand_check.py --one on the installed library (needs the machine's CUDA 13
  runtime wheels, as that script does): a variant for another GPU fails there with "no kernel image".

Prints one line per install and writes variants_uv.json (and uv-debug.log) under --out ($OUT by default). Exit 0 when
uv installed what the rules give this GPU and (if run) cuRAND produced numbers; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def find_uv(given: str | None) -> str:
    if given:
        return given
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if not found:
            raise SystemExit("no uv: pass --uv PATH or install uv==0.13.8") from None
        return found
    return str(find_uv_bin())


def gpus() -> dict[str, Any]:
    """Compute capabilities of the visible GPUs and the driver's CUDA version, as nvidia-smi reports them."""
    q = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [[c.strip() for c in line.split(",")] for line in q.stdout.strip().splitlines()]
    banner = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True).stdout
    cuda = banner.split("CUDA Version:", 1)[1].split()[0] if "CUDA Version:" in banner else None
    return {"gpus": [{"name": r[0], "cc": r[1], "driver": r[2]} for r in rows], "driver_cuda": cuda}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def expected(variants: dict[str, Any], cc: str, driver_cuda: str | None) -> str | None:
    """The label the NVIDIA provider's rules give a GPU of `cc` with this driver; None: the universal wheel. uv's
    provider reads the highest compute capability among the GPUs, as the reference provider does."""
    major, minor = (int(p) for p in cc.split("."))
    offered = {f"{major}{m}_real" for m in range(minor + 1)} | {f"{major}0_virtual"}
    fits = []
    for label, props in variants.items():
        nv = props.get("nvidia", {})
        if not offered & set(nv.get("sm_arch", [])):
            continue
        bounds = nv.get("cuda_version_lower_bound", [])
        if bounds and (driver_cuda is None or all(_version(b) > _version(driver_cuda) for b in bounds)):
            continue
        fits.append(label)
    if len(fits) > 1:  # slimwheel's families never overlap; another tool's might, and uv would order them
        raise SystemExit(f"{cc}: several variants fit ({', '.join(fits)}): this script expects one per GPU family")
    return fits[0] if fits else None


def landed(venv: Path, project: str) -> str | None:
    dist_glob = f"{project.replace('-', '_')}-*.dist-info"
    (dist,) = (venv / "lib").glob(f"python3.*/site-packages/{dist_glob}")
    vj = dist / "variant.json"
    if not vj.is_file():
        return None
    (label,) = json.loads(vj.read_text())["variants"]
    return str(label)


def install(uv: str, venv: Path, simple: Path, project: str, *, preview: bool, log: Path | None) -> str | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NV_VARIANT_PROVIDER_", "UV_"))}
    env.update(UV_OFFLINE="1", UV_NO_CONFIG="1", UV_CACHE_DIR=str(venv.parent / "uv-cache"))
    if log is not None:
        env["RUST_LOG"] = "uv=debug"
    cmd = [uv, "pip", "install", "--reinstall", "--no-deps", "--python", str(venv / "bin" / "python")]
    cmd += ["--preview-features", "wheel-variants"] if preview else []
    proc = subprocess.run([*cmd, "--index-url", simple.as_uri(), project], capture_output=True, text=True, env=env)
    if log is not None:
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"uv failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return landed(venv, project)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--wheel", type=Path, help="make DIR first with `slimwheel variants WHEEL`")
    ap.add_argument("--project", help="default: the one project under DIR/simple")
    ap.add_argument("--uv")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.wheel:
        cmd = [sys.executable, "-m", "slimwheel", "variants", "--offline", "-o", str(a.dir), str(a.wheel)]
        subprocess.run(cmd, check=True)
    simple = a.dir.resolve() / "simple"
    project = a.project or next(p.name for p in simple.iterdir() if p.is_dir())
    (index,) = a.dir.glob("*-variants.json")
    variants = json.loads(index.read_text())["variants"]
    uv = find_uv(a.uv)
    machine = gpus()
    top = max((g["cc"] for g in machine["gpus"]), key=_version)
    want = expected(variants, top, machine["driver_cuda"])
    record: dict[str, Any] = {
        "uv": subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip(),
        **machine,
        "project": project,
        "variants": variants,
        "expected": want,
    }
    with tempfile.TemporaryDirectory(prefix="variants-uv-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        record["landed"] = install(uv, venv, simple, project, preview=True, log=a.out / "uv-debug.log")
        print(
            f"uv --preview-features wheel-variants, GPU {top}, driver CUDA {machine['driver_cuda']}: "
            f"{record['landed'] or 'universal'} (expected {want or 'universal'})"
        )
        ok = record["landed"] == want
        if project == "nvidia-curand-cu12":
            (libdir,) = (venv / "lib").glob("python3.*/site-packages/nvidia/curand/lib")
            run = subprocess.run(
                [os.environ.get("CURAND_PYTHON", "python3"), str(HERE / "curand_check.py"), "--one", str(libdir)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            digests = (
                json.loads(run.stdout)
                if run.returncode == 0
                else {"process": f"rc {run.returncode}: {run.stderr[-2000:]}"}
            )
            numbers = [c for c, d in digests.items() if not str(d).startswith(("error", "curand", "rc "))]
            record["curand"] = {"cases": len(digests), "with_numbers": len(numbers), "runs": digests}
            print(f"cuRAND from the installed wheel: {len(numbers)} of {len(digests)} cases produced numbers")
            ok = ok and bool(numbers)
        record["landed_without_preview"] = install(uv, venv, simple, project, preview=False, log=None)
        print(f"uv without the preview flag: {record['landed_without_preview'] or 'universal'}")
        ok = ok and record["landed_without_preview"] is None
    record["ok"] = ok
    (a.out / "variants_uv.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
