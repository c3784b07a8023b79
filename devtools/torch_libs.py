"""Writes slimwheel/resources/torch-lib.json: per PyPI torch release and Linux machine, the shared libraries its wheel
ships in torch/lib and which of them `import torch` loads, read from PyPI without downloading the wheels.

Each wheel is read through HTTP range requests: its zip central directory (about 1 MB of a 100-900 MB wheel) lists
torch/lib; for the import closure the stored bytes of each library are inflated only up to the end of its dynamic
section and string table (`needed`). The closure starts where `import torch` starts: torch/__init__.py opens
torch/lib/libtorch_global_deps.so, then imports torch/_C (its DT_NEEDED pulls in libtorch_python.so, libtorch.so,
...); a library counts as loaded at import when a chain of DT_NEEDED from those two reaches it, under the name that
chain asks for (the loader matches that name later: a NEEDED libgomp.so.1 of another library finds it loaded).
Libraries are read smallest first and reading stops once every shipped library is placed or the closure is read;
members over MAX_READ (libtorch_cuda.so, 300-650 MB stored) are never read, so what only they need stays unproven.

    python -m devtools.torch_libs 2.4.1 2.5.1 2.6.0 2.7.1 2.8.0 2.9.1 2.10.0 2.11.0
"""

from __future__ import annotations

import io
import json
import re
import struct
import sys
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from slimwheel import pypindex

