"""`slimwheel repair`: auditwheel repair with the CUDA libraries of PyPI's nvidia-* wheels excluded and required.

The orchestrator; each step is a call into the module that owns the concern:
  unpack and verify the input (`wheelfile`) -> its ELF files (`inspect.dynamic`) -> CUDA major, exclusions and
  requirements (`deps`) -> `auditwheel repair --exclude ...` (`tools`) -> search paths: unsafe entries dropped, the
  nvidia/... and external folders put back (`rpath`, `external`) -> the run-time loader (`runtime.place`) ->
  Requires-Dist (`wheelfile`) -> the output judged by the same dependency rule `check` uses (`deps`; else exit 12,
  nothing written) -> packed atomically (`wheelfile`). The input wheel is never modified.

External libraries (`--external SONAME=REQUIREMENT[@FOLDER]`, `slimwheel.external`): non-CUDA libraries another PyPI
wheel provides get the same treatment as the CUDA ones, without the loader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from slimwheel import deps, fsutil, torchext, wheelfile
from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.major import cuda_major
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, CheckFailed, ConfigError, ExitCode, ToolError
from slimwheel.external import ExternalLib, check_can_tie, resolve_external, used_externals
from slimwheel.inspect.dynamic import ElfInfo, carried_names, imports_by_library, scan_elfs
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.inspect.wheel import requires_dist
from slimwheel.rpath import norm_origin, resolve_entry, unsafe_entries, with_folders
from slimwheel.runtime.place import DriverFloor, driver_floor, install_loader
from slimwheel.strip import Stripped, strip_members
from slimwheel.tools import replace_needed, run_auditwheel, set_rpath

log = logging.getLogger("slimwheel.repair")


@dataclass(frozen=True, kw_only=True)
class RepairResult:
    wheel: Path
    excluded: tuple[str, ...]
    requires: tuple[str, ...]
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
    # CUDA libraries only optional parts of the package need (deps.DependencyVerdict.optional), left unrequired
    optional: tuple[str, ...] = ()
    stripped: tuple[Stripped, ...] = ()  # ELF files stripped of debug info (`strip=True`), before auditwheel
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def unvendored_bytes(self) -> tuple[int, int]:
        """(bytes in the input wheel, bytes installed) of the copies removed."""
        return sum(u.compressed for u in self.unvendored), sum(u.installed for u in self.unvendored)


@dataclass(frozen=True, kw_only=True)
class Unvendored:
    """A copy of a CUDA library the input wheel carried (auditwheel's `libcudart-5a077122.so.12.0.107`)."""

    file: str
    soname: str  # the name the wheel's files needed it by
    replaced_by: str | None  # the SONAME they need now (libcudart.so.12); None: dropped (libnvrtc-builtins)
    package: str  # the nvidia-* wheel that provides it
    compressed: int  # bytes in the input wheel
    installed: int


@dataclass(frozen=True, kw_only=True)
class _Input:
    """What repair learns from the input wheel before auditwheel runs."""

    dist_name: str
    names: list[str]
    elfs: dict[str, ElfInfo]
    requires: tuple[str, ...]
    record_problems: tuple[str, ...]
    imports: dict[str, frozenset[str]]  # library -> the symbols the wheel's ELF files take from it
    torch: torchext.TorchUse | None = None  # what its ELF files take from torch, if they need torch's libraries


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
    host's, which needs a newer glibc). `strip`: strip the ELF files the debug-symbols check fails (`slimwheel.strip`)."""
    wheel = Path(wheel).absolute()
    if not wheel.is_file():
        raise BadInputError(f"{wheel}: no such file")
    if plat is not None and not deps.known_platform(plat):
        raise BadInputError(f"--plat {plat}: not a platform tag auditwheel knows (e.g. manylinux_2_28_x86_64)")
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    # A temp sibling in the cache: a killed run's copy (4 GB for a big wheel) goes at the next repair (fsutil).
    work_root = fsutil.cache_dir() / "work" / "repair"
    with fsutil.temp_sibling(work_root, directory=True) as tmp, _named_for_user(tmp, wheel):
        src = _read_input(wheel, tmp / "in", rewrite_record=rewrite_record)
        copies = _vendored(wheel, src)
        if copies and not unvendor:
            raise CheckFailed(
                f"{wheel.name} carries copies of CUDA libraries ({', '.join(u.file for u in copies)}); a process that "
                "also loads the nvidia-* wheels' (torch does) would hold two CUDA runtimes; repair without "
                "--keep-vendored replaces them with the nvidia-* wheels",
                ExitCode.INCONSISTENT_DEPENDENCIES,
            )
        if copies:
            _unvendor(tmp / "in", src, copies, wheel)
            src = _rescan(tmp / "in", src, wheel)
            versions = {**_vendored_versions(src, copies, wheel), **(versions or {})}
        stripped = strip_members(tmp / "in", src.elfs) if strip else ()
        major = major_for(src.elfs, requires=src.requires, cuda=cuda, wheel_name=wheel.name)
        if src.torch is not None:
            built = _torch_built(torch or torchext.pinned_build(src.requires, cuda_major=major), major, wheel.name)
            torch_req = torchext.requirement(src.torch, built, cuda_major=major)
            externals = (*torchext.externals(src.torch, torch_req), *externals)
            log.info("%s: %s; requires %s", wheel.name, src.torch.summary(), torch_req)
        # Each file's CUDA libraries, of its own major: an alternative's (bitsandbytes' _cuda121.so: CUDA 12), else
        # the wheel's.
        alts = alt_model.alternatives(src.elfs)
        file_major = {p: _alt_major(src.elfs[p], alts[p]) if p in alts else major for p in src.elfs}
        # A library the wheel carries itself is no requirement: nvidia-cufft's libcufftw.so.12 needs libcufft.so.12
        # beside it (repair required nvidia-cufft of the nvidia-cufft wheel). Copies of CUDA libraries were unvendored
        # above, unless kept on purpose: then the wheel carries them, as asked.
        carried = carried_names(src.elfs.values())
        per_file = {
            p: [lib for lib in deps.needed_runtime_libs([info], file_major[p]) if lib.soname not in carried]
            for p, info in src.elfs.items()
        }
        majors = sorted({m for p, m in file_major.items() if m is not None and per_file[p]})
        every: list[int | None] = list(majors) or [major]
        excludes = tuple(
            dict.fromkeys([*(x for m in every for x in deps.exclusions(m)), *(e.pattern for e in externals)])
        )
        needed = list(dict.fromkeys(lib for libs in per_file.values() for lib in libs))
        # A project that installs its CUDA libraries through an extra (CuPy's `ctk`) keeps that choice: libraries the
        # extra installs are not required again, and those no requirement installs are required under that extra.
        # The package's Python sources say which extension modules are optional parts (read only when asked).
        python = PythonImports.from_wheel(wheel)
        pre = deps.dependency_problems(
            list(src.elfs.values()),
            cuda_major=major,
            requires=src.requires,
            tags=[str(t) for t in parse_wheel_filename(wheel.name)[3]],
            files=src.names,
            name=src.dist_name,
            imports=python,
        )
        by_extra = {p.soname for p in pre.from_extras}
        extra = pre.extras[0] if len(pre.extras) == 1 else None
        # Libraries only optional parts need stay unrequired, as the project has them (CuPy 14.2 documents
        # `pip install nvidia-nccl-cu13 cutensor-cu13` as optional): requiring them would add NCCL's 300 MB to every
        # install. Their RPATH to the nvidia-* folders stays, so that installing the package turns the part on.
        to_require = [lib for lib in needed if lib.soname not in by_extra and lib.soname not in pre.optional]
        for soname in pre.optional:
            log.info("%s: %s is needed by optional parts only; not required", wheel.name, soname)
        floors = tuple(
            {
                lib.package: deps.floor_for(lib, cuda=cuda, versions=versions, imports=src.imports)
                for lib in to_require
            }.values()
        )
        if len(majors) > 1 and extra is None:
            # Alternatives for several CUDA majors, one loaded per process: pip cannot tell which one a process will
            # load (bitsandbytes picks by torch's CUDA), so each major's wheels come with an extra of its own
            # (`pip install bitsandbytes[cuda12]`); without it the alternative finds its libraries where the process
            # already has them (torch's) or the system's.
            reqs = {}
            for m in majors:
                libs_m = [lib for lib in to_require if lib.cuda_major == m]
                for pkg, r in deps.requirements(
                    libs_m, cuda=cuda if cuda and cuda.major == m else None, versions=versions, imports=src.imports
                ).items():
                    reqs[pkg] = f'{r}; extra == "cuda{m}"'
            extra = ", ".join(f"cuda{m}" for m in majors)
        else:
            reqs = deps.requirements(to_require, cuda=cuda, versions=versions, imports=src.imports)
            if extra is not None:
                reqs = {pkg: f'{r}; extra == "{extra}"' for pkg, r in reqs.items()}
        phases["read"] = time.monotonic() - t0

        t1 = time.monotonic()
        aw_out = tmp / "auditwheel"
        aw_out.mkdir()
        # auditwheel reads a private copy: its messages then never name a file the user may mistake for theirs.
        copy = tmp / wheel.name
        if copies or stripped:
            wheelfile.pack(tmp / "in", wheelfile.dist_info_of(src.names, wheel), copy)
        else:
            shutil.copyfile(wheel, copy)
        repaired = run_auditwheel(
            copy, aw_out, excludes=excludes, plat=plat, cwd=tmp, shown_as=wheel, library_dirs=library_dirs
        )
        phases["auditwheel"] = time.monotonic() - t1
        log.info("auditwheel repair: %s (%.1f s)", repaired.name, phases["auditwheel"])

        t2 = time.monotonic()
        work = tmp / "out"
        names = _unpack(repaired, work, shown_as=wheel)
        dist_info = wheelfile.dist_info_of(names, wheel)
        after = _scan(work, wheel)
        bundled = tuple(sorted(n for n in after if n not in set(src.names)))
        # Judged after auditwheel: a library it bundled may be the one that needs the external library.
        used = used_externals(after.values(), externals)
        for e in externals:
            if e not in used:
                log.info("external library %s: no ELF file in %s needs it; ignored", e.pattern, wheel.name)
        external = tuple(resolve_external(e) for e in used)
        for e in external:
            if why := check_can_tie(e):
                raise BadInputError(
                    f"{wheel.name}: {why}; the repaired wheel would fail check",
                    hint="give a folder inside that project's own folder: SONAME=REQUIREMENT@FOLDER",
                )

        fixed, dropped = _fix_search_paths(work, after, src.elfs, needed, external, per_file)
        after = _scan(work, wheel)
        loader_files: list[str] = []
        # Libraries an extra installs may be absent (the project supports a system CUDA then): the loader, which
        # insists on the wheels' copies, is for libraries the wheel always requires.
        if loader and needed and extra is None:
            assert major is not None  # needed is empty without a major
            loader_files = install_loader(
                work,
                names,
                after,
                needed=[lib for lib in needed if lib.soname not in pre.optional],
                reqs=reqs,
                dist_name=src.dist_name,
                driver=_driver(repaired, major),
                wheel_name=wheel.name,
            )
            after = _scan(work, wheel)

        meta_path = work / dist_info / "METADATA"
        where = f"{wheel.name}:{dist_info}/METADATA"
        meta_text, _ = wheelfile.add_requires_dist(meta_path.read_text(encoding="utf-8"), reqs, path=where)
        meta_text, external_reqs = wheelfile.merge_requires_dist(
            meta_text, [e.requirement for e in external], path=where
        )
        meta_path.write_text(meta_text, encoding="utf-8")

        _, _, _, tags = parse_wheel_filename(repaired.name)
        verdict = deps.dependency_problems(
            list(after.values()),
            cuda_major=major,
            requires=requires_dist(meta_text),
            tags=[str(t) for t in tags],
            files=names,
            imports=python,
        )
        problems = list(verdict.problems)
        if src.torch is not None:
            problems += torchext.judge(src.torch, requires_dist(meta_text), cuda_major=major).problems
        if problems:
            raise CheckFailed(
                f"{wheel.name}: the repaired wheel would fail `slimwheel check`, so none was written: "
                + "; ".join(problems),
                ExitCode.INCONSISTENT_DEPENDENCIES,
            )
        target = Path(out_dir).absolute() / repaired.name
        if target.resolve() == wheel.resolve():
            raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another -w folder")
        wheelfile.pack(work, dist_info, target, verify=lambda written: _readable_by_check(written, wheel))
        phases["rewrite"] = time.monotonic() - t2
    requires = (*reqs.values(), *external_reqs)
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
        bundled=bundled,
        cuda_major=major,
        loader=tuple(loader_files),
        rpath_fixed=tuple(fixed),
        rpath_dropped=tuple(dropped),
        record_rewritten=bool(src.record_problems),
        external=external,
        floors=floors,
        extra=extra,
        unvendored=copies,
        optional=pre.optional,
        stripped=stripped,
        phases=phases,
    )


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


