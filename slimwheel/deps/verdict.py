"""Every library a wheel needs accounted for: `dependency_problems`, the rule check and repair judge by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.providers import CudaFaultKind, FromTorch, cxx_runtime_text, second_copy
from slimwheel.deps.resolve import Fault, FileResolution, How, OpenedChain, Resolution, Resolved, resolve
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.pyimports import OptionalModule, PythonImports
from slimwheel.reqgraph import Provider, RequirementGraph
from slimwheel.rpath import describe
from slimwheel.shown import abbreviated
from slimwheel.torchext import releases_text

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
    # What the verdict could not learn (a folder taken on trust, offline or where the index could not tell): never
    # a pass; check makes each a failure of its own exit code, or a note where the user chose so (`--unknown`).
    unknown: tuple[str, ...] = ()
    # Libraries that nothing provides and only optional parts of the package need (CuPy's NCCL and cuTENSOR): repair
    # leaves them unrequired, as the project does (a note says which package turns the part on).
    optional: tuple[str, ...] = ()
    resolved: Resolved | None = None  # what the verdict was worded from

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
    (rmm-cu12 -> librmm-cu12 -> rapids-logger's librapids_logger.so). The resolution is `deps.resolve`; this words it
    (`word`)."""
    return word(
        resolve(
            elfs,
            cuda_major=cuda_major,
            requires=requires,
            tags=tags,
            files=files,
            name=name,
            imports=imports,
            graph=graph,
        )
    )


def fault_text(r: Resolution) -> str:
    """What is wrong with a library nothing (or a wrongly pinned requirement) provides, as one line."""
    said = f"{r.file} needs {r.soname}"
    c = r.cuda
    if r.fault is Fault.PATH:
        where = "on the user's machine" if r.soname.startswith("/") else "from the current directory"
        return (
            f"{said}: a NEEDED entry with a '/' is opened as that path, {where}, never from the wheel or its "
            "requirements, so whoever can write there runs code at import: link the library by its SONAME"
        )
    if r.fault is Fault.UNREACHED:
        if r.carrier:
            named = r.carrier.rsplit("/", 1)[-1]
            what = f"the wheel carries it as {r.carrier}" + (
                f" (its SONAME: the loader looks for a file named {r.soname})" if named != r.soname else ""
            )
        else:
            what = f"Requires-Dist '{r.requirement}' installs it in {r.folder}"
        return (
            f"{said}: {what}, but no entry of its search path (DT_RUNPATH, else DT_RPATH, from where it installs) "
            f"reaches {r.folder}, and nothing the package loads first brings it: add {r.entry} to its RUNPATH"
        )
    if c is not None and c.kind is CudaFaultKind.UNPINNED_THROUGH:
        assert c.lib is not None and c.requirement is not None
        text = (
            f"{said} (CUDA {c.lib.cuda_major}) through Requires-Dist '{c.requirement}', which does not pin "
            f"{c.requirement.name} to CUDA {c.lib.cuda_major}: pip may install another CUDA major"
        )
    elif c is not None and c.kind is CudaFaultKind.UNPINNED:
        assert c.lib is not None and c.requirement is not None
        text = (
            f"{said} (CUDA {c.lib.cuda_major}), but Requires-Dist '{c.requirement}' does not pin "
            f"{c.lib.package} to {c.lib.version_major}.*: pip may install another CUDA major"
        )
    elif c is not None and c.kind is CudaFaultKind.DROPPED:
        assert c.lib is not None and c.requirement is not None
        text = (
            f"{said} (CUDA {c.lib.cuda_major}), but Requires-Dist '{c.requirement}' admits {c.requirement.name} "
            f"{c.lib.until} and later, which no longer install it ({c.lib.package} {c.lib.until} dropped it), and pip "
            f"takes the newest: keep it below {c.lib.until}"
        )
    elif c is not None and c.kind is CudaFaultKind.CONDITIONAL:
        text = (
            f"{said}: Requires-Dist '{c.conditional}' holds only under its marker, not everywhere the wheel installs "
            "(Linux, its Python versions), so pip may install the wheel without it"
        )
    elif c is not None:
        wanted = " or ".join(f"{lib.package} (CUDA {lib.cuda_major})" for lib in c.candidates)
        text = f"{said}: not in the wheel and no Requires-Dist on {wanted}"
    elif r.fault is Fault.FOREIGN:
        text = (
            f"{said}: not in the wheel, not a CUDA runtime library from PyPI, not allowed by {r.policy}, and not in "
            f"an RPATH folder named like a required project; its RPATH reaches {', '.join(r.foreign)}, other "
            "projects' folders, and offline it is not known whether a requirement installs it there (without "
            "--offline the index tells)"
        )
    else:
        text = (
            f"{said}: not in the wheel, not a CUDA runtime library from PyPI, not in an RPATH folder of a required "
            f"project, and not allowed by {r.policy}"
        )
    if (t := r.torch) is not None:
        text = (
            f"{text}; torch {releases_text(t.providing)} from PyPI {t.how} and load it at `import torch`, but "
            f"Requires-Dist '{t.req}' also admits torch {releases_text(t.lacking)}, which do(es) not"
        )
    if r.unlearned and r.fault is not Fault.FOREIGN:
        text = (
            f"{text}; whether a requirement's own wheels install it is not known: the index was not read "
            "(`slimwheel check` without --offline reads it)"
        )
    if r.unread:
        text = f"{text} (what {len(r.unread)} requirement(s) install could not be read from the index: " + (
            f"{abbreviated(r.unread, 2)})"
        )
    return text