OUT = Path(__file__).resolve().parents[1] / "slimwheel" / "resources" / "torch-lib.json"
# PEP 691's JSON form of the simple index: every file of a project with its URL. (PyPI's per-version JSON API,
# /pypi/torch/<version>/json, answered 404 from this machine for 2.10.0 while /pypi/torch/json answered.)
INDEX = "https://pypi.org/simple/torch/"
MACHINES = ("x86_64", "aarch64")
PYTHON = "cp312"  # the wheel whose libraries are read; the other Python versions' torch/lib must list the same files
MAX_READ = 200 * 2**20  # stored bytes of one library, at most
MAX_WHEEL_READ = 4 * 2**30  # bytes fetched of one wheel in all: its directory and the libraries read (torch: ~1 GB)
_SHARED = re.compile(r"\.so(\.\d+)*$")
# A wheel's file name: torch-VERSION[-BUILD]-PY-ABI-PLATFORM.whl
_WHEEL = re.compile(
    r"^torch-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


def wheels(files: list[dict[str, object]], version: str, machine: str) -> list[tuple[str, str]]:
    """(file name, URL) of the Linux wheels of `version` for `machine`, of the highest build number (pip prefers it:
    torch 2.10.0 has '-3' rebuilds for x86_64)."""
    found: dict[tuple[str, str], tuple[int, str, str]] = {}
    for f in files:
        m = _WHEEL.match(str(f["filename"]))
        if not m or m["version"] != version or "linux" not in m["plat"] or not m["plat"].endswith(f"_{machine}"):
            continue
        build = int(re.match(r"\d+", m["build"]).group()) if m["build"] else 0  # type: ignore[union-attr]
        key = (m["py"], m["abi"])
        if key not in found or build > found[key][0]:
            found[key] = (build, str(f["filename"]), str(f["url"]))
    return sorted((name, url) for _b, name, url in found.values())


def lib_files(names: list[str]) -> list[str]:
    """The shared libraries directly in torch/lib, by file name."""
    return sorted(n[len("torch/lib/") :] for n in names if re.fullmatch(r"torch/lib/[^/]+", n) and _SHARED.search(n))


def needed(read: Callable[[int], bytes | bytearray]) -> list[str]:
    """DT_NEEDED of a 64-bit little-endian ELF file, through `read(n)`: its first n bytes. Only the program headers,
    the dynamic segment and the string table it names are used: the section headers lie at the end of the file."""
    head = read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    phoff, phentsize, phnum = struct.unpack_from("<Q", head, 32)[0], *struct.unpack_from("<HH", head, 54)
    ph = read(phoff + phentsize * phnum)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _f, off, vaddr, _pa, filesz, _m, _a = struct.unpack_from("<IIQQQQQQ", ph, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((vaddr, off, filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (off, filesz)
    if dynamic is None:
        return []
    data = read(dynamic[0] + dynamic[1])
    entries = [struct.unpack_from("<qQ", data, dynamic[0] + i) for i in range(0, dynamic[1], 16)]
    tags: dict[int, int] = {}
    wanted = []
    for tag, val in entries:
        if tag == 0:
            break
        if tag == 1:
            wanted.append(val)
        tags.setdefault(tag, val)
    strtab = next(off + tags[5] - vaddr for vaddr, off, size in loads if vaddr <= tags[5] < vaddr + size)
    data = read(strtab + tags[10])
    return [data[strtab + v : data.index(b"\0", strtab + v)].decode() for v in wanted]


def member_needed(zf: zipfile.ZipFile, name: str) -> list[str]:
    """`needed` of a member, inflating its stored bytes only as far as asked."""
    with zf.open(name) as f:
        got = bytearray()

        def read(n: int) -> bytearray:
            while len(got) < n:
                chunk = f.read(max(n - len(got), 1 << 20))
                if not chunk:
                    raise ValueError(f"{name}: ends at {len(got)} bytes, {n} needed")
                got.extend(chunk)
            return got  # at least n bytes; copying 450 MB for each look would cost more than the inflating

        return needed(read)


def closure(
    roots: list[str], shipped: list[str], sizes: Mapping[str, int], read: Callable[[str], list[str]]
) -> tuple[dict[str, str], list[str]]:
    """(loaded: torch/lib file -> the file whose DT_NEEDED names it, unread: members of the closure not read).
    `roots`: members (torch/_C..., torch/lib/...); `read(member)`: its DT_NEEDED. Smallest first; stops once every
    shipped library is placed."""
    # a root in torch/lib (libtorch_global_deps.so) is opened by torch/__init__.py itself
    loaded = {r.rsplit("/", 1)[-1]: "torch/__init__.py" for r in roots if r.startswith("torch/lib/")}
    queue = list(roots)
    seen = set(roots)
    unread = []
    while queue and len(loaded) < len(shipped):
        queue.sort(key=lambda m: sizes[m])
        member = queue.pop(0)
        if sizes[member] > MAX_READ:
            unread.append(member.rsplit("/", 1)[-1])
            continue
        for n in read(member):
            if n in shipped and n not in loaded:
                loaded[n] = member.rsplit("/", 1)[-1]
                if (m := f"torch/lib/{n}") not in seen:
                    seen.add(m)
                    queue.append(m)
    unread += [m.rsplit("/", 1)[-1] for m in queue if sizes[m] > MAX_READ]
    return dict(sorted(loaded.items())), sorted(set(unread))


def release(files: list[dict[str, object]], version: str, machine: str) -> dict[str, object] | None:
    found = wheels(files, version, machine)
    if not found:
        return None
    listings = {}
    for name, url in found:
        zf = zipfile.ZipFile(io.BufferedReader(pypindex.RangeReader(url, limit=MAX_WHEEL_READ), 1 << 20))
        listings[name] = lib_files(zf.namelist())
        if name.split("-")[-3] == PYTHON:
            chosen, chosen_zf = name, zf
    if len({tuple(v) for v in listings.values()}) != 1:
        raise SystemExit(f"torch {version} {machine}: torch/lib differs between Python versions: {listings}")
    shipped = listings[chosen]
    infos = {i.filename: i.compress_size for i in chosen_zf.infolist()}
    roots = [n for n in infos if re.fullmatch(r"torch/_C\.[^/]*\.so", n)] + ["torch/lib/libtorch_global_deps.so"]
    loaded, unread = closure(roots, shipped, infos, lambda m: member_needed(chosen_zf, m))
    fetched = chosen_zf.fp.raw.fetched  # type: ignore[union-attr]
    print(f"torch {version} {machine}: {len(found)} wheels, {fetched / 2**20:.0f} MiB of {chosen} read", flush=True)
    return {"wheel": chosen, "wheels": len(found), "files": shipped, "loaded": loaded, "unread": unread}


def main() -> None:
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        files = json.load(r)["files"]
    releases = {}
    for version in sys.argv[1:]:
        minor = ".".join(version.split(".")[:2])
        machines = {m: got for m in MACHINES if (got := release(files, version, m)) is not None}
        releases[minor] = {"version": version, "machines": machines}
    data = {"schema": 1, "from": INDEX, "releases": releases}
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: releases {', '.join(releases)}")


if __name__ == "__main__":
    main()
