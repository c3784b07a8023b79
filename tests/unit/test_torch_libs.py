"""devtools/torch_libs.py (what PyPI's torch wheels ship in torch/lib and load at import) and its table,
slimwheel/resources/torch-lib.json. The generator reads PyPI; these tests read no network."""

from __future__ import annotations

import struct

from devtools import torch_libs
from slimwheel import torchext


def _elf(needed: list[str], *, base: int = 0x400000) -> bytes:
    """An ELF64 with program headers only (no section headers, as the front of a library is): one PT_LOAD that maps
    the file at `base`, and PT_DYNAMIC with DT_NEEDED, DT_STRTAB (an address) and DT_STRSZ."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in needed)
    offs = [1 + sum(len(n) + 1 for n in needed[:i]) for i in range(len(needed))]
    str_at = 64 + 2 * 56
    dyn_at = str_at + len(strtab) + (-(str_at + len(strtab)) % 8)
    tags = [(1, o) for o in offs] + [(5, base + str_at), (10, len(strtab)), (0, 0)]
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    total = dyn_at + len(dyn)
    head = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    head += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 1, 4, 0, base, base, total, total, 0x1000)
    ph += struct.pack("<IIQQQQQQ", 2, 6, dyn_at, base + dyn_at, base + dyn_at, len(dyn), len(dyn), 8)
    body = strtab + b"\0" * (dyn_at - str_at - len(strtab))
    return head + ph + body + dyn


def test_needed_reads_the_dynamic_segment_through_its_address() -> None:
    data = _elf(["libtorch_cpu.so", "libgomp.so.1"])
    asked: list[int] = []

    def read(n: int) -> bytes:
        asked.append(n)
        assert n <= len(data)  # never more than the file: the generator inflates only as far as asked
        return data[:n]

    assert torch_libs.needed(read) == ["libtorch_cpu.so", "libgomp.so.1"]
    assert max(asked) == len(data)


def test_closure_follows_needed_from_the_roots_under_the_names_asked_for() -> None:
    needs = {
        "torch/_C.so": ["libtorch_python.so"],
        "torch/lib/libtorch_global_deps.so": ["libgomp-a34b3233.so.1"],
        "torch/lib/libtorch_python.so": ["libtorch_cpu.so", "libtorch_cuda.so"],
        "torch/lib/libtorch_cpu.so": ["libarm_compute.so", "libc.so.6"],
        "torch/lib/libarm_compute.so": [],
        "torch/lib/libgomp-a34b3233.so.1": [],
    }
    shipped = [n.rsplit("/", 1)[-1] for n in needs if n.startswith("torch/lib/")] + [
        "libtorch_cuda.so",
        "libjitbackend_test.so",  # shipped, needed by nothing: never loaded at import
    ]
    sizes = {n: 1 for n in needs} | {"torch/lib/libtorch_cuda.so": torch_libs.MAX_READ + 1}
    read: list[str] = []

    def needs_of(member: str) -> list[str]:
        read.append(member)
        return needs[member]

    loaded, unread = torch_libs.closure(["torch/_C.so", "torch/lib/libtorch_global_deps.so"], shipped, sizes, needs_of)
    assert loaded == {
        "libarm_compute.so": "libtorch_cpu.so",
        "libgomp-a34b3233.so.1": "libtorch_global_deps.so",
        "libtorch_cpu.so": "libtorch_python.so",
        "libtorch_cuda.so": "libtorch_python.so",
        "libtorch_global_deps.so": "torch/__init__.py",
        "libtorch_python.so": "_C.so",
    }
    assert unread == ["libtorch_cuda.so"] and "torch/lib/libtorch_cuda.so" not in read


def test_the_highest_build_of_each_wheel_is_read() -> None:
    base = "https://files.pythonhosted.org/x/"
    names = [
        "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.10.0-3-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        "torch-2.10.0-cp312-cp312-win_amd64.whl",
        "torch-2.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.10.0.tar.gz",
    ]
    files: list[dict[str, object]] = [{"filename": n, "url": base + n} for n in names]
    assert torch_libs.wheels(files, "2.10.0", "x86_64") == [(names[1], base + names[1])]
    assert torch_libs.wheels(files, "2.10.0", "aarch64") == [(names[2], base + names[2])]
    assert torch_libs.lib_files(["torch/lib/libgomp.so.1", "torch/lib/libc10.so", "torch/lib/libshm/x.h", "a.so"]) == [
        "libc10.so",
        "libgomp.so.1",
    ]


def test_the_table_covers_the_releases_of_the_pins_table_and_has_its_shape() -> None:
    table = torchext.shipped_libs()
    for rel in torchext.pypi_releases():  # devtools/torch_abi.py's releases: the same versions, read here too
        assert {s.version for s in table[rel.minor].values()} == {rel.version}
    for minor, machines in table.items():
        assert set(machines) == {"x86_64", "aarch64"}, minor
        for s in machines.values():
            assert {"libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so"} <= set(s.files)
            assert set(s.loaded) <= set(s.files)  # loaded from torch/lib, under a file's name
            assert {"libtorch_python.so", "libtorch_cpu.so", "libc10.so"} <= set(s.loaded)
            assert all(by in s.files or by.startswith("_C.") or by == "torch/__init__.py" for by in s.loaded.values())


def test_pypis_x86_64_torch_loads_libgomp_unrenamed_from_2_7() -> None:
    """Read from PyPI on 2026-12-02: torch 2.4-2.6 ship auditwheel's libgomp-a34b3233.so.1, 2.7-2.11 libgomp.so.1;
    libtorch_global_deps.so needs it."""
    table = torchext.shipped_libs()
    for minor in ("2.4", "2.5", "2.6"):
        assert "libgomp.so.1" not in table[minor]["x86_64"].loaded
        assert table[minor]["x86_64"].loaded["libgomp-a34b3233.so.1"] == "libtorch_global_deps.so"
    for minor in ("2.7", "2.8", "2.9", "2.10", "2.11"):
        assert table[minor]["x86_64"].loaded["libgomp.so.1"] == "libtorch_global_deps.so"