def _copy_note(f: FileResolution, resolved: Resolved) -> str:
    assert f.copy is not None and f.copy_lib is not None
    said = (
        f"{f.file} is a copy of {f.copy.real_name} ({f.copy_lib.package}"
        + (", loaded by its library" if f.copy.companion else "")
        + f"): {second_copy(f.copy_lib, resolved.torch)}"
    )
    if (p := f.shared) is not None:
        # the same auditwheel copy in a requirement's wheel is one mapping per process; unvendoring one side only
        # leaves that copy and the nvidia-* wheel's library loaded together (`repair.unvendor.shared_copies`)
        return (
            f"{said}; {p.project} {p.version} ships the same copy ({p.path}; the wheel {p.how()}), which a process "
            f"maps once: unvendoring only this wheel would load two; `slimwheel repair` refuses that unless "
            "--split-shared-copies, so repair both wheels"
        )
    return f"{said}; `slimwheel repair` replaces it with that wheel"


def _folder_notes(folders: Sequence[Resolution]) -> list[str]:
    """One line per RPATH entry, requirement and set of files: libraries taken to be in a required project's folder,
    which only the index could confirm (auto-gptq 0.7.1's five modules and torch 2.2's four libraries: one line, not
    twenty). The index was not read (`check --offline`, and repair, which never reads it), or did not tell."""
    grouped: dict[tuple[str, str, bool], tuple[list[str], list[str]]] = {}
    for r in folders:
        files, libs = grouped.setdefault((r.entry, str(r.requirement), r.offline), ([], []))
        files.append(r.file)
        libs.append(r.soname)
    out = []
    for (entry, req, offline), (files, libs) in grouped.items():
        one = len(set(files)) == 1
        names = list(dict.fromkeys(libs))
        why = (
            "the index was not read: `slimwheel check` without --offline reads it"
            if offline
            else "the index did not tell its files"
        )
        out.append(
            f"{abbreviated(list(dict.fromkeys(files)))} {'needs' if one else 'need'} {', '.join(names)}: "
            f"{'its' if one else 'their'} RPATH entry {entry} reaches a folder of Requires-Dist {req}, but whether "
            f"that requirement installs {'the library' if len(names) == 1 else 'those libraries'} there is not known "
            f"({why})"
        )
    return out


