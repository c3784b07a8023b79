"""Resolution: for every library each ELF file of a wheel needs (DT_NEEDED), loads at run time (NVRTC for embedded
sources) or opens by name (dlopen), which provider covers it and how, as typed, frozen values. Nothing here words a
verdict: `deps.verdict` does, from these values alone; `repair` plans from them (which libraries an extra installs,
which only optional parts need).

The provider rules, in the order a library is tried: in the wheel; on the manylinux allow-list; the driver; the
system's dynamic loader; for a CUDA library of the table, a requirement on its nvidia-* wheel pinned to its major, else
an extra's, else torch's import (a torch extension with or without a torch requirement), else a requirement's
requirement, else nothing; for any other library, an RPATH folder of a required project (taken on trust only where the
index could not tell), a requirement's requirement, torch, a requirement named after it, else nothing. A library
nothing provides is no fault where only a part the package does without needs it: an optional extension module, a
plugin opened by name, a build for another GPU platform.
"""

from __future__ import annotations

import enum
import fnmatch
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement

from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.bounds import satisfiable
from slimwheel.deps.installs import Installs, Requirements
from slimwheel.deps.policy import SYSTEM_LOADERS, SystemPolicy, system_policy
from slimwheel.deps.providers import (
    AdmittedTorch,
    CudaFault,
    FromTorch,
    admitted_torch,
    cuda_library_fault,
    external_provider,
    extra_provider,
    foreign_folders,
    named_provider,
    plugins,
    requirement_on,
    torch_provider,
)
from slimwheel.deps.reach import (
    LOADER_FILE,
    ImportLoads,
    Reached,
    entry_to_add,
    imported_module,
    inherited_rpaths,
    preloaded,
    reached_member,
    reaching,
)
from slimwheel.inspect.dynamic import ElfInfo, carried_names
from slimwheel.inspect.pyimports import OptionalModule, PythonImports
from slimwheel.reqgraph import Provider, RequirementGraph
from slimwheel.rpath import SearchEntry, install_dir, resolve_entries


class How(enum.Enum):
    """Who provides a library a file needs."""

    IN_WHEEL = "in the wheel"
    SYSTEM = "the system (manylinux allow-list)"
    DRIVER = "the driver"
    LOADER = "the dynamic loader"
    REQUIREMENT = "a requirement on its nvidia-* wheel"
    EXTRA = "an extra's requirement"
    TORCH = "torch's import"
    TORCHLESS = "torch, which the wheel does not require"  # a torch extension of a wheel with no torch requirement
    FOLDER = "an RPATH folder of a required project"  # taken on trust: the index did not tell what is there
    TRANSITIVE = "a requirement's requirement"
    NAMED = "a requirement named after it"
    OPTIONAL = "nothing; an optional part needs it"
    PLUGIN = "nothing; a plugin needs it"
    BACKEND = "nothing; a build for another GPU platform needs it"
    NOTHING = "nothing"


class Use(enum.Enum):
    NEEDED = "needs"  # DT_NEEDED
    LOADS = "loads at run time"  # NVRTC for embedded sources, loaded by slimwheel's code


