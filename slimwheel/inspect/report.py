"""The wheel report: what takes the space, which GPUs the wheel runs on, which driver and libraries it needs."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda.arch import (
    CC,
    KNOWN_CCS,
    Coverage,
    Kind,
    Target,
    Variant,
    listing_order,
    served_by,
)
from slimwheel.cuda.major import cuda_major
from slimwheel.cuda.versions import (
    MAJOR_DRIVER,
    PTX_ISA_RELEASE,
    SIZE_COMPRESSION_DRIVER_CUDA12,
    CudaVersion,
    driver_for_release,
    driver_key,
)
from slimwheel.inspect.duplicates import DuplicateGroup
from slimwheel.inspect.elf import ElfReport
from slimwheel.inspect.fatbin import Fatbin, FatbinEntry
from slimwheel.inspect.nvrtc import EmbeddedSources, describe, served_ccs

__all__ = [
    "CoverageGap",
    "ElfReport",
    "Excused",
    "Fatbin",
    "FatbinEntry",
    "FileEntry",
    "TargetTotal",
    "WheelReport",
    "assemble",
    "coverage_detail",
    "coverage_rows",
    "gap_text",
    "module_coverage",
    "report_to_json",
    "target_totals",
]

log = logging.getLogger(__name__)
SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    name: str
    compressed: int  # bytes inside the zip
    uncompressed: int  # bytes once installed
    share: float  # compressed / the wheel's size on disk


@dataclass(frozen=True, kw_only=True)
class TargetTotal:
    """All fatbin entries of one kind and arch across a wheel."""

    kind: str
    arch: str
    count: int
    stored: int
    uncompressed: int


@dataclass(frozen=True, kw_only=True)
class CoverageGap:
    """A CC that some CUDA modules serve worse than others: the wheel is only as good as its weakest module."""

    cc: CC
    how: str  # the worst: "ptx" (some modules only by PTX JIT) or "none" (some modules cannot run at all)
    fatbins: int  # how many fatbins serve it that way
    total: int  # fatbins with loadable code
    elfs: tuple[str, ...]  # the ELF files those fatbins are in
    targets: tuple[tuple[str, ...], ...] = ()  # the code those fatbins carry, one tuple of targets per kind of module


@dataclass(frozen=True, kw_only=True)
class Excused:
    """Modules of one file that carry no code for a CC while other modules of the same file run it natively, in a
    file that dispatches by GPU (`_dispatches_by_gpu`): per-generation kernels, not judged for this CC; or (`whole`)
    files of a wheel that dispatches by GPU whose code is all for other GPUs, while other files serve this one."""

    cc: CC
    fatbins: int
    elfs: tuple[str, ...]
    targets: tuple[tuple[str, ...], ...] = ()
    whole: bool = False  # files left out whole: components for other GPUs (`_for_others`), not modules within one


@dataclass(frozen=True, kw_only=True)
class CoverageDetail:
    coverage: Coverage
    gaps: tuple[CoverageGap, ...]
    excused: tuple[Excused, ...]
    # CC -> the modules judged for it (not left out as made for other GPUs, per-generation or alternatives), and all
    # modules: cuSPARSELt 0.8.1 "serves" 6.0-7.5 through the PTX of 2 of its 995 modules, the rest made for 8.0+.
    judged: tuple[tuple[CC, int], ...] = ()
    total: int = 0


@dataclass(frozen=True, kw_only=True)
class WheelReport:
    """Everything size-report shows and check judges, for one wheel. Sizes are bytes."""

    path: Path
    name: str
    version: str
    tags: tuple[str, ...]
    requires_dist: tuple[str, ...]
    size: int  # the wheel's bytes on disk
    files: tuple[FileEntry, ...]
    elfs: tuple[ElfReport, ...]
    targets: tuple[Target, ...]  # union over every fatbin
    coverage: Coverage  # per CC, the worst over every fatbin (a kernel runs only if its own module serves the GPU)
    coverage_gaps: tuple[CoverageGap, ...]
    cuda_major: int | None
    cuda_major_why: str
    ptx_release: CudaVersion | None  # the CUDA release the newest PTX ISA came with
    driver_floor: str | None  # for GPUs served by SASS
    ptx_driver_floor: str | None  # for GPUs served only through PTX JIT
    driver_why: tuple[str, ...]
    compression: tuple[str, ...]  # fatbin compression seen: none, lz4, zstd
    alternatives: tuple[Alternative, ...] = ()  # libraries of which one is loaded, by CUDA version
    duplicates: tuple[DuplicateGroup, ...] = ()  # byte-identical files, the most wasted bytes first

    @property
    def duplicate_waste(self) -> tuple[int, int]:
        """What the extra copies of byte-identical files take: (in the wheel, once installed)."""
        return (
            sum(g.wasted_compressed for g in self.duplicates),
            sum(g.wasted_uncompressed for g in self.duplicates),
        )

    @property
    def installed_size(self) -> int:
        return sum(f.uncompressed for f in self.files)

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.split("-", 2)[2] for t in self.tags if t.count("-") >= 2))

    @property
    def is_x86_64(self) -> bool:
        return any(p.endswith("x86_64") for p in self.platforms) or self.path.name.endswith("x86_64.whl")

    @property
    def fatbin_entries(self) -> tuple[FatbinEntry, ...]:
        return tuple(e for elf in self.elfs for fb in elf.fatbins for e in fb.entries)

    @property
    def code_entries(self) -> tuple[FatbinEntry, ...]:
        """The entries of modules that define kernels: what runs on a GPU, and so what sets a driver floor."""
        return tuple(e for elf in self.elfs for e in elf.code_entries)

    @property
    def kernelless(self) -> tuple[tuple[str, int], ...]:
        """(file, containers) of the modules that define no function (`Fatbin.kernels`), per file that has any."""
        return tuple((e.name, n) for e in self.elfs if (n := len(e.kernelless_fatbins)))


def target_totals(entries: tuple[FatbinEntry, ...] | list[FatbinEntry]) -> tuple[TargetTotal, ...]:
    acc: dict[tuple[str, str], list[int]] = {}
    for e in entries:
        a = acc.setdefault((e.kind, e.arch), [0, 0, 0])
        a[0] += 1
        a[1] += e.stored_size
        a[2] += e.uncompressed_size
    order = {"sass": 0, "ptx": 1, "lto-ir": 2}

    def key(k: tuple[str, str]) -> tuple[int, int, str]:
        m = re.match(r"\d+", k[1])
        return (order.get(k[0], 3), int(m.group()) if m else 0, k[1])

    return tuple(
        TargetTotal(kind=k[0], arch=k[1], count=v[0], stored=v[1], uncompressed=v[2])
        for k, v in sorted(acc.items(), key=lambda kv: key(kv[0]))
    )


_RANK = {"none": 0, "ptx": 1, "sass": 2}


def _made_for_others(ts: frozenset[Target], cc: CC) -> bool:
    """Whether a module is plainly meant for other GPUs than `cc`, so that a library never launches it there.

    True for a module whose code is all for newer GPUs than cc (cubins and PTX alike: code for newer GPUs only cannot
    be meant to run on older ones), or, without portable PTX, whose cubins are all for one other major (a
    generation's own kernels). cuBLAS and cuBLASLt
    ship many such modules (Hopper-only, Ampere-and-newer tensor-core kernels) beside generic ones. A module whose
    cubins are all for older majors, over several of them, is judged: that is a library missing a new GPU.
    """
    if all(t.cc > cc for t in ts):
        # Code for newer GPUs only, PTX included (compute_90 JIT-compiles for 9.0 and up): NVIDIA's libraries keep one
        # module per architecture (cuFFT: compute_90 alone, sm_107 alone; cuBLASLt: sm_100 sm_120 compute_120) and
        # load the one for the GPU at hand.
        return True
    if any(t.kind is Kind.PTX and t.variant is Variant.PLAIN for t in ts):
        return False
    majors = {t.cc.major for t in ts}
    return min(majors) > cc.major or (len(majors) == 1 and cc.major not in majors)


def _for_others(ts: frozenset[Target], cc: CC) -> bool:
    """Whether none of a module's code is meant for `cc` (which it does not run natively): each target is for a newer
    GPU, or arch- or family-specific code, which runs on its own GPU (or family) and nowhere else."""
    return bool(ts) and all(t.cc > cc or t.variant is not Variant.PLAIN for t in ts)


def _dispatches_by_gpu(groups: dict[frozenset[Target], int]) -> bool:
    """Whether a file's modules are per-generation kernels that it picks by the GPU it runs on: some module carries
    arch- or family-specific SASS (sm_90a, sm_100f, sm_120f), code that only a library choosing kernels per GPU
    ships (cuBLASLt 13.0: Ada/Blackwell FP8 modules `sm_89 sm_120f compute_120` beside Hopper's `sm_90a` ones; vLLM,
    FlashAttention). A module of such a file that has no code for a GPU, beside modules that run it natively, is one
    the library does not launch there. A file without such code (a plain build: every module compiled for one list
    of targets) is judged module by module: there a module missing a GPU is a gap."""
    return any(t.kind is Kind.SASS and t.variant is not Variant.PLAIN for ts in groups for t in ts)


def nvrtc_targets(record: EmbeddedSources) -> frozenset[Target]:
    """What embedded kernel sources amount to: a cubin for every CC the NVRTC of their CUDA major targets (compiled
    for the exact GPU at first use), and PTX of the newest for GPUs newer than that NVRTC."""
    ccs = served_ccs(record)
    return frozenset({Target.parse(f"sm_{cc.sm}") for cc in ccs} | {Target.parse(f"compute_{max(ccs).sm}")})


@dataclass(frozen=True, kw_only=True)
class Alternative:
    """One of several libraries of which a wheel loads one, chosen by CUDA version (bitsandbytes ships
    libbitsandbytes_cuda118.so ... _cuda132.so and loads the one for the CUDA it finds)."""

    group: str  # the name with the CUDA version left out: bitsandbytes/libbitsandbytes_cuda*.so
    file: str
    cuda: str  # as the name says it: "11.8", "12", "13.2"
    cuda_major: int | None  # from what the file needs, else from its name
    driver_floor: str | None  # the major's first driver (zstd entries of CUDA 12: 12.8's) with SASS, else the PTX one
    ptx_driver_floor: str | None = None  # the driver that JIT-compiles the file's own newest PTX ISA
    sass: tuple[str, ...] = ()  # the CCs this alternative serves with SASS
    ptx_only: tuple[str, ...] = ()  # the CCs it serves only through PTX JIT


def alternative_groups(elfs: tuple[ElfReport, ...]) -> dict[str, tuple[str, ...]]:
    """group -> files of per-CUDA alternatives (`cuda.alternatives.groups`): the wheel loads one of them."""
    return alt_model.groups(e.name for e in elfs)


def module_coverage(
    elfs: tuple[ElfReport, ...], ccs: tuple[CC, ...] = KNOWN_CCS
) -> tuple[Coverage, tuple[CoverageGap, ...]]:
    """`coverage_detail` without the excused modules."""
    d = coverage_detail(elfs, ccs)
    return d.coverage, d.gaps


def _sorted_targets(ts: frozenset[Target]) -> tuple[str, ...]:
    return tuple(str(t) for t in sorted(ts, key=lambda t: (t.kind is Kind.PTX, t.cc)))


def coverage_detail(elfs: tuple[ElfReport, ...], ccs: tuple[CC, ...] = KNOWN_CCS) -> CoverageDetail:
    """Per CC, how the wheel serves it: each ELF file only as well as its weakest generic CUDA module, the wheel only
    as well as its weakest file. Of alternatives (`alternative_groups`), which a wheel loads one of, the best
    serving file counts: the wheel serves a GPU when some alternative does.

    Within a file, modules plainly made for other GPUs (`_made_for_others`) are not judged for this one, unless the
    file has nothing else: then it serves the GPU only if one of its modules does. In a file that dispatches by GPU
    (`_dispatches_by_gpu`), modules with no code at all for a GPU that other modules of the file run natively are
    not judged either; they are returned as `excused`, so that a report can say so.
    """
    per_elf: dict[str, dict[frozenset[Target], int]] = {}
    alternatives = alternative_groups(elfs)
    for elf in elfs:
        for fb in elf.judged_fatbins:
            ts = frozenset(e.target for e in fb.entries if e.target is not None)
            groups = per_elf.setdefault(elf.name, {})
            groups[ts] = groups.get(ts, 0) + 1
        for record in elf.nvrtc:  # a module compiled at run time for the GPU it runs on: native wherever NVRTC can
            groups = per_elf.setdefault(elf.name, {})
            ts = nvrtc_targets(record)
            groups[ts] = groups.get(ts, 0) + 1
    total = sum(len(elf.judged_fatbins) + len(elf.nvrtc) for elf in elfs)
    out: dict[str, list[CC]] = {"sass": [], "ptx": [], "none": []}
    gaps = []
    excused: list[Excused] = []
    judged_per_cc: list[tuple[CC, int]] = []
    dispatching = {name for name, groups in per_elf.items() if _dispatches_by_gpu(groups)}
    for cc in ccs:
        left_out: dict[str, dict[frozenset[Target], int]] = {}
        # how -> (fatbins judged that way, the files they are in: a dict as an ordered set, since a wheel may hold
        # thousands of files, flashinfer-cubin 15,970 cubins)
        hows: dict[str, tuple[int, dict[str, None]]] = {}
        sets: dict[str, set[frozenset[Target]]] = {}
        per_file: dict[str, dict[frozenset[Target], tuple[str, int]]] = {}
        for name, groups in per_elf.items():
            generic = {ts: n for ts, n in groups.items() if not _made_for_others(ts, cc)}
            if name in dispatching and any(served_by(cc, ts)[0] == "sass" for ts in generic):
                gone = {ts: n for ts, n in generic.items() if served_by(cc, ts)[0] == "none"}
                if gone:
                    left_out[name] = gone
                    generic = {ts: n for ts, n in generic.items() if ts not in gone}
            if generic:
                per_file[name] = {ts: (served_by(cc, ts)[0], n) for ts, n in generic.items()}
            else:
                best = max((served_by(cc, ts)[0] for ts in groups), key=_RANK.__getitem__)
                per_file[name] = {ts: (best, n) for ts, n in groups.items()}
        # In a wheel that picks kernels by GPU (some file has arch- or family-specific SASS), a file none of whose
        # code is meant for this GPU is a component for others: code for newer GPUs only, or arch-/family-specific
        # code of other GPUs (sgl-kernel 0.3.21's flashmla_ops: sm_90a sm_100a; torchao 0.18's _C_cutlass_90a:
        # sm_90a, beside _C_mxfp8: sm_100 compute_120; vLLM's _flashmla_C). It is not judged for a GPU that other
        # files serve, as per-generation modules within a file are not. A wheel of plain builds is judged file by
        # file: there a file missing a GPU is a gap.
        native = {n for n, judged in per_file.items() if any(how == "sass" for how, _ in judged.values())}
        components = [
            n for n in per_file if dispatching and n not in native and all(_for_others(ts, cc) for ts in per_elf[n])
        ]
        others = set(components)
        serving = any(how != "none" for n, judged in per_file.items() if n not in others for how, _ in judged.values())
        if serving:
            for name in components:
                left_out[name] = dict(per_elf[name])
                del per_file[name]
        for files in alternatives.values():
            present = [f for f in files if f in per_file]
            if len(present) > 1:
                keep = max(present, key=lambda f: min(_RANK[h] for h, _ in per_file[f].values()))
                for f in present:
                    if f != keep:
                        del per_file[f]
        for name, judged in per_file.items():
            for ts, (how, n) in judged.items():
                count, names = hows.get(how, (0, {}))
                names[name] = None
                hows[how] = (count + n, names)
                sets.setdefault(how, set()).add(ts)
        worst = min(hows, key=_RANK.__getitem__) if hows else "none"
        out[worst].append(cc)
        judged_per_cc.append((cc, sum(n for count in per_file.values() for _how, n in count.values())))
        if len(hows) > 1:
            count, names = hows[worst]
            kinds = sorted(_sorted_targets(ts) for ts in sets[worst])
            gaps.append(
                CoverageGap(cc=cc, how=worst, fatbins=count, total=total, elfs=tuple(names), targets=tuple(kinds))
            )
        # of alternatives, the one judged; a component file left out whole is judged by no alternative
        within = {name: gone for name, gone in left_out.items() if name in per_file}
        whole = {name: left_out[name] for name in components if serving}
        for kept, is_whole in ((within, False), (whole, True)):
            if kept:
                excused.append(
                    Excused(
                        cc=cc,
                        fatbins=sum(n for gone in kept.values() for n in gone.values()),
                        elfs=tuple(kept),
                        targets=tuple(sorted({_sorted_targets(ts) for gone in kept.values() for ts in gone})),
                        whole=is_whole,
                    )
                )
    coverage = Coverage(tuple(out["sass"]), tuple(out["ptx"]), tuple(out["none"]))
    return CoverageDetail(
        coverage=coverage, gaps=tuple(gaps), excused=tuple(excused), judged=tuple(judged_per_cc), total=total
    )


def assemble(
    path: Path,
    meta: Any,
    wheel_size: int,
    files: tuple[FileEntry, ...],
    elfs: tuple[ElfReport, ...],
    duplicates: tuple[DuplicateGroup, ...] = (),
) -> WheelReport:
    # Modules with no kernels (`Fatbin.kernels`) run nothing: their targets, PTX ISA and compression set no floor.
    entries = [e for elf in elfs for e in elf.code_entries]
    targets = tuple(sorted({e.target for e in entries if e.target is not None}, key=listing_order))
    coverage, gaps = module_coverage(elfs)
    groups = alternative_groups(elfs)
    in_groups = {f for files in groups.values() for f in files}
    # the wheel's own floors come from the files every process loads; each alternative states its own
    # (`_alternatives`): a cu13 folder's zstd entries and PTX ISA say nothing of the cu12 folder beside it
    loaded = [e for elf in elfs if elf.name not in in_groups for e in elf.code_entries]
    isas = [e.ptx_isa for e in loaded if e.ptx_isa]
    ptx_release = _ptx_release(isas)
    evidence = cuda_major(
        [(e.name, e.needed) for e in elfs if e.name not in in_groups],
        meta.requires_dist,
        ptx_release,
        embedded=[r.cuda_major for e in elfs for r in e.nvrtc],
        ships=[(e.name, e.soname) for e in elfs if e.name not in in_groups],
        name=meta.name,
    )
    major, major_why = evidence.major, evidence.why
    alternatives = _alternatives(elfs, groups)
    alt_majors = sorted({a.cuda_major for a in alternatives if a.cuda_major is not None})
    if alt_majors and (major is None or major_why.startswith("PTX ISA")):
        major = alt_majors[-1]
        major_why = (
            f"alternatives for CUDA {', '.join(a.cuda for a in alternatives)}, one loaded per process: "
            f"CUDA {major} is the newest; each alternative is stated on its own"
        )
    compression = tuple(sorted({e.compression for e in entries}))
    why: list[str] = []
    floor: str | None = None
    loaded_sass = any(e.target is not None and e.target.kind is Kind.SASS for e in loaded)
    if major is not None and major in MAJOR_DRIVER and loaded_sass:
        floor = MAJOR_DRIVER[major]
        why.append(f"CUDA {major} code runs on the major's first driver, {floor} (minor version compatibility)")
        if major == 12 and any(e.compression == "zstd" for e in loaded):
            if driver_key(SIZE_COMPRESSION_DRIVER_CUDA12) > driver_key(floor):
                floor = SIZE_COMPRESSION_DRIVER_CUDA12
            why.append(
                f"zstd-compressed fatbin entries (--compress-mode, CUDA 12.8+) need driver >= "
                f"{SIZE_COMPRESSION_DRIVER_CUDA12}"
            )
    elif major is not None and major in MAJOR_DRIVER and any(e.nvrtc for e in elfs):
        floor = MAJOR_DRIVER[major]
        why.append(
            f"kernels compiled at run time by the NVRTC of CUDA {major} load on that major's drivers, {floor} up"
        )
    ptx_floor = None
    if ptx_release is not None:
        ptx_floor = driver_for_release(ptx_release)
        isa = f"{max(isas)[0]}.{max(isas)[1]}"
        if ptx_floor is None:
            why.append(
                f"PTX ISA {isa} came with CUDA {ptx_release}, newer than slimwheel's driver table: JIT compiling it "
                f"needs that release's driver (unknown here)"
            )
        else:
            why.append(f"PTX ISA {isa} came with CUDA {ptx_release}: JIT compiling it needs driver >= {ptx_floor}")
        if floor is None:
            floor = ptx_floor
    elif isas:
        why.append(f"PTX ISA {max(isas)[0]}.{max(isas)[1]} predates CUDA 11.0: no driver floor known for it")
    alt_floors = [a for a in alternatives if a.driver_floor is not None]
    if alt_floors:
        oldest = min(alt_floors, key=lambda a: driver_key(a.driver_floor or "0"))
        floor = oldest.driver_floor
        why.append(
            f"each alternative needs its own CUDA major's driver; the oldest that runs one of them: {floor} "
            f"({oldest.file}, CUDA {oldest.cuda})"
        )
    alt_ptx = [a for a in alternatives if a.ptx_driver_floor is not None]
    if alt_ptx and ptx_floor is None:
        ptx_oldest = min(alt_ptx, key=lambda a: driver_key(a.ptx_driver_floor or "0"))
        ptx_floor = ptx_oldest.ptx_driver_floor
        why.append(
            f"each alternative's PTX needs the driver of the CUDA release of its own ISA; the oldest that JIT-compiles "
            f"one of them: {ptx_floor} ({ptx_oldest.file}, CUDA {ptx_oldest.cuda})"
        )
    return WheelReport(
        path=path,
        name=meta.name,
        version=meta.version,
        tags=meta.tags,
        requires_dist=meta.requires_dist,
        size=wheel_size,
        files=files,
        elfs=elfs,
        targets=targets,
        coverage=coverage,
        coverage_gaps=gaps,
        cuda_major=major,
        cuda_major_why=major_why,
        ptx_release=ptx_release,
        driver_floor=floor,
        ptx_driver_floor=ptx_floor,
        driver_why=tuple(why),
        compression=compression,
        alternatives=alternatives,
        duplicates=duplicates,
    )


def _ptx_release(isas: list[tuple[int, int]]) -> CudaVersion | None:
    """The CUDA release that brought the newest PTX ISA: JIT compiling it needs that release's driver."""
    if not isas:
        return None
    newest = max(isas)
    rel = PTX_ISA_RELEASE.get(newest)
    if rel is None:  # an ISA newer than the table: the newest release we know of is a lower bound
        # An ISA older than the table (CUDA 10 and before) has no release slimwheel knows: no PTX floor.
        rel = max((r for isa, r in PTX_ISA_RELEASE.items() if isa <= newest), default=None)
    return CudaVersion(*rel) if rel is not None else None


def _alternatives(elfs: tuple[ElfReport, ...], groups: dict[str, tuple[str, ...]]) -> tuple[Alternative, ...]:
    """Each alternative's CUDA major and driver floors from its own file alone (`assemble`'s rules, one file)."""
    by_name = {e.name: e for e in elfs}
    out = []
    for group, files in groups.items():
        for f in files:
            e = by_name[f]
            cuda = alt_model.version_of(f)
            m = cuda_major([(f, e.needed)]).major or int(cuda.split(".")[0])
            own = e.code_entries
            sass = any(t.kind is Kind.SASS for en in own if (t := en.target) is not None)
            floor = MAJOR_DRIVER.get(m) if sass else None
            if floor is not None and m == 12 and any(en.compression == "zstd" for en in own):
                floor = max(floor, SIZE_COMPRESSION_DRIVER_CUDA12, key=driver_key)
            rel = _ptx_release([en.ptx_isa for en in own if en.ptx_isa])
            ptx_floor = driver_for_release(rel) if rel is not None else None
            cov, _ = module_coverage((e,))
            out.append(
                Alternative(
                    group=group,
                    file=f,
                    cuda=cuda,
                    cuda_major=m,
                    driver_floor=floor or ptx_floor,
                    ptx_driver_floor=ptx_floor,
                    sass=tuple(map(str, cov.native)),
                    ptx_only=tuple(map(str, cov.ptx_only)),
                )
            )
    return tuple(sorted(out, key=lambda a: (a.group, tuple(int(x) for x in a.cuda.split(".")))))


def _entry_json(e: FatbinEntry) -> dict[str, Any]:
    d: dict[str, Any] = {
        "kind": e.kind,
        "arch": e.arch,
        "compression": e.compression,
        "stored_bytes": e.stored_size,
        "uncompressed_bytes": e.uncompressed_size,
    }
    if e.ptx_isa:
        d["ptx_isa"] = f"{e.ptx_isa[0]}.{e.ptx_isa[1]}"
    return d


def elf_to_json(elf: ElfReport) -> dict[str, Any]:
    return {
        "name": elf.name,
        "bytes": elf.size,
        "kind": elf.kind,
        "machine": elf.machine,
        "sections": dict(sorted(elf.sections.items(), key=lambda kv: -kv[1])),
        "soname": elf.soname,
        "needed": list(elf.needed),
        "opens": list(elf.opens),  # CUDA libraries it opens with dlopen by name (ElfReport.opens)
        "names": list(elf.names),  # other shared objects it may open by name (ElfReport.names)
        "rpath": elf.rpath,
        "runpath": elf.runpath,
        "exports_cxx_runtime": elf.exports_cxx_runtime,
        # library -> the GNU symbol versions required of it (the platform floor: slimwheel.floor)
        "symbol_versions": {
            lib: [v.version for v in elf.version_needs if v.library == lib]
            for lib in dict.fromkeys(v.library for v in elf.version_needs)
        },
        "cuda_modules": elf.modules,
        "no_kernel_modules": len(elf.kernelless_fatbins),
        "fatbin_bytes": elf.fatbin_bytes,
        "fatbins": [
            {
                "offset": fb.offset,
                "section": fb.section or None,
                "bytes": fb.size,
                "device_link": fb.device_link,
                "kernels": fb.kernels,
                "entries": [_entry_json(e) for e in fb.entries],
            }
            for fb in elf.fatbins
        ],
        "totals": [t.__dict__ for t in target_totals([e for fb in elf.fatbins for e in fb.entries])],
        "nvrtc_sources": describe(elf.nvrtc),
    }


def gap_text(gap: CoverageGap) -> str:
    how = "only through PTX JIT" if gap.how == "ptx" else "not at all"
    text = f"{gap.fatbins} of {gap.total} fatbins run {how} (in {', '.join(gap.elfs)})"
    if gap.targets:
        shown = "; ".join(" ".join(ts) for ts in gap.targets[:3]) + ("; ..." if len(gap.targets) > 3 else "")
        text += f"; their code: {shown}"
        older = all(
            all(t.startswith("sm_") and int(t[3:].rstrip("afr")) // 10 < gap.cc.major for t in ts) for ts in gap.targets
        )
        if older and gap.how == "none":
            # cuBLAS 11.8 ships such modules (openai_sgemm: sm_50/60/61 only) and launches them on those GPUs only.
            text += (
                " (SASS for older GPUs only and no PTX: a library's kernels for older GPUs, which it does not "
                "launch on this one, look like this; code of your own needs this GPU's SASS or PTX)"
            )
    return text


def coverage_rows(report: WheelReport) -> list[tuple[str, str, str, str]]:
    """(cc, GPU, how: sass|ptx|none, via) for every known CC, 5.0 to 12.1; `how` is the weakest module's."""
    from slimwheel.cuda.arch import generation

    gaps = {g.cc: g for g in report.coverage_gaps}
    how_of = {
        cc: k
        for k, ccs in (
            ("sass", report.coverage.native),
            ("ptx", report.coverage.ptx_only),
            ("none", report.coverage.none),
        )
        for cc in ccs
    }
    rows = []
    for cc in KNOWN_CCS:
        how = how_of[cc]
        t = served_by(cc, report.targets)[1]
        via = gap_text(gaps[cc]) if cc in gaps else (str(t) if t and how != "none" else "")
        gen = generation(cc)
        rows.append((str(cc), gen.name if gen else "", how, via))
    return rows


def _coverage_json(report: WheelReport) -> list[dict[str, Any]]:
    gaps = {g.cc: g for g in report.coverage_gaps}
    out = []
    for (cc_text, gpu, how, _via), cc in zip(coverage_rows(report), KNOWN_CCS, strict=True):
        best = served_by(cc, report.targets)[1]
        gap = gaps.get(cc)
        out.append(
            {
                "cc": cc_text,
                "gpu": gpu,
                "served_by": how,
                "best_target": str(best) if best else None,
                "weakest": None
                if gap is None
                else {"served_by": gap.how, "fatbins": gap.fatbins, "of": gap.total, "elfs": list(gap.elfs)},
            }
        )
    return out


def report_to_json(report: WheelReport) -> dict[str, Any]:
    """Versioned JSON ("schema": 1). Sizes are integers in bytes; their keys end in _bytes or are "bytes"."""
    return {
        "schema": SCHEMA,
        "wheel": {
            "path": str(report.path),
            "file": report.path.name,
            "name": report.name,
            "version": report.version,
            "tags": list(report.tags),
            "requires_dist": list(report.requires_dist),
            "bytes": report.size,
            "installed_bytes": report.installed_size,
        },
        "cuda": {
            "major": report.cuda_major,
            "major_evidence": report.cuda_major_why,
            "ptx_release": str(report.ptx_release) if report.ptx_release else None,
            "driver_floor": report.driver_floor,
            "ptx_jit_driver_floor": report.ptx_driver_floor,
            "driver_reasons": list(report.driver_why),
            "fatbin_compression": list(report.compression),
            "alternatives": [dataclasses.asdict(a) for a in report.alternatives],
            "no_kernel_modules": sum(n for _f, n in report.kernelless),
        },
        "targets": [str(t) for t in report.targets],
        "coverage": _coverage_json(report),
        "totals": [t.__dict__ for t in target_totals(report.fatbin_entries)],
        "files": [
            {
                "name": f.name,
                "compressed_bytes": f.compressed,
                "uncompressed_bytes": f.uncompressed,
                "share": round(f.share, 6),
            }
            for f in sorted(report.files, key=lambda f: -f.compressed)
        ],
        "elfs": [elf_to_json(e) for e in report.elfs],
        "duplicates": [
            {
                "names": list(g.names),
                "keep": g.keep,
                "bytes_each": g.size,
                "wasted_compressed_bytes": g.wasted_compressed,
                "wasted_uncompressed_bytes": g.wasted_uncompressed,
                "soname_chain": g.soname_chain,
            }
            for g in report.duplicates
        ],
    }
