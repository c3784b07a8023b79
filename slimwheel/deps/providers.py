"""Provider rules: who provides a library a wheel's file needs, loads or opens (an extra, torch, a project's folder,
a requirement named after it), and the faults of a CUDA library's requirement."""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from slimwheel.cuda import libs as cudalibs
from slimwheel.deps.bounds import admits_only_major, admits_past, requirement_for
from slimwheel.deps.installs import Installs, Requirements
from slimwheel.deps.reach import abi_tagged
from slimwheel.external import folder_of_project, library_of_project
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.rpath import origin_target

if TYPE_CHECKING:
    from slimwheel.torchext import PypiRelease


# ------------------------------------------------------------------------------------------- every library accounted


def external_provider(info: ElfInfo, reqs: Requirements, needed: str = "") -> tuple[str, Requirement] | None:
    """(RPATH entry, requirement) when an `$ORIGIN/...` entry of the ELF's search path points into a top-level folder
    of site-packages named like a project the wheel requires (scipy_openblas32/lib <-> scipy-openblas32; cutensor/lib <->
    cutensor-cu13: `external.folder_of_project`).

    The folder is computed from where the ELF installs (`faiss/_swigfaiss.so` + `$ORIGIN/../x/lib` -> `x/lib`); its
    first component, normalized as PEP 503 normalizes project names, must equal a required project's name. It cannot
    see projects whose import folder has another name (PyQt5-Qt5 installs PyQt5/Qt5): the wheel alone does not tell
    which folders those install, and guessing by prefix would accept torchvision's RPATH into torch/ without a torch
    requirement. Of several such entries, the one into the folder of the project the library `needed` is named after
    comes first (libraft 26.10 repaired with both: librapids_logger.so is rapids-logger's, not librmm-cu12's)."""
    found: list[tuple[str, str, Requirement]] = []
    for entry in info.search_path:
        target = origin_target(entry, info.path) if entry else None
        if target is None or target == ".":
            continue
        top = target.split("/")[0]
        found += [(entry, p, rs[0]) for p, rs in reqs.always.items() if folder_of_project(top, p)]
    named = [(entry, req) for entry, p, req in found if needed and library_of_project(needed, p)]
    ranked = named or [(entry, req) for entry, _p, req in found]
    return ranked[0] if ranked else None


def foreign_folders(info: ElfInfo, tops: Collection[str]) -> tuple[str, ...]:
    """The folders in site-packages outside the wheel's own top-level folders `tops` (other projects') that the
    `$ORIGIN/...` entries of the ELF's search path name."""
    targets = (origin_target(entry, info.path) if entry else None for entry in info.search_path)
    return tuple(dict.fromkeys(t for t in targets if t is not None and t != "." and t.split("/")[0] not in tops))


def named_provider(needed: str, reqs: Requirements) -> Requirement | None:
    """The requirement whose project the library is named after (`external.library_of_project`: librmm.so and
    librmm-cu12). Torch's libraries are left to the torch rules (torchext)."""
    from slimwheel import torchext

    if torchext.is_torch_library(needed):
        return None
    named = [(project, rs[0]) for project, rs in reqs.always.items() if library_of_project(needed, project)]
    # the library wheel itself (librmm-cu12) before a wheel that requires it (rmm-cu12, which pylibraft requires)
    named.sort(key=lambda pr: not pr[0].startswith("lib") and not pr[0].startswith("nvidia-lib"))
    return named[0][1] if named else None


