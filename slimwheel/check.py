"""Checks on a wheel report: size budget, required GPU coverage, and that every needed library is accounted for.

Pure functions over a `WheelReport`; the CLI turns verdicts into output and an exit code (`raise_for`).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.resources
import json
import re
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.arch import CC, generation, parse_cc_set
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.report import ElfReport, WheelReport, gap_text, module_coverage
from slimwheel.repair import origin_target
from slimwheel.units import mb, mib, parse_size

DEFAULT_BUDGET = "60MiB"
# The dynamic loader is part of glibc; some libraries name it in DT_NEEDED (for __tls_get_addr) and every
# manylinux system has it, though auditwheel's whitelist does not list it.
_LOADERS = ("ld-linux*.so.*", "ld64.so.*", "ld-musl-*.so.1")


@dataclass(frozen=True, kw_only=True)
class CheckPolicy:
    budget_bytes: int = 60 * 2**20
    require: tuple[CC, ...] = ()
    require_spec: str = ""  # as the user wrote it ("7.5-12.0", "toolkit"), for messages
    left_out: tuple[CC, ...] = ()  # integrated aarch64 GPUs dropped from the request for an x86_64 wheel
    dependencies: bool = True


@dataclass(frozen=True, kw_only=True)
class Failure:
    kind: str  # "budget" | "coverage" | "dependencies"
    message: str
    exit_code: ExitCode


@dataclass(frozen=True, kw_only=True)
class Verdict:
    wheel: str
    ok: bool
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = field(default=())


def required_ccs(spec: str, report: WheelReport) -> tuple[tuple[CC, ...], tuple[CC, ...]]:
    """(required, left out) for `--require-arch`: nothing for "" or "none"; a CC set ("7.5-12.0", "8.0+", "9.0");
    "toolkit": every CC the
    wheel's CUDA major can target (the newest release of that major slimwheel knows), or "auto": those of them from
    the oldest CC the wheel has code for up: whatever the wheel chose to start at, it must not lose newer GPUs (a wheel
    with no device code, or whose CUDA major cannot be told, requires nothing). Integrated GPUs (Jetson, Thor, GB10)
    are aarch64 systems, so they are left out for x86_64 wheels."""
    spec = spec.strip()
    if not spec or spec.lower() == "none":
        return (), ()
    if spec.lower() in ("toolkit", "auto"):
        if report.cuda_major is None:
            if spec.lower() == "auto":
                return (), ()
            raise BadInputError(
                f"{report.path}: --require-arch toolkit: cannot tell the wheel's CUDA major",
                hint="give the compute capabilities instead, e.g. --require-arch 7.5-12.0",
            )
        # Numbers nvcc accepts that no product we know of has (10.1, renamed 11.0) are left out.
        ccs = tuple(cc for cc in supported_archs(CudaVersion(report.cuda_major, 99)) if generation(cc) is not None)
        if spec.lower() == "auto":
            if not report.targets:
                return (), ()
            oldest = min(t.cc for t in report.targets)
            ccs = tuple(cc for cc in ccs if cc >= oldest)
    else:
        ccs = parse_cc_set(spec)
    if not report.is_x86_64:
        return ccs, ()
    keep = tuple(cc for cc in ccs if not ((g := generation(cc)) and g.integrated))
    return keep, tuple(cc for cc in ccs if cc not in keep)


def make_policy(
    report: WheelReport, *, budget: str | int = DEFAULT_BUDGET, require_arch: str = "", dependencies: bool = True
) -> CheckPolicy:
    require, left_out = required_ccs(require_arch, report)
    return CheckPolicy(
        budget_bytes=parse_size(budget, what="budget"),
        require=require,
        require_spec=require_arch,
        left_out=left_out,
        dependencies=dependencies,
    )


@functools.lru_cache(maxsize=1)
def _policies() -> tuple[dict[str, Any], ...]:
    text = importlib.resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text("utf-8")
    return tuple(json.loads(text))


def manylinux_whitelist(report: WheelReport) -> tuple[str, tuple[str, ...], str | None]:
    """(policy name, lib_whitelist, note) for the wheel's platform tags, from auditwheel's policy JSON.

    Several manylinux tags: the oldest (most restrictive) one applies, because pip may install the wheel there.
    """
    policies = [p for p in _policies() if p["priority"] > 0]
    by_name: dict[str, dict[str, Any]] = {}
    for p in policies:
        by_name[p["name"]] = p
        for alias in p.get("aliases", []):
            by_name[alias] = p
    matched = []
    for plat in report.platforms:
        m = re.fullmatch(r"(manylinux\w*?)_(x86_64|aarch64|i686|ppc64le|s390x|armv7l|riscv64)", plat)
        if m and m.group(1) in by_name:
            matched.append(by_name[m.group(1)])
    if matched:
        p = max(matched, key=lambda p: p["priority"])
        return p["name"], tuple(p["lib_whitelist"]), None
    newest = min(policies, key=lambda p: p["priority"])
    return (
        newest["name"],
        tuple(newest["lib_whitelist"]),
        f"no manylinux platform tag ({', '.join(report.platforms) or 'none'}): system libraries were checked "
        f"against {newest['name']}'s list",
    )


def _required_packages(report: WheelReport) -> tuple[dict[str, Requirement], list[str]]:
    reqs: dict[str, Requirement] = {}
    notes: list[str] = []
    for r in report.requires_dist:
        try:
            req = Requirement(r)
        except InvalidRequirement:
            notes.append(f"Requires-Dist {r!r} cannot be parsed")
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue  # only installed on request: does not make a library available
        reqs[canonicalize_name(req.name)] = req
    return reqs, notes


def _admits_only_major(req: Requirement, major: int) -> bool:
    """Does the requirement pin a package that is versioned by CUDA release (nvidia-cuda-runtime 13.0.x) to `major`?"""
    spec = req.specifier
    if not str(spec):
        return False
    probes_in = [Version(f"{major}.{m}.{p}") for m in (0, 1, 5, 9) for p in (0, 99)]
    # The requirement's own versions too: an exact pin (==13.0.96) or a narrow range admits none of the round probes.
    for clause in spec:
        try:
            v = Version(clause.version.removesuffix(".*"))
        except InvalidVersion:
            continue
        if v.major == major:
            probes_in.append(v)
    probes_out = [Version(f"{major - 1}.9.99"), Version(f"{major + 1}.0.0")]
    return any(spec.contains(v, prereleases=True) for v in probes_in) and not any(
        spec.contains(v, prereleases=True) for v in probes_out
    )


def external_provider(elf: ElfReport, reqs: dict[str, Requirement]) -> tuple[str, Requirement] | None:
    """(RPATH entry, requirement) when an `$ORIGIN/...` entry of the ELF's search path points into a top-level folder
    of site-packages named like a project the wheel requires (scipy_openblas32/lib <-> scipy-openblas32).

    The rule: the folder is computed from where the ELF installs (`faiss/_swigfaiss.so` + `$ORIGIN/../x/lib` ->
    `x/lib`), its first component normalized as PEP 503 does with project names must equal a required project's
    normalized name. Import packages named like their project (scipy_openblas32, torch, pyarrow) pass; a folder of the
    wheel itself, one outside site-packages, or an absolute path never does. It cannot see projects whose import
    folder has another name (PyQt5-Qt5 installs PyQt5/Qt5): the wheel alone does not tell which folders those install,
    and guessing by prefix would accept torchvision's RPATH into torch/ without a torch requirement."""
    entries = (elf.runpath or elf.rpath or "").split(":")  # the loader ignores DT_RPATH when DT_RUNPATH exists
    for entry in entries:
        target = origin_target(entry, elf.name) if entry else None
        if target is None or target == ".":
            continue
        req = reqs.get(canonicalize_name(target.split("/")[0]))
        if req is not None:
            return entry, req
    return None