def _chain_note(c: OpenedChain) -> str:
    names = " or ".join(c.names)
    wanted = " or ".join(f"{lib.package}, CUDA {lib.cuda_major}" for lib in c.libs)
    how = (
        f"installed, that wheel is found through its RPATH entry {c.reached}"
        if c.reached
        else f"no search path of {c.file} reaches "
        f"{'that wheel' + chr(39) + 's folder' if len(c.libs) == 1 else 'those wheels' + chr(39) + ' folders'} "
        f"({', '.join(dict.fromkeys(lib.folder for lib in c.libs))}), so installing it alone does not help: the "
        "library must already be loaded (torch loads its nvidia-* libraries at import) or sit on the loader's path "
        "(a CUDA toolkit, LD_LIBRARY_PATH)"
    )
    said = (
        "the name is in its read-only data"
        if len(c.names) == 1
        else "names of several CUDA majors in its read-only data: it takes whichever it finds"
    )
    if c.unpinned is not None:
        # A requirement on the library's wheel that admits any release of it (nvidia-cudnn-cu13 9.28 requires plain
        # `nvidia-cublas`, nvidia-cufft 12.5 `nvidia-nvjitlink`) installs the library today: the fault is the missing
        # pin, not a missing requirement.
        lib, unpinned = c.unpinned
        through = (
            "" if canonicalize_name(unpinned.name) == lib.package else f" through its requirement on {lib.package}"
        )
        return (
            f"{c.file} opens {names} at run time (dlopen; {said}); Requires-Dist '{unpinned}' installs it{through}, "
            f"but does not pin {unpinned.name} to CUDA {lib.cuda_major}: a release of another CUDA major, which pip "
            f"may install, has another SONAME; {how}"
        )
    return (
        f"{c.file} opens {names} at run time (dlopen; {said}), and no requirement of the wheel installs "
        f"{'it' if len(c.names) == 1 else 'any of them'} ({wanted}); {how}; else what needs it fails when it runs"
    )


@dataclass(kw_only=True)
class _Tally:
    """What `word` gathers across files before it words the lines said once per set of files."""

    from_extras: dict[tuple[str, str], tuple[Requirement, list[str], list[str]]] = field(default_factory=dict)
    from_torch: dict[str, tuple[FromTorch, list[str]]] = field(default_factory=dict)
    transitive: dict[tuple[str, Provider, str], list[str]] = field(default_factory=dict)
    torchless: dict[str, list[str]] = field(default_factory=dict)
    brought_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    by_name: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unaccounted: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    unlearned: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # as `unaccounted`, not known
    unsafe: dict[str, list[str]] = field(default_factory=dict)
    optional: dict[str, tuple[OptionalModule, list[tuple[str, str]]]] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    plugin_lacks: dict[str, list[str]] = field(default_factory=dict)
    backend_lacks: dict[str, list[str]] = field(default_factory=dict)
    preloaded: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # source -> (file, library)
    own_preloaded: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # the same, the wheel's own

    def provided(self, r: Resolution) -> None:
        """A library something provides that a note says once per provider (and set of files)."""
        if r.how is How.EXTRA:
            assert r.requirement is not None
            got = self.from_extras.setdefault((r.extra, r.soname), (r.requirement, [], []))
            got[1].append(r.file)
            got[2].append(r.entry)
        elif r.how is How.TORCH:
            assert r.torch is not None
            self.from_torch.setdefault(r.soname, (r.torch, []))[1].append(r.file)
        elif r.how is How.TORCHLESS:
            self.torchless.setdefault(r.file, []).append(r.soname)
            if r.brought_by:
                self.brought_by[r.soname] = r.brought_by
        elif r.how is How.TRANSITIVE:
            assert r.provider is not None
            self.transitive.setdefault((r.soname, r.provider, r.entry), []).append(r.file)
        elif r.how is How.NAMED:
            self.by_name.setdefault((r.soname, str(r.requirement)), []).append(r.file)
        elif r.how is How.REQUIREMENT and r.preloaded_by:
            self.preloaded.setdefault(r.preloaded_by, []).append((r.file, r.soname))
        elif r.how is How.IN_WHEEL and r.preloaded_by:
            self.own_preloaded.setdefault(r.preloaded_by, []).append((r.file, r.soname))

    def unprovided(self, r: Resolution, *, alternative: bool, problems: list[str]) -> None:
        if r.how is How.PLUGIN:
            self.plugin_lacks.setdefault(r.file, []).append(r.soname)
        elif r.how is How.BACKEND:
            self.backend_lacks.setdefault(r.file, []).append(r.soname)
        elif r.how is How.OPTIONAL:
            assert r.optional is not None
            self.optional.setdefault(r.file, (r.optional, []))[1].append((r.soname, r.package))
        else:
            self.failed.add(r.soname)
            text = fault_text(r)
            said = f"{r.file} needs {r.soname}: "
            if r.unlearned or r.unread:
                # the index not read, or unable to tell a requirement's files: not known (`check --unknown`)
                self.unlearned.setdefault(text[len(said) :], {}).setdefault(r.soname, []).append(r.file)
            elif alternative or not text.startswith(said):
                problems.append(text)  # an alternative's problems are joined per file by `word`
            else:
                self.unaccounted.setdefault(text[len(said) :], {}).setdefault(r.soname, []).append(r.file)


