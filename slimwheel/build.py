"""`slimwheel build` as a library: plan -> toolkit -> [prune] -> PEP 517 build -> repair -> inspect + check -> report.

Each phase is a plain call into the module that owns it (toolkit, plan, prune, repair, inspect, check); this module
only wires them, times them, and tells a `progress` callback about each one. It never prints. The wheel is built with
pypa/build (`python -m build --wheel`, isolated) and scikit-build-core, which receives the plan as
`-C cmake.define.SLIMWHEEL_*=...`, plus the toolkit's nvcc and root and the folder of slimwheel's CMake package (so
`find_package(slimwheel)` works even though slimwheel is not installed in the isolated build environment).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import slimwheel
from slimwheel import compilercache, context, torchext
from slimwheel.config import Config
from slimwheel.errors import BadInputError, ToolError
from slimwheel.fsutil import cache_dir, write_text_atomic
from slimwheel.plan import BuildPlan, cmake_defines, plan_to_json
from slimwheel.toolkit import toolkit_to_json
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool_status

if TYPE_CHECKING:  # the repair and inspect areas are imported when a build runs, not when slimwheel starts
    from slimwheel.analysis import WheelAnalysis
    from slimwheel.check import Verdict
    from slimwheel.cuda.arch import CC
    from slimwheel.inspect.report import WheelReport
    from slimwheel.repair import RepairResult

log = logging.getLogger(__name__)

REPORT_SCHEMA = 1


@dataclass(frozen=True)
class PhaseEvent:
    """What the progress callback hears: a phase starts, or ends after `seconds` with a one-line `detail`."""

    phase: str
    state: Literal["start", "done"]
    seconds: float | None = None
    detail: str = ""


Progress = Callable[[PhaseEvent], None]


@dataclass(frozen=True, kw_only=True)
class BuildSetup:
    """Everything decided before compiling: what --dry-run shows."""

    project_dir: Path
    plan: BuildPlan
    toolkit: Toolkit | None  # None only in a dry run when the toolkit is not assembled yet
    toolkit_note: str
    command: tuple[str, ...]
    env: dict[str, str]  # added to the environment of the build
    torch: torchext.TorchBuild | None = None  # a torch extension: the torch of the environment that builds it
    library_dirs: tuple[Path, ...] = ()  # searched first by repair (a sysroot's: what the wheel was linked against)
    launcher: compilercache.Launcher | None = None  # the compiler cache every compile runs through


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    wheel: Path
    report_json: Path
    phases: dict[str, float]
    setup: BuildSetup
    verdict: Verdict
    report: WheelReport
    repair: RepairResult
    extra: dict[str, Any] = field(default_factory=dict)


class _Phases:
    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.times: dict[str, float] = {}
        self.details: dict[str, str] = {}

    @contextmanager
    def phase(self, name: str, start_detail: str = "") -> Iterator[dict[str, str]]:
        """`start_detail`: what the start event carries (the build phase names its log, for the step count)."""
        box: dict[str, str] = {"detail": ""}
        if self.progress:
            self.progress(PhaseEvent(name, "start", detail=start_detail))
        t0 = time.monotonic()
        yield box
        secs = time.monotonic() - t0
        self.times[name] = round(secs, 2)
        self.details[name] = box["detail"]
        log.debug("phase %s: %.1f s %s", name, secs, box["detail"])
        if self.progress:
            self.progress(PhaseEvent(name, "done", secs, box["detail"]))


def check_project(project_dir: Path) -> Path:
    project_dir = Path(project_dir).absolute()
    if not (project_dir / "pyproject.toml").is_file():
        raise BadInputError(
            f"{project_dir}: no pyproject.toml; slimwheel builds PEP 517 projects",
            hint="point it at the folder with pyproject.toml (scikit-build-core as the build backend)",
        )
    return project_dir


def config_settings(
    plan: BuildPlan,
    toolkit: Toolkit | None,
    *,
    static_libdir: Path | None = None,
    build_dir: Path | None = None,
    launcher: compilercache.Launcher | None = None,
) -> list[str]:
    """The `-C` settings for scikit-build-core: `plan.cmake_defines`, and the build folder (slimwheel's own, so a
    build never shares CMake state with another build of the project)."""
    program = str(launcher.program) if launcher is not None else None
    defines = cmake_defines(plan, toolkit, static_libdir=static_libdir, launcher=program)
    settings = [f"cmake.define.{k}={v}" for k, v in defines.items()]
    if build_dir is not None:
        settings.append(f"build-dir={build_dir}")
    return settings


def build_command(
    project_dir: Path, outdir: Path, settings: list[str], *, isolation: bool = True, python: str | None = None
) -> tuple[str, ...]:
    cmd = [python or sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir)]
    if not isolation:
        cmd.append("--no-isolation")
    cmd += [f"-C{s}" for s in settings]
    cmd.append(str(project_dir))
    return tuple(cmd)


def prepare(
    project_dir: Path,
    cfg: Config,
    *,
    env: Mapping[str, str] | None = None,
    dry_run: bool = False,
    isolation: bool = True,
    wheel_dir: Path | None = None,
    build_dir: Path | None = None,
    phases: _Phases | None = None,
) -> BuildSetup:
    """Plan, toolkit, (static) prune, and the build command. A dry run finds but never assembles a toolkit."""
    e = dict(os.environ if env is None else env)
    ph = phases or _Phases(None)
    project_dir = check_project(project_dir)
    with ph.phase("toolkit") as box:
        tk = context.toolkit_for(cfg, e, assemble=not dry_run)
        box["detail"] = f"CUDA {tk.version} ({tk.source}) at {tk.root}" if tk else "none here yet (dry run)"
    with ph.phase("plan") as box:
        ctx = context.with_toolkit(cfg, e, tk)
        box["detail"] = f"CUDA {ctx.plan.cuda}: {ctx.plan.arch.cmake_architectures}, compression {ctx.plan.compression}"
    plan, note = ctx.plan, ctx.origin
    static_libdir = None
    if plan.link == "static" and not dry_run and tk is not None:
        with ph.phase("prune") as box:
            try:
                from slimwheel.prune import prune_libraries
            except ImportError as err:
                raise ToolError(f"static linking needs slimwheel.prune, which is not available ({err})") from None
            pruned = prune_libraries(tk, plan.arch.targets, plan.components, cache=cache_dir(e))
            static_libdir = pruned.libdir
            n = len(plan.arch.targets)
            box["detail"] = f"{len(pruned.libs)} libraries pruned to {n} targets in {pruned.libdir}"
    build_env = dict(tk.env) if tk is not None else {}
    library_dirs: tuple[Path, ...] = ()
    if cfg.sysroot.strip():
        with ph.phase("sysroot") as box:
            from slimwheel.toolkit.sysroot import cap_for, ensure_sysroot, spec_for

            if dry_run:
                box["detail"] = f"{spec_for(cfg.sysroot).name} (not assembled: dry run)"
            else:
                sr = ensure_sysroot(cfg.sysroot, env=e)
                cap = cap_for(sr, cfg.manylinux)
                build_env.update(sr.env(cap))  # over the toolkit's CUDAHOSTCXX: the host compiler is the sysroot's
                library_dirs = tuple(sr.library_path())
                box["detail"] = f"{sr.spec.name} at {sr.root}: GCC {sr.spec.gcc}, glibc {sr.spec.glibc}"
                if cap is not None:
                    box["detail"] += f"; glibc symbols capped at {cap.policy} ({len(cap.pinned)} pinned)"
                    if cap.glibcxx_shims:
                        box["detail"] += f", GLIBCXX_{', GLIBCXX_'.join(cap.glibcxx_shims)} members linked in"
    floor_note = host_floor_note(cfg)
    if floor_note:
        log.warning("%s", floor_note)
    outdir = wheel_dir or Path("<temporary folder>")
    tp = torchext.torch_project(project_dir)
    launcher = None
    if (tool := compilercache.tool_of(cfg.compiler_cache)) is not None:
        if dry_run:
            launcher = compilercache.planned_launcher(tool, cache_dir(e))
        else:
            with ph.phase("compiler-cache") as box:
                launcher = compilercache.ensure_launcher(tool, cache_dir(e))
                box["detail"] = f"{tool} {launcher.version} at {launcher.program}"
        setuptools_torch = tp is not None and tp.backend == "setuptools" and tk is not None
        build_env.update(
            compilercache.launcher_env(
                launcher,
                build_dir=build_dir,
                # the toolkit and the sysroot live in the cache: a second machine has them under another home
                shared_dirs=(cache_dir(e),),
                env=e,
                torch_nvcc=tk.nvcc if setuptools_torch and tk is not None else None,
            )
        )
    settings = config_settings(plan, tk, static_libdir=static_libdir, build_dir=build_dir, launcher=launcher)
    torch = None
    if tp is not None:
        torch, isolation = _torch_for(project_dir, tp, plan), False
        if tk is not None:
            build_env.update(
                torchext.build_env(
                    tp,
                    plan.arch.targets,
                    compression_flag=plan.compression_flag,
                    cuda_root=tk.root,
                    build_dir=build_dir,
                )
            )
        if tp.backend != "scikit-build-core":
            settings = []  # the plan goes through the environment; setuptools has no CMake defines
    cmd = build_command(project_dir, outdir, settings, isolation=isolation)
    return BuildSetup(
        project_dir=project_dir,
        plan=plan,
        toolkit=tk,
        toolkit_note=note,
        command=cmd,
        env=build_env,
        torch=torch,
        library_dirs=library_dirs,
        launcher=launcher,
    )


def host_floor_note(cfg: Config, host_glibc: str | None = None) -> str | None:
    """What to say before a build whose compiler gives a platform floor above `cfg.manylinux`: the host's glibc
    (os.confstr, or `host_glibc`) is newer than the target's and no sysroot is set, so the symbols it links can be
    newer too. None when no target is set, a sysroot is used, or the host is within the target."""
    from slimwheel.floor import policies

    target = cfg.parsed.manylinux
    if target is None or cfg.sysroot.strip():
        return None
    if host_glibc is None:
        try:
            host_glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "").removeprefix("glibc ").strip()
        except (ValueError, OSError):
            return None
    if not host_glibc:
        return None
    host_policy = next((p for p in policies() if host_glibc in p.versions.get("x86_64", {}).get("GLIBC", ())), None)
    if host_policy is None or host_policy.priority >= target.priority:
        return None
    return (
        f"this host's glibc {host_glibc} and compiler give a platform floor up to {host_policy.name}, above the "
        f'target {target.name}: set [tool.slimwheel] sysroot = "debian11" (GCC 10, glibc 2.31, no container; '
        "below manylinux_2_31 its compilers pin exp/log/pow to versions the target allows) or build with "
        "`slimwheel container` (manylinux_2_28 image); check fails symbols above the target"
    )


def _torch_for(project_dir: Path, tp: torchext.TorchProject, plan: BuildPlan) -> torchext.TorchBuild:
    """A torch extension builds against the torch of this Python (no isolation, as `pip install
    --no-build-isolation` does: the torch it runs with must be the one it compiled against), whose CUDA major must be
    the toolkit's."""
    built = torchext.installed_torch()
    if built is None:
        raise BadInputError(
            f"{project_dir} builds a torch extension ({tp.why}), but torch is not installed in {sys.executable}",
            hint="install the torch the wheel is for (e.g. pip install torch)",
        )
    if why := torchext.cuda_mismatch(built, plan.cuda.major, where=str(project_dir)):
        raise BadInputError(
            why,
            hint=f"build with the toolkit of torch's CUDA (--cuda {built.cuda}), or install a "
            f"torch built with CUDA {plan.cuda.major}",
        )
    log.info(
        "%s: a torch extension (%s); builds in this Python against torch %s (CUDA %s)",
        project_dir,
        tp.why,
        built.version,
        built.cuda,
    )
    return built


