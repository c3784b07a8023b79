"""Synthetic fatbins and ELF files built byte by byte, for unit tests and fuzzing (no compiler needed).

The layouts follow slimwheel.inspect.fatbin's docstring and the ELF64 specification; the integration tests check
the same readers against nvcc's real output and cuobjdump.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

KIND = {"ptx": 1, "sass": 2, "lto-ir": 8}
FLAG_64BIT_LINUX = 0x11


def fatbin_entry(
    *,
    kind: str | int = "sass",
    sm: int = 90,
    flags: int = FLAG_64BIT_LINUX,
    payload: bytes = b"\0" * 64,
    compressed_size: int = 0,
    uncompressed_size: int = 0,
    ptx_isa: tuple[int, int] = (9, 0),
    header_size: int = 64,
    padded_size: int | None = None,
) -> bytes:
    k = KIND[kind] if isinstance(kind, str) else kind
    verword = (ptx_isa[0] << 16 | ptx_isa[1]) if k == 1 else 0x00010008
    padded = len(payload) if padded_size is None else padded_size
    head = struct.pack(
        "<HHIQIIIIQQQQ",
        k,
        0x0101,
        header_size,
        padded,
        compressed_size,
        0x40 if header_size > 64 else 0,
        verword,
        sm,
        0,
        flags,
        0,
        uncompressed_size,
    )
    return head + b"\0" * (header_size - 64) + payload


def fatbin(entries: Iterable[bytes], *, fat_size: int | None = None) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body) if fat_size is None else fat_size) + body


def pad8(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 8)


def elf(
    *,
    sections: Mapping[str, bytes] = {},
    needed: Iterable[str] = (),
    soname: str | None = None,
    rpath: str | None = None,
    runpath: str | None = None,
    e_type: int = 3,  # ET_DYN
    load_segment: bool = False,
    dynamic_segment: bool = False,
    symbols: Iterable[str] = (),
    imports: Mapping[str, Iterable[tuple[str, str]]] = {},
    verneed: bytes | None = None,
    undefined: Iterable[str] = (),
    symtab: Iterable[str] = (),
) -> bytes:
    """An ELF64 little-endian x86_64 file with .dynamic/.dynstr, the given PROGBITS sections and .shstrtab.

    With `load_segment`, one PT_LOAD maps the whole file at virtual address 0 (address == file offset).
    `dynamic_segment` adds that PT_LOAD and a PT_DYNAMIC over .dynamic, whose array then points the loader at its
    tables (DT_STRTAB, DT_STRSZ, DT_SYMTAB, DT_VERSYM, DT_VERNEED) as a linker writes it.
    `symbols` become defined global functions in a .dynsym section. `imports` (library -> (symbol, version) pairs)
    become undefined symbols bound to GNU versions: .gnu.version and .gnu.version_r, as a linker writes them;
    `verneed` replaces the .gnu.version_r bytes (hostile chains).
    `undefined` become undefined symbols with no version (taken from another file).
    `symtab` become defined functions (STT_FUNC) in a .symtab section, where a cubin keeps its kernels' symbols.
    """
    dynstr = b"\0"
    tags: list[tuple[int, int]] = []

    def s(text: str) -> int:
        nonlocal dynstr
        off = len(dynstr)
        dynstr += text.encode() + b"\0"
        return off

    for n in needed:
        tags.append((1, s(n)))
    if soname:
        tags.append((14, s(soname)))
    if rpath:
        tags.append((15, s(rpath)))
    if runpath:
        tags.append((29, s(runpath)))
    dynsym = b"\0" * 24  # the null symbol
    for name in symbols:  # Elf64_Sym: name, info (STB_GLOBAL << 4 | STT_FUNC), other, shndx (defined), value, size
        dynsym += struct.pack("<IBBHQQ", s(name), 0x12, 0, 1, 0, 0)
    versym = [0] * (1 + len(list(symbols)))  # defined ones: VER_NDX_LOCAL... (0) is what matters: not a need
    vn = b""
    index = 2  # 0 and 1 are VER_NDX_LOCAL and VER_NDX_GLOBAL
    libs = list(imports.items())
    for li, (lib, pairs) in enumerate(libs):
        pairs = list(pairs)
        versions = list(dict.fromkeys(v for _s, v in pairs))
        ndx = {}
        aux = b""
        for vi, ver in enumerate(versions):
            ndx[ver] = index
            # Vernaux: hash, flags, other (the index), name, next (16 bytes on; 0 for the last)
            aux += struct.pack("<IHHII", 0, 0, index, s(ver), 16 if vi < len(versions) - 1 else 0)
            index += 1
        nxt = 16 + len(aux) if li < len(libs) - 1 else 0
        vn += struct.pack("<HHIII", 1, len(versions), s(lib), 16, nxt) + aux
        for sym, ver in pairs:  # undefined global functions: shndx 0
            dynsym += struct.pack("<IBBHQQ", s(sym), 0x12, 0, 0, 0, 0)
            versym.append(ndx[ver])
    for name in undefined:  # SHN_UNDEF, no version
        dynsym += struct.pack("<IBBHQQ", s(name), 0x12, 0, 0, 0, 0)
        versym.append(1)  # VER_NDX_GLOBAL: no version needed
    undefined = list(undefined)
    # The table tags point at sections placed below: their values are filled in once the layout is known.
    pointers: list[tuple[int, str]] = []
    if dynamic_segment:
        pointers = [(5, ".dynstr"), (10, "")]
        if symbols or imports or undefined:
            pointers.append((6, ".dynsym"))
        if imports or verneed is not None:
            pointers += [(0x6FFFFFF0, ".gnu.version"), (0x6FFFFFFE, ".gnu.version_r")]
    tags += [(t, 0) for t, _n in pointers]
    tags.append((0, 0))
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    # (name, type, data, link, entsize)
    secs: list[tuple[str, int, bytes, int, int]] = [(".dynstr", 3, dynstr, 0, 0), (".dynamic", 6, dynamic, 1, 16)]
    if symbols or imports or undefined:
        secs.append((".dynsym", 11, dynsym, 1, 24))
    if imports or verneed is not None:
        secs.append((".gnu.version", 0x6FFFFFFF, b"".join(struct.pack("<H", v) for v in versym), 0, 2))
        secs.append((".gnu.version_r", 0x6FFFFFFE, vn if verneed is None else verneed, 1, 0))
    if symtab:  # Elf64_Sym entries after the null one; names in .dynstr (section 1)
        table = b"\0" * 24 + b"".join(struct.pack("<IBBHQQ", s(n), 0x12, 0, 1, 0, 0) for n in symtab)
        secs.append((".symtab", 2, table, 1, 24))
        secs[0] = (".dynstr", 3, dynstr, 0, 0)
    secs += [(name, 1, data, 0, 0) for name, data in sections.items()]
    shstrtab = b"\0"
    name_off = []
    for name, *_ in [*secs, (".shstrtab", 3, b"", 0, 0)]:
        name_off.append(len(shstrtab))
        shstrtab += name.encode() + b"\0"
    secs.append((".shstrtab", 3, shstrtab, 0, 0))
    phnum = 2 if dynamic_segment else 1 if load_segment else 0
    off = 64 + 56 * phnum
    placed = []
    at = off
    for _name, _t, data, _l, _e in secs:
        at += -at % 8
        placed.append(at)
        at += len(data)
    where = {name: placed[i] for i, (name, *_r) in enumerate(secs)}
    if pointers:
        values = {5: where[".dynstr"], 10: len(dynstr)} | {t: where[n] for t, n in pointers if n}
        tags = [(t, values.get(t, v)) if t in values and v == 0 else (t, v) for t, v in tags]
        dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
        secs[1] = (".dynamic", 6, dynamic, 1, 16)
    body = b""
    for _name, _t, data, _l, _e in secs:
        pad = -(off + len(body)) % 8
        body += b"\0" * pad
        body += data
    pad = -(off + len(body)) % 8
    body += b"\0" * pad
    shoff = off + len(body)
    shnum = len(secs) + 1
    total = shoff + 64 * shnum
    ehdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    ehdr += struct.pack(
        "<HHIQQQIHHHHHH", e_type, 62, 1, 0, 64 if phnum else 0, shoff, 0, 64, 56, phnum, 64, shnum, shnum - 1
    )
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, total, total, 0x1000) if phnum else b""
    if dynamic_segment:  # PT_DYNAMIC, read-write, over .dynamic (address == file offset)
        d, size = where[".dynamic"], len(secs[1][2])
        phdr += struct.pack("<IIQQQQQQ", 2, 6, d, d, d, size, size, 8)
    shdrs = b"\0" * 64
    for i, (_name, t, data, link, ent) in enumerate(secs):
        flags = 2 if t == 1 else 0  # SHF_ALLOC for PROGBITS
        shdrs += struct.pack("<IIQQQQIIQQ", name_off[i], t, flags, placed[i], placed[i], len(data), link, 0, 8, ent)
    return ehdr + phdr + body + shdrs


def cubin(
    sm: int,
    *,
    abi: int = 8,
    arch_specific: bool = False,
    compat: bool = False,
    text: bytes | None = b"\x00" * 256,
    functions: Iterable[str] = (),
    extra: Mapping[str, bytes] | None = None,
) -> bytes:
    """A standalone cubin as nvcc -cubin writes it, as far as readers look: an ELF for EM_CUDA (190) with the CUDA
    OS/ABI (0x41), the ABI version in e_ident[8] and the SM in e_flags (ABI 8: bits 8-15; ABI 7: bits 0-7 with the
    virtual SM in 16-23), one kernel's text section. Arch-specific as CUDA 12.x marks it (0x800 in ABI 7, 0x8 in ABI
    8), or with `compat` as CUDA 13.0 does: e_flags unmarked, attribute 9 of a .nv.compat section (the records nvcc 13.0.88
    wrote for sm_100a, attribute 9 moved behind the sized record that readers step over). `text=None` leaves the
    kernel's section out: with no `functions` (STT_FUNC symbols in .symtab) either, a module that defines nothing, as
    nvcc writes for a translation unit with no kernels (nvidia-npp 13.2's 1,888-byte sm_75 cubins)."""
    sections = {".nv.info": b"\x04\x2f\x08\x00" * 4}
    if text is not None:
        sections = {".text._Z6kernelv": text, **sections}
    sections.update(extra or {})  # more sections: nvcc's .debug_frame
    if compat:
        sections[".nv.compat"] = bytes.fromhex(
            f"0202010002050500030701010203000002060100040b080009000000000000000209{int(arch_specific):02x}00"
        )
    body = bytearray(elf(sections=sections, e_type=2, symtab=functions))
    body[7], body[8] = 0x41, abi
    if abi >= 8:
        flags = 0x6000002 | (sm << 8) | (0x8 if arch_specific and not compat else 0)
    else:
        flags = 0x500 | sm | (sm << 16) | (0x800 if arch_specific else 0)
    struct.pack_into("<H", body, 18, 190)
    struct.pack_into("<I", body, 48, flags)
    return bytes(body)


def ptx(sm: int, *, entry: str | None = "_Z6kernelv", isa: tuple[int, int] = (8, 5)) -> bytes:
    """PTX text as nvcc writes it: the `.version`/`.target` header and, unless `entry` is None, one kernel
    (`.visible .entry`); without one, a module with no kernels (spconv-cu126 2.3.8's compute_52 members)."""
    text = f"//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version {isa[0]}.{isa[1]}\n.target sm_{sm}\n.address_size 64\n\n"
    if entry is not None:
        text += f"\t// .globl\t{entry}\n.visible .entry {entry}()\n{{\n\tret;\n}}\n"
    return text.encode()


def nvidia_runpath(path: str, needed: Iterable[str]) -> str:
    """The RUNPATH that reaches, from the wheel file at `path`, the nvidia-* wheels' folders of the CUDA libraries in
    `needed` (what `slimwheel repair` writes): a file without it finds them only where something loaded them first."""
    from slimwheel.cuda.libs import RUNTIME_LIBS
    from slimwheel.rpath import with_folders

    names = set(needed)
    folders = [lib.folder for lib in RUNTIME_LIBS if lib.soname in names]
    return ":".join(with_folders((), path, folders) or ())
