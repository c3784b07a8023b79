"""Measure how a Tile IR entry looks inside a fatbin (for slimwheel/inspect/fatbin.py's kind table).

Exports a small cuTile kernel as Tile IR bytecode with the `cuda-tile` package (no GPU needed), wraps it with a
CUDA 13 toolkit's `fatbinary --image3=kind=tileir,sm=100`, and records the entry header, what `cuobjdump -all` says,
and the whole fatbin as hex. Writes results/tileir-fatbin.json.
    python scripts/tileir-fatbin.py --tile-python /path/to/venv-with-cuda-tile/bin/python [--cuda 13.5]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slimwheel.fsutil import write_text_atomic
from slimwheel.toolkit import ensure_toolkit

EXPORT = """\
import sys
import cuda.tile as ct
from cuda.tile import compilation as cc

@ct.kernel
def scale(x, y):
    pid = ct.bid(0)
    t = ct.load(x, index=(pid,), shape=(16,))
    ct.store(y, index=(pid,), tile=t * 2)

arr = cc.ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                         may_alias_internally=False)
sig = cc.KernelSignature([arr, arr], calling_convention=cc.CallingConvention.cutile_python_v1())
cc.export_kernel(scale, [sig], sys.argv[1], output_format="tileir_bytecode", bytecode_version="13.3")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tile-python", required=True, help="a Python with `cuda-tile` installed")
    ap.add_argument("--cuda", default="13.5")
    ap.add_argument("--out", type=Path, default=Path("results/tileir-fatbin.json"))
    args = ap.parse_args()
    tk = ensure_toolkit(args.cuda)
    with tempfile.TemporaryDirectory() as tmp:
        bc, fb = Path(tmp) / "scale.tileirbc", Path(tmp) / "scale.fatbin"
        export = Path(tmp) / "export.py"  # cuTile reads the kernel's source: a file, not `python -c`
        export.write_text(EXPORT)
        subprocess.run([args.tile_python, str(export), str(bc)], check=True)
        magic = bc.read_bytes()[:8].hex()
        subprocess.run([str(tk.root / "bin" / "fatbinary"), f"--create={fb}",
                        f"--image3=kind=tileir,sm=100,file={bc}"], check=True)  # fmt: skip
        dump = subprocess.run([str(tk.root / "bin" / "cuobjdump"), "-all", str(fb)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        data = fb.read_bytes()
        tile_version = subprocess.run([args.tile_python, "-c", "import cuda.tile; print(cuda.tile.__version__)"],
                                      capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    kind, version, header = struct.unpack_from("<HHI", data, 16)
    fields = dict(re.findall(r"^(\w[\w ]*?) = (.*)$", dump, re.M))
    doc = {
        "schema": 1,
        "command": "python scripts/tileir-fatbin.py --tile-python <venv with cuda-tile>/bin/python",
        "machine": f"{platform.node()} ({platform.machine()})",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "toolkit": str(tk.version),
        "cuda_tile": tile_version,
        "bytecode_magic": magic,  # the bytecode file's first 8 bytes: b"\\x7fTileIR\\0"
        "entry_kind": kind,
        "entry_version": version,
        "entry_header_size": header,
        "cuobjdump": {"title": dump.strip().splitlines()[0], **fields},
        "fatbin_hex": data.hex(),
    }
    write_text_atomic(args.out, json.dumps(doc, indent=2) + "\n")
    print(f"Tile IR fatbin entry: kind {kind:#x}, header {header} bytes; cuobjdump: {doc['cuobjdump']['title']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
