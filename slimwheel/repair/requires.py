"""Requirement planning: which CUDA libraries each file needs (of its own major), what auditwheel leaves out, and
which nvidia-* requirements the output gets, per CUDA major and extra, with their floors."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from slimwheel import deps, torchext
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.external import ExternalLib
from slimwheel.inspect.dynamic import ElfInfo, carried_names
from slimwheel.repair.major import file_majors
from slimwheel.repair.source import RepairInput
from slimwheel.reqgraph import RequirementGraph

log = logging.getLogger("slimwheel.repair")


@dataclass(frozen=True, kw_only=True)
class RuntimeNeeds:
    """The CUDA libraries of the nvidia-* wheels the input's files need."""

    per_file: dict[str, list[cudalibs.RuntimeLib]]  # each file's, of its own major
    majors: list[int]  # the majors of files that need any
    needed: list[cudalibs.RuntimeLib]  # all of them, first-seen order


def runtime_needs(elfs: Mapping[str, ElfInfo], major: int | None) -> RuntimeNeeds:
    """A library the wheel carries itself is no requirement: nvidia-cufft's libcufftw.so.12 needs libcufft.so.12
    beside it (repair required nvidia-cufft of the nvidia-cufft wheel). Copies of CUDA libraries are unvendored
    before this, unless kept on purpose: then the wheel carries them, as asked."""
    by_file = file_majors(elfs, major)
    carried = carried_names(elfs.values())
    per_file = {
        p: [lib for lib in deps.needed_runtime_libs([info], by_file[p]) if lib.soname not in carried]
        for p, info in elfs.items()
    }
    majors = sorted({m for p, m in by_file.items() if m is not None and per_file[p]})
    needed = list(dict.fromkeys(lib for libs in per_file.values() for lib in libs))
    return RuntimeNeeds(per_file=per_file, majors=majors, needed=needed)


def exclusions(
    needs: RuntimeNeeds, major: int | None, externals: Sequence[ExternalLib], elsewhere: Sequence[str] = ()
) -> tuple[str, ...]:
    """auditwheel's --exclude patterns: every needed major's CUDA SONAMEs, the external libraries', then those the
    requirements install (`provided_elsewhere`)."""
    every: list[int | None] = list(needs.majors) or [major]
    return tuple(
        dict.fromkeys(
            [
                *(x for m in every for x in deps.exclusions(m)),
                *(e.pattern for e in externals),
                *map(_literal, elsewhere),
            ]
        )
    )


# Who provides a library from another project's wheel: a requirement (its nvidia-* wheel, an extra's, one named
# after the library, a requirement's requirement) or a required project's RPATH folder.
_ELSEWHERE = frozenset({deps.How.REQUIREMENT, deps.How.EXTRA, deps.How.NAMED, deps.How.TRANSITIVE, deps.How.FOLDER})


def provided_elsewhere(resolved: deps.Resolved) -> tuple[str, ...]:
    """The libraries the resolution finds another project's wheel provides (`_ELSEWHERE`): auditwheel must not bundle
    them, as check passes them. Bundled, they would be a second copy in a process that loads that wheel's (RAPIDS'
    librmm, loaded by rmm's import), and where auditwheel cannot find one on this machine it refuses the wheel
    (pylibraft-cu12 26.10's librapids_logger.so, which libraft-cu12 installs through rapids-logger)."""
    return tuple(
        dict.fromkeys(r.soname for r in resolved.libraries() if r.how in _ELSEWHERE and r.use is deps.Use.NEEDED)
    )