class Fault(enum.Enum):
    """Why nothing provides a library that is not a CUDA library of the table."""

    UNPROVIDED = "unprovided"  # not in the wheel, not CUDA, not in a required project's folder, not allowed
    FOREIGN = "foreign"  # the same, and offline: its RPATH reaches other projects' folders that may hold it
    PATH = "path"  # a NEEDED entry with a '/': opened as that path (from the current directory when relative)
    # what provides it installs it in a folder (`folder`) that no entry of the file's search path reaches, and nothing
    # the package loads first brings it: `entry` is the one to add
    UNREACHED = "unreached"


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """One library of one file, and who provides it. Only the fields of its `how` are set."""

    file: str
    soname: str
    use: Use
    how: How
    cuda: CudaFault | None = None  # a CUDA library: what its requirement lacks (None: a pinned requirement has it)
    fault: Fault | None = None  # another library nothing provides: why
    foreign: tuple[str, ...] = ()  # Fault.FOREIGN: the other projects' folders its RPATH reaches
    policy: str = ""  # the manylinux policy it is not allowed by (Fault.*)
    torch: FromTorch | None = None  # TORCH, or a fault with the torch releases that would and would not bring it
    extra: str = ""  # EXTRA: the extra
    requirement: Requirement | None = None  # EXTRA, FOLDER, NAMED: the Requires-Dist that provides it
    # FOLDER: the RPATH entry; TRANSITIVE, EXTRA: the entry that reaches the provider's (the library's) folder, or ""
    entry: str = ""
    offline: bool = False  # FOLDER: the index was not read (else: it could not tell that project's files)
    provider: Provider | None = None  # TRANSITIVE
    brought_by: tuple[str, ...] = ()  # TORCHLESS, a CUDA library: the PyPI torch releases that install it
    optional: OptionalModule | None = None  # OPTIONAL: why the file is optional
    package: str = ""  # OPTIONAL: the nvidia-* wheel that would turn the part on, if the table knows it
    unread: tuple[str, ...] = ()  # a fault: the requirements whose own requirements the index could not tell
    # Fault.UNPROVIDED/FOREIGN, or a CUDA library no requirement names: the index was not read (offline, and repair,
    # which never reads it) and a requirement's own wheels, which only it tells, may install the library
    unlearned: bool = False
    folder: str = ""  # Fault.UNREACHED: the site-packages folder the library is installed in
    carrier: str = ""  # IN_WHEEL: the member the loader finds; Fault.UNREACHED: the member no search path reaches
    preloaded_by: str = ""  # REQUIREMENT reached by no search path: the package's Python source that loads it first

    @property
    def provided(self) -> bool:
        return self.how not in (How.NOTHING, How.OPTIONAL, How.PLUGIN, How.BACKEND)

    @property
    def required_fault(self) -> bool:
        """A fault of the wheel's metadata (a requirement pinned wrong, or under a marker), optional part or not."""
        return self.cuda is not None and self.cuda.requirement is not None


@dataclass(frozen=True, kw_only=True)
class OpenedChain:
    """Names of one library a file opens by name (dlopen: NVRTC, NCCL), of one or more CUDA majors, none of which
    anything provides (a chain where one name is provided resolves)."""

    file: str
    names: tuple[str, ...]  # newest major first
    libs: tuple[cudalibs.RuntimeLib, ...]
    reached: str  # the RPATH entry that reaches one of the libraries' folders, or ""
    # a requirement that installs the library without pinning its major (nvidia-cudnn-cu13 9.28's `nvidia-cublas`)
    unpinned: tuple[cudalibs.RuntimeLib, Requirement] | None = None


@dataclass(frozen=True, kw_only=True)
class Shadow:
    """A system toolkit entry of a file's search path that comes before an entry into an nvidia-* wheels' folder
    holding CUDA libraries the file needs: where the system has them, the loader takes the system's copies."""

    system: str  # the entry: /usr/local/cuda/lib64
    before: str  # the later entry: $ORIGIN/../cu13/lib
    folder: str  # where that one lands: nvidia/cu13/lib
    sonames: tuple[str, ...]  # the CUDA libraries the file needs from that folder


