"""Writes slimwheel/resources/torch-abi.json, what slimwheel.torchext knows of torch, from a torch wheel and PyPI's
metadata of torch releases (PEP 658: no multi-GB downloads):

- the shared libraries of torch/lib (never bundled into an extension's wheel, found through RPATH into torch/lib);
- the stable ABI's C symbols (every AOTI_TORCH_EXPORT function of the C shim headers) with the torch release each
  first appears in, from the headers' `#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0` gates; ungated ones are
  "2.9", the oldest release torch/csrc/stable names as a minimum ("Minimum compatible version: PyTorch 2.9");
- per torch minor release on PyPI: the CUDA version of its default (PyPI) build and its nvidia-* pins.

    python -m devtools.torch_abi torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl 2.9.1 2.10.0 2.11.0
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from devtools.torch_pins import pip_report

OUT = Path(__file__).resolve().parents[1] / "slimwheel" / "resources" / "torch-abi.json"
SHIMS = (
    "torch/include/torch/csrc/inductor/aoti_torch/c/",
    "torch/include/torch/csrc/stable/c/",
    "torch/include/torch/csrc/inductor/aoti_torch/generated/",
)
_GATE = re.compile(r"#\s*if\s+TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_0")
_DECL = re.compile(r"AOTI_TORCH_EXPORT\b[^;{(]*?\b([A-Za-z_]\w*)\s*\(", re.S)
UNGATED = "2.9"


def stable_symbols(text: str) -> dict[str, str]:
    """name -> first release, for each AOTI_TORCH_EXPORT declaration of one header."""
    out: dict[str, str] = {}
    stack: list[str | None] = []
    pending = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            if re.match(r"#\s*if", s):
                m = _GATE.match(s)
                stack.append(f"{m.group(1)}.{m.group(2)}" if m else None)
            elif re.match(r"#\s*(else|elif)", s) and stack:
                stack[-1] = None  # the branch for older targets
            elif re.match(r"#\s*endif", s) and stack:
                stack.pop()
            continue
        pending += line + "\n"
        if ";" in line or "{" in line:
            gates = [g for g in stack if g is not None]
            release = max(gates, key=Version) if gates else UNGATED
            for name in _DECL.findall(pending):
                out.setdefault(name, release)
            pending = ""
    return out


def _metadata(version: str) -> dict[str, object]:
    (torch,) = pip_report("--no-deps", f"torch=={version}")
    meta = torch["metadata"]
    assert isinstance(meta, dict)
    return meta


def _resolved(reqs: list[str]) -> dict[str, str]:
    names = (item["metadata"] for item in pip_report(*reqs))
    return {
        str(m["name"]): str(m["version"]) for m in names if isinstance(m, dict) and str(m["name"]).startswith("nvidia-")
    }


def release(version: str) -> dict[str, object]:
    """The CUDA version of PyPI's build of torch `version` (its nvidia-* runtime pin) and its nvidia-* pins."""
    meta = _metadata(version)
    linux = [Requirement(r) for r in meta.get("requires_dist", []) if "extra" not in r]  # type: ignore[union-attr]
    nvidia = {r.name: str(r.specifier).removeprefix("==") for r in linux if r.name.startswith("nvidia-")}
    toolkit = [r for r in linux if r.name == "cuda-toolkit"]
    if toolkit:  # torch >= 2.11 pins the meta package; its extras pin the components
        nvidia.update(_resolved([str(r).split(";")[0] for r in toolkit]))
    runtime = next(v for k, v in nvidia.items() if k.startswith("nvidia-cuda-runtime"))
    cuda = ".".join(runtime.split(".")[:2])
    return {"version": version, "cuda": cuda, "pins": dict(sorted(nvidia.items()))}


def main() -> None:
    wheel, versions = Path(sys.argv[1]), sys.argv[2:]
    symbols: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        # torch's own libraries; not the libgomp.so.1 it carries (an extension that needs OpenMP brings its own)
        libs = sorted(
            Path(n).name
            for n in names
            if n.startswith("torch/lib/") and re.match(r"lib(c10|torch|caffe2|shm)\w*\.so$", Path(n).name)
        )
        for n in sorted(names):
            if n.startswith(SHIMS) and n.endswith(".h"):
                for sym, rel in stable_symbols(zf.read(n).decode("utf-8")).items():
                    symbols.setdefault(sym, rel)
        version = re.search(r"__version__ = '([^']+)'", zf.read("torch/version.py").decode()).group(1)  # type: ignore[union-attr]
    releases = {".".join(v.split(".")[:2]): release(v) for v in versions}
    data = {
        "schema": 1,
        "from": wheel.name,
        "torch": version,
        "libraries": libs,
        "stable_symbols": dict(sorted(symbols.items())),
        "pypi_releases": releases,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(libs)} libraries, {len(symbols)} stable symbols, releases {', '.join(releases)}")


if __name__ == "__main__":
    main()