def word(resolved: Resolved) -> DependencyVerdict:
    """The verdict and its notes, worded from the resolution alone: one line per fault, per provider and per set of
    files where several files share one reason."""
    problems: list[str] = []
    notes: list[str] = []
    unknown: list[str] = []
    folders: list[Resolution] = []
    if resolved.policy.note:
        notes.append(resolved.policy.note)
    notes += [f"Requires-Dist {r!r} cannot be parsed" for r in resolved.unparsable]
    problems += [
        f"Requires-Dist on {project} contradict each other ({'; '.join(map(str, rs))}): "
        "pip can install no version of it, so it cannot install the wheel"
        for project, rs in resolved.contradictions
    ]
    tally = _Tally()
    for f in resolved.files:
        if f.copy is not None:
            notes.append(_copy_note(f, resolved))
        before = len(problems)
        if f.exports_cxx_runtime:
            problems.append(cxx_runtime_text(f.file))
        if f.driver:
            problems.append(
                f"{f.file} is a copy of the NVIDIA driver's {f.driver}: the driver's libraries must be the installed "
                "driver's own (they match its kernel module, version for version), and a bundled copy is loaded "
                "instead of it wherever this wheel's files find it first; build the wheel again with it excluded "
                f"(auditwheel repair --exclude {f.driver}; `slimwheel repair` excludes it)"
            )
        if f.unsafe:
            said = f"{'entry' if len(f.unsafe) == 1 else 'entries'}: {describe(f.unsafe)}"
            tally.unsafe.setdefault(said, []).append(f.file)
        if f.dead:
            notes.append(f"{f.file}: RPATH/RUNPATH {describe(f.dead)}")
        for r in f.loads:
            if r.how is How.NOTHING:
                problems.append(fault_text(r).replace(" needs ", " loads at run time ", 1))
            tally.provided(r)
        notes += [_chain_note(c) for c in f.chains]
        for r in f.opened:
            tally.provided(r)
        for r in f.needed:
            if r.how is How.FOLDER:
                folders.append(r)
            elif r.how is How.NOTHING and r.required_fault:
                # a requirement that pins the wrong major is a fault of the wheel's metadata, optional part or not
                problems.append(fault_text(r))
            elif not r.provided:
                tally.unprovided(r, alternative=f.alternative is not None, problems=problems)
            else:
                tally.provided(r)
        if f.alternative is not None and len(problems) > before:
            # an alternative is judged on its own: its problems in one line, named as the alternative it is
            a = f.alternative
            n = sum(1 for x in resolved.files if x.alternative is not None and x.alternative.group == a.group)
            mine = [p.removeprefix(f"{f.file}: ").removeprefix(f"{f.file} ") for p in problems[before:]]
            problems[before:] = [
                f"{f.file} (alternative for CUDA {a.cuda}, one of {n} loaded per process): " + "; ".join(mine)
            ]
    unknown += _folder_notes(folders)
    notes += _named_notes(tally.by_name)
    notes += _backend_notes(tally.backend_lacks, resolved.backends)
    notes += [
        f"{path} is a plugin: {resolved.plugins[path]} opens it by name, and no file of the wheel needs it; it needs "
        f"{', '.join(libs)}, which neither the wheel nor its requirements install, so opening it fails where the "
        "system does not provide them (whether the package works without that plugin, the wheel does not show)"
        for path, libs in tally.plugin_lacks.items()
    ]
    problems += _unaccounted_problems(tally.unaccounted)
    unknown += _unaccounted_problems(tally.unlearned)
    problems += _torchless_problems(tally.torchless, tally.brought_by)
    problems += [f"{abbreviated(paths)}: unsafe RPATH/RUNPATH {said}" for said, paths in tally.unsafe.items()]
    problems += [
        f"{f.file}: its search path names {s.system} (a system toolkit location) before {s.before} ({s.folder}, where "
        f"the nvidia-* wheels install {', '.join(s.sonames)}): where the user's machine has a CUDA toolkit there, the "
        "loader takes its copies and not the wheels' (a second CUDA runtime beside torch's); drop the entry or put "
        "it last"
        for f in resolved.files
        for s in f.shadowed
    ]
    provisions = tuple(
        ExtraProvision(
            extra=extra,
            soname=soname,
            requirement=str(req),
            files=tuple(dict.fromkeys(fs)),
            unreached="" if any(entries) else _folder_of(soname, resolved.cuda_major),
        )
        for (extra, soname), (req, fs, entries) in tally.from_extras.items()
    )
    notes += extra_notes(provisions, name=resolved.name)
    notes += [
        f"{abbreviated(list(dict.fromkeys(f for f, _ in got)))} need(s) {', '.join(dict.fromkeys(s for _, s in got))} "
        f"from the nvidia-* wheels, which no search path of theirs reaches: found because {source} loads those "
        "libraries first (ctypes): they load only once it has run"
        for source, got in tally.preloaded.items()
    ]
    notes += [_own_preloaded_note(source, got) for source, got in tally.own_preloaded.items()]
    notes += _torch_notes(tally.from_torch)
    notes += _transitive_notes(tally.transitive, resolved.name)
    notes += _optional_notes(tally.optional)
    only_optional = dict.fromkeys(
        lib for _, libs in tally.optional.values() for lib, _ in libs if lib not in tally.failed
    )
    return DependencyVerdict(
        problems=tuple(problems),
        notes=tuple(notes),
        from_extras=provisions,
        unknown=tuple(unknown),
        optional=tuple(only_optional),
        resolved=resolved,
    )


