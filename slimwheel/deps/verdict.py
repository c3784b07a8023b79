"""Every library a wheel needs accounted for: `dependency_problems`, the rule check and repair judge by."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.bounds import satisfiable
from slimwheel.deps.installs import Installs, Requirements
from slimwheel.deps.policy import SYSTEM_LOADERS, system_policy
from slimwheel.deps.providers import (
    FromTorch,
    admitted_torch,
    cuda_library_problem,
    cxx_runtime_problem,
    external_provider,
    extra_provider,
    foreign_folders,
    named_provider,
    plugins,
    reaching,
    requirement_on,
    second_copy,
    torch_provider,
)
from slimwheel.inspect.dynamic import ElfInfo, carried_names
from slimwheel.inspect.pyimports import OptionalModule, PythonImports
from slimwheel.reqgraph import Provider, RequirementGraph
from slimwheel.rpath import describe, resolve_entries
from slimwheel.shown import abbreviated

# ------------------------------------------------------------------------------------------- every library accounted


@dataclass(frozen=True, kw_only=True)
class ExtraProvision:
    """A CUDA library that only an extra of the wheel installs (CuPy's `ctk`)."""

    extra: str
    soname: str
    requirement: str  # the Requires-Dist under the extra that installs it: cuda-toolkit[cublas,...]==13.*
    files: tuple[str, ...]  # the wheel's files that need it
    # the folder the extra's wheel installs it in, when no search path of those files reaches it (onnxruntime-gpu
    # 1.31's providers have no RUNPATH: the libraries are found only once loaded, by its preload_dlls() or torch)
    unreached: str = ""


@dataclass(frozen=True, kw_only=True)
class DependencyVerdict:
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    from_extras: tuple[ExtraProvision, ...] = ()
    # Libraries that nothing provides and only optional parts of the package need (CuPy's NCCL and cuTENSOR): repair
    # leaves them unrequired, as the project does (a note says which package turns the part on).
    optional: tuple[str, ...] = ()

    @property
    def extras(self) -> tuple[str, ...]:
        """The extras that install CUDA libraries the wheel needs, in order."""
        return tuple(dict.fromkeys(p.extra for p in self.from_extras))


def dependency_problems(
    elfs: Sequence[ElfInfo],
    *,
    cuda_major: int | None,
    requires: Sequence[str],
    tags: Sequence[str],
    files: Iterable[str] = (),
    name: str = "",
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> DependencyVerdict:
    """Every NEEDED library of every ELF must be in the wheel, a CUDA library whose nvidia-* wheel is required (pinned
    to its major) wherever the wheel installs, found through RPATH in a required project's folder, the driver, the
    system's dynamic loader, or on the manylinux allow-list; search paths must stay inside site-packages; the
    requirements must be installable (no contradictory pair). `files`: every file of the wheel (a NEEDED name that is a
    file's name is carried by the wheel). A CUDA library only an extra installs is no problem: the verdict's
    `from_extras` and one note per extra say which extra provides what, and what happens without it. `name`: the
    project, for the notes' pip command. `imports`: the wheel's Python sources (`inspect.pyimports`, read only when
    asked): a library that nothing provides, needed by an extension module the package imports only where it survives
    the import failing, is a note (an optional part, as CuPy's NCCL and cuTENSOR bindings), not a problem. `graph`:
    what the requirements' own requirements install (`reqgraph`, read from the index only when a library is left
    unprovided by the rules above): a library one of them installs is a note that names the chain, not a problem
    (rmm-cu12 -> librmm-cu12 -> rapids-logger's librapids_logger.so)."""
    from slimwheel import torchext

    problems: list[str] = []
    notes: list[str] = []
    platforms = tuple(dict.fromkeys(t.split("-", 2)[2] for t in tags if t.count("-") >= 2))
    policy = system_policy(platforms)
    if policy.note:
        notes.append(policy.note)
    reqs = Requirements.of(requires, Installs.from_tags(tags))
    notes += [f"Requires-Dist {r!r} cannot be parsed" for r in reqs.unparsable]
    for project, rs in reqs.always.items():
        if len(rs) > 1 and not satisfiable([r.specifier for r in rs]):
            problems.append(
                f"Requires-Dist on {project} contradict each other ({'; '.join(map(str, rs))}): "
                "pip can install no version of it, so it cannot install the wheel"
            )
    files = tuple(files)
    inside = carried_names(elfs) | {f.rsplit("/", 1)[-1] for f in files}
    tops = {f.split("/", 1)[0] for f in files}  # the wheel's own top-level folders
    from_extras: dict[tuple[str, str], tuple[Requirement, list[str]]] = {}  # (extra, soname) -> (req, files)
    # soname -> (torch requirement, providing releases, package, files)
    from_torch: dict[str, tuple[FromTorch, list[str]]] = {}  # soname -> (what torch brings, files)
    alts = alt_model.alternatives(info.path for info in elfs)
    torch = admitted_torch(reqs)
    machines = Installs.from_tags(tags).machines
    # (soname, provider, found through which RPATH entry, or "") -> the files that need it
    transitive: dict[tuple[str, Provider, str], list[str]] = {}

    def by_graph(info: ElfInfo, soname: str) -> bool:
        """Whether a requirement's requirement installs the library (then a note says which, through what)."""
        p = graph.provider(soname) if graph is not None else None
        if p is None:
            return False
        folder = p.path.rsplit("/", 1)[0] if "/" in p.path else "."
        transitive.setdefault((soname, p, reaching(info, [folder])), []).append(info.path)
        return True

    def unread(problem: str) -> str:
        """The problem, with the requirements whose own requirements the index could not tell."""
        if graph is None or not (missed := graph.unread):
            return problem
        return f"{problem} (what {len(missed)} requirement(s) install could not be read from the index: " + (
            f"{abbreviated(missed, 2)})"
        )

    def by_torch(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib], problem: str) -> str | None:
        """None when torch's import brings the library (a note then says so), else the problem, with the torch
        releases that would bring it where some do."""
        t = torch_provider(soname, cands, torch, machines)
        if t is None:
            return problem
        if t.enough(alternative=info.path in alts):
            from_torch.setdefault(soname, (t, []))[1].append(info.path)
            return None
        return (
            f"{problem}; torch {', '.join(t.providing)} from PyPI {t.how} and load it at `import torch`, but "
            f"Requires-Dist '{t.req}' also admits torch {', '.join(t.lacking)}, which do(es) not"
        )

    def _torch_enough(soname: str, cands: list[cudalibs.RuntimeLib], *, alternative: bool) -> bool:
        t = torch_provider(soname, cands, torch, machines)
        return t is not None and t.enough(alternative=alternative)

    # A torch extension in a wheel that requires no torch (torchaudio 2.11, torchao 0.18, fbgemm-gpu 1.9): torch's own
    # libraries and the CUDA libraries torch's PyPI builds install (libcudart.so.13) lack for one reason, said once
    # per set of files (`torchless`), not once per library and again by the torch rules.
    any_torch = admitted_torch(Requirements.of(["torch"], Installs.from_tags(tags))) if torch is None else None
    torchless: dict[str, list[str]] = {}  # file -> the libraries a torch requirement would bring
    brought_by: dict[str, tuple[str, ...]] = {}  # a CUDA library of those -> the PyPI torch releases that install it

    def for_torch(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib]) -> bool:
        """Whether the library is one that a torch requirement would bring to this torch extension, the wheel
        requiring no torch: then a requirement's requirement installs it (a note), or `torchless` holds it."""
        if any_torch is None or not any(torchext.is_torch_library(n) for n in info.needed):
            return False
        if info.path in plugin_of or info.path in backends or (imports is not None and imports.optional(info.path)):
            return False  # a part the package does without: `unprovided` says what it lacks, in a note
        if not torchext.is_torch_library(soname):
            if (t := torch_provider(soname, cands, any_torch, machines)) is None:
                return False
            brought_by[soname] = t.providing
        if not by_graph(info, soname):
            torchless.setdefault(info.path, []).append(soname)
        return True

    def judge(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib]) -> str | None:
        problem = cuda_library_problem(info, soname, cands, reqs)
        if problem is not None and (got := extra_provider(cands, reqs)) is not None:
            from_extras.setdefault((got[0], soname), (got[1], []))[1].append(info.path)
            return None
        if problem is not None and for_torch(info, soname, cands):
            return None
        return problem if problem is None else by_torch(info, soname, cands, problem)

    # extension module -> (why it is optional, [(library, the package that provides it, if the table knows it)])
    optional: dict[str, tuple[OptionalModule, list[tuple[str, str]]]] = {}
    failed: set[str] = set()  # libraries nothing provides that a part the package cannot do without needs
    # why -> library -> the files that need it: one problem per reason and set of files (torchaudio 2.11's three
    # modules need the same five torch libraries: one line, not fifteen)
    unaccounted: dict[str, dict[str, list[str]]] = {}
    # the unsafe search path entries, as said -> the files that have them: one line per entry and depth
    # (nvidia-nvimgcodec-cu12 0.9's 17 files share '/usr/local/cuda/lib64')
    unsafe: dict[str, list[str]] = {}
    by_name: dict[tuple[str, str], list[str]] = {}  # (library, the requirement named after it) -> files
    plugin_of = plugins(elfs)
    backends = alt_model.other_backends(info.path for info in elfs)  # bitsandbytes' ROCm and XPU builds
    backend_lacks: dict[str, list[str]] = {}  # such a build -> the libraries nothing provides
    plugin_lacks: dict[str, list[str]] = {}  # plugin -> the libraries nothing provides

    def unprovided(info: ElfInfo, needed: str, cands: list[cudalibs.RuntimeLib], problem: str) -> None:
        """A library nothing provides: a problem, or a note when the file is an optional part of the package."""
        if info.path in plugin_of and info.path not in alts:
            plugin_lacks.setdefault(info.path, []).append(needed)
            return
        if info.path in backends:
            backend_lacks.setdefault(info.path, []).append(needed)
            return
        opt = imports.optional(info.path) if imports is not None and info.path not in alts else None
        if opt is None:
            failed.add(needed)
            said = f"{info.path} needs {needed}: "
            if info.path in alts or not problem.startswith(said):
                problems.append(problem)  # an alternative's problems are joined per file below
            else:
                unaccounted.setdefault(problem[len(said) :], {}).setdefault(needed, []).append(info.path)
        else:
            optional.setdefault(info.path, (opt, []))[1].append((needed, cands[-1].package if cands else ""))

    def judge_file(info: ElfInfo) -> None:
        major = alts[info.path].major if info.path in alts else cuda_major  # an alternative has its own
        if problem := cxx_runtime_problem(info):
            problems.append(problem)
        resolved = resolve_entries(info.search_path, info.path)
        if bad := [e for e in resolved if not e.safe]:
            unsafe.setdefault(f"{'entry' if len(bad) == 1 else 'entries'}: {describe(bad)}", []).append(info.path)
        if dead := [e for e in resolved if e.kind == "python-lib"]:
            notes.append(f"{info.path}: RPATH/RUNPATH {describe(dead)}")
        for loaded in info.loads:  # opened at run time (NVRTC for embedded sources): its wheel must be required
            cands = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == loaded]
            if major is not None:
                cands = [lib for lib in cands if lib.cuda_major == major] or cands
            if cands and (problem := judge(info, loaded, cands)):
                problems.append(problem.replace(" needs ", " loads at run time ", 1))
        # A library opened by name may be optional (NCCL for several GPUs): said, not failed, when nothing installs
        # it. Names of another CUDA major are fallbacks tried in turn (onnxruntime-gpu 1.31's CUDA 13 provider names
        # libcudart.so.12 and .13), not what a file of its major loads; in a file of no known major, the names of one
        # library for several majors are such a chain (cudnn-frontend 1.32's module opens libcudart.so.13 or .12,
        # whichever it finds): one note when none of them is provided, none when one is.
        chains: dict[str, list[tuple[str, list[cudalibs.RuntimeLib], bool]]] = {}
        for opened in info.opens:
            cands = [
                lib
                for lib in cudalibs.RUNTIME_LIBS
                if lib.soname == opened and (major is None or lib.cuda_major == major)
            ]
            if cands:
                missing = (
                    opened not in inside
                    and cuda_library_problem(info, opened, cands, reqs) is not None
                    and extra_provider(cands, reqs) is None
                    and not _torch_enough(opened, cands, alternative=info.path in alts)
                    and not by_graph(info, opened)
                )
                chains.setdefault(opened.split(".so", 1)[0], []).append((opened, cands, missing))
        for chain in chains.values():
            if not all(missing for _o, _c, missing in chain):
                continue
            chain.sort(key=lambda link: -max(lib.cuda_major for lib in link[1]))  # the newest major first
            names = " or ".join(opened for opened, _c, _m in chain)
            every = [lib for _o, cands, _m in chain for lib in cands]
            wanted = " or ".join(f"{lib.package}, CUDA {lib.cuda_major}" for lib in every)
            # dlopen by name searches the opener's RUNPATH, LD_LIBRARY_PATH and the system's folders, and takes a
            # library of that name already loaded: installing the nvidia-* wheel helps only through one of those
            reached = reaching(info, (lib.folder for lib in every))
            how = (
                f"installed, that wheel is found through its RPATH entry {reached}"
                if reached
                else f"no search path of {info.path} reaches "
                f"{'that wheel' + chr(39) + 's folder' if len(every) == 1 else 'those wheels' + chr(39) + ' folders'} "
                f"({', '.join(dict.fromkeys(lib.folder for lib in every))}), so installing it alone does not "
                "help: the library must already be loaded (torch loads its nvidia-* libraries at import) or sit on "
                "the loader's path (a CUDA toolkit, LD_LIBRARY_PATH)"
            )
            said = (
                "the name is in its read-only data"
                if len(chain) == 1
                else "names of several CUDA majors in its read-only data: it takes whichever it finds"
            )
            # A requirement on the library's wheel that admits any release of it (nvidia-cudnn-cu13 9.28 requires
            # plain `nvidia-cublas`, nvidia-cufft 12.5 `nvidia-nvjitlink`) installs the library today: the fault is
            # the missing pin, not a missing requirement.
            pinless = next(((lib, r) for lib in every if (r := requirement_on(lib, reqs)) is not None), None)
            if pinless is not None:
                lib, unpinned = pinless
                through = (
                    ""
                    if canonicalize_name(unpinned.name) == lib.package
                    else f" through its requirement on {lib.package}"
                )
                notes.append(
                    f"{info.path} opens {names} at run time (dlopen; {said}); Requires-Dist '{unpinned}' installs it"
                    f"{through}, but does not pin {unpinned.name} to CUDA {lib.cuda_major}: a release of another CUDA "
                    f"major, which pip may install, has another SONAME; {how}"
                )
                continue
            notes.append(
                f"{info.path} opens {names} at run time (dlopen; {said}), and no requirement of the wheel installs "
                f"{'it' if len(chain) == 1 else 'any of them'} ({wanted}); {how}; else what needs it fails when it runs"
            )
        for needed in info.needed:
            if needed in inside or needed in policy.whitelist or needed in cudalibs.DRIVER_SONAMES:
                continue
            if any(fnmatch.fnmatchcase(needed, pat) for pat in SYSTEM_LOADERS):
                continue
            cands = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == needed]
            if major is not None:
                cands = [lib for lib in cands if lib.cuda_major == major] or cands
            if cands:
                if problem := judge(info, needed, cands):
                    # a requirement that pins the wrong major is a fault of the wheel's metadata, optional part or not
                    required = any(requirement_on(lib, reqs) for lib in cands)
                    if required:
                        problems.append(problem)
                    elif not by_graph(info, needed):
                        unprovided(info, needed, cands, unread(problem))
                continue
            if provided := external_provider(info, reqs):
                # An RPATH entry into a required project's folder says where the file looks, not what is there:
                # pennylane-lightning-gpu 0.45's libcustatevec.so.1 was "found" in scipy_openblas32/lib. Where the
                # index tells which requirement installs the library, that answers (and whether RPATH reaches it);
                # where it was not read (offline, or a requirement it could not tell), the folder is taken on trust.
                if by_graph(info, needed):
                    continue
                if graph is None or graph.unread:
                    notes.append(
                        f"{info.path} needs {needed}: its RPATH entry {provided[0]} reaches a folder of Requires-Dist "
                        f"{provided[1]}, taken to hold it ("
                        + ("offline: the index would tell" if graph is None else "the index did not tell its files")
                        + ")"
                    )
                    continue
            # torch's libraries go to the torch rules first: its tables say which releases load them at import
            if not torchext.is_torch_library(needed) and by_graph(info, needed):
                continue
            if for_torch(info, needed, []):
                continue
            if named := named_provider(needed, reqs):
                by_name.setdefault((needed, str(named)), []).append(info.path)
                continue
            problem = (
                f"{info.path} needs {needed}: not in the wheel, not a CUDA runtime library from PyPI, "
                f"not in an RPATH folder of a required project, and not allowed by {policy.name}"
            )
            if graph is None and reqs.always and (foreign := foreign_folders(info, tops)):
                # Offline, a folder of another project that a search path names may be a requirement's whose folder
                # is not named like it (tilelang 0.1.15: tvm_ffi/lib of apache-tvm-ffi, z3/lib of z3-solver): the
                # failure says what is not known, not that no requirement has it.
                problem = (
                    f"{info.path} needs {needed}: not in the wheel, not a CUDA runtime library from PyPI, not allowed "
                    f"by {policy.name}, and not in an RPATH folder named like a required project; its RPATH reaches "
                    f"{', '.join(foreign)}, other projects' folders, and offline it is not known whether a "
                    "requirement installs it there (without --offline the index tells)"
                )
            if (problem := by_torch(info, needed, [], problem)) and not (
                torchext.is_torch_library(needed) and by_graph(info, needed)
            ):
                unprovided(info, needed, [], unread(problem))

    for info in elfs:
        if (copy := cudalibs.vendored(info.path)) is not None:
            lib = next((c for c in copy.candidates if c.cuda_major == cuda_major), copy.candidates[-1])
            notes.append(
                f"{info.path} is a copy of {copy.real_name} ({lib.package}"
                + (", loaded by its library" if copy.companion else "")
                + f"): {second_copy(lib, torch)}; `slimwheel repair` replaces it with that wheel"
            )
        before = len(problems)
        judge_file(info)
        if info.path in alts and len(problems) > before:
            # an alternative is judged on its own: its problems in one line, named as the alternative it is
            a = alts[info.path]
            n = sum(1 for x in alts.values() if x.group == a.group)
            mine = [p.removeprefix(f"{info.path}: ").removeprefix(f"{info.path} ") for p in problems[before:]]
            problems[before:] = [
                f"{info.path} (alternative for CUDA {a.cuda}, one of {n} loaded per process): " + "; ".join(mine)
            ]
    notes += _named_notes(by_name)
    notes += _backend_notes(backend_lacks, backends)
    notes += [
        f"{path} is a plugin: {plugin_of[path]} opens it by name, and no file of the wheel needs it; it needs "
        f"{', '.join(libs)}, which neither the wheel nor its requirements install, so opening it fails where the "
        "system does not provide them (whether the package works without that plugin, the wheel does not show)"
        for path, libs in plugin_lacks.items()
    ]
    problems += _unaccounted_problems(unaccounted)
    problems += _torchless_problems(torchless, brought_by)
    problems += [f"{abbreviated(paths)}: unsafe RPATH/RUNPATH {said}" for said, paths in unsafe.items()]
    by_path = {info.path: info for info in elfs}

    def unreached(soname: str, files: Iterable[str]) -> str:
        """The library's folder, when no search path of any of the files reaches it."""
        rows = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname]
        folders = {lib.folder for lib in rows}
        if any(reaching(by_path[f], folders) for f in files):
            return ""
        mine = sorted(lib.folder for lib in rows if lib.cuda_major == cuda_major) or sorted(folders)
        return mine[0] if mine else ""

    provisions = tuple(
        ExtraProvision(
            extra=extra,
            soname=soname,
            requirement=str(req),
            files=tuple(dict.fromkeys(fs)),
            unreached=unreached(soname, fs),
        )
        for (extra, soname), (req, fs) in from_extras.items()
    )
    notes += extra_notes(provisions, name=name)
    # torch's own libraries come in sixes (libc10.so ... libtorch_cuda.so): one note for those that the same files need
    # from the same releases' torch/lib, one per library otherwise
    shipped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for soname, (t, paths) in from_torch.items():
        if t.how.startswith("ship"):
            shipped.setdefault((str(t.req), t.providing, tuple(paths)), []).append(soname)
            continue
        shown = abbreviated(paths)
        notes.append(
            f"{shown} need(s) {soname}: no requirement of the wheel installs it, but Requires-Dist '{t.req}' does: "
            f"torch {', '.join(t.providing)} from PyPI {t.how} and load it at `import torch`, and the "
            "loader uses that copy when torch is imported before these libraries are loaded"
        )
    for (req, providing, files), sonames in shipped.items():
        one = from_torch[sonames[0]][0]
        how = f"{one.how} and load it" if len(sonames) == 1 else "ship(s) them in torch/lib and load them"
        shown = abbreviated(files)
        notes.append(
            f"{shown} need(s) {', '.join(sonames)}: no requirement of the wheel installs "
            f"{'them' if len(sonames) > 1 else 'it'}, but Requires-Dist '{req}' does: torch {', '.join(providing)} "
            f"from PyPI {how} at `import torch`, and the loader uses those copies when torch is imported before "
            "these libraries are loaded"
        )
    notes += _transitive_notes(transitive, name)
    for path, (opt, libs) in optional.items():
        packages = ", ".join(dict.fromkeys(p for _, p in libs if p))
        others = [lib for lib, p in libs if not p]
        if packages and others:  # installing the CUDA wheels alone does not turn it on (sgl-kernel needs torch too)
            hint = f" (pip install {packages} brings the CUDA ones; {', '.join(others)} must come from elsewhere)"
        else:
            hint = f" (pip install {packages} turns it on)" if packages else ""
        notes.append(
            f"{path} needs {', '.join(lib for lib, _ in libs)}, which no requirement of the wheel installs; it is an "
            f"optional part: the package imports {opt.module} only where it survives the import failing "
            f"(try/except ImportError at {abbreviated(opt.guards)}), so without "
            f"{'them' if len(libs) > 1 else 'it'} that feature is off and the rest works{hint}"
        )
    only_optional = dict.fromkeys(lib for _, libs in optional.values() for lib, _ in libs if lib not in failed)
    return DependencyVerdict(
        problems=tuple(problems), notes=tuple(notes), from_extras=provisions, optional=tuple(only_optional)
    )