def _dependency_failures(report: WheelReport) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    bundled = {f.name.rsplit("/", 1)[-1] for f in report.files}
    bundled |= {e.soname for e in report.elfs if e.soname}
    policy, whitelist, note = manylinux_whitelist(report)
    if note:
        notes.append(note)
    reqs, req_notes = _required_packages(report)
    notes.extend(req_notes)
    for elf in report.elfs:
        for needed in elf.needed:
            if needed in bundled or needed in whitelist or needed in cudalibs.DRIVER_SONAMES:
                continue
            if any(fnmatch.fnmatchcase(needed, pat) for pat in _LOADERS):
                continue
            candidates = [lib for lib in cudalibs.RUNTIME_LIBS if lib.soname == needed]
            if report.cuda_major is not None:
                candidates = [lib for lib in candidates if lib.cuda_major == report.cuda_major] or candidates
            if not candidates:
                if provided := external_provider(elf, reqs):
                    notes.append(f"{elf.name} needs {needed}: found through RPATH {provided[0]}, a folder of "
                                 f"Requires-Dist {provided[1]}")  # fmt: skip
                    continue
                problems.append(
                    f"{elf.name} needs {needed}: not in the wheel, not a CUDA runtime library from PyPI, "
                    f"not in an RPATH folder of a required project, and not allowed by {policy}"
                )
                continue
            satisfied = False
            wanted = []
            for lib in candidates:
                req = reqs.get(canonicalize_name(lib.package))
                wanted.append(f"{lib.package} (CUDA {lib.cuda_major})")
                if req is None:
                    continue
                # The unsuffixed CUDA 13 wheels of cuRAND, cuFFT, cuSPARSE and cuSOLVER are versioned by their
                # SONAME major (nvidia-curand 10.x), not by the CUDA release; for the others the two agree.
                version_major = int(lib.soname.split(".so.", 1)[1].split(".")[0])
                if lib.package.endswith(f"-cu{lib.cuda_major}") or _admits_only_major(req, version_major):
                    satisfied = True
                    break
                problems.append(
                    f"{elf.name} needs {needed} (CUDA {lib.cuda_major}), but Requires-Dist '{req}' does not pin "
                    f"{lib.package} to {version_major}.*: pip may install another CUDA major"
                )
                satisfied = True  # reported above, more precisely than "missing"
                break
            if not satisfied:
                problems.append(
                    f"{elf.name} needs {needed}: not in the wheel and no Requires-Dist on {' or '.join(wanted)}"
                )
    return problems, notes