def pinned(lib: cudalibs.RuntimeLib, req: Requirement) -> bool:
    """Whether `req` installs lib's wheel of lib's CUDA major only: itself pinned, or through a wheel pinned to the
    major (cuda-toolkit==13.*, or a library wheel of that major that requires lib's wheel: nvidia-cudnn-cu13)."""
    name = str(canonicalize_name(req.name))
    if name == cudalibs.TOOLKIT_PACKAGE:  # the metapackage of a major pins its components to it
        # its versions are the CUDA release's, as NVTX's are: cuda-toolkit 12.9 installs nvidia-nvtx-cu12 12.9
        return admits_only_major(req, lib.cuda_major) and not admits_past(req, lib)
    if name != lib.package:
        return any(
            pinned(provider, req)
            for provider in cudalibs.libs_for(lib.cuda_major)
            if provider.package == name and lib.package in cudalibs.WHEEL_REQUIRES.get(name, ())
        )
    if admits_past(req, lib):
        return False
    # The unsuffixed CUDA 13 wheels of cuRAND, cuFFT, cuSPARSE and cuSOLVER are versioned by their SONAME major
    # (nvidia-curand 10.x), not by the CUDA release; for the others the two agree.
    return lib.package.endswith(f"-cu{lib.cuda_major}") or admits_only_major(req, lib.version_major)


def extra_provider(cands: list[cudalibs.RuntimeLib], reqs: Requirements) -> tuple[str, Requirement] | None:
    for lib in cands:
        if (got := reqs.under_extra(lib.package)) is not None and pinned(lib, got[1]):
            return got
    return None


@dataclass(frozen=True, kw_only=True)
class AdmittedTorch:
    req: Requirement  # the wheel's torch requirement
    minors: tuple[str, ...]  # the torch minors it admits (torchext.admitted_minors)
    pinned: tuple[PypiRelease, ...]  # the admitted ones of torchext's table of nvidia-* pins


def admitted_torch(reqs: Requirements) -> AdmittedTorch | None:
    """The wheel's torch requirement and the torch releases it admits; None when it requires no torch."""
    from slimwheel import torchext

    req = reqs.first("torch")
    if req is None:
        return None
    minors = tuple(torchext.admitted_minors(req.specifier))
    return AdmittedTorch(req=req, minors=minors, pinned=tuple(r for r in torchext.pypi_releases() if r.minor in minors))


@dataclass(frozen=True, kw_only=True)
class FromTorch:
    """What `import torch` of the admitted PyPI releases brings of one library the wheel does not."""

    req: Requirement
    providing: tuple[str, ...]  # the torch versions whose import loads it
    lacking: tuple[str, ...]  # admitted torch versions whose import does not (or that slimwheel has not read)
    how: str  # "require(s) nvidia-cublas-cu12" / "ship(s) torch/lib/libgomp.so.1, which libtorch_global_deps.so needs,"

    def enough(self, *, alternative: bool) -> bool:
        """Every admitted release must load it, except for a per-CUDA alternative, which the project loads only for
        the CUDA it finds (bitsandbytes loads libbitsandbytes_cuda128.so under a torch of CUDA 12.8): there one
        release suffices."""
        return bool(self.providing) and (alternative or not self.lacking)