@dataclass(frozen=True, kw_only=True)
class FileResolution:
    """Everything resolved of one ELF file, in the order the rules met it."""

    file: str
    alternative: alt_model.AlternativeFile | None  # a per-CUDA alternative (one loaded per process)
    copy: cudalibs.Vendored | None  # a copy of a CUDA library the nvidia-* wheels provide
    copy_lib: cudalibs.RuntimeLib | None
    driver: str = ""  # the NVIDIA driver library the file is a copy of (`cudalibs.driver_copy`): never the wheel's
    shared: Provider | None  # a requirement that ships the same copy (`RequirementGraph.shared_copy`)
    exports_cxx_runtime: bool  # carries libstdc++ linked statically and exports it
    unsafe: tuple[SearchEntry, ...]  # search path entries that leave site-packages or point at the build machine
    dead: tuple[SearchEntry, ...]  # entries into the Python library's folder, which never hold a wheel's libraries
    shadowed: tuple[Shadow, ...] = ()  # system toolkit entries searched before the nvidia-* folders it reaches
    loads: tuple[Resolution, ...]
    chains: tuple[OpenedChain, ...]
    opened: tuple[Resolution, ...]  # names it opens that a requirement's requirement installs (TRANSITIVE)
    needed: tuple[Resolution, ...]


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """The resolution of a whole wheel."""

    policy: SystemPolicy
    unparsable: tuple[str, ...]  # Requires-Dist lines that cannot be parsed
    contradictions: tuple[tuple[str, tuple[Requirement, ...]], ...]  # project -> requirements no version satisfies
    files: tuple[FileResolution, ...]
    torch: AdmittedTorch | None  # the wheel's torch requirement and the releases it admits
    plugins: dict[str, str]  # plugin -> the file that opens it
    backends: dict[str, str]  # builds for other GPU platforms -> the platform
    cuda_major: int | None
    name: str

    def libraries(self) -> Iterable[Resolution]:
        for f in self.files:
            yield from f.loads
            yield from f.opened
            yield from f.needed

    def by(self, how: How) -> list[Resolution]:
        return [r for r in self.libraries() if r.how is how]

    def extras(self) -> tuple[str, ...]:
        """The extras that install CUDA libraries the wheel needs, in order (CuPy's `ctk`)."""
        return tuple(dict.fromkeys(r.extra for r in self.by(How.EXTRA)))

    def from_extras(self) -> frozenset[str]:
        """The libraries an extra installs."""
        return frozenset(r.soname for r in self.by(How.EXTRA))

    def from_requirements(self) -> frozenset[str]:
        """The libraries a requirement's requirement installs (the index's graph: pylibraft-cu12's cuBLAS, through
        libraft-cu12 -> cuda-toolkit[cublas])."""
        return frozenset(r.soname for r in self.by(How.TRANSITIVE))

    def only_optional(self) -> tuple[str, ...]:
        """Libraries that nothing provides and only optional parts of the package need (CuPy's NCCL and cuTENSOR):
        repair leaves them unrequired, as the project does."""
        failed = {r.soname for r in self.by(How.NOTHING) if r.use is Use.NEEDED and not r.required_fault}
        return tuple(dict.fromkeys(r.soname for r in self.by(How.OPTIONAL) if r.soname not in failed))


@dataclass(frozen=True, kw_only=True)
class _Context:
    """What every rule may consult; nothing in it changes while a wheel is resolved (the graph caches its reads)."""

    reqs: Requirements
    policy: SystemPolicy
    inside: frozenset[str]
    members: Mapping[str, tuple[str, ...]]  # every file of the wheel, by file name (the loader finds files by name)
    sonames: dict[str, str]  # SONAME -> the first ELF file of the wheel that has it
    inherited: dict[str, Reached]  # file -> the DT_RPATH folders of the files that load it (deps.reach)
    tops: frozenset[str]
    alts: dict[str, alt_model.AlternativeFile]
    torch: AdmittedTorch | None
    any_torch: AdmittedTorch | None  # torch as if required, for a wheel that requires none
    machines: tuple[str, ...]
    plugin_of: dict[str, str]
    backends: dict[str, str]
    imports: PythonImports | None
    graph: RequirementGraph | None
    import_loads: ImportLoads


def resolve(
    elfs: Sequence[ElfInfo],
    *,
    cuda_major: int | None,
    requires: Sequence[str],
    tags: Sequence[str],
    files: Iterable[str] = (),
    name: str = "",
    imports: PythonImports | None = None,
    graph: RequirementGraph | None = None,
) -> Resolved:
    """Resolve every library of every ELF file (see the module docstring). `files`: every file of the wheel (a NEEDED
    name that is a file's name is carried by the wheel). `imports`: the wheel's Python sources, asked only for files
    that need a library nothing provides. `graph`: what the requirements' own requirements install, asked only where
    the rules before it provide nothing."""
    platforms = tuple(dict.fromkeys(t.split("-", 2)[2] for t in tags if t.count("-") >= 2))
    installs = Installs.from_tags(tags)
    reqs = Requirements.of(requires, installs)
    torch = admitted_torch(reqs)
    all_files = tuple(files)
    members = _by_name([*all_files, *(info.path for info in elfs)])
    inherited = inherited_rpaths(elfs)
    ctx = _Context(
        reqs=reqs,
        policy=system_policy(platforms),
        inside=frozenset(carried_names(elfs) | {f.rsplit("/", 1)[-1] for f in all_files}),
        members=members,
        sonames={info.soname: info.path for info in reversed(elfs) if info.soname},
        inherited=inherited,
        tops=frozenset(f.split("/", 1)[0] for f in all_files),
        alts=alt_model.alternatives(info.path for info in elfs),
        torch=torch,
        any_torch=admitted_torch(Requirements.of(["torch"], installs)) if torch is None else None,
        machines=tuple(installs.machines),
        plugin_of=plugins(elfs),
        backends=alt_model.other_backends(info.path for info in elfs),
        imports=imports,
        graph=graph,
        import_loads=ImportLoads(elfs, members, inherited),
    )
    contradictions = tuple(
        (project, tuple(rs))
        for project, rs in reqs.always.items()
        if len(rs) > 1 and not satisfiable([r.specifier for r in rs])
    )
    return Resolved(
        policy=ctx.policy,
        unparsable=tuple(reqs.unparsable),
        contradictions=contradictions,
        files=tuple(_resolve_file(info, ctx, cuda_major) for info in elfs),
        torch=torch,
        plugins=ctx.plugin_of,
        backends=ctx.backends,
        cuda_major=cuda_major,
        name=name,
    )