def _folder_of(soname: str, cuda_major: int | None) -> str:
    """The folder an extra's wheel installs the library in (of the wheel's major, where the SONAME fits two)."""
    rows = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname]
    mine = sorted(lib.folder for lib in rows if lib.cuda_major == cuda_major) or sorted({lib.folder for lib in rows})
    return mine[0] if mine else ""


def _torch_notes(from_torch: Mapping[str, tuple[FromTorch, Sequence[str]]]) -> list[str]:
    """One note per library `import torch` brings; torch's own libraries come in sixes (libc10.so ...
    libtorch_cuda.so): one note for those that the same files need from the same releases' torch/lib."""
    notes = []
    shipped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for soname, (t, paths) in from_torch.items():
        if t.how.startswith("ship"):
            shipped.setdefault((str(t.req), t.providing, tuple(paths)), []).append(soname)
            continue
        notes.append(
            f"{abbreviated(paths)} need(s) {soname}: only '{t.req}' installs it: torch {releases_text(t.providing)} "
            f"from PyPI {t.how} and load it at `import torch`, which must come first"
        )
    for (req, providing, files), sonames in shipped.items():
        one = from_torch[sonames[0]][0]
        how = f"{one.how} and load it" if len(sonames) == 1 else "ship(s) them in torch/lib and load them"
        notes.append(
            f"{abbreviated(files)} need(s) {', '.join(sonames)}: only '{req}' installs "
            f"{'them' if len(sonames) > 1 else 'it'}: torch {releases_text(providing)} from PyPI {how} at "
            "`import torch`, which must come first"
        )
    return notes


def _optional_notes(optional: Mapping[str, tuple[OptionalModule, Sequence[tuple[str, str]]]]) -> list[str]:
    notes = []
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
    return notes


def _own_preloaded_note(source: str, got: Sequence[tuple[str, str]]) -> str:
    """Files that find the wheel's own libraries only because the package loaded them first: by path from its Python
    code (`source`, a .py file), or through the libraries an extension module needs (`source`, that module)."""
    files = abbreviated(list(dict.fromkeys(f for f, _ in got)))
    head = f"{files} need(s) {', '.join(dict.fromkeys(s for _, s in got))}, which the wheel carries where no search "
    if source.endswith(".py"):
        return (
            head + "path of theirs reaches: found because the package loads its own library by path first (ctypes; "
            f"{source} names it), and the loader then takes that copy by SONAME: they load only once it has run"
        )
    return (
        head + f"path of theirs reaches: found because importing {source} loads those libraries first (it needs "
        "them, directly or through another library), and the loader then takes that copy by SONAME: no file of "
        "the wheel needs these files, so the package opens them at run time, and they load only once it is imported"
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