def _run_build(setup: BuildSetup, log_path: Path) -> None:
    env = dict(os.environ)
    env.update(setup.env)
    # -v shows the command (tools logs it); the report keeps it too. A day: a faiss build on 2 cores takes hours.
    proc = run_tool_status(
        setup.command, what=f"building {setup.project_dir}", env=env, log_to=log_path, timeout=24 * 3600
    )
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])
        raise ToolError(
            f"building {setup.project_dir} failed (exit {proc.returncode}); the whole log is {log_path}:\n{tail}"
        )


def _report_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name.removesuffix(".whl") + ".slimwheel.json")


def judge_built(
    wheel: Path, cfg: Config, wanted: tuple[CC, ...] | None, *, env: Mapping[str, str]
) -> tuple[WheelAnalysis, Verdict]:
    """The check phase of a build: the repaired wheel's analysis judged by the one verdict (`check.judge`), with the
    project's budget, coverage (`wanted`: the plan's GPUs, for `require-arch = "auto"`), distribution checks and
    platform floor, reading the index as `slimwheel check` does. `slimwheel check` with the same settings gives the
    same verdict."""
    from slimwheel.analysis import analyze
    from slimwheel.check import PolicySettings, judge, may_read_index, policy_for

    analysis = analyze(wheel)
    settings = PolicySettings.of(cfg, read_index=may_read_index(env))
    return analysis, judge(analysis, policy_for(analysis.report, settings, require_arch=cfg.require_arch_for(wanted)))