def _by_name(paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The wheel's files by file name, each name's in wheel order (first seen first, no repeats): asked once per
    DT_NEEDED entry, where a scan of every member per entry cost CuPy 370,000 basename calls (1.4 s of a 3.3 s check)."""
    out: dict[str, list[str]] = {}
    for path in dict.fromkeys(paths):
        out.setdefault(posixpath.basename(path), []).append(path)
    return {name: tuple(found) for name, found in out.items()}


def _resolve_file(info: ElfInfo, ctx: _Context, cuda_major: int | None) -> FileResolution:
    alt = ctx.alts.get(info.path)
    major = alt.major if alt is not None else cuda_major  # an alternative has its own
    copy = cudalibs.vendored(info.path, info.soname)  # by SONAME as well as file name, as repair finds copies
    copy_lib = next((c for c in copy.candidates if c.cuda_major == cuda_major), copy.candidates[-1]) if copy else None
    entries = resolve_entries(info.search_path, info.path)
    loads = []
    for loaded in info.loads:  # opened at run time (NVRTC for embedded sources): its wheel must be required
        cands = _candidates(loaded, major)
        if cands:
            loads.append(_cuda(info, loaded, cands, ctx, Use.LOADS))
    chains, opened = _opened_chains(info, ctx, major)
    return FileResolution(
        file=info.path,
        alternative=alt,
        copy=copy,
        copy_lib=copy_lib,
        driver=cudalibs.driver_copy(info.path, info.soname),
        shared=ctx.graph.shared_copy(info.path) if copy is not None and ctx.graph is not None else None,
        exports_cxx_runtime=info.exports_cxx_runtime,
        unsafe=tuple(e for e in entries if not e.safe),
        dead=tuple(e for e in entries if e.kind == "python-lib"),
        shadowed=_shadowed(info, entries),
        loads=tuple(loads),
        chains=chains,
        opened=opened,
        needed=tuple(r for needed in info.needed if (r := _needed(info, needed, ctx, major)) is not None),
    )


def _shadowed(info: ElfInfo, entries: Sequence[SearchEntry]) -> tuple[Shadow, ...]:
    """System toolkit entries before the entries that reach the nvidia-* folders of CUDA libraries the file needs or
    opens by name: dlopen searches the calling file's DT_RUNPATH in the same order (nvidia-dali-cuda130 2.4.0 needs
    no CUDA library and opens libnppc.so.13, libcufile.so.0 and more through /usr/local/cuda/lib64 first)."""
    wanted = {*info.needed, *info.opens, *info.loads}
    out = []
    for i, system in enumerate(entries):
        if system.kind != "system":
            continue
        for later in entries[i + 1 :]:
            if later.kind != "inside":
                continue
            names = tuple(
                dict.fromkeys(
                    lib.soname for lib in cudalibs.RUNTIME_LIBS if lib.folder == later.target and lib.soname in wanted
                )
            )
            if names:
                out.append(Shadow(system=system.entry, before=later.entry, folder=later.target, sonames=names))
    return tuple(out)


def _candidates(soname: str, major: int | None) -> list[cudalibs.RuntimeLib]:
    cands = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname]
    if major is not None:
        cands = [lib for lib in cands if lib.cuda_major == major] or cands
    return cands


def _by_graph(info: ElfInfo, soname: str, ctx: _Context, use: Use) -> Resolution | None:
    """A requirement's requirement that installs the library, with the RPATH entry that reaches its folder."""
    p = ctx.graph.provider(soname) if ctx.graph is not None else None
    if p is None:
        return None
    folder = p.path.rsplit("/", 1)[0] if "/" in p.path else "."
    return Resolution(
        file=info.path,
        soname=soname,
        use=use,
        how=How.TRANSITIVE,
        provider=p,
        entry=reaching(info, [folder], ctx.inherited),
    )