def _named_notes(by_name: Mapping[tuple[str, str], Sequence[str]]) -> list[str]:
    """One note per library named after a requirement ((library, requirement) -> the files that need it)."""
    out = []
    for (needed, named), paths in by_name.items():
        one = len(paths) == 1
        out.append(
            f"{abbreviated(paths)} {'needs' if one else 'need'} {needed}, which no search path of "
            f"{'it' if one else 'them'} finds: Requires-Dist '{named}' is named after it; such library wheels "
            "(RAPIDS': librmm-cu12 installs librmm/lib64/librmm.so) load it when imported, and the loader uses that "
            "copy if they are imported before these files load, which the wheel's own files do not show"
        )
    return out


def _backend_notes(lacks: Mapping[str, Sequence[str]], backends: Mapping[str, str]) -> list[str]:
    """One note per set of libraries that builds for another GPU platform need and nothing provides."""
    by_libs: dict[tuple[str, ...], list[str]] = {}
    for path, libs in lacks.items():
        by_libs.setdefault(tuple(libs), []).append(path)
    return [
        f"{abbreviated(paths)} ({', '.join(dict.fromkeys(backends[p] for p in paths))}: "
        f"{'a build' if len(paths) == 1 else 'builds'} for another GPU platform beside the per-CUDA ones, one "
        "loaded per process where the package runs on that platform) "
        f"{'needs' if len(paths) == 1 else 'need'} {', '.join(libs)}, which come with that platform's own stack "
        "(its drivers and runtime, or its build of torch), not with the wheel's requirements"
        for libs, paths in by_libs.items()
    ]


