"""`slimwheel slim`: a wheel someone already built, with the device code that no requested GPU uses dropped.

Flow: unpack the input once into a work folder and read its report from the unpacked files -> the compute
capabilities to keep (check.required_ccs, the rule `check --require-arch` uses, so integrated aarch64 GPUs leave an
x86_64 request the same way; unknown ones refused) -> each ELF file's edits planned from its report (fatbin_edit) ->
new version -> packed with a fresh RECORD, edited files streamed through their plans (wheelfile.pack_to) -> read
back and checked with the requested CCs required, under a temporary name -> renamed. The input wheel is only read;
memory holds one file's scanned pages at a time, never a copy of a file.

Naming: the slimmed wheel gets a local version label (`1.2.0+slim.sm90`; `2.1+cu130.slim.sm90` when the version has
one already) rather than a build tag. A build tag would make pip prefer the slim wheel over the universal one of the
same version wherever both are found, and it is invisible in `pip list`; a local label says what the install is,
matches `==1.2.0` pins, and PyPI refuses to host it, so a slim wheel meant for one cluster cannot reach everyone.
The filename's version and METADATA's Version agree; the tags are unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from slimwheel import check as checkmod
from slimwheel import fsutil
from slimwheel.cuda.arch import (
    CC,
    KNOWN_CCS,
    CCRequest,
    RequireArch,
    Target,
    counted,
    parse_cc_set,
    require_known,
    served_by,
)
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.devicecode import has_device_code
from slimwheel.inspect.elf import ElfReport, kernels_kept
from slimwheel.inspect.fatbin import Fatbin
from slimwheel.inspect.files import mapped_file
from slimwheel.inspect.report import WheelReport, coverage_detail, nvrtc_targets
from slimwheel.inspect.scan import inspect_unpacked, inspect_wheel
from slimwheel.inspect.wheel import DEFAULT_LIMITS, WheelArchive, file_tags
from slimwheel.postbuild.fatbin_edit import (
    Dropped,
    ElfPlan,
    PtxMode,
    SlimRequest,
    apply_plan,
    container_keep,
    plan_elf,
)
from slimwheel.wheelfile import Source, digest_tree, judge_record, pack_to, record_problems, unpack

log = logging.getLogger(__name__)
SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class FileSlim:
    """One ELF file of the wheel: its installed bytes (unchanged: freed bytes become zeros) and what it lost.
    `removed`: a standalone cubin for none of the requested GPUs, left out of the wheel whole."""

    name: str
    size: int
    containers: int
    dropped: tuple[Dropped, ...]
    removed: bool = False

    @property
    def dropped_bytes(self) -> int:
        return sum(d.bytes for d in self.dropped)

    def by_arch(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(kind, arch) -> (entries, bytes) dropped."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for d in self.dropped:
            n, b = out.get((d.kind, d.arch), (0, 0))
            out[(d.kind, d.arch)] = (n + 1, b + d.bytes)
        return out


@dataclass(frozen=True, kw_only=True)
class Rewritten:
    """A wheel written by `write_rewritten`: where it goes, and what each ELF file lost."""

    wheel: Path
    version: str
    files: tuple[FileSlim, ...]


@dataclass(frozen=True, kw_only=True)
class SlimResult:
    source: Path
    request: SlimRequest
    left_out: tuple[CC, ...]  # integrated GPUs dropped from the request for an x86_64 wheel
    rewritten: Rewritten
    before: WheelReport
    after: WheelReport
    verdict: checkmod.Verdict


@dataclass(frozen=True, kw_only=True)
class PtxKeep:
    """--ptx, parsed (`parse_ptx`): the PTX mode, and the CCs whose PTX to keep besides; `text` as written, for
    messages."""

    mode: PtxMode = "needed"
    ccs: tuple[CC, ...] = ()
    text: str = "needed"


def parse_ptx(spec: str) -> PtxKeep:
    """--ptx: "needed" (only PTX a requested GPU needs), "newest" (each module's newest PTX too), or CCs whose PTX
    to keep ("9.0", "8.0,12.0")."""
    s = spec.strip().lower()
    if s in ("needed", ""):
        return PtxKeep(mode="needed", text=spec)
    if s == "newest":
        return PtxKeep(mode="newest", text=spec)
    try:
        return PtxKeep(mode="needed", ccs=parse_cc_set(s), text=spec)
    except BadInputError as e:
        raise BadInputError(f"--ptx {spec!r}: {e.message}", hint="needed, newest, or compute capabilities") from None


def local_version(version: str, label: str) -> str:
    """`version` with `label` appended to its local part (PEP 440): 1.2.0 -> 1.2.0+LABEL, 2.1+cu130 -> 2.1+cu130.LABEL."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise BadInputError(f"version {version!r} is not a PEP 440 version") from None
    new = f"{version}.{label}" if v.local else f"{version}+{label}"
    try:
        Version(new)
    except InvalidVersion:
        raise BadInputError(f"local version label {label!r} is not valid (PEP 440: letters, digits, dots)") from None
    return new


def slim_label(ccs: tuple[CC, ...], ptx: PtxMode, ptx_ccs: tuple[CC, ...]) -> str:
    """slim.sm80.sm90 (+ .ptx for the newest PTX, .ptx90 for listed PTX)."""
    parts = ["slim", *(f"sm{cc.sm}" for cc in sorted(set(ccs)))]
    if ptx == "newest":
        parts.append("ptx")
    parts += [f"ptx{cc.sm}" for cc in sorted(set(ptx_ccs))]
    return ".".join(parts)


def _replace_version(metadata: str, new: str, *, where: str) -> str:
    head, sep, body = metadata.partition("\n\n")
    text, n = re.subn(r"(?m)^Version:[ \t]*.*$", f"Version: {new}", head, count=1)
    if n != 1:
        raise BadInputError(f"{where}: no Version field")
    return text + sep + body


@dataclass(frozen=True, kw_only=True)
class Unpacked:
    """A wheel unpacked once into a work folder, with its report read from the unpacked files: what every output of
    a slim or variants run is made from, so that the input is read once however many wheels come out."""

    wheel: Path
    root: Path
    names: tuple[str, ...]
    report: WheelReport
    dist_info: str


def unpack_input(wheel: Path, work: Path, *, rewrite_record: bool = False) -> Unpacked:
    """Unpack `wheel` under `work` (bounded, streamed: `wheelfile.unpack`), judge its RECORD against the files
    (`wheelfile.judge_record`: exit 14 unless `rewrite_record`) and read its report from the files."""
    wheel = Path(wheel)
    try:
        parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    root = Path(work) / "w"
    names = unpack(wheel, root)
    report = inspect_unpacked(wheel, root, names)
    with WheelArchive(wheel) as archive:
        dist_info = archive.metadata().dist_info
    record = root / dist_info / "RECORD"
    try:
        text = record.read_text(encoding="utf-8") if record.is_file() else ""
    except UnicodeDecodeError:
        raise BadInputError(f"{wheel}: {dist_info}/RECORD is not UTF-8 text") from None
    judge_record(
        wheel,
        record_problems(text, digest_tree(root), record_name=f"{dist_info}/RECORD"),
        rewrite_record=rewrite_record,
    )
    return Unpacked(wheel=wheel, root=root, names=tuple(names), report=report, dist_info=dist_info)


def output_name(src: Unpacked, out_dir: Path, *, version: str | None, variant: str | None = None) -> Path:
    """Where the rewritten wheel goes: the input's file name with the new version (and the variant label)."""
    wheel = src.wheel
    stem = wheel.name.removesuffix(".whl")
    dist_prefix = src.dist_info.removesuffix(".dist-info")  # name-version as the wheel spells it
    old_version = dist_prefix.split("-", 1)[1] if "-" in dist_prefix else src.report.version
    parts = stem.split("-")
    if parts[1] != old_version:
        raise BadInputError(
            f"{wheel}: the file name's version {parts[1]!r} differs from its .dist-info folder's {old_version!r}"
        )
    parts[1] = version or old_version
    if variant is not None:
        parts.append(variant)
    target = Path(out_dir) / ("-".join(parts) + ".whl")
    if target.resolve() == wheel.resolve():
        raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another output folder")
    return target


def plans_for(src: Unpacked, request: SlimRequest) -> dict[str, ElfPlan]:
    """Per ELF file with containers: what slimming to `request` does (read from the unpacked file's headers)."""
    out = {}
    whole = monotone_whole(src.report, request, src.root)
    for elf in src.report.elfs:
        if not elf.fatbins:
            continue
        with mapped_file(src.root / elf.name, elf.name) as data:
            out[elf.name] = plan_elf(data, elf, request, whole.get(elf.name, frozenset()))
    return out


def _slimmed(
    report: WheelReport, request: SlimRequest, whole: Mapping[str, set[int]], root: Path
) -> tuple[ElfReport, ...]:
    """The ELF reports as the slimmed copy will read: each container with the members slim keeps, and with no
    kernels when those define none (an empty sm_70 cubin kept beside sm_52 code dropped)."""

    def kept(elf: ElfReport, fb: Fatbin) -> Fatbin:
        keep = container_keep(fb, request, whole=fb.offset in whole.get(elf.name, ()))
        if all(keep):
            return fb
        entries = tuple(e for e, k in zip(fb.entries, keep, strict=True) if k)
        loadable = any(e.target is not None for e in entries)  # a standalone cubin is kept whole or not at all
        code = fb.kernels and loadable and kernels_kept(root / elf.name, elf.name, fb, keep)
        return dataclasses.replace(fb, entries=entries, kernels=code)

    return tuple(dataclasses.replace(elf, fatbins=tuple(kept(elf, fb) for fb in elf.fatbins)) for elf in report.elfs)


def monotone_whole(report: WheelReport, request: SlimRequest, root: Path) -> dict[str, frozenset[int]]:
    """Containers (file -> offsets) slim keeps whole so that no GPU the input fails passes in the slimmed copy.

    Coverage judges a module only for GPUs it is meant for, and an emptied container for none: emptying a module
    with no code for a GPU that it was judged for (the only one of its file: a file is judged by what it has) would
    turn that GPU's failure into a pass with strictly less code (nvidia-npp 13.2 slimmed to 9.0 did), and so would
    narrowing a module to one major's code (then made for that major only). So the slimmed copy's coverage is
    computed before anything is written, and while a GPU flips, the slimmed modules without code for it are kept
    whole; each round keeps at least one more, so it ends. Standalone cubin files (flashinfer-cubin: one per GPU,
    picked by the package) are left out of this rule: a file for other GPUs only is theirs, not a gap."""
    gpus = tuple(cc for cc in KNOWN_CCS if counted(cc, exclude_integrated=report.is_x86_64))
    failing = set(coverage_detail(report.elfs, gpus).coverage.none)
    whole: dict[str, set[int]] = {}
    while failing:
        slimmed = _slimmed(report, request, whole, root)
        flipped = failing - set(coverage_detail(slimmed, gpus).coverage.none)
        if not flipped:
            break
        grew = False
        for elf, after in zip(report.elfs, slimmed, strict=True):
            if elf.kind == "cubin":  # a file its package loads for the GPU it names: left out for other GPUs
                continue
            for fb, kept in zip(elf.fatbins, after.fatbins, strict=True):
                ts = [e.target for e in fb.entries if e.target is not None]
                changed = fb.kernels and ts and len(kept.entries) < len(fb.entries)
                if changed and any(served_by(cc, ts)[0] == "none" for cc in flipped):
                    grew |= fb.offset not in whole.setdefault(elf.name, set())
                    whole[elf.name].add(fb.offset)
        if not grew:
            break
    return {name: frozenset(offsets) for name, offsets in whole.items()}


def _source(path: Path, plan: ElfPlan) -> Source:
    def feed(sink: Callable[[bytes], object]) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            apply_plan(lambda at, n: os.pread(fd, n, at), plan, sink)
        finally:
            os.close(fd)

    return feed


def write_rewritten(
    src: Unpacked,
    tmp: Path,
    target: Path,
    plans: Mapping[str, ElfPlan],
    *,
    version: str | None,
    extra_files: Callable[[str], Mapping[str, bytes]] | None = None,
) -> Rewritten:
    """Write the slimmed copy of `src` to `tmp` (the caller renames it onto `target` once it is judged): every ELF
    with edits streamed through its plan (`fatbin_edit.apply_plan`), everything else as unpacked. `version`: a new
    version renames the .dist-info and .data folders of the work tree and METADATA's Version (slim makes one output
    per work tree); None keeps it. `extra_files(dist_info)`: files to add, by path in the wheel."""
    root = src.root
    dist_prefix = src.dist_info.removesuffix(".dist-info")
    old_version = dist_prefix.split("-", 1)[1] if "-" in dist_prefix else src.report.version
    dist_info = src.dist_info
    renamed = ""
    if version is not None and version != old_version:
        new_prefix = f"{dist_prefix.split('-', 1)[0]}-{version}"
        for suffix in (".dist-info", ".data"):
            if (root / f"{dist_prefix}{suffix}").is_dir():
                (root / f"{dist_prefix}{suffix}").rename(root / f"{new_prefix}{suffix}")
        dist_info = f"{new_prefix}.dist-info"
        meta_path = root / dist_info / "METADATA"
        meta_path.write_text(
            _replace_version(meta_path.read_text(encoding="utf-8"), version, where=f"{src.wheel}: METADATA"),
            encoding="utf-8",
        )
        renamed = dist_prefix
    log.info("%s -> %s", src.wheel.name, target.name)

    def moved(name: str) -> str:  # a file's path after the folder renames above
        top, sep, rest = name.partition("/")
        for suffix in (".dist-info", ".data"):
            if renamed and top == renamed + suffix:
                return f"{dist_info.removesuffix('.dist-info')}{suffix}{sep}{rest}"
        return name

    sources = {moved(name): _source(root / moved(name), plan) for name, plan in plans.items() if plan.edits}
    omit = frozenset(moved(name) for name, plan in plans.items() if plan.omitted)
    pack_to(
        root,
        dist_info,
        tmp,
        sources=sources,
        extra=extra_files(dist_info) if extra_files else None,
        omit=omit,
        label=target,
    )
    files = tuple(
        FileSlim(
            name=name, size=plan.size, containers=plan.containers, dropped=plan.dropped, removed=bool(plan.omitted)
        )
        for name, plan in sorted(plans.items())
    )
    return Rewritten(wheel=target, version=version or old_version, files=files)


# Members over 8 MiB are spooled and mapped rather than read into memory when slim reads its own outputs back: freed
# large buffers stay in the allocator's arenas (variants of cupy-cuda13x crept from 44 to 87 MB over five wheels).
_JUDGE_LIMITS = dataclasses.replace(DEFAULT_LIMITS, in_memory_bytes=1 << 20)


def judge_output(tmp: Path, target: Path) -> WheelReport:
    """The report of a written wheel, read back as every command reads wheels (one member at a time), so that a wheel
    slimwheel cannot read never gets its final name; reported under that name."""
    report = inspect_wheel(tmp, _JUDGE_LIMITS, workers=1)
    # The tags come from the final name, as pip reads them, not from the temporary one (which names no tags: the
    # WHEEL file's would stand in, linux_x86_64 for CuPy 14.2's wheels named manylinux2014_x86_64).
    return dataclasses.replace(report, path=target, tags=file_tags(target.name) or report.tags)


def unserved(report: WheelReport, ccs: tuple[CC, ...]) -> bool:
    """Whether no code of the wheel, in any CUDA module, runs on any requested GPU: a slimmed copy would then hold no
    code for them at all (faiss-gpu-cu12 1.14.1.post1, sm_70/sm_80 only, slimmed to 9.0 lost all 182 modules). One
    module lacking them is not that (cuBLAS keeps Hopper's kernels in sm_90a modules of their own)."""
    targets = set(report.targets) | {t for e in report.elfs for r in e.nvrtc for t in nvrtc_targets(r)}
    return all(served_by(cc, targets)[0] == "none" for cc in ccs)


def slim(
    wheel: Path,
    out_dir: Path,
    *,
    archs: RequireArch,
    ptx: PtxKeep = PtxKeep(),
    allow_unserved: bool = False,
    rewrite_record: bool = False,
    settings: checkmod.PolicySettings = checkmod.NO_SETTINGS,
) -> SlimResult:
    """Slim `wheel` into out_dir to the GPUs of `archs` (a coverage request, `parse_require_arch`: "9.0", "8.0-9.0",
    "8.0+", or "toolkit"/"auto" as `check --require-arch` reads them).

    Refused before anything is written: compute capabilities no GPU has, and (unless `allow_unserved`) a request
    that none of the wheel's code serves, and an input whose RECORD does not match its files (as repair refuses it,
    `wheelfile.judge_record`, unless `rewrite_record`). The output is read back and judged under a temporary name, renamed only
    then; the work folder (`$TMPDIR/slimwheel-slim-*`) goes whatever happens, and a killed run's is removed by the next.
    `settings`: what the output is judged against beside the request (`check.PolicySettings.of` the user's
    configuration, as `slimwheel check` judges; its gpu-intent narrowed to the request).
    """
    wheel = Path(wheel)
    mode, ptx_ccs = ptx.mode, ptx.ccs
    require_known(ptx_ccs, what=f"--ptx {ptx.text!r}")
    shown_archs = f"--archs {str(archs)!r}"
    if isinstance(archs, CCRequest):  # refused before the wheel is unpacked
        require_known(archs.resolve(), what=shown_archs)
    with fsutil.work_dir("slimwheel-slim-") as work:
        src = unpack_input(wheel, work, rewrite_record=rewrite_record)
        before = src.report
        ccs, left_out = checkmod.required_ccs(archs, before)
        require_known(ccs, what=shown_archs)
        if not ccs:
            raise BadInputError(f"{shown_archs}: names no GPU to keep code for")
        request = SlimRequest(ccs=ccs, ptx=mode, ptx_ccs=ptx_ccs)
        if not before.fatbin_entries:
            raise BadInputError(f"{wheel}: no fatbin (CUDA device code) in any ELF file: nothing to slim")
        if not before.code_entries:
            # Modules that define no kernel are kept whole (and cuda-cccl 1.2.1's are all such): the output would be
            # the input under another version. Said as what it is, not as a request nothing serves.
            containers = sum(n for _, n in before.kernelless)
            raise BadInputError(
                f"{wheel}: none of its {containers} CUDA module(s) defines a kernel (modules with none are kept "
                "whole): nothing to slim"
            )
        if not allow_unserved and unserved(before, ccs):
            have = " ".join(str(t) for t in before.targets) or "none"
            raise CheckFailed(
                f"{wheel}: no CUDA module of it runs on {', '.join(map(str, ccs))} (its code: {have}); slimming "
                f"would drop all of its device code, so no wheel was written (--allow-unserved writes it anyway)",
                ExitCode.MISSING_COVERAGE,
            )
        version = local_version(before.version, slim_label(ccs, mode, ptx_ccs))
        target = output_name(src, out_dir, version=version)
        plans = plans_for(src, request)
        with fsutil.atomic_path(target) as tmp:
            rewritten = write_rewritten(src, tmp, target, plans, version=version)
            after = judge_output(tmp, target)
    policy = checkmod.policy_for(
        after,
        settings,
        require_arch=CCRequest.of(ccs),
        made_for=ccs,
        # code slim dropped is not code built at run time: an output left with none fails as it did before
        strict_device_code=has_device_code(before),
    )
    verdict = checkmod.judge(checkmod.analyze(after.path, report=after), policy)  # as `slimwheel check` judges it
    return SlimResult(
        source=wheel,
        request=request,
        left_out=left_out,
        rewritten=rewritten,
        before=before,
        after=after,
        verdict=verdict,
    )


@dataclass(frozen=True, kw_only=True)
class WheelSummary:
    """The sizes and targets of a wheel, all a result keeps of a report it no longer needs."""

    targets: tuple[Target, ...]
    size: int
    installed_size: int
    fatbin_bytes: int

    @classmethod
    def of(cls, report: WheelReport) -> WheelSummary:
        return cls(
            targets=report.targets,
            size=report.size,
            installed_size=report.installed_size,
            fatbin_bytes=sum(e.fatbin_bytes for e in report.elfs),
        )


def sizes_json(before: WheelSummary, after: WheelSummary) -> dict[str, int]:
    return {
        "before_bytes": before.size,
        "after_bytes": after.size,
        "before_installed_bytes": before.installed_size,
        "after_installed_bytes": after.installed_size,
        "before_fatbin_bytes": before.fatbin_bytes,
        "after_fatbin_bytes": after.fatbin_bytes,
    }


def files_json(files: tuple[FileSlim, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "bytes": f.size,
            "fatbins": f.containers,
            "dropped_bytes": f.dropped_bytes,
            "removed": f.removed,
            "dropped": [
                {"kind": kind, "arch": arch, "entries": n, "bytes": b}
                for (kind, arch), (n, b) in sorted(f.by_arch().items(), key=lambda kv: -kv[1][1])
            ],
        }
        for f in files
    ]


def result_to_json(r: SlimResult) -> dict[str, Any]:
    """Versioned ("schema": 1); sizes in bytes."""
    return {
        "schema": SCHEMA,
        "input": str(r.source),
        "wheel": str(r.rewritten.wheel),
        "version": r.rewritten.version,
        "keep": {
            "ccs": [str(cc) for cc in r.request.ccs],
            "ptx": r.request.ptx,
            "ptx_ccs": [str(cc) for cc in r.request.ptx_ccs],
            "left_out": [str(cc) for cc in r.left_out],
        },
        "targets_before": [str(t) for t in r.before.targets],
        "targets_after": [str(t) for t in r.after.targets],
        "sizes": sizes_json(WheelSummary.of(r.before), WheelSummary.of(r.after)),
        "files": files_json(r.rewritten.files),
        "check": checkmod.verdict_to_json(r.verdict),
    }