def _unread(ctx: _Context) -> tuple[str, ...]:
    return ctx.graph.unread if ctx.graph is not None else ()


def _for_torch(
    info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib], ctx: _Context, use: Use
) -> Resolution | None:
    """For a torch extension in a wheel that requires no torch (torchaudio 2.11, torchao 0.18, fbgemm-gpu 1.9): a
    library a torch requirement would bring (torch's own, or a CUDA library torch's PyPI builds install), which a
    requirement's requirement installs (TRANSITIVE) or nothing does (TORCHLESS). None when the rule does not apply."""
    from slimwheel import torchext

    if ctx.any_torch is None or not any(torchext.is_torch_library(n) for n in info.needed):
        return None
    if (
        info.path in ctx.plugin_of
        or info.path in ctx.backends
        or (ctx.imports is not None and ctx.imports.optional(info.path))
    ):
        return None  # a part the package does without: what it lacks is said of the part
    brought: tuple[str, ...] = ()
    if not torchext.is_torch_library(soname):
        if (t := torch_provider(soname, cands, ctx.any_torch, ctx.machines)) is None:
            return None
        brought = t.providing
    if (via := _by_graph(info, soname, ctx, use)) is not None:
        return via
    return Resolution(file=info.path, soname=soname, use=use, how=How.TORCHLESS, brought_by=brought)


def _torch_or(fault: Resolution, cands: list[cudalibs.RuntimeLib], ctx: _Context, info: ElfInfo) -> Resolution:
    """TORCH where `import torch` of every admitted release brings the library (one release, for an alternative);
    else the fault, with the releases that would and would not bring it where some would."""
    t = torch_provider(fault.soname, cands, ctx.torch, ctx.machines)
    if t is None:
        return fault
    if t.enough(alternative=info.path in ctx.alts):
        return Resolution(file=info.path, soname=fault.soname, use=fault.use, how=How.TORCH, torch=t)
    return _replace(fault, torch=t)


def _replace(r: Resolution, **changes: object) -> Resolution:
    import dataclasses

    return dataclasses.replace(r, **changes)  # type: ignore[arg-type]


def _cuda(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib], ctx: _Context, use: Use) -> Resolution:
    """A CUDA library of the table: its pinned requirement, an extra's, torch's import, else a fault (which the caller
    may still see provided by a requirement's requirement or excuse in an optional part)."""
    fault = cuda_library_fault(cands, ctx.reqs)
    if fault is None:
        folders = {lib.folder for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname}
        entry = reaching(info, folders, ctx.inherited)
        first = "" if entry or use is Use.LOADS else _loaded_first(info, soname, cands, ctx)
        if entry or use is Use.LOADS or first:
            # slimwheel's code loads what it opens at run time by absolute path: no search path is involved
            source = first if first.endswith(".py") and not first.endswith(LOADER_FILE) else ""
            return Resolution(
                file=info.path, soname=soname, use=use, how=How.REQUIREMENT, entry=entry, preloaded_by=source
            )
        lib = cands[-1]
        return Resolution(
            file=info.path,
            soname=soname,
            use=use,
            how=How.NOTHING,
            fault=Fault.UNREACHED,
            requirement=requirement_on(lib, ctx.reqs),
            folder=lib.folder,
            entry=entry_to_add(info, lib.folder),
        )
    if (got := extra_provider(cands, ctx.reqs)) is not None:
        folders = {lib.folder for lib in cudalibs.RUNTIME_LIBS if lib.soname == soname}
        return Resolution(
            file=info.path,
            soname=soname,
            use=use,
            how=How.EXTRA,
            extra=got[0],
            requirement=got[1],
            cuda=fault,
            entry=reaching(info, folders, ctx.inherited),
        )
    if (r := _for_torch(info, soname, cands, ctx, use)) is not None:
        return r
    return _torch_or(Resolution(file=info.path, soname=soname, use=use, how=How.NOTHING, cuda=fault), cands, ctx, info)


