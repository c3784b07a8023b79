"""External libraries: non-CUDA shared libraries another PyPI wheel provides (libscipy_openblas.so from
scipy-openblas32). Repair leaves them out of the wheel, requires that wheel, and points an `$ORIGIN` RPATH entry at the
folder it installs them in; check accepts a NEEDED library found through such an entry into a required project.

`SONAME=REQUIREMENT[@FOLDER]` is the one text form (`repair --external`, `SLIMWHEEL_EXTERNAL_LIBS`); the config keeps
its entries in that form and `parse_externals` reads them back.
"""

from __future__ import annotations

import fnmatch
import logging
import posixpath
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda import libs as cudalibs
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo, carried_names

log = logging.getLogger("slimwheel.external")

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
        raise BadInputError(
            f"{where}: requirement {requirement!r} for {pattern} has a marker; the library is needed "
            "wherever the wheel is installed"
        )
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
        raise BadInputError(
            f"{where}: expected SONAME=REQUIREMENT[@FOLDER], e.g. "
            f"libscipy_openblas.so=scipy-openblas32>=0.3.28, got {text!r}"
        )
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
    folders = sorted(
        {
            posixpath.dirname(f) or "."
            for f in files
            if ".." not in f.split("/") and fnmatch.fnmatchcase(posixpath.basename(f), ext.pattern)
        }
    )
    if not folders:
        raise BadInputError(
            f"external library {ext.pattern}: the installed {project} has no file of that name",
            hint=f"check the SONAME, or give the folder: {ext.pattern}={ext.requirement}@FOLDER",
        )
    if len(folders) > 1:
        raise BadInputError(
            f"external library {ext.pattern}: the installed {project} has it in several folders ({', '.join(folders)})",
            hint=f"choose one: {ext.pattern}={ext.requirement}@FOLDER",
        )
    return folders[0]


def installed_files(requirement: str) -> list[str] | None:
    """The RECORD paths (relative to site-packages) of the requirement's distribution in the running Python."""
    import importlib.metadata  # 7 ms (email's parsers): only a build with --external reads installed files

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


# A CUDA build's suffix on a project name: cutensor-cu13 installs cutensor/, cupy-cuda12x installs cupy/.
_CUDA_SUFFIX = re.compile(r"-cu(?:da)?\d+x?$")


def folder_of_project(top: str, project: str) -> bool:
    """Whether a top-level site-packages folder is named like the project: equal as PEP 503 normalizes names, or
    equal to the name without a CUDA build suffix (`cutensor/` of cutensor-cu13). The one rule check and repair use
    to tie an RPATH folder to a requirement; a prefix alone never ties (torchvision's RPATH into torch/ is no torch
    requirement)."""
    if top in (".", ""):
        return False
    name, folder = str(canonicalize_name(project)), str(canonicalize_name(top))
    return folder in (name, _CUDA_SUFFIX.sub("", name))


def library_of_project(soname: str, project: str) -> bool:
    """Whether a SONAME is named after a project, as RAPIDS' library wheels name theirs: `libX.so[.N]` of project
    `libX`, `X` or `nvidia-libX`, with a CUDA suffix or not (librmm-cu12: librmm.so, rapids-logger:
    librapids_logger.so, nvidia-libnvcomp-cu12: libnvcomp.so.5). Those wheels load their library when imported
    (`load_library()`), before the libraries that need it."""
    stem = soname.split(".so", 1)[0]
    if not stem.startswith("lib") or stem == "lib":
        return False
    name = _CUDA_SUFFIX.sub("", str(canonicalize_name(project))).removeprefix("nvidia-")
    return str(canonicalize_name(stem)) in (name, "lib" + name)


def check_can_tie(ext: ExternalLib) -> str | None:
    """Why `slimwheel check` will not tie the folder to the requirement (see `origin_target`), or None."""
    if folder_of_project((ext.folder or "").split("/")[0], ext.project):
        return None
    return (
        f"external library {ext.pattern}: its folder {ext.folder} does not start with a folder named like the project "
        f"{ext.project} (or its name without a -cuNN suffix), so `slimwheel check` cannot tell that the requirement "
        "provides it"
    )


def used_externals(elfs: Iterable[ElfInfo], externals: Sequence[ExternalLib]) -> tuple[ExternalLib, ...]:
    """The externals some ELF file needs and the wheel does not carry itself."""
    elfs = list(elfs)
    inside = carried_names(elfs)
    needed = {n for info in elfs for n in info.needed if n not in inside}
    return tuple(e for e in externals if any(e.matches(n) for n in needed))