def _unpack(archive: Path, dest: Path, *, shown_as: Path) -> list[str]:
    """wheelfile.unpack, with messages naming the user's file instead of a temporary one."""
    try:
        return wheelfile.unpack(archive, dest)
    except BadInputError as e:
        raise BadInputError(str(e).replace(str(archive), str(shown_as))) from None


def _scan(root: Path, wheel: Path) -> dict[str, ElfInfo]:
    try:
        return scan_elfs(root)
    except BadInputError as e:
        raise BadInputError(f"{wheel}: {e}") from None


def _read_input(wheel: Path, dest: Path, *, rewrite_record: bool) -> _Input:
    try:
        dist_name = parse_wheel_filename(wheel.name)[0]
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    names = wheelfile.unpack(wheel, dest)
    dist_info = wheelfile.dist_info_of(names, wheel)
    for required in ("METADATA", "WHEEL", "RECORD"):
        if not (dest / dist_info / required).is_file():
            raise BadInputError(f"{wheel}: {dist_info}/{required} is missing; not a wheel")
    try:
        meta = (dest / dist_info / "METADATA").read_text(encoding="utf-8")
        record = (dest / dist_info / "RECORD").read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{wheel}: {dist_info}/METADATA or RECORD is not UTF-8 text") from None
    problems = wheelfile.judge_record(
        wheel,
        wheelfile.record_problems(record, wheelfile.digest_tree(dest), record_name=f"{dist_info}/RECORD"),
        rewrite_record=rewrite_record,
    )
    inspect_wheel(wheel)  # check's reader and its limits (MAX_RECORDS, MAX_WRAPPERS, ZipLimits): what it refuses, we do
    elfs = _scan(dest, wheel)
    if not elfs:
        raise BadInputError(f"{wheel}: no ELF files in the wheel; a pure Python wheel has nothing to repair")
    imports: dict[str, set[str]] = {}
    torch_imports: dict[str, frozenset[str]] = {}
    for path, info in elfs.items():
        by_library = imports_by_library(dest / path)
        for lib, names_used in by_library.items():
            imports.setdefault(lib, set()).update(names_used)
        if any(torchext.is_torch_library(n) for n in info.needed):  # torch's libraries have no symbol versions
            torch_imports[path] = frozenset(n for ns in by_library.values() for n in ns if torchext.is_torch_symbol(n))
    torch = torchext.torch_use({p: i.needed for p, i in elfs.items()}, torch_imports)
    return _Input(
        dist_name=dist_name,
        names=names,
        elfs=elfs,
        requires=requires_dist(meta),
        record_problems=problems,
        imports={k: frozenset(v) for k, v in imports.items()},
        torch=torch,
    )


