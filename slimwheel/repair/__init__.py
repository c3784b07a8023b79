"""`slimwheel repair`: auditwheel repair with the CUDA libraries of PyPI's nvidia-* wheels excluded and required.

The orchestrator; each step is a call into the module that owns the concern:
  unpack and verify the input (`wheelfile`) -> its ELF files (`inspect.dynamic`) -> CUDA major, exclusions and
  requirements (`deps`) -> search path entries into folders nobody named dropped from auditwheel's copy
  (`searchpath.drop_before_auditwheel`: it would bundle from them) -> `auditwheel repair --exclude ...` (`tools`) ->
  search paths: unsafe entries dropped, the
  nvidia/... and external folders put back (`rpath`, `external`) -> the run-time loader (`runtime.place`) ->
  Requires-Dist (`wheelfile`) -> the output judged by the same dependency rule `check` uses (`deps`; else exit 12,
  nothing written) -> packed atomically (`wheelfile`). The input wheel is never modified.

External libraries (`--external SONAME=REQUIREMENT[@FOLDER]`, `slimwheel.external`): non-CUDA libraries another PyPI
wheel provides get the same treatment as the CUDA ones, without the loader.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel import deps, fsutil, torchext, wheelfile
from slimwheel.analysis import requirements_graph
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, CheckFailed, ConfigError, ToolError
from slimwheel.external import ExternalLib
from slimwheel.repair.major import major_for
from slimwheel.repair.output import (
    externals_needed,
    final_judgement,
    output_target,
    read_repaired,
    write_requirements,
)
from slimwheel.repair.requires import (
    exclusions,
    plan_from_rules,
    plan_requirements,
    provided_elsewhere,
    refuse_paths,
    runtime_needs,
    torch_externals,
    wheel_tags,
)
from slimwheel.repair.searchpath import (
    DroppedReach,
    drop_before_auditwheel,
    fix_search_paths,
    not_found,
    wanted_rpath,
)
from slimwheel.repair.source import RepairInput, elf_facts, read_input, unpack_as
from slimwheel.repair.unvendor import (
    IndexFor,
    SharedCopy,
    Unvendored,
    copies_versions,
    without_copies,
)
from slimwheel.runtime.place import driver_floor, install_loader
from slimwheel.strip import Stripped, strip_members
from slimwheel.tools import LibrariesNotFound, run_auditwheel

__all__ = ["IndexFor", "RepairResult", "SharedCopy", "Unvendored", "major_for", "repair_wheel", "wanted_rpath"]

log = logging.getLogger("slimwheel.repair")


@dataclass(frozen=True, kw_only=True)
class RepairResult:
    wheel: Path
    excluded: tuple[str, ...]
    requires: tuple[str, ...]  # the Requires-Dist lines repair wrote
    bundled: tuple[str, ...]
    cuda_major: int | None = None
    loader: tuple[str, ...] = ()  # files added to run the loader (loader modules, shims)
    rpath_fixed: tuple[str, ...] = ()  # ELF files whose RPATH got the nvidia/... (or external) folders back
    rpath_dropped: tuple[str, ...] = ()  # `file: entry` for each unsafe search path entry removed
    record_rewritten: bool = False  # the input's RECORD did not match its files and --rewrite-record was given
    external: tuple[ExternalLib, ...] = ()  # the external libraries the wheel needs, each with its folder
    floors: tuple[deps.Floor, ...] = ()  # each CUDA library's requirement floor and why
    extra: str | None = None  # the extra(s) its CUDA libraries are required under: the project's own (CuPy's ctk), or
    # one per CUDA major for alternatives of several majors ("cuda12, cuda13")
    unvendored: tuple[Unvendored, ...] = ()  # CUDA libraries the input bundled, left to the nvidia-* wheels now
    split: tuple[SharedCopy, ...] = ()  # unvendored copies a requirement ships too (--split-shared-copies)
    copies_unknown: tuple[str, ...] = ()  # requirements whose copies could not be compared, each with why
    # What the output's verdict could not learn (`deps.DependencyVerdict.unknown`: a required project's folder taken
    # to hold a library, which only the index tells): said, not a reason to write nothing (repair gives no verdict;
    # `check` fails such a wheel with exit 19 unless --unknown note)
    unknown: tuple[str, ...] = ()
    # CUDA libraries only optional parts of the package need (deps.DependencyVerdict.optional), left unrequired
    optional: tuple[str, ...] = ()
    stripped: tuple[Stripped, ...] = ()  # ELF files stripped of debug info (`strip=True`), before auditwheel
    phases: dict[str, float] = field(default_factory=dict)
    # the wheel's own requirements on CUDA libraries' wheels, kept as the maintainer wrote them in place of the plan's
    # (faiss-gpu-cu11 1.12's `nvidia-cuda-runtime-cu11>=11.8.89` for `>=11.0,<12`)
    kept: tuple[str, ...] = ()
    # platform tags of the input older than its files' symbol versions allow (`floor.below_floor`), which auditwheel
    # keeps beside the tag it adds: dropped from the name and WHEEL
    tags_dropped: tuple[str, ...] = ()

    @property
    def unvendored_bytes(self) -> tuple[int, int]:
        """(bytes in the input wheel, bytes installed) of the copies removed."""
        return sum(u.compressed for u in self.unvendored), sum(u.installed for u in self.unvendored)


def repair_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    cuda: CudaVersion | None = None,
    loader: bool = True,
    plat: str | None = None,
    versions: Mapping[str, str] | None = None,
    externals: Sequence[ExternalLib] = (),
    rewrite_record: bool = False,
    unvendor: bool = True,
    torch: torchext.TorchBuild | None = None,
    library_dirs: Sequence[Path] = (),
    named_dirs: Sequence[Path] = (),
    index: IndexFor | None = None,
    split_shared: bool = False,
    strip: bool = False,
) -> RepairResult:
    """Repair one wheel into out_dir (see the module docstring). `versions`: nvidia-* package -> version the build
    linked against, for the requirements' lower bounds. `externals`: libraries other wheels provide; those no ELF
    file needs are ignored (so one config serves builds that link them and builds that do not). `rewrite_record`:
    accept an input whose RECORD does not match its files (the output always gets a fresh, correct RECORD). `unvendor`:
    copies of CUDA libraries the input carries (`cuda.libs.vendored`: spconv/cumm-style `libcudart-<hash>.so.12`
    under `<name>.libs/`) are removed and the files that need them need the nvidia-* wheels' SONAMEs instead, which
    the rest of repair then requires, finds by RPATH and loads; False: such a wheel is refused (exit 12), since its
    copy and the nvidia-* wheels' would be two CUDA runtimes in one process. `torch`: the torch the wheel was built
    against, for a wheel that needs torch's libraries (default: the running Python's torch); its libraries are left to
    torch's wheel and torch is required (`slimwheel.torchext`). `library_dirs`: searched first for what auditwheel
    bundles (a sysroot's library folders: a wheel linked against Debian 11's libgomp must bundle that one, not the
    host's, which needs a newer glibc); the user named them, so an RPATH entry into one is auditwheel's to follow.
    `named_dirs`: other folders outside the wheel whose libraries may be bundled (`build`'s own build and install
    folders): an absolute RPATH entry at or under one is left for auditwheel; any other entry into a folder outside
    the wheel is dropped before auditwheel reads the file, and a library found only through one is refused (exit
    12, naming the file, the NEEDED name and the path). `index`: the lookup of the requirements' wheels (check's
    requirement graph): what they, and theirs, install is not bundled, the output is judged with it, and a copy one
    of them ships is not unvendored (exit 12) unless `split_shared`; None: offline. `strip`: strip the ELF files the
    debug-symbols check fails (`slimwheel.strip`)."""
    wheel = _checked_input(Path(wheel).absolute(), plat)
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    # A temp sibling in the cache: a killed run's copy (4 GB for a big wheel) goes at the next repair (fsutil).
    work_root = fsutil.cache_dir() / "work" / "repair"
    with fsutil.temp_sibling(work_root, directory=True) as tmp, _named_for_user(tmp, wheel):
        src = read_input(wheel, tmp / "in", rewrite_record=rewrite_record)
        # what the requirements, and theirs, install (read once, on first question), as check reads it
        graph = requirements_graph(src.requires, wheel_tags(wheel.name), index) if index and src.requires else None
        src, copies, shared, unknown = without_copies(
            src, tmp / "in", wheel, unvendor=unvendor, graph=graph, split_shared=split_shared
        )
        if copies:
            versions = {**copies_versions(copies), **(versions or {})}
        stripped = strip_members(tmp / "in", src.elfs) if strip else ()
        major = major_for(src.elfs, requires=src.requires, cuda=cuda, wheel_name=wheel.name)
        if src.torch is not None:
            externals = (*torch_externals(src.torch, src.requires, torch, major, wheel.name), *externals)
        needs = runtime_needs(src.elfs, major)
        pre = plan_from_rules(src, major, wheel, graph)
        excludes = exclusions(needs, major, externals, provided_elsewhere(pre))
        refuse_paths(pre, wheel)
        pre_dropped, reach = drop_before_auditwheel(tmp / "in", src.elfs, (*library_dirs, *named_dirs))
        plan = plan_requirements(needs, pre, cuda=cuda, versions=versions, imports=src.imports, wheel_name=wheel.name)
        phases["read"] = time.monotonic() - t0

        t1 = time.monotonic()
        changed = bool(copies or stripped or pre_dropped)
        repaired = _auditwheel(tmp, wheel, src, changed, excludes, plat, library_dirs, reach, offline=graph is None)
        phases["auditwheel"] = time.monotonic() - t1
        log.info("auditwheel repair: %s (%.1f s)", repaired.name, phases["auditwheel"])

        t2 = time.monotonic()
        work = tmp / "out"
        names = unpack_as(repaired, work, shown_as=wheel)
        dist_info = wheelfile.dist_info_of(names, wheel)
        # auditwheel's output, read once: its ELF facts and, for the loader, its driver floor
        aw_report = read_repaired(repaired, work, names, wheel)
        after = elf_facts(aw_report)
        bundled = tuple(sorted(n for n in after if n not in set(src.names)))
        external = externals_needed(after, externals, wheel)
        fixed, dropped, after = fix_search_paths(work, after, src.elfs, needs.needed, external, needs.per_file)
        loader_files: list[str] = []
        # Libraries an extra installs may be absent (the project supports a system CUDA then): the loader, which
        # insists on the wheels' copies, is for libraries the wheel always requires.
        if loader and needs.needed and plan.extra is None:
            assert major is not None  # nothing is needed without a major
            loader_files = install_loader(
                work,
                names,
                after,
                needed=[lib for lib in needs.needed if lib.soname not in plan.optional],
                reqs=plan.reqs,
                dist_name=src.dist_name,
                driver=driver_floor(major, aw_report.driver_floor, "; ".join(aw_report.driver_why) or None),
                wheel_name=wheel.name,
            )
        requires, kept = write_requirements(
            work / dist_info / "METADATA", f"{wheel.name}:{dist_info}/METADATA", plan, external
        )
        target, retagged = output_target(
            Path(out_dir).absolute(), repaired.name, work / dist_info / "WHEEL", aw_report, wheel
        )
        not_known: list[str] = []
        wheelfile.pack(
            work,
            dist_info,
            target,
            verify=lambda written: not_known.extend(final_judgement(written, wheel, src, graph)),
        )
        phases["rewrite"] = time.monotonic() - t2
    for why in not_known:
        log.warning("%s: not known: %s", wheel.name, why)
    kept_names = {canonicalize_name(Requirement(k).name) for k in kept}  # their floors are not what was written
    log.info(
        "repaired %s -> %s (excluded %d SONAMEs, requires %s)",
        wheel.name,
        target,
        len(excludes),
        ", ".join(requires) or "nothing",
    )
    return RepairResult(
        wheel=target,
        excluded=excludes,
        requires=requires,
        kept=kept,
        bundled=bundled,
        cuda_major=major,
        loader=tuple(loader_files),
        rpath_fixed=tuple(fixed),
        rpath_dropped=tuple(dict.fromkeys([*pre_dropped, *dropped])),
        record_rewritten=bool(src.record_problems),
        external=external,
        floors=tuple(f for f in plan.floors if canonicalize_name(f.package) not in kept_names),
        extra=plan.extra,
        unvendored=copies,
        split=shared,
        copies_unknown=unknown,
        unknown=tuple(not_known),
        optional=plan.optional,
        stripped=stripped,
        phases=phases,
        tags_dropped=retagged,
    )


def _checked_input(wheel: Path, plat: str | None) -> Path:
    if not wheel.is_file():
        raise BadInputError(f"{wheel}: no such file")
    if plat is not None and not deps.known_platform(plat):
        raise BadInputError(f"--plat {plat}: not a platform tag auditwheel knows (e.g. manylinux_2_28_x86_64)")
    return wheel


def _auditwheel(
    tmp: Path,
    wheel: Path,
    src: RepairInput,
    changed: bool,
    excludes: Sequence[str],
    plat: str | None,
    library_dirs: Sequence[Path],
    reach: Sequence[DroppedReach],
    *,
    offline: bool,
) -> Path:
    """auditwheel repair of a private copy of the input (packed from `tmp/in` when repair `changed` its files there):
    its messages then never name a file the user may mistake for theirs. Returns the wheel it wrote. `offline`: the
    requirements' own requirements were not read, so a library one of them installs was not excluded."""
    aw_out = tmp / "auditwheel"
    aw_out.mkdir()
    copy = tmp / wheel.name
    if changed:
        wheelfile.pack(tmp / "in", wheelfile.dist_info_of(src.names, wheel), copy)
    else:
        shutil.copyfile(wheel, copy)
    try:
        return run_auditwheel(
            copy, aw_out, excludes=excludes, plat=plat, cwd=tmp, shown_as=wheel, library_dirs=library_dirs
        )
    except LibrariesNotFound as e:
        failure = not_found(e, reach, wheel, names=src.names, elfs=src.elfs)
        if offline and src.requires and failure is e:
            raise CheckFailed(
                f"{e.message}. Offline, what the requirements' own requirements install was not read: without "
                "--offline repair reads the index, and leaves out a library a requirement installs",
                e.exit_code,
            ) from None
        raise failure from None


@contextlib.contextmanager
def _named_for_user(tmp: Path, wheel: Path) -> Iterator[None]:
    """Messages of the steps inside repair's work folder name the input, never the work folder: its unpacked copies
    (`in/`, `out/`) by member name, its copy of the wheel as the wheel, anything else there as "repair's work folder";
    a message that names no wheel gets the input's name first."""
    try:
        yield
    except (BadInputError, ToolError) as e:
        text = e.message
        for inside in ("in", "out", "auditwheel"):
            text = text.replace(f"{tmp / inside}/", "")
        text = text.replace(str(tmp / wheel.name), str(wheel))
        text = text.replace(str(tmp), "repair's work folder")
        if isinstance(e, BadInputError) and wheel.name not in text:
            text = f"{wheel}: {text}"
        if text == e.message:
            raise
        raise (BadInputError if isinstance(e, ConfigError) else type(e))(text, hint=e.hint) from None
