#!/usr/bin/env python3
"""A slimmed NVIDIA library wheel on a real GPU: cuRAND from `slimwheel slim --archs 9.0 nvidia_curand-*.whl` against
the same release's unslimmed libcurand.so.10, on the same GPU, bit for bit (issue 22: `slim` on NVIDIA's own wheels).

    python3 lab/gpu/curand_check.py --slim DIR --orig DIR [--out DIR]    # DIR: a folder holding libcurand.so.10

Each library runs in a process of its own (ctypes; device memory through the CUDA runtime the machine's nvidia-* wheels
bring), for every host-API generator (XORWOW, MRG32k3a, MTGP32, Philox4_32_10, MT19937, Sobol32, scrambled Sobol32,
Sobol64) and the distributions uniform, normal, log-normal and Poisson; a run prints the SHA-256 of each output. The
check passes when both libraries give the same digests for every case, and fails when the slim one is refused
("no kernel image") or differs. Writes curand_h200.json under --out ($OUT by default).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

N = 1 << 20
SEED = 1234
GENERATORS = {  # curandRngType_t
    "XORWOW": 101,
    "MRG32K3A": 121,
    "MTGP32": 141,
    "MT19937": 142,
    "PHILOX4_32_10": 161,
    "SOBOL32": 201,
    "SCRAMBLED_SOBOL32": 202,
    "SOBOL64": 203,
}
QUASI = {"SOBOL32", "SCRAMBLED_SOBOL32", "SOBOL64"}
# (case, host-API function, arguments after (generator, output, n), bytes per value)
CASES = (
    ("uniform", "curandGenerateUniform", (), 4),
    ("normal", "curandGenerateNormal", (ctypes.c_float(0.0), ctypes.c_float(1.0)), 4),
    ("lognormal", "curandGenerateLogNormalDouble", (ctypes.c_double(0.0), ctypes.c_double(0.5)), 8),
    ("poisson", "curandGeneratePoisson", (ctypes.c_double(3.5),), 4),
)
SOBOL64_CASES = (("uniform_double", "curandGenerateUniformDouble", (), 8),)  # 64-bit quasi: the double entry points


def _cudart() -> ctypes.CDLL:
    import nvidia  # type: ignore[import-untyped]  # the machine's nvidia-* wheels (torch's); untyped

    for p in nvidia.__path__:
        lib = Path(p) / "cu13" / "lib" / "libcudart.so.13"
        if lib.exists():
            return ctypes.CDLL(str(lib))
    raise SystemExit("no libcudart.so.13 among the nvidia-* wheels")


def run_one(libdir: Path) -> dict[str, str]:
    """Digests of every case, with the libcurand.so.10 in `libdir` (this process loads no other)."""
    cudart = _cudart()
    curand = ctypes.CDLL(str(libdir / "libcurand.so.10"))
    out: dict[str, str] = {}
    dev = ctypes.c_void_p()
    if cudart.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(N * 8)) != 0:
        raise SystemExit("cudaMalloc failed")
    host = (ctypes.c_ubyte * (N * 8))()
    for name, kind in GENERATORS.items():
        gen = ctypes.c_void_p()
        rc = curand.curandCreateGenerator(ctypes.byref(gen), kind)
        if rc != 0:
            out[name] = f"curandCreateGenerator: {rc}"
            continue
        if name in QUASI:
            curand.curandSetQuasiRandomGeneratorDimensions(gen, 4)
        else:
            curand.curandSetPseudoRandomGeneratorSeed(gen, ctypes.c_ulonglong(SEED))
        cases = SOBOL64_CASES if name == "SOBOL64" else CASES
        for case, fn, args, width in cases:
            rc = getattr(curand, fn)(gen, dev, ctypes.c_size_t(N), *args)
            sync = cudart.cudaDeviceSynchronize()
            if rc != 0 or sync != 0:
                out[f"{name}/{case}"] = f"error: curand {rc}, cudaDeviceSynchronize {sync}"
                continue
            cudart.cudaMemcpy(host, dev, ctypes.c_size_t(N * width), 2)  # device to host
            out[f"{name}/{case}"] = hashlib.sha256(bytes(host)[: N * width]).hexdigest()
        curand.curandDestroyGenerator(gen)
    cudart.cudaFree(dev)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slim", type=Path)
    ap.add_argument("--orig", type=Path)
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one)))
        return 0
    runs = {}
    for label, d in (("orig", a.orig), ("slim", a.slim)):
        p = subprocess.run([sys.executable, __file__, "--one", str(d)], capture_output=True, text=True, timeout=600)
        runs[label] = (
            json.loads(p.stdout) if p.returncode == 0 else {"process": f"rc {p.returncode}: {p.stderr[-2000:]}"}
        )
    cases = sorted(set(runs["orig"]) | set(runs["slim"]))
    # A case both libraries refuse alike (a distribution a generator does not offer) is the same answer; it is
    # listed, and at least one case must have produced numbers.
    same = [c for c in cases if runs["orig"].get(c) == runs["slim"].get(c)]
    refused = [c for c in same if str(runs["orig"][c]).startswith(("error", "curand"))]
    report = {
        "n": N,
        "seed": SEED,
        "cases": len(cases),
        "identical": len(same),
        "refused_by_both": refused,
        "differ": [c for c in cases if c not in same],
        "runs": runs,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "curand_h200.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"curand: {len(same)} of {len(cases)} cases identical; differ: {report['differ']}")
    return 0 if len(same) == len(cases) and len(same) > len(refused) else 1


if __name__ == "__main__":
    sys.exit(main())
