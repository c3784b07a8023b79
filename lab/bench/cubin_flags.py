"""How a cubin's own ELF header names its GPU, checked against the fatbin entry headers that wrap it: the evidence
for `slimwheel.inspect.fatbin.cubin_entry`, which reads standalone `.cubin` files (flashinfer-cubin) by their header
alone, having no fatbin around them.

For every uncompressed SASS entry of every fatbin container in the corpus wheels (testkit/corpus.py, from the
cache; downloaded when missing), the payload's ELF header (ABI version in e_ident[8], e_flags) is read and
`cubin_entry` asked what it says; the fatbin entry header (`parse_fatbin`'s reading of its sm and flags) is the
reference. The JSON counts, per (ABI version, fatbin arch, cubin arch), how many entries there are: where the two
arches differ, the header's reading is wrong for that kind of cubin.

Standalone `.cubin` members of the wheels given with `--wheel` (flashinfer-cubin) have no fatbin around them: their
reference is the `-arch sm_XX` option the toolkit recorded in the cubin's .note.nv.tkinfo note (cuobjdump prints it
as "Tool Command Line Arguments"), `f` dropped (family-specific code is marked nowhere and runs where plain code
does); slimwheel's reading is `read_elf`'s, as size-report, check and slim see the file.

    .venv/bin/python lab/bench/cubin_flags.py              # lab/results/cubin-flags.json
    .venv/bin/python lab/bench/cubin_flags.py --only torchvision,jax
    .venv/bin/python lab/bench/cubin_flags.py --wheel flashinfer_cubin-0.6.13-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import struct
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: testkit (the corpus) and slimwheel
from slimwheel import fsutil
from slimwheel.inspect.elf import read_elf
from slimwheel.inspect.fatbin import cubin_entry
from testkit.corpus import CORPUS, ensure

OUT = REPO / "lab" / "results" / "cubin-flags.json"
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIIIQQQQ")
_EM_CUDA = 190
_TKINFO_ARCH = re.compile(rb"-arch[= ]sm_(\d+[af]?)\b")


def _payloads(data: bytes, offset: int) -> list[tuple[int, int]]:
    """(kind, payload offset) of each entry of the container at `offset`, in order: where the payloads are, which
    slimwheel's parser does not keep."""
    _magic, _v, header_size, fat_size = _HEADER.unpack_from(data, offset)
    p, stop, out = offset + header_size, offset + header_size + fat_size, []
    while p + _ENTRY.size <= stop:
        kind, _ev, ehsize, padded = _ENTRY.unpack_from(data, p)[:4]
        out.append((kind, p + ehsize))
        p += ehsize + padded
    return out


def measure(wheel: Path) -> tuple[Counter[tuple[int, str, str]], int]:
    counts: Counter[tuple[int, str, str]] = Counter()
    skipped = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.file_size < 64:
                continue
            with zf.open(info) as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            data = zf.read(info)
            report = read_elf(data, info.filename)
            for fb in report.fatbins:
                for entry, (kind, at) in zip(fb.entries, _payloads(data, fb.offset), strict=True):
                    if entry.kind != "sass" or kind != 2:
                        continue
                    if entry.compression != "none":
                        skipped += 1  # the cubin's header is compressed with the rest; not read here
                        continue
                    head = data[at : at + 64]
                    if head[:4] != b"\x7fELF" or struct.unpack_from("<H", head, 18)[0] != _EM_CUDA:
                        skipped += 1
                        continue
                    abi, e_flags = head[8], struct.unpack_from("<I", head, 48)[0]
                    counts[(abi, entry.arch, cubin_entry(abi, e_flags, entry.stored_size).arch)] += 1
    return counts, skipped


def measure_standalone(wheel: Path) -> tuple[Counter[tuple[int, str, str]], int]:
    """Per (ABI version, tkinfo's -arch, slimwheel's arch): the standalone cubins of `wheel`; and how many had no
    -arch recorded."""
    counts: Counter[tuple[int, str, str]] = Counter()
    unrecorded = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".cubin"):
                continue
            data = zf.read(info)
            report = read_elf(data, info.filename)
            if report.kind != "cubin":
                continue
            m = _TKINFO_ARCH.search(data)
            if m is None:
                unrecorded += 1
                continue
            (entry,) = report.fatbins[0].entries
            counts[(data[8], m.group(1).decode().removesuffix("f"), entry.arch)] += 1
    return counts, unrecorded


def _breakdown(counts: Counter[tuple[int, str, str]], reference: str) -> dict[str, Any]:
    """Counts per (ABI version, the reference's arch, slimwheel's arch), and how many of them disagree."""
    return {
        "by_abi": [
            {"abi": abi, reference: ref, "cubin_arch": ca, "count": n} for (abi, ref, ca), n in sorted(counts.items())
        ],
        "disagree": sum(n for (_a, ref, ca), n in counts.items() if ref != ca),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated parts of requirements to read")
    ap.add_argument("--wheel", type=Path, action="append", default=[], help="a wheel of standalone .cubin files")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    rows: list[dict[str, Any]] = []
    total: Counter[tuple[int, str, str]] = Counter()
    for w in CORPUS:
        if only and not any(s in w.requirement for s in only):
            continue
        t = time.perf_counter()
        counts, skipped = measure(ensure(w))
        total.update(counts)
        part = _breakdown(counts, "fatbin_arch")
        rows.append(
            {
                "requirement": w.requirement,
                "entries": sum(counts.values()),
                "compressed_or_not_elf": skipped,
                "by_abi_fatbin_cubin": part["by_abi"],
                "disagree": part["disagree"],
                "s": round(time.perf_counter() - t, 1),
            }
        )
        print(f"{w.requirement:34} {rows[-1]['entries']:6} cubins, {part['disagree']:5} disagree", flush=True)
    standalone: list[dict[str, Any]] = []
    for path in args.wheel:
        t = time.perf_counter()
        counts, unrecorded = measure_standalone(path)
        part = _breakdown(counts, "tkinfo_arch")
        standalone.append(
            {
                "wheel": path.name,
                "cubins": sum(counts.values()),
                "no_arch_recorded": unrecorded,
                "by_abi_tkinfo_cubin": part["by_abi"],
                "disagree": part["disagree"],
                "s": round(time.perf_counter() - t, 1),
            }
        )
        print(f"{path.name}: {standalone[-1]['cubins']} cubins, {part['disagree']} disagree", flush=True)
    whole = _breakdown(total, "fatbin_arch")
    doc: dict[str, Any] = {
        "schema": 1,
        "machine": f"this project's CPU machine ({platform.machine()}, {len(os.sched_getaffinity(0))} cores)",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "lab/bench/cubin_flags.py"
        + (f" --only {args.only}" if only else "")
        + "".join(f" --wheel {p.name}" for p in args.wheel),
        "wheels": rows,
        "standalone": standalone,
        "total": {
            "entries": sum(total.values()),
            "disagree": whole["disagree"],
            "disagreements": [c for c in whole["by_abi"] if c["fatbin_arch"] != c["cubin_arch"]],
        },
    }
    fsutil.write_text_atomic(OUT, json.dumps(doc, indent=1) + "\n")
    print(f"{doc['total']['entries']} cubins, {doc['total']['disagree']} disagree; {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