def _torch_built(given: torchext.TorchBuild | None, major: int | None, wheel_name: str) -> torchext.TorchBuild:
    """The torch the wheel was built against: the one given (or the one release the wheel pins itself to:
    `torchext.pinned_build`), else the running Python's; its CUDA major must be the wheel's."""
    built = given or torchext.installed_torch()
    if built is None:
        raise BadInputError(
            f"{wheel_name} needs torch's libraries, but no torch is installed in this Python to tell "
            "which release it was built against",
            hint="pass --torch VERSION (e.g. 2.11.0+cu130)",
        )
    if major is not None and (why := torchext.cuda_mismatch(built, major, where=wheel_name)):
        raise CheckFailed(why, ExitCode.INCONSISTENT_DEPENDENCIES)
    return built


def _readable_by_check(written: Path, wheel: Path) -> None:
    """The packed output read as `check` reads it (its limits: a bundled library may carry fatbins past them): a wheel
    check refuses (exit 3) is never written."""
    try:
        inspect_wheel(written)
    except BadInputError as e:
        raise BadInputError(
            f"{wheel.name}: the repaired wheel would be refused by `slimwheel check`, so none was written: "
            + e.message.replace(str(written), "the repaired wheel")
        ) from None


def _vendored(wheel: Path, src: _Input) -> tuple[Unvendored, ...]:
    """The input's copies of CUDA libraries, each with the SONAME that replaces it (of the wheel's CUDA major where
    the name fits two: libcurand.so.10)."""
    found = {p: v for p in src.elfs if (v := cudalibs.vendored(p)) is not None}
    if not found:
        return ()
    majors = {v.candidates[0].cuda_major for v in found.values() if len(v.candidates) == 1 and not v.companion}
    with zipfile.ZipFile(wheel) as z:
        sizes = {i.filename: (i.compress_size, i.file_size) for i in z.infolist()}
    out = []
    for path, v in sorted(found.items()):
        lib = next((c for c in v.candidates if c.cuda_major in majors), v.candidates[-1])
        soname = src.elfs[path].soname or path.rsplit("/", 1)[-1]
        out.append(
            Unvendored(
                file=path,
                soname=soname,
                replaced_by=None if v.companion else lib.soname,
                package=lib.package,
                compressed=sizes[path][0],
                installed=sizes[path][1],
            )
        )
    return tuple(out)