def torch_provider(
    soname: str, cands: list[cudalibs.RuntimeLib], torch: AdmittedTorch | None, machines: Sequence[str]
) -> FromTorch | None:
    """Which admitted PyPI torch releases load `soname` at `import torch`, when the wheel requires torch; the dynamic
    loader then takes a library of that name that is already loaded. A CUDA library (`cands`): torch's own
    requirements install one of `cands` (the table of nvidia-* pins), and torch loads it. Another library: torch's
    wheel ships it in torch/lib for each of the wheel's `machines` and a chain of DT_NEEDED from torch/_C loads it
    under that name (torchext.shipped_libs; auditwheel's renamed libgomp-a34b3233.so.1 of torch 2.4-2.6 is another
    name). Releases newer than the tables are not judged, as for CUDA libraries; older admitted ones that the table
    of torch/lib does not hold count as lacking. None when torch is not required or none of its releases loads it."""
    from slimwheel import torchext

    if torch is None:
        return None
    if cands:
        packages = {lib.package for lib in cands}
        providing = [r for r in torch.pinned if packages & set(r.pins)]
        if not providing:
            return None
        package = next(p for p in providing[0].pins if p in packages)
        spec = torch.req.specifier
        return FromTorch(
            req=torch.req,
            providing=tuple(torchext.release_label(r.minor, r.version, spec) for r in providing),
            lacking=tuple(torchext.release_label(r.minor, r.version, spec) for r in torch.pinned if r not in providing),
            how=f"require(s) {package}",
        )
    # torch's own libraries (libc10.so, libtorch_cuda.so) are judged the same way: torchvision 0.26's _C.so needs
    # them with no search path into torch/lib, and finds them because `import torch` loaded them first.
    table = torchext.shipped_libs()
    oldest = Version(next(iter(table)))
    yes: list[tuple[str, torchext.ShippedLibs]] = []  # as a note names the release, what it ships
    no: list[str] = []
    newer: list[str] = []  # releases newer than the table: torch's own libraries are in torch/lib in every release
    unread = False  # admitted releases older than the table, which count as lacking
    for minor in torch.minors:
        per = table.get(minor)
        if per is None:
            if Version(minor) < oldest:
                unread = True
            elif torchext.is_torch_library(soname):
                newer.append(minor)
            continue
        shipped = [per.get(m) for m in machines]
        version = torchext.release_label(minor, next(s.version for s in per.values()), torch.req.specifier)
        if all(s is not None and soname in s.loaded for s in shipped):
            yes.append((version, per[machines[0]]))
        else:
            # auditwheel's renamed copy (libgomp-a34b3233.so.1) is loaded under its own name only
            stem = soname.split(".so")[0] + "-"
            renamed = sorted({n for s in shipped if s is not None for n in s.loaded if n.startswith(stem)})
            no.append(f"{version} (loads {', '.join(renamed)})" if renamed else version)
    if unread:  # named once, not minor by minor (torch>=2.0 would list 2.0, 2.1, 2.2, 2.3)
        no.insert(0, f"releases before {oldest} (torch/lib not read)")
    if not yes and not newer:
        return None
    how = (
        f"ship(s) torch/lib/{soname}, which {yes[-1][1].loaded[soname]} needs,"
        if yes
        else (
            f"ship(s) torch/lib/{soname} (torch's own library, in every release; slimwheel's table ends at "
            f"{max(table, key=Version)})"
        )
    )
    return FromTorch(
        req=torch.req,
        # minors newer than the table are probes, not releases (no torch 2.12 ... 3.13 exists yet): named once
        providing=tuple(v for v, _ in yes) + ((f"releases after {max(table, key=Version)}",) if newer else ()),
        lacking=tuple(no),
        how=how,
    )


def second_copy(lib: cudalibs.RuntimeLib, torch: AdmittedTorch | None) -> str:
    """Who else brings the nvidia-* wheel's copy of a library the wheel carries, as far as torch tells: the torch
    releases the wheel admits (or PyPI's torch releases of that CUDA major) that require that wheel. torchvision 0.26
    carries cudart and nvJPEG; torch 2.11 requires nvidia-cuda-runtime, not nvidia-nvjpeg."""
    from slimwheel import torchext

    if torch is not None:
        admitted = [r.version for r in torch.pinned]
        loads = [r.version for r in torch.pinned if lib.package in r.pins]
        if loads:
            return (
                f"torch {', '.join(loads)}, which the wheel's Requires-Dist '{torch.req}' admits, requires "
                f"{lib.package} and loads its copy, so a process that imports both holds two"
            )
        if admitted:
            return (
                f"torch {', '.join(admitted)}, which the wheel's Requires-Dist '{torch.req}' admits, does not require "
                f"{lib.package}: a process holds two only where another package loads that wheel's copy"
            )
    loads = [r.version for r in torchext.pypi_releases() if lib.package in r.pins]
    if loads:
        verb = "requires" if len(loads) == 1 else "require"
        return f"a process that also loads {lib.package}'s copy holds two (PyPI's torch {', '.join(loads)} {verb} it)"
    return (
        f"a process holds two where another package loads {lib.package}'s copy (no torch release slimwheel knows "
        "requires it)"
    )