def _loaded_first(info: ElfInfo, soname: str, cands: list[cudalibs.RuntimeLib], ctx: _Context) -> str:
    """What the package loads before the file that brings the library (the loader then takes the copy already
    loaded, by SONAME): slimwheel's loader (its file), the package's own Python code that opens the nvidia-* wheels'
    files (that source), or `import torch` of every release the wheel admits ("torch"); "" when nothing does."""
    if loader := preloaded(info, ctx.members.get(LOADER_FILE, ())):
        return loader
    top = info.path.split("/", 1)[0]
    # auditwheel's `<dist>.libs/` holds what the wheel's packages load, after their own Python code has run
    packages = _packages(ctx) if top.endswith(".libs") else [top]
    if ctx.imports is not None:
        for package in packages:
            if source := ctx.imports.preloading(package, (b"nvidia",)):
                return source
    t = torch_provider(soname, cands, ctx.torch, ctx.machines)
    return "torch" if t is not None and t.enough(alternative=info.path in ctx.alts) else ""


def _packages(ctx: _Context) -> list[str]:
    """The wheel's top-level folders that may hold Python packages (not auditwheel's `.libs`, the metadata or `.data`):
    whose code loads the files outside any package."""
    return sorted(t for t in ctx.tops if not t.endswith((".libs", ".dist-info", ".data")))


def _loaded_own(info: ElfInfo, needed: str, ctx: _Context) -> str:
    """The package's Python source that opens the wheel's own library of SONAME `needed` by path before the file is
    loaded, which then takes that copy by SONAME, the one name the dynamic loader matches a loaded library by (dgl,
    hidet, bitblas's TVM); "" when nothing does, or the wheel has no file of that SONAME. A file outside the packages
    (auditwheel's `.libs`, the top of site-packages) is loaded by any of them."""
    carrier = ctx.sonames.get(needed, "")
    if not carrier or ctx.imports is None:
        return ""
    top = info.path.split("/", 1)[0]
    packages = _packages(ctx) if top.endswith(".libs") or "/" not in info.path else [top]
    name = posixpath.basename(carrier).encode()
    return next((source for p in packages if (source := ctx.imports.loading_own(p, name))), "")


def _loaded_by_import(info: ElfInfo, needed: str, ctx: _Context) -> str:
    """The extension module whose import loads the wheel's own library `needed` first (`reach.ImportLoads`), the
    loader then taking that copy by SONAME; "" where none does. Only for a shared library no file of the wheel needs,
    that is no extension module: the package opens it at run time (dlopen, ctypes), once imported. nixl-cu12 1.5.1's
    plugins in nixl_cu12.libs/nixl need libnixl_common.so, which `_bindings` loads through libnixl.so; a program
    beside them (nixl_example) runs in a process of its own, where nothing is loaded first."""
    base = posixpath.basename(info.path)
    if ".so" not in base or imported_module(info):
        return ""
    if {base, info.soname or ""} & ctx.import_loads.needed:
        return ""
    return ctx.import_loads.by_name().get(needed, "")


def _unprovided(info: ElfInfo, fault: Resolution, cands: list[cudalibs.RuntimeLib], ctx: _Context) -> Resolution:
    """A library nothing provides: a fault, unless the file is a part the package does without."""
    if info.path in ctx.plugin_of and info.path not in ctx.alts:
        return _replace(fault, how=How.PLUGIN)
    if info.path in ctx.backends:
        return _replace(fault, how=How.BACKEND)
    opt = ctx.imports.optional(info.path) if ctx.imports is not None and info.path not in ctx.alts else None
    if opt is None:
        return fault
    return _replace(fault, how=How.OPTIONAL, optional=opt, package=cands[-1].package if cands else "")


