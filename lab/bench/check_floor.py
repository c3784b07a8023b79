"""What `check` cannot save over `size-report` (issue 36 item 1), measured on this machine from one run: the RECORD
verdict hashes every member, and the routes that would hide that hash behind the inflation.

For each wheel given (default: the corpus wheels of jax-cuda13-pjrt, nvidia-cudnn-cu13 and cuda-cccl):
- SHA-256 throughput of this machine (hashlib, 200 MiB) against ISA-L's inflate of the wheel's largest member;
- the largest member inflated in one call (size-report's route), one call then hashed (check's), and inflated in steps
  into an anonymous map while another thread hashes each step (a pipelined route), each the best of `--repeat`;
- every member under 1 MiB inflated with ISA-L's and with zlib's decompressobj (the small-member route).
Ratios are against the one-call inflate measured in the same run. Nothing is written: it prints.

    .venv/bin/python lab/bench/check_floor.py
    .venv/bin/python lab/bench/check_floor.py --repeat 5 path/to/wheel.whl
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import struct
import sys
import threading
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: testkit (the corpus)
from isal import isal_zlib

from testkit import corpus

DEFAULT = ("jax-cuda13-pjrt", "nvidia-cudnn-cu13", "cuda-cccl")


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _raw(mm: mmap.mmap, info: zipfile.ZipInfo) -> bytes:
    """The member's compressed bytes (a copy: the map closes with the file)."""
    name_len, extra_len = struct.unpack_from("<HH", mm, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len
    return mm[start : start + info.compress_size]


def _one_call(raw: bytes, size: int) -> bytes:
    out: bytes = isal_zlib.decompressobj(-15).decompress(raw, size + 1)
    isal_zlib.crc32(out)
    return out


def _stepped_hashed(raw: bytes, size: int) -> str:
    """Inflate in 1 MiB steps into an anonymous map; another thread hashes each step as it lands."""
    d = isal_zlib.decompressobj(-15)
    dest = mmap.mmap(-1, max(size, 1))
    view = memoryview(dest)
    steps: SimpleQueue[memoryview | None] = SimpleQueue()
    h = hashlib.sha256()

    def hasher() -> None:
        while (block := steps.get()) is not None:
            h.update(block)

    t = threading.Thread(target=hasher)
    t.start()
    pos, crc = 0, 0
    for k in range(0, len(raw), 256 << 10):
        data = raw[k : k + (256 << 10)]
        while data:
            out = d.decompress(data, 1 << 20)
            if out:
                crc = isal_zlib.crc32(out, crc)
                view[pos : pos + len(out)] = out
                steps.put(view[pos : pos + len(out)])
                pos += len(out)
            data = d.unconsumed_tail
    steps.put(None)
    t.join()
    digest = h.hexdigest()
    view.release()
    dest.close()
    return digest


def measure(wheel: Path, repeat: int) -> None:
    print(f"{wheel.name}")
    with zipfile.ZipFile(wheel) as z, open(wheel, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        infos = [i for i in z.infolist() if i.compress_type == zipfile.ZIP_DEFLATED]
        big = max(infos, key=lambda i: i.file_size)
        raw = _raw(mm, big)
        one = _best(lambda: _one_call(raw, big.file_size), repeat)
        hashed = _best(lambda: hashlib.sha256(_one_call(raw, big.file_size)).digest(), repeat)
        stepped = _best(lambda: _stepped_hashed(raw, big.file_size), repeat)
        mib = big.file_size / 2**20
        print(f"  largest member {big.filename.rsplit('/', 1)[-1]}: {mib:.0f} MiB, inflated at {mib / one:.0f} MiB/s")
        print(f"    one call (size-report)           {one:.3f} s  1.00")
        print(f"    one call, then SHA-256 (check)   {hashed:.3f} s  {hashed / one:.2f}")
        print(f"    steps into a map, hashed beside  {stepped:.3f} s  {stepped / one:.2f}")
        small = [(_raw(mm, i), i.file_size) for i in infos if i.file_size < 1 << 20]
        if len(small) >= 100:
            isal = _best(lambda: [isal_zlib.decompressobj(-15).decompress(r, n + 1) for r, n in small], repeat)
            plain = _best(lambda: [zlib.decompressobj(-15).decompress(r, n + 1) for r, n in small], repeat)
            print(f"  {len(small)} members under 1 MiB: ISA-L {isal * 1000:.0f} ms, zlib {plain * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheels", nargs="*", type=Path, help="wheels (default: three corpus wheels)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data = os.urandom(1 << 20) * 200
    t = _best(lambda: hashlib.sha256(data).digest(), args.repeat)
    print(f"SHA-256 (hashlib): {200 / t:.0f} MiB/s on this machine ({os.cpu_count()} CPUs)")
    wheels = args.wheels or [corpus.ensure(w) for w in corpus.CORPUS if w.requirement.split("==")[0] in DEFAULT]
    for w in wheels:
        measure(w, args.repeat)


if __name__ == "__main__":
    main()