def requirement_on(lib: cudalibs.RuntimeLib, reqs: Requirements) -> Requirement | None:
    """The wheel's unconditional requirement on the library's package, directly or through the CUDA metapackage."""
    return reqs.first(lib.package) or reqs.via.get((None, str(canonicalize_name(lib.package))))


def install_requirement(lib: cudalibs.RuntimeLib, requires: Iterable[str], tags: Iterable[str] = ()) -> str:
    """What to `pip install` for a CUDA library a wheel needs and lacks (doctor's hint): the wheel's own requirement
    that installs it (on its package, or on the CUDA metapackage with its extras), without the marker; for a wheel
    that has none, the requirement repair would add (`requirement_for`). Never a bare package name: pip would take
    the newest release, of whichever CUDA major."""
    reqs = Requirements.of(requires, Installs.from_tags(tags))
    req = requirement_on(lib, reqs)
    if req is None:
        cond = reqs.conditional.get(str(canonicalize_name(lib.package)))
        req = cond[0] if cond else None
    if req is None and (under := reqs.under_extra(lib.package)) is not None:
        req = under[1]
    if req is None:
        return requirement_for(lib, cuda=None, versions=None)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


class CudaFaultKind(enum.Enum):
    """What the requirements lack for a CUDA library of the table."""

    UNPINNED_THROUGH = "unpinned-through"  # required through cuda-toolkit or a wheel that requires it, not pinned
    UNPINNED = "unpinned"  # required directly, not pinned to the library's major
    CONDITIONAL = "conditional"  # required only under a marker that does not hold everywhere the wheel installs
    MISSING = "missing"  # no requirement on any of its wheels
    DROPPED = "dropped"  # required directly, admitting the releases that no longer install it (`RuntimeLib.until`)


@dataclass(frozen=True, kw_only=True)
class CudaFault:
    kind: CudaFaultKind
    candidates: tuple[cudalibs.RuntimeLib, ...]  # the table's rows of that SONAME (of the file's major, if any)
    lib: cudalibs.RuntimeLib | None = None  # UNPINNED*: the row whose requirement is at fault
    requirement: Requirement | None = None  # UNPINNED*: the unconditional requirement that does not pin it
    conditional: Requirement | None = None  # CONDITIONAL: the requirement under its marker


def cuda_library_fault(cands: Sequence[cudalibs.RuntimeLib], reqs: Requirements) -> CudaFault | None:
    """None when a requirement installs one of `cands` pinned to its CUDA major (directly, through cuda-toolkit, or
    through a wheel that requires it), else what is wrong. The first row with an unconditional requirement decides."""
    for lib in cands:
        req = requirement_on(lib, reqs)
        if req is None:
            continue
        if pinned(lib, req):  # itself, through cuda-toolkit, or through a wheel that requires it
            return None
        through = str(canonicalize_name(req.name)) != lib.package
        if admits_past(req, lib) and (not through or admits_only_major(req, lib.cuda_major)):
            kind = CudaFaultKind.DROPPED  # pinned to the major, but admitting the release that dropped the library
        else:
            kind = CudaFaultKind.UNPINNED_THROUGH if through else CudaFaultKind.UNPINNED
        return CudaFault(kind=kind, candidates=tuple(cands), lib=lib, requirement=req)
    cond = [r for lib in cands for r in reqs.conditional.get(str(canonicalize_name(lib.package)), [])]
    if cond:
        return CudaFault(kind=CudaFaultKind.CONDITIONAL, candidates=tuple(cands), conditional=cond[0])
    return CudaFault(kind=CudaFaultKind.MISSING, candidates=tuple(cands))


_TEMPLATE_PART = re.compile(r"%[sdu]")


def _names_nothing(template: str) -> bool:
    """Whether a printf template names no library in particular: its fixed text, less a leading "lib" and the
    ".so" ending, has no letter or digit ("lib%s.so", "%s.so")."""
    fixed = "".join(_TEMPLATE_PART.split(template)).removeprefix("lib")
    fixed = fixed[: fixed.find(".so")] if ".so" in fixed else fixed
    return not any(c.isalnum() for c in fixed)