def _needed(info: ElfInfo, needed: str, ctx: _Context, major: int | None) -> Resolution | None:
    """The resolution of one DT_NEEDED entry; None for the loader itself (no provider to name). A name the wheel
    carries is in the wheel only where the file's search path reaches the member (`deps.reach`); else the other rules
    may still provide it, and where none does, the fault names the member and the entry to add."""
    if "/" in needed:
        # the loader opens it as that path, the current directory's for a relative one: never the wheel's file
        return Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=How.NOTHING, fault=Fault.PATH)
    if member := reached_member(info, needed, ctx.members.get(needed, ()), ctx.inherited):
        return Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=How.IN_WHEEL, carrier=member)
    if needed == info.soname:
        return Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=How.IN_WHEEL, carrier=info.path)
    r = _needed_elsewhere(info, needed, ctx, major)
    if r is None or r.how is not How.NOTHING or r.required_fault or needed not in ctx.inside:
        return r
    carrier = next(iter(ctx.members.get(needed, ())), "") or ctx.sonames.get(needed, "")
    if source := _loaded_own(info, needed, ctx) or _loaded_by_import(info, needed, ctx):
        return Resolution(
            file=info.path, soname=needed, use=Use.NEEDED, how=How.IN_WHEEL, carrier=carrier, preloaded_by=source
        )
    folder = install_dir(carrier) or "."
    fault = Resolution(
        file=info.path,
        soname=needed,
        use=Use.NEEDED,
        how=How.NOTHING,
        fault=Fault.UNREACHED,
        carrier=carrier,
        folder=folder,
        entry=entry_to_add(info, folder),
    )
    return _unprovided(info, fault, [], ctx)


def _needed_elsewhere(info: ElfInfo, needed: str, ctx: _Context, major: int | None) -> Resolution | None:
    """The rules after the wheel's own files (module doc)."""
    from slimwheel import torchext

    def plain(how: How) -> Resolution:
        return Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=how)

    if needed in ctx.policy.whitelist:
        return plain(How.SYSTEM)
    if needed in cudalibs.DRIVER_SONAMES:
        return plain(How.DRIVER)
    if any(fnmatch.fnmatchcase(needed, pat) for pat in SYSTEM_LOADERS):
        return plain(How.LOADER)
    cands = _candidates(needed, major)
    if cands:
        r = _cuda(info, needed, cands, ctx, Use.NEEDED)
        if r.how is not How.NOTHING or r.required_fault:
            return r
        # UNREACHED: the wheel's own requirement installs it and no search path reaches it. The index would only
        # name that same nvidia-* wheel, which loads nothing when imported: a fault with the entry to add, online too.
        if r.fault is not Fault.UNREACHED and (via := _by_graph(info, needed, ctx, Use.NEEDED)) is not None:
            return via
        unlearned = r.fault is not Fault.UNREACHED and _unlearned(ctx)
        return _unprovided(info, _replace(r, unread=_unread(ctx), unlearned=unlearned), cands, ctx)
    if provided := external_provider(info, ctx.reqs, needed):
        # An RPATH entry into a required project's folder says where the file looks, not what is there:
        # pennylane-lightning-gpu 0.45's libcustatevec.so.1 was "found" in scipy_openblas32/lib. Where the index tells
        # which requirement installs the library, that answers (and whether RPATH reaches it); where it was not read
        # (offline, or a requirement it could not tell), the folder is taken on trust.
        if (via := _by_graph(info, needed, ctx, Use.NEEDED)) is not None:
            return via
        if torchext.is_torch_library(needed):
            # torch's tables tell what its releases ship in torch/lib and load at import: known, not on trust
            nothing = Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=How.NOTHING)
            if (by_torch := _torch_or(nothing, [], ctx, info)).how is How.TORCH:
                return by_torch
        if ctx.graph is None or ctx.graph.unread:
            return Resolution(
                file=info.path,
                soname=needed,
                use=Use.NEEDED,
                how=How.FOLDER,
                entry=provided[0],
                requirement=provided[1],
                offline=ctx.graph is None,
            )
    # torch's libraries go to the torch rules first: its tables say which releases load them at import
    if not torchext.is_torch_library(needed) and (via := _by_graph(info, needed, ctx, Use.NEEDED)) is not None:
        return via
    if (for_torch := _for_torch(info, needed, [], ctx, Use.NEEDED)) is not None:
        return for_torch
    if named := named_provider(needed, ctx.reqs):
        return Resolution(file=info.path, soname=needed, use=Use.NEEDED, how=How.NAMED, requirement=named)
    fault = Resolution(
        file=info.path, soname=needed, use=Use.NEEDED, how=How.NOTHING, fault=Fault.UNPROVIDED, policy=ctx.policy.name
    )
    if ctx.graph is None and ctx.reqs.always and (foreign := foreign_folders(info, ctx.tops)):
        # Offline, a folder of another project that a search path names may be a requirement's whose folder is not
        # named like it (tilelang 0.1.15: tvm_ffi/lib of apache-tvm-ffi, z3/lib of z3-solver): the failure says what
        # is not known, not that no requirement has it.
        fault = _replace(fault, fault=Fault.FOREIGN, foreign=foreign)
    fault = _torch_or(fault, [], ctx, info)
    if fault.how is How.TORCH:
        return fault
    if torchext.is_torch_library(needed) and (via := _by_graph(info, needed, ctx, Use.NEEDED)) is not None:
        return via
    return _unprovided(info, _replace(fault, unread=_unread(ctx), unlearned=_unlearned(ctx)), [], ctx)