def build_project(
    project_dir: Path,
    cfg: Config,
    *,
    out_dir: Path,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    isolation: bool = True,
    build_dir: Path | None = None,
) -> BuildResult:
    """Build, repair, inspect and check one project; write `<wheel>.slimwheel.json` beside the repaired wheel.

    The verdict of the checks is in the result (and the report); the caller decides the exit status
    (slimwheel.check.raise_for). Errors: BadInputError for bad settings, ToolError when a tool fails.
    `build_dir`: CMake's build folder, kept for incremental rebuilds; default a fresh temporary one (a clean build
    that shares nothing with the project's own build-dir or a concurrent build).
    """
    from slimwheel.analysis import index_lookup
    from slimwheel.check import may_read_index, verdict_to_json
    from slimwheel.external import parse_externals
    from slimwheel.inspect.report import report_to_json
    from slimwheel.repair import repair_wheel

    e = dict(os.environ if env is None else env)
    out_dir = Path(out_dir).absolute()
    ph = _Phases(progress)
    t_start = time.monotonic()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="slimwheel-build-") as tmp_s:
        raw_dir = Path(tmp_s) / "dist"
        bdir = Path(build_dir).absolute() if build_dir is not None else Path(tmp_s) / "build"
        setup = prepare(project_dir, cfg, env=e, isolation=isolation, wheel_dir=raw_dir, build_dir=bdir, phases=ph)
        tk = setup.toolkit
        assert tk is not None  # not a dry run
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        log_path = cache_dir(e) / "logs" / f"build-{setup.project_dir.name}-{stamp}.log"
        with ph.phase("build", start_detail=str(log_path)) as box:
            if "DIST_EXTRA_CONFIG" in setup.env:  # a setuptools torch extension: its build folder is ours
                bdir.mkdir(parents=True, exist_ok=True)
                write_text_atomic(Path(setup.env["DIST_EXTRA_CONFIG"]), torchext.setuptools_config(bdir))
            cache: compilercache.Session | None = None
            if setup.launcher is not None:
                with compilercache.session(setup.launcher, {**os.environ, **setup.env}, Path(tmp_s)) as cache:
                    _run_build(dataclasses.replace(setup, env={**setup.env, **cache.env}), log_path)
            else:
                _run_build(setup, log_path)
            wheels = sorted(raw_dir.glob("*.whl"))
            if len(wheels) != 1:
                raise ToolError(f"building {setup.project_dir} made {len(wheels)} wheels, expected one ({log_path})")
            raw = wheels[0]
            box["detail"] = f"{raw.name} ({raw.stat().st_size / 2**20:.2f} MiB before repair)"
            if cache is not None and cache.before is not None and cache.after is not None:
                box["detail"] += "; " + compilercache.summary(compilercache.stats_delta(cache.before, cache.after))
        with ph.phase("repair") as box:
            versions = (toolkit_to_json(tk, env=e).get("packages") or None) if tk.source == "pypi" else None
            out_dir.mkdir(parents=True, exist_ok=True)
            externals = parse_externals(cfg.external_libs, where="[tool.slimwheel] external-libs")
            repaired = repair_wheel(
                raw,
                out_dir,
                cuda=tk.version,
                loader=cfg.loader,
                versions=versions,
                externals=externals,
                torch=setup.torch,
                library_dirs=setup.library_dirs,
                # the build's own folders, which this run made: an RPATH entry into them (CMake's build tree) is the
                # project's, and auditwheel bundles what it finds there
                named_dirs=(Path(tmp_s), bdir),
                # what the requirements install, read as the check phase reads it: a library a requirement's
                # requirement installs is left to it, not bundled
                index=index_lookup if may_read_index(e) else None,
                strip=cfg.strip,
            )
            box["detail"] = f"{repaired.wheel.name}; requires {', '.join(repaired.requires) or 'nothing'}"
        with ph.phase("check") as box:
            analysis, verdict = judge_built(repaired.wheel, cfg, setup.plan.arch.wanted, env=e)
            report, torch_use = analysis.report, analysis.torch
            box["detail"] = "ok" if verdict.ok else "; ".join(f.message for f in verdict.failures)
    report_json = _report_path(repaired.wheel)
    with ph.phase("report") as box:
        data = {
            "schema": REPORT_SCHEMA,
            "slimwheel": slimwheel.__version__,
            "started": started,
            "project": str(setup.project_dir),
            "wheel": str(repaired.wheel),
            "ok": verdict.ok,
            "config": cfg.to_json(),
            "plan": plan_to_json(setup.plan),
            "toolkit": toolkit_to_json(tk, env=e),
            "build_command": list(setup.command),
            "build_log": str(log_path),
            "compiler_cache": None if setup.launcher is None or cache is None else cache.to_json(setup.launcher),
            "repair": {
                "excluded": list(repaired.excluded),
                "requires": list(repaired.requires),
                "bundled": list(repaired.bundled),
                "external": [x.to_json() for x in repaired.external],
                "floors": [{"package": f.package, "floor": f.version, "why": f.why} for f in repaired.floors],
                "built_against": dict(versions or {}),
            },
            "report": report_to_json(report),
            "torch": None
            if torch_use is None or setup.torch is None
            else {
                "built_against": str(setup.torch.version),
                "cuda": setup.torch.cuda,
                **torchext.use_to_json(
                    torch_use, torchext.judge(torch_use, report.requires_dist, cuda_major=report.cuda_major)
                ),
            },
            "check": verdict_to_json(verdict),
            "phases": {**ph.times, "total": round(time.monotonic() - t_start, 2)},
        }
        write_text_atomic(report_json, json.dumps(data, indent=2) + "\n")
        report_json.chmod(0o644)  # a CI artifact: mkstemp's private mode would hide it from other users
        box["detail"] = str(report_json)
    phases = dict(ph.times)
    phases["total"] = round(time.monotonic() - t_start, 2)
    return BuildResult(
        wheel=repaired.wheel,
        report_json=report_json,
        phases=phases,
        setup=setup,
        verdict=verdict,
        report=report,
        repair=repaired,
        extra={"details": dict(ph.details), "log": str(log_path)},
    )