# auditwheel's name for a library it grafts: libcrypto-64b40125.so.1.1.1k, libcudart.faf08d9a.so.13
_GRAFTED = re.compile(r"[-.][0-9a-f]{8}\.so")


def _opens_any(path: str) -> bool:
    """Whether a file's template that names no library in particular ("lib%s.so") shows it opening the wheel's
    plugins: only in one of the wheel's own shared libraries. cuda-quantum's libcudaq-common.so opens its backends,
    lib/libnvqir-*.so, so; OpenSSL's libcrypto, which auditwheel grafted beside mooncake-transfer-engine 0.3.14's
    libraries, carries the same template for its engines, and triton 3.9's ptxas-blackwell (a program) carries it
    too: neither opens the wheel's libraries."""
    base = path.rsplit("/", 1)[-1]
    return ".so" in base and _GRAFTED.search(base) is None


def _name_matches(name: str, base: str) -> bool:
    """Whether a name a file may open ("nvshmem_bootstrap_mpi.so", "nvshmem_transport_%s.so.%d") is the file name
    `base`: itself, with a version after it (nvshmem_bootstrap_mpi.so.3), or the printf template filled in (a
    template that names nothing in particular matches any file of the form: see `_opens_any`)."""
    if "%" in name:
        parts = _TEMPLATE_PART.split(name)
        holes = _TEMPLATE_PART.findall(name)
        pattern = re.escape(parts[0]) + "".join(
            ("[^/]+" if h == "%s" else r"\d+") + re.escape(p) for h, p in zip(holes, parts[1:], strict=True)
        )
        return re.fullmatch(pattern + r"(\.\d+)*", base) is not None
    return base == name or base.startswith(name + ".")


def plugins(elfs: Sequence[ElfInfo]) -> dict[str, str]:
    """The wheel's plugins: file -> a file of the wheel that opens it by name (`ElfInfo.names`). A plugin is no Python
    extension module (no ABI tag; named lib*.so or versioned .so.N), and no file of the wheel needs it: it is loaded
    only when its opener asks (onnxruntime-gpu's TensorRT provider, NVSHMEM's bootstrap and transport plugins)."""
    needed = {n for info in elfs for n in info.needed}
    out: dict[str, str] = {}
    for info in elfs:
        base = info.path.rsplit("/", 1)[-1]
        if base in needed or (info.soname or "") in needed or abi_tagged(base):
            continue
        if not (base.startswith("lib") or re.search(r"\.so\.\d", base)):
            continue
        opener = next(
            (
                q.path
                for q in elfs
                if q.path != info.path
                and any(_name_matches(n, base) for n in q.names if not _names_nothing(n) or _opens_any(q.path))
            ),
            None,
        )
        if opener is not None:
            out[info.path] = opener
    return out


def cxx_runtime_problem(info: ElfInfo) -> str | None:
    """A library that carries libstdc++ (linked statically) and exports its symbols. Python processes load
    libstdc++.so.6 too (numpy, torch, the CUDA libraries); calls that go through the dynamic symbol table then bind to
    the first copy the loader meets while the rest stay in the file's own copy, so the two copies' state mixes:
    locales, exceptions, iostreams. The faiss wheel built on the GPU machine carried such a copy (no libstdc++.so.6 in
    DT_NEEDED, libstdc++'s SystemTap notes, 5,400 dynamic symbols) and crashed in index_factory, whose std::regex
    reads the locale; linked to the shared libstdc++ there, it passed faiss's GPU tests (docs/faiss.md)."""
    if not info.exports_cxx_runtime:
        return None
    return cxx_runtime_text(info.path)


def cxx_runtime_text(path: str) -> str:
    return (
        f"{path} carries libstdc++ linked statically and exports it (std::locale::classic is in its dynamic "
        "symbol table): in a process that also loads libstdc++.so.6, part of its C++ runtime calls go to the "
        "other copy and the two copies' state mixes. Link libstdc++ dynamically (it is on the manylinux "
        "allow-list), or hide the static copy (-Wl,--exclude-libs,ALL)"
    )