# Projects whose files and own requirements slimwheel's tables know: the CUDA library table's wheels, the metapackage,
# and torch, whose rules judge the releases resources/torch-lib.json was read from and leave newer ones unjudged
# (`providers.torch_provider`): its requirement is decided there, not left unknown here.
_TABLE_PACKAGES = frozenset({lib.package for lib in cudalibs.RUNTIME_LIBS} | {cudalibs.TOOLKIT_PACKAGE, "torch"})


def _unlearned(ctx: _Context) -> bool:
    """The index was not read and the wheel requires a project the tables do not describe: what that
    project's wheels install, and what they require, only the index tells, so a library nothing else provides may come
    with them (kvikio-cu12 26.10: librapids_logger.so through libkvikio-cu12's rapids-logger). Not known, then: never
    a pass, and not a definite failure either (`check --unknown`)."""
    return ctx.graph is None and any(p not in _TABLE_PACKAGES for p in ctx.reqs.always)


def _opened_chains(
    info: ElfInfo, ctx: _Context, major: int | None
) -> tuple[tuple[OpenedChain, ...], tuple[Resolution, ...]]:
    """A library opened by name may be optional (NCCL for several GPUs): said, not failed, when nothing installs it.
    Names of another CUDA major are fallbacks tried in turn (onnxruntime-gpu 1.31's CUDA 13 provider names
    libcudart.so.12 and .13), not what a file of its major loads; in a file of no known major, the names of one
    library for several majors are such a chain (cudnn-frontend 1.32's module opens libcudart.so.13 or .12, whichever
    it finds): one chain when none of them is provided, none when one is. Also the names a requirement's requirement
    installs."""
    chains: dict[str, list[tuple[str, list[cudalibs.RuntimeLib], bool]]] = {}
    transitive: list[Resolution] = []
    for opened in info.opens:
        cands = [
            lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == opened and (major is None or lib.cuda_major == major)
        ]
        if not cands:
            continue
        missing = opened not in ctx.inside and cuda_library_fault(cands, ctx.reqs) is not None
        missing = missing and extra_provider(cands, ctx.reqs) is None
        if missing:
            t = torch_provider(opened, cands, ctx.torch, ctx.machines)
            missing = not (t is not None and t.enough(alternative=info.path in ctx.alts))
        if missing and (via := _by_graph(info, opened, ctx, Use.NEEDED)) is not None:
            transitive.append(via)
            missing = False
        chains.setdefault(opened.split(".so", 1)[0], []).append((opened, cands, missing))
    out = []
    for chain in chains.values():
        if not all(missing for _o, _c, missing in chain):
            continue
        chain.sort(key=lambda link: -max(lib.cuda_major for lib in link[1]))  # the newest major first
        every = tuple(lib for _o, cands, _m in chain for lib in cands)
        unpinned = next(((lib, r) for lib in every if (r := requirement_on(lib, ctx.reqs)) is not None), None)
        out.append(
            OpenedChain(
                file=info.path,
                names=tuple(opened for opened, _c, _m in chain),
                libs=every,
                # dlopen by name searches the opener's RUNPATH, LD_LIBRARY_PATH and the system's folders, and takes a
                # library of that name already loaded: installing the nvidia-* wheel helps only through one of those
                reached=reaching(info, (lib.folder for lib in every), ctx.inherited),
                unpinned=unpinned,
            )
        )
    return tuple(out), tuple(transitive)