def _torchless_problems(torchless: Mapping[str, Sequence[str]], brought_by: Mapping[str, Sequence[str]]) -> list[str]:
    """The one problem of the torch extensions of a wheel that requires no torch (file -> the libraries a torch
    requirement would bring; library -> the PyPI torch releases that install it): one reason, so one line, with every
    such file and the libraries of them all."""
    from slimwheel import torchext

    if not torchless:
        return []
    libs = list(dict.fromkeys(lib for needed in torchless.values() for lib in needed))
    own = [lib for lib in libs if torchext.is_torch_library(lib)]
    by_releases: dict[tuple[str, ...], list[str]] = {}
    for lib in libs:
        if lib not in own:
            by_releases.setdefault(tuple(brought_by.get(lib, ())), []).append(lib)
    parts = [f"torch's libraries ({', '.join(own)})"] if own else []
    parts += [
        f"{', '.join(brought)}, which PyPI's torch {abbreviated(releases, 4)} install{'s' if len(releases) == 1 else ''}"
        for releases, brought in by_releases.items()
    ]
    return [
        f"{abbreviated(torchless)} {'needs' if len(torchless) == 1 else 'need'} {' and '.join(parts)}, but the wheel "
        "has no Requires-Dist on torch: pip may install it without torch, or beside a torch it cannot load"
    ]


