#!/usr/bin/env python3
"""slimwheel/nvrtc.hpp end to end on a GPU: compile, disk cache, load, launch, and planted or broken cache files.

Runs the `gpu_check` program of tests/packages/nvrtc-embed (built there or carried) in fresh processes against one
cache folder, tampering with the folder between runs; every run must compute the right top-k, and a tampered file
must never be loaded (the kernel is compiled again). Needs libnvrtc.so.13 (the nvidia-cuda-nvrtc wheel).

    python3 tests/gpu/nvrtc_cache_check.py --binary build/gpu_check [--out $OUT]      # writes nvrtc_cache_gpu.json

tests/gpu/test_nvrtc_gpu.py runs the same checks (run_checks) under pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def find_nvrtc() -> Path:
    for entry in sys.path:
        lib = Path(entry) / "nvidia/cu13/lib/libnvrtc.so.13"
        if entry and lib.is_file():
            return lib
    raise SystemExit("libnvrtc.so.13 not found in an nvidia/cu13/lib folder on sys.path: pip install nvidia-cuda-nvrtc")


def run_checks(binary: Path, nvrtc: Path, scratch: Path) -> list[dict[str, Any]]:
    cache = scratch / "cache"
    results: list[dict[str, Any]] = []

    def run(step: str, k: int, expect: dict[str, Any], cache_env: str | None = None) -> dict[str, Any]:
        env = dict(os.environ, SLIMWHEEL_NVRTC_CACHE=cache_env or str(cache))
        r = subprocess.run([str(binary), str(nvrtc), str(k)], check=False, capture_output=True, text=True, env=env)
        try:
            got: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            got = {"error": (r.stdout + r.stderr)[-2000:]}
        ok = r.returncode == 0 and got.get("correct") is True and all(got.get(key) == v for key, v in expect.items())
        row = {"step": step, "ok": ok, "expect": expect, "got": got}
        results.append(row)
        print(json.dumps(row), flush=True)
        return got

    def only_file(k_files: set[Path]) -> Path:
        (path,) = set(cache.glob("*.slwk")) - k_files
        return path

    run("empty cache: compiled", 256, {"from_cache": False, "cache_enabled": True})
    a = only_file(set())
    got = run("new process: from the disk cache", 256, {"from_cache": True})
    results[-1]["under_10_ms"] = got.get("ready_ms", 1e9) < 10

    data = bytearray(a.read_bytes())
    data[-100] ^= 0x01
    a.write_bytes(bytes(data))
    run("one flipped byte in the cubin: compiled again", 256, {"from_cache": False})
    run("the file was replaced: from the cache again", 256, {"from_cache": True})

    run("another kernel (K=64)", 64, {"from_cache": False})
    b = only_file({a})
    a.write_bytes(b.read_bytes())  # a valid entry, planted under the wrong key
    run("a valid entry of another key planted: compiled again", 256, {"from_cache": False})

    a.write_bytes(a.read_bytes()[:500])
    run("a truncated file: compiled again", 256, {"from_cache": False})

    cache.chmod(0o777)
    run("cache folder writable by everyone: refused", 256, {"from_cache": False, "cache_enabled": False})
    cache.chmod(0o700)
    run("SLIMWHEEL_NVRTC_CACHE=off", 256, {"from_cache": False, "cache_enabled": False}, cache_env="off")
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", type=Path, required=True)
    ap.add_argument("--nvrtc", type=Path)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nvrtc-cache-gpu-") as tmp:
        results = run_checks(a.binary.resolve(), (a.nvrtc or find_nvrtc()).resolve(), Path(tmp))
    ok = all(r["ok"] for r in results) and all(r.get("under_10_ms", True) for r in results)
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / "nvrtc_cache_gpu.json"
    tmp_out = out.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps({"schema": 1, "ok": ok, "checks": results}, indent=2) + "\n")
    os.replace(tmp_out, out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