def _unvendor(root: Path, src: _Input, copies: Sequence[Unvendored], wheel: Path) -> None:
    """Remove the copies; every other ELF file that needs one (by its SONAME or by its file name) needs the nvidia-*
    wheels' SONAME instead. torchvision 0.26.0's image.so needs libnvjpeg.36e11081.so.13, the file whose SONAME is
    still libnvjpeg.so.13."""
    changes = {name: u.replaced_by for u in copies for name in (u.soname, u.file.rsplit("/", 1)[-1])}
    gone = {u.file for u in copies}
    for path, info in src.elfs.items():
        if path in gone:
            continue
        mine = {old: new for old, new in changes.items() if old in info.needed}
        if mine:
            # a NEEDED the file already has under its new name is dropped rather than listed twice
            mine = {o: (None if n in info.needed else n) for o, n in mine.items()}
            replace_needed(root / path, mine, name=path)
    for u in copies:
        (root / u.file).unlink()
        log.info(
            "%s: removed %s (%d bytes installed), now needed as %s from %s",
            wheel.name,
            u.file,
            u.installed,
            u.replaced_by or "nothing (its library loads it)",
            u.package,
        )


def _rescan(root: Path, src: _Input, wheel: Path) -> _Input:
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    elfs = _scan(root, wheel)
    imports: dict[str, set[str]] = {}
    for path in elfs:
        for lib, used in imports_by_library(root / path).items():
            imports.setdefault(lib, set()).update(used)
    return dataclasses.replace(src, names=names, elfs=elfs, imports={k: frozenset(v) for k, v in imports.items()})


