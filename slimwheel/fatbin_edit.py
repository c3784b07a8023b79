"""Dropping device code from fatbin containers in place: what `slimwheel slim` and `slimwheel variants` do to each ELF.

A container keeps its place (the host wrapper in .nvFatBinSegment points at its first byte) and the section keeps its
size (no relink, no moved symbols): the kept entries move to the container's start, the header's entry size shrinks
to theirs, and every freed byte becomes zero, which a zip stores almost for free. Payloads are moved byte for byte,
never decompressed.

Which entries a GPU uses is decided by `slimwheel.cuda.arch.served_by` (the driver's preference: the best compatible
cubin, else the newest compatible PTX), per container, since every container is loaded on its own.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from slimwheel.cuda.arch import CC, Kind, Target, Variant, served_by
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import ElfReport, read_elf
from slimwheel.inspect.fatbin import Fatbin, FatbinEntry

# The two fields of the layout in slimwheel/inspect/fatbin.py that moving an entry needs: the container header's
# u16 header size and u64 entry bytes, and each entry header's u32 header size and u64 stored payload size.
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY_SIZES = struct.Struct("<4xIQ")

PtxMode = Literal["needed", "newest"]


@dataclass(frozen=True, kw_only=True)
class SlimRequest:
    """What to keep. `ccs`: the GPUs that must still run every module. PTX: always kept where a module serves one of
    them only by PTX JIT ("needed"); with "newest", each module's newest plain PTX is kept too, so GPUs newer than
    any kept cubin still JIT-compile it; `ptx_ccs`: PTX for these compute capabilities is kept where present."""

    ccs: tuple[CC, ...]
    ptx: PtxMode = "needed"
    ptx_ccs: tuple[CC, ...] = ()

    def __post_init__(self) -> None:
        if not self.ccs:
            raise BadInputError("slim: no compute capability to keep", hint="give e.g. --archs 9.0 or --archs 8.0-9.0")


@dataclass(frozen=True, kw_only=True)
class EntrySpan:
    """Where one entry (its header and stored payload) lies in the file that holds its container."""

    offset: int
    size: int
    entry: FatbinEntry


@dataclass(frozen=True, kw_only=True)
class Dropped:
    """One entry removed from a container."""

    container: int  # the container's offset in the file
    kind: str
    arch: str
    bytes: int  # its header and stored payload: what the container shrank by


@dataclass(frozen=True, kw_only=True)
class ElfSlim:
    """The outcome for one ELF file (or .fatbin file): its new bytes (same length) and what left it."""

    name: str
    data: bytes
    containers: int
    kept: tuple[tuple[str, str], ...]  # (kind, arch) of every entry kept, in file order
    dropped: tuple[Dropped, ...]

    @property
    def dropped_bytes(self) -> int:
        return sum(d.bytes for d in self.dropped)


def entry_spans(data: bytes | bytearray | memoryview, fb: Fatbin, *, where: str) -> tuple[EntrySpan, ...]:
    """The entries of a container that `parse_fatbin` already read (so every size is known to fit), with their
    places in the file. Spans tile the container's body from its header to its end."""
    mv = memoryview(data)
    _magic, _version, header_size, fat_size = _CONTAINER.unpack_from(mv, fb.offset)
    p = fb.offset + header_size
    end = p + fat_size
    spans: list[EntrySpan] = []
    for entry in fb.entries:
        ehsize, padded = _ENTRY_SIZES.unpack_from(mv, p)
        spans.append(EntrySpan(offset=p, size=ehsize + padded, entry=entry))
        p += ehsize + padded
    if p != end:  # parse_fatbin walked the same bytes: a mismatch is a bug, not bad input
        raise AssertionError(f"{where}: fatbin at {fb.offset:#x}: entries end at {p:#x}, container at {end:#x}")
    return tuple(spans)


def keep_mask(entries: Iterable[FatbinEntry], request: SlimRequest) -> tuple[bool, ...]:
    """Which entries of one container to keep. Entries with no loadable target (LTO-IR, kinds slimwheel does not
    know) are kept: nothing tells which GPU or tool uses them."""
    es = tuple(entries)
    targets = [e.target for e in es if e.target is not None]
    wanted: set[Target] = set()
    for cc in request.ccs:
        _how, best = served_by(cc, targets)
        if best is not None:
            wanted.add(best)
    plain_ptx = [t for t in targets if t.kind is Kind.PTX and t.variant is Variant.PLAIN]
    if request.ptx == "newest" and plain_ptx:
        wanted.add(max(plain_ptx, key=lambda t: t.cc))
    wanted.update(t for t in targets if t.kind is Kind.PTX and t.cc in request.ptx_ccs)
    return tuple(e.target is None or e.target in wanted for e in es)


def slim_container(buf: bytearray, fb: Fatbin, keep: tuple[bool, ...], *, where: str) -> tuple[Dropped, ...]:
    """Compact the container at fb.offset of `buf` to the kept entries; zero what they no longer use."""
    spans = entry_spans(buf, fb, where=where)
    if len(keep) != len(spans):
        raise AssertionError(f"{where}: {len(keep)} decisions for {len(spans)} entries")
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, fb.offset)
    body = fb.offset + header_size
    end = body + fat_size
    # Each kept span moves to a place at or before where it was, in order: a forward copy never overwrites bytes
    # that a later span still needs.
    w = body
    dropped: list[Dropped] = []
    for span, k in zip(spans, keep, strict=True):
        if k:
            if span.offset != w:
                buf[w : w + span.size] = buf[span.offset : span.offset + span.size]
            w += span.size
        else:
            dropped.append(Dropped(container=fb.offset, kind=span.entry.kind, arch=span.entry.arch, bytes=span.size))
    buf[w:end] = bytes(end - w)
    _CONTAINER.pack_into(buf, fb.offset, magic, version, header_size, w - body)
    return tuple(dropped)


def slim_elf(data: bytes, name: str, request: SlimRequest) -> ElfSlim:
    """Slim every fatbin container of an ELF (or bare .fatbin) file; `data` itself is not changed."""
    report: ElfReport = read_elf(data, name)
    buf = bytearray(data)
    dropped: list[Dropped] = []
    kept: list[tuple[str, str]] = []
    for fb in report.fatbins:
        keep = keep_mask(fb.entries, request)
        kept.extend((e.kind, e.arch) for e, k in zip(fb.entries, keep, strict=True) if k)
        if all(keep):
            continue
        dropped.extend(slim_container(buf, fb, keep, where=name))
    return ElfSlim(name=name, data=bytes(buf), containers=len(report.fatbins), kept=tuple(kept),
                   dropped=tuple(dropped))  # fmt: skip

