"""Dropping device code from fatbin containers in place: what `slimwheel slim` and `slimwheel variants` do to each ELF.

A container keeps its place (the host wrapper in .nvFatBinSegment, or the library's own table, points at its first
byte) and the section keeps its size (no relink, no moved symbols): the kept entries move to the container's start,
the header's entry size shrinks to theirs, and every freed byte becomes zero, which a zip stores almost for free.
Payloads are moved byte for byte, never decompressed. The edits are planned from the file's report (`plan_elf`) and
streamed (`apply_plan`): a 1 GiB library is slimmed through a 1 MiB window, never copied whole into memory.

Which entries a GPU uses is decided by `slimwheel.cuda.arch.served_by` (the driver's preference: the best compatible
cubin, else the newest compatible PTX), per container, since every container is loaded on its own.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from slimwheel.cuda.arch import CC, Kind, Target, Variant, served_by
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import ElfReport, read_elf
from slimwheel.inspect.fatbin import Fatbin, FatbinEntry
from slimwheel.inspect.files import Buffer

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
    """The outcome for one ELF file (or .fatbin file): its new bytes (same length) and what left it; a standalone
    cubin for none of the requested GPUs has no bytes left (the file goes)."""

    name: str
    data: bytes
    containers: int
    kept: tuple[tuple[str, str], ...]  # (kind, arch) of every entry kept, in file order
    dropped: tuple[Dropped, ...]

    @property
    def dropped_bytes(self) -> int:
        return sum(d.bytes for d in self.dropped)


def entry_spans(data: Buffer | memoryview, fb: Fatbin, *, where: str) -> tuple[EntrySpan, ...]:
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


def container_keep(fb: Fatbin, request: SlimRequest, *, whole: bool = False) -> tuple[bool, ...]:
    """Which members of one container slim keeps: `keep_mask`'s, or all of them for a module with no kernels (it
    runs nothing on any GPU, so dropping its members serves no request, and an emptied container would read as code
    removed) and for one kept `whole` (slim.monotone_whole: emptying it would hide a failing GPU)."""
    if whole or not fb.kernels:
        return (True,) * len(fb.entries)
    return keep_mask(fb.entries, request)


@dataclass(frozen=True, kw_only=True)
class ContainerEdit:
    """One container rewritten: its new 16-byte header, then the kept spans' bytes (from where they lie in the
    unchanged file) back to back, then zeros up to the container's old end."""

    offset: int
    end: int
    header: bytes
    kept: tuple[tuple[int, int], ...]  # (offset in the unchanged file, bytes)
    dropped: tuple[Dropped, ...]


@dataclass(frozen=True, kw_only=True)
class ElfPlan:
    """What slimming one ELF file (or .fatbin file) to a request does, decided from its report alone: edits sorted
    by offset, never overlapping (the reader refuses containers that share bytes). `apply_plan` streams the new
    bytes; the file keeps its length."""

    name: str
    size: int
    containers: int
    kept: tuple[tuple[str, str], ...]  # (kind, arch) of every entry kept, in file order
    kept_targets: frozenset[Target]  # the loadable targets left
    edits: tuple[ContainerEdit, ...]
    # A standalone cubin for none of the requested GPUs: the file leaves the wheel (it is one module; nothing of it
    # would ever load on them), where a container would keep its header.
    omitted: tuple[Dropped, ...] = ()

    @property
    def dropped(self) -> tuple[Dropped, ...]:
        return tuple(d for e in self.edits for d in e.dropped) + self.omitted