def _unaccounted_problems(unaccounted: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    """One problem per reason and set of needing files (reason -> library -> files), naming its libraries."""
    out = []
    for why, libs in unaccounted.items():
        by_files: dict[tuple[str, ...], list[str]] = {}
        for lib, paths in libs.items():
            by_files.setdefault(tuple(paths), []).append(lib)
        for files, sonames in by_files.items():
            out.append(f"{abbreviated(files)} {'needs' if len(files) == 1 else 'need'} {', '.join(sonames)}: {why}")
    return out


def _transitive_notes(transitive: Mapping[tuple[str, Provider, str], Sequence[str]], name: str) -> list[str]:
    """One note per provider and set of needing files ((library, provider, RPATH entry that reaches it or "") ->
    files): nvidia-cublas-cu12's libcublas.so.12 and libcublasLt.so.12 share one."""
    grouped: dict[tuple[tuple[str, ...], str, str, tuple[str, ...], str], list[Provider]] = {}
    for (_soname, p, entry), needing in transitive.items():
        grouped.setdefault((tuple(needing), p.project, p.version, p.chain, entry), []).append(p)
    out = []
    for (files, project, version, _chain, entry), ps in grouped.items():
        found = (
            f"found through its RPATH entry {entry}"
            if entry
            else "the loader finds that copy when it is loaded before these files (RAPIDS' and NVIDIA's library "
            "wheels load theirs when imported), which the wheel's own files do not show"
        )
        who = "a requirement of the wheel" if len(ps[0].chain) == 1 else "a requirement's requirement"
        out.append(
            f"{abbreviated(files)} need(s) {', '.join(p.soname for p in ps)}, which {who} installs: "
            f"{name or 'the wheel'} {ps[0].how()}, and {project} {version} (the version the index offers now) "
            f"installs {', '.join(p.path for p in ps)}; {found}"
        )
    return out


def extra_notes(provisions: Sequence[ExtraProvision], *, name: str = "") -> list[str]:
    """One note per extra: which CUDA libraries it installs, for which files, and what happens without it."""
    out = []
    for extra in dict.fromkeys(p.extra for p in provisions):
        ps = [p for p in provisions if p.extra == extra]
        reqs = ", ".join(dict.fromkeys(p.requirement for p in ps))
        files = sorted({f for p in ps for f in p.files})
        shown = abbreviated(files)
        # a library the required wheel requires itself (onnxruntime-gpu's cuBLAS through nvidia-cudnn-cu13)
        through = sorted(
            {
                f"{provider} requires {lib.package}"
                for p in ps
                for provider in [str(canonicalize_name(Requirement(p.requirement).name))]
                for lib in cudalibs.RUNTIME_LIBS
                if lib.soname == p.soname and lib.package in cudalibs.WHEEL_REQUIRES.get(provider, ())
            }
        )
        reqs += f" ({'; '.join(through)})" if through else ""
        out.append(
            f"CUDA libraries come with the extra '{extra}' (pip install '{name or 'the wheel'}[{extra}]'): "
            f"{', '.join(p.soname for p in ps)}, from Requires-Dist {reqs}; without the extra, {len(files)} file(s) "
            f"({shown}) load only where those libraries come from elsewhere (a CUDA toolkit, conda, or the nvidia-* "
            "wheels installed on their own, where the loader or the package's own loading code finds them), else "
            "loading those files fails"
            + (
                f"; with it, no search path of those files reaches {', '.join(sorted({p.unreached for p in ps}))}, "
                "so the libraries are found only once loaded (by the package's own preloading, or torch's import)"
                if all(p.unreached for p in ps)
                else ""
            )
        )
    return out