def _literal(soname: str) -> str:
    """`soname` as an fnmatch pattern that matches only itself (auditwheel's --exclude takes patterns)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in soname)


@dataclass(frozen=True, kw_only=True)
class RequirementPlan:
    reqs: dict[str, str]  # package -> the Requirement-Dist line written
    floors: tuple[deps.Floor, ...]
    extra: str | None  # the extra(s) the CUDA libraries are required under (docs/repair.md)
    optional: tuple[str, ...]  # SONAMEs only optional parts need: left unrequired


def plan_requirements(
    needs: RuntimeNeeds,
    resolved: deps.Resolved,
    *,
    cuda: CudaVersion | None,
    versions: Mapping[str, str] | None,
    imports: Mapping[str, frozenset[str]],
    wheel_name: str,
) -> RequirementPlan:
    """The requirements of `needs`, planned from the input's resolution (`resolved`, `deps.resolve`): the libraries its
    own extras install, those its requirements' requirements install (required again, a floor of repair's could
    contradict the version they pin) and those only optional parts need.

    A project that installs its CUDA libraries through an extra (CuPy's `ctk`) keeps that choice: libraries the extra
    installs are not required again, and those no requirement installs are required under that extra. Libraries only
    optional parts need stay unrequired, as the project has them (CuPy 14.2 documents `pip install nvidia-nccl-cu13
    cutensor-cu13` as optional): requiring them would add NCCL's 300 MB to every install. Their RPATH to the nvidia-*
    folders stays, so that installing the package turns the part on."""
    extras, optional, from_requirements = resolved.extras(), resolved.only_optional(), resolved.from_requirements()
    extra = extras[0] if len(extras) == 1 else None
    installed = resolved.from_extras() | from_requirements
    to_require = [lib for lib in needs.needed if lib.soname not in installed and lib.soname not in optional]
    for soname in sorted(from_requirements & {lib.soname for lib in needs.needed}):
        log.info("%s: %s is installed by a requirement's requirement; not required again", wheel_name, soname)
    for soname in optional:
        log.info("%s: %s is needed by optional parts only; not required", wheel_name, soname)
    floors = tuple(
        {lib.package: deps.floor_for(lib, cuda=cuda, versions=versions, imports=imports) for lib in to_require}.values()
    )
    if len(needs.majors) > 1 and extra is None:
        # Alternatives for several CUDA majors, one loaded per process: pip cannot tell which one a process will load
        # (bitsandbytes picks by torch's CUDA), so each major's wheels come with an extra of its own (`pip install
        # bitsandbytes[cuda12]`); without it the alternative finds its libraries where the process already has them
        # (torch's) or the system's.
        reqs = {}
        for m in needs.majors:
            libs_m = [lib for lib in to_require if lib.cuda_major == m]
            for pkg, r in deps.requirements(
                libs_m, cuda=cuda if cuda and cuda.major == m else None, versions=versions, imports=imports
            ).items():
                reqs[pkg] = f'{r}; extra == "cuda{m}"'
        extra = ", ".join(f"cuda{m}" for m in needs.majors)
    else:
        reqs = deps.requirements(to_require, cuda=cuda, versions=versions, imports=imports)
        if extra is not None:
            reqs = {pkg: f'{r}; extra == "{extra}"' for pkg, r in reqs.items()}
    return RequirementPlan(reqs=reqs, floors=floors, extra=extra, optional=optional)


def torch_externals(
    use: torchext.TorchUse,
    requires: Sequence[str],
    given: torchext.TorchBuild | None,
    major: int | None,
    wheel_name: str,
) -> tuple[ExternalLib, ...]:
    """torch's libraries, left to torch's wheel, which is required in the release range the wheel serves."""
    built = _torch_built(given or torchext.pinned_build(requires, cuda_major=major), major, wheel_name)
    torch_req = torchext.requirement(use, built, cuda_major=major)
    log.info("%s: %s; requires %s", wheel_name, use.summary(), torch_req)
    return torchext.externals(use, torch_req)


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


def wheel_tags(name: str) -> list[str]:
    """The tags of a wheel's file name, as strings (`cp311-cp311-manylinux_2_28_x86_64`)."""
    return [str(t) for t in parse_wheel_filename(name)[3]]


def plan_from_rules(src: RepairInput, major: int | None, wheel: Path, graph: RequirementGraph | None) -> deps.Resolved:
    """Who provides each library of the input (`deps.resolve`), for planning: which libraries the project's own extras
    install, which only optional parts need (the package's Python sources say which extension modules are optional)
    and which the requirements install (`graph`: theirs too). Planned from the resolution, not mined from a verdict's
    wording."""
    return deps.resolve(
        list(src.elfs.values()),
        cuda_major=major,
        requires=src.requires,
        tags=wheel_tags(wheel.name),
        files=src.names,
        name=src.dist_name,
        imports=src.python,
        graph=graph,
    )


def refuse_paths(pre: deps.Resolved, wheel: Path) -> None:
    """A NEEDED entry with a '/' names a file by path (issue 41 S1): auditwheel reads it from this machine
    (/tmp/x/libevil.so) and grafts it into the wheel, a library nobody named. Refused before auditwheel runs."""
    paths = [r for r in pre.libraries() if r.fault is deps.Fault.PATH]
    if paths:
        raise CheckFailed(
            f"{wheel.name}: "
            + "; ".join(f"{r.file} needs {r.soname} by path" for r in paths)
            + ": auditwheel would copy that file from this machine into the wheel; link the library by its SONAME",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