def plan_elf(data: Buffer, report: ElfReport, request: SlimRequest, whole: frozenset[int] = frozenset()) -> ElfPlan:
    """The edits that slim `report`'s containers to `request`; `data` is the file the report was read from (only
    entry headers are read from it). Containers at the offsets in `whole` are kept as they are."""
    edits: list[ContainerEdit] = []
    kept: list[tuple[str, str]] = []
    targets: set[Target] = set()
    if report.kind == "cubin":  # the whole file is its one module: kept as it is, or left out of the wheel
        return _cubin_plan(report, request, whole)
    for fb in report.fatbins:
        keep = container_keep(fb, request, whole=fb.offset in whole)
        kept.extend((e.kind, e.arch) for e, k in zip(fb.entries, keep, strict=True) if k)
        if fb.kernels:  # a module with no kernels serves no GPU: the report counts no targets of it either
            targets.update(e.target for e, k in zip(fb.entries, keep, strict=True) if k and e.target is not None)
        if all(keep):
            continue
        spans = entry_spans(data, fb, where=report.name)
        magic, version, header_size, _fat_size = _CONTAINER.unpack_from(data, fb.offset)
        # a longer header's tail is copied as it is
        spans_head: tuple[tuple[int, int], ...] = (
            ((fb.offset + _CONTAINER.size, header_size - _CONTAINER.size),) if header_size > _CONTAINER.size else ()
        )
        body = sum(s.size for s, k in zip(spans, keep, strict=True) if k)
        edits.append(
            ContainerEdit(
                offset=fb.offset,
                end=fb.offset + fb.size,
                header=_CONTAINER.pack(magic, version, header_size, body),
                kept=spans_head + tuple((s.offset, s.size) for s, k in zip(spans, keep, strict=True) if k),
                dropped=tuple(
                    Dropped(container=fb.offset, kind=s.entry.kind, arch=s.entry.arch, bytes=s.size)
                    for s, k in zip(spans, keep, strict=True)
                    if not k
                ),
            )
        )
    return ElfPlan(
        name=report.name,
        size=report.size,
        containers=len(report.fatbins),
        kept=tuple(kept),
        kept_targets=frozenset(targets),
        edits=tuple(edits),
    )


CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


def _cubin_plan(report: ElfReport, request: SlimRequest, whole: frozenset[int]) -> ElfPlan:
    (module,) = report.fatbins
    (entry,) = module.entries
    (keep,) = container_keep(module, request, whole=bool(whole))
    return ElfPlan(
        name=report.name,
        size=report.size,
        containers=1,
        kept=((entry.kind, entry.arch),) if keep else (),
        kept_targets=frozenset({entry.target} if keep and module.kernels and entry.target is not None else ()),
        edits=(),
        omitted=() if keep else (Dropped(container=0, kind=entry.kind, arch=entry.arch, bytes=report.size),),
    )


def apply_plan(read: Callable[[int, int], bytes], plan: ElfPlan, sink: Callable[[bytes], object]) -> None:
    """Stream the slimmed file to `sink`, at most CHUNK bytes at once: unchanged ranges and kept entries are read
    from the unchanged file through `read(offset, size)` (os.pread, or a slice of a buffer), so memory holds one
    chunk, never the file."""

    def copy(at: int, n: int) -> None:
        while n > 0:
            step = min(CHUNK, n)
            block = read(at, step)
            if len(block) != step:
                raise BadInputError(f"{plan.name}: changed while it was being slimmed (short read at {at:#x})")
            sink(block)
            at += step
            n -= step

    pos = 0
    for e in plan.edits:
        copy(pos, e.offset - pos)
        sink(e.header)
        w = e.offset + len(e.header)
        for at, n in e.kept:
            copy(at, n)
            w += n
        left = e.end - w
        while left > 0:
            sink(_ZEROS[: min(CHUNK, left)])
            left -= min(CHUNK, left)
        pos = e.end
    copy(pos, plan.size - pos)


def slim_elf(data: Buffer, name: str, request: SlimRequest) -> ElfSlim:
    """Slim every fatbin container of an ELF (or bare .fatbin) file held in memory; `data` itself is not changed."""
    report: ElfReport = read_elf(data, name)
    plan = plan_elf(data, report, request)
    if plan.omitted:  # a cubin for none of the GPUs: nothing of the file is left
        return ElfSlim(name=name, data=b"", containers=1, kept=(), dropped=plan.dropped)
    if not plan.edits:
        return ElfSlim(name=name, data=bytes(data), containers=plan.containers, kept=plan.kept, dropped=())
    out = bytearray()
    apply_plan(lambda at, n: bytes(data[at : at + n]), plan, out.extend)
    return ElfSlim(name=name, data=bytes(out), containers=plan.containers, kept=plan.kept, dropped=plan.dropped)