def check_wheel(report: WheelReport, policy: CheckPolicy) -> Verdict:
    failures: list[Failure] = []
    notes: list[str] = []
    if report.size > policy.budget_bytes:
        failures.append(
            Failure(
                kind="budget",
                message=f"{mib(report.size)} ({mb(report.size)}, {report.size} bytes) is over the budget of "
                f"{mib(policy.budget_bytes)} ({mb(policy.budget_bytes)}, {policy.budget_bytes} bytes) by "
                f"{report.size - policy.budget_bytes} bytes",
                exit_code=ExitCode.OVER_BUDGET,
            )
        )
    else:
        notes.append(f"size {mib(report.size)} of a {mib(policy.budget_bytes)} budget")
    if policy.left_out:
        notes.append(
            "left out of the required set, as integrated aarch64 GPUs never run an x86_64 wheel: "
            + ", ".join(map(str, policy.left_out))
        )
    if policy.require:
        # Judged for the required CCs themselves (they may lie outside the report's table, e.g. 8.8).
        cov, gap_list = module_coverage(report.elfs, policy.require)
        gaps = {g.cc: g for g in gap_list}
        missing = list(cov.none)
        if missing:
            names = ", ".join(
                f"{cc}"
                + (f" ({g.name})" if (g := generation(cc)) else "")
                + (f" [{gap_text(gaps[cc])}]" if cc in gaps else "")
                for cc in missing
            )
            failures.append(
                Failure(
                    kind="coverage",
                    message=f"required compute capabilities with neither SASS nor PTX: {names}",
                    exit_code=ExitCode.MISSING_COVERAGE,
                )
            )
        else:
            ptx = [str(cc) for cc in cov.ptx_only]
            notes.append(
                f"all {len(policy.require)} required compute capabilities are served"
                + (f" ({', '.join(ptx)} only through PTX JIT)" if ptx else "")
            )
    if policy.dependencies:
        problems, dep_notes = _dependency_failures(report)
        notes.extend(dep_notes)
        failures.extend(
            Failure(kind="dependencies", message=p, exit_code=ExitCode.INCONSISTENT_DEPENDENCIES) for p in problems
        )
    return Verdict(wheel=str(report.path), ok=not failures, failures=tuple(failures), notes=tuple(notes))


def exit_code_for(verdicts: list[Verdict] | tuple[Verdict, ...]) -> ExitCode:
    codes = {f.exit_code for v in verdicts for f in v.failures}
    if not codes:
        return ExitCode.OK
    if len(codes) == 1:
        return codes.pop()
    return ExitCode.CHECK_FAILED


def raise_for(verdicts: list[Verdict] | tuple[Verdict, ...]) -> None:
    """CheckFailed with 10 (budget), 11 (coverage), 12 (dependencies), or 13 when several kinds failed."""
    code = exit_code_for(verdicts)
    if code is ExitCode.OK:
        return
    failed = [v for v in verdicts if not v.ok]
    kinds = sorted({f.kind for v in failed for f in v.failures})
    raise CheckFailed(f"{len(failed)} of {len(verdicts)} wheel(s) failed: {', '.join(kinds)}", code)


def verdict_to_json(v: Verdict) -> dict[str, Any]:
    return {
        "wheel": v.wheel,
        "ok": v.ok,
        "failures": [{"kind": f.kind, "message": f.message, "exit_code": int(f.exit_code)} for f in v.failures],
        "notes": list(v.notes),
    }