def _vendored_versions(src: _Input, copies: Sequence[Unvendored], wheel: Path) -> dict[str, str]:
    """package -> the release the copies were (libcudart.so.12.0.107: nvidia-cuda-runtime-cu12 12.0.107): what the
    wheel was built and tested against, the requirement's floor."""
    out: dict[str, str] = {}
    for u in copies:
        v = cudalibs.vendored(u.file)
        if v is not None and v.version and not v.companion:
            out.setdefault(u.package, v.version)
    return out


def major_for(
    elfs: Mapping[str, ElfInfo],
    *,
    requires: Sequence[str] = (),
    cuda: CudaVersion | None = None,
    wheel_name: str = "the wheel",
) -> int | None:
    """The CUDA major to repair for: the one given, else the wheel's own evidence (`cuda.major.cuda_major`). A wheel that
    needs libraries of several majors is refused (exit 12); one that needs only SONAMEs two majors share, without
    other evidence, needs --cuda (exit 3). Per-CUDA alternatives (`cuda.alternatives`) are no mixture: the major is
    that of the other files, else the newest alternative's; each alternative is repaired for its own."""
    alts = alt_model.alternatives(elfs)
    evidence = cuda_major(
        [(i.path, i.needed) for i in elfs.values() if i.path not in alts],
        requires,
        carried=carried_names(elfs.values()),
    )
    if evidence.major is None and cuda is None and alts:
        return max(_alt_major(elfs[f], a) for f, a in alts.items())
    if evidence.mixed:
        raise CheckFailed(
            f"{wheel_name}: the wheel needs libraries of several CUDA majors ({'; '.join(evidence.mixed)}); "
            "one process cannot load both",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    major = cuda.major if cuda is not None else evidence.major
    if major is None and evidence.ambiguous:
        raise BadInputError(
            f"{wheel_name}: the wheel needs {', '.join(evidence.ambiguous)}, which CUDA 12 and 13 share; cannot tell "
            "the CUDA major",
            hint="pass --cuda 12.X or --cuda 13.X",
        )
    if major is None:
        return None
    if not cudalibs.libs_for(major):
        raise BadInputError(f"CUDA {major}: slimwheel's library table has no nvidia-* wheels for it")
    if wrong := deps.wrong_major([i for i in elfs.values() if i.path not in alts], major):
        raise CheckFailed(
            f"repairing for CUDA {major}, but the wheel needs libraries of another CUDA major: {'; '.join(wrong)}",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    return major


def _alt_major(info: ElfInfo, alt: alt_model.AlternativeFile) -> int:
    """An alternative's CUDA major: from the libraries it needs, else from its name."""
    return cuda_major([(info.path, info.needed)]).major or alt.major


def wanted_rpath(
    info: ElfInfo,
    original: ElfInfo | None,
    libs: Sequence[cudalibs.RuntimeLib],
    externals: Sequence[ExternalLib] = (),
) -> tuple[str, ...] | None:
    """The search path an ELF needs after auditwheel: its own safe entries (`rpath.unsafe_entries` are dropped), plus
    the nvidia/... folders of the CUDA libraries it needs (auditwheel drops entries that point outside the wheel),
    then the folders of the external libraries it needs (externals with their folder resolved). None when nothing
    changes."""
    bad = {u.entry for u in unsafe_entries(info.search_path, info.path)}
    safe = [e for e in info.search_path if e not in bad]
    folders = [lib.folder for lib in libs if lib.soname in info.needed]
    folders += [e.folder for e in externals if e.folder is not None and any(e.matches(n) for n in info.needed)]
    if not folders:
        return tuple(norm_origin(e) for e in safe) if bad else None
    # the input's entries into the nvidia-* wheels' folders, which auditwheel drops (the one rule: `rpath.resolve_entry`)
    keep = [
        e
        for e in (original.search_path if original else ())
        if (r := resolve_entry(e, info.path)).kind == "inside" and r.target.startswith("nvidia/")
    ]
    entries = with_folders(safe, info.path, folders, keep)
    return entries if entries is not None or not bad else tuple(norm_origin(e) for e in safe)


def _fix_search_paths(
    work: Path,
    elfs: Mapping[str, ElfInfo],
    before: Mapping[str, ElfInfo],
    needed: Sequence[cudalibs.RuntimeLib],
    external: Sequence[ExternalLib],
    per_file: Mapping[str, Sequence[cudalibs.RuntimeLib]] | None = None,
) -> tuple[list[str], list[str]]:
    """Set each file's `wanted_rpath` (`per_file`: the CUDA libraries of the file's own major, for the input's files;
    files auditwheel added get `needed`); returns (files changed, `file: entry` dropped as unsafe)."""
    fixed: list[str] = []
    dropped: list[str] = []
    for path, info in elfs.items():
        for u in unsafe_entries(info.search_path, path):
            log.warning("%s: dropped RPATH/RUNPATH entry %r: %s", path, u.entry, u.why)
            dropped.append(f"{path}: {u.entry!r}")
        libs = per_file[path] if per_file is not None and path in per_file else needed
        entries = wanted_rpath(info, before.get(path), libs, external)
        if entries is not None:
            set_rpath(work / path, entries, use_rpath_tag=bool(info.rpath) and not info.runpath, name=path)
            fixed.append(path)
    return fixed, dropped


def _driver(repaired: Path, major: int) -> DriverFloor:
    """The loader's driver floor, from the wheel report (it knows PTX and fatbin compression)."""
    report = inspect_wheel(repaired)
    return driver_floor(major, report.driver_floor, "; ".join(report.driver_why) or None)
