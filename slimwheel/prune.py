"""nvprune the static CUDA libraries a static link needs down to the plan's targets, with a cache.

Why: a static link pulls whole archive members of libcublasLt_static.a (962 MB in CUDA 11.8), and each member carries
SASS for every architecture the toolkit knows. nvprune drops the cubins and PTX the build does not target, before
the linker ever sees them (the seed faiss wheel: 216.5 MB static on CUDA 11.0).

The cache lives in fsutil.cache_dir()/pruned/:
    digests.json                  sha256 of each source library, keyed by (path, size, mtime): hashing 1 GB takes seconds
    lib/<key>/<libX_static.a>     one pruned library; key = sha256(library digest, targets, nvprune version)
    sets/<key>/                   the folder handed to the link (SLIMWHEEL_STATIC_LIBDIR): symlinks into lib/
    contents/<digest>.json        which SASS/PTX targets a library holds (cuobjdump: 20 s for cublasLt)
Entries are produced in a temporary folder and renamed into place under a per-entry lock, so concurrent runs neither
duplicate work nor see half-written files.

nvprune keeps exact matches only: `-gencode arch=compute_75,code=sm_75` drops a library's sm_70 cubins. cuBLAS 11.8
ships sm_75 cubins for 2 of its 182 kernels' objects (measured with cuobjdump), so pruning to the plan's own targets
would leave Turing GPUs without most cuBLAS kernels. So the kept set is computed per library (`keep_targets`): for every
GPU a plan target serves, every cubin of that library that GPU can run (same major, minor <= the GPU's), and for GPUs
that only the plan's PTX serves, the library's best PTX for them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from slimwheel import fsutil
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.arch import CC, GENERATIONS, Kind, Target
from slimwheel.errors import BadInputError, ToolError
from slimwheel.toolkit.model import Toolkit
from slimwheel.tools import run_tool_status

log = logging.getLogger(__name__)

# Static components in link order, what each needs, and which hold no device code (nothing for nvprune to remove):
# slimwheel/cuda/libs.py's STATIC_LIBS, the table SlimWheelStatic.cmake links by too.
LINK_ORDER: tuple[str, ...] = tuple(s.component for s in cudalibs.STATIC_LIBS)
DEPENDS: dict[str, tuple[str, ...]] = {s.component: s.depends for s in cudalibs.STATIC_LIBS}
HOST_ONLY: frozenset[str] = frozenset(s.component for s in cudalibs.STATIC_LIBS if not s.device_code)

_DIGEST_DB = "digests.json"


@dataclass(frozen=True, kw_only=True)
class PrunedLib:
    """One static library before and after pruning. Host-only archives are not pruned: `pruned` is `source`."""

    component: str
    source: Path
    pruned: Path
    before: int
    after: int
    cache_hit: bool
    seconds: float = 0.0
    available: tuple[Target, ...] = ()  # the targets the library ships
    kept: tuple[Target, ...] = ()  # the targets nvprune kept (keep_targets)
    unserved: tuple[CC, ...] = ()  # GPUs the plan serves but this library cannot (no usable cubin or PTX)

    @property
    def saved(self) -> int:
        return self.before - self.after

    @property
    def host_only(self) -> bool:
        return self.pruned == self.source


@dataclass(frozen=True, kw_only=True)
class PruneResult:
    """The folder to link from (libX_static.a for every component) and what pruning did to each library."""

    libdir: Path
    libs: tuple[PrunedLib, ...]
    targets: tuple[Target, ...] = ()
    nvprune_version: str = ""

    @property
    def before(self) -> int:
        return sum(lib.before for lib in self.libs)

    @property
    def after(self) -> int:
        return sum(lib.after for lib in self.libs)


def resolve_components(components: Iterable[str]) -> tuple[str, ...]:
    """The requested components plus what they need, in link order. Case-insensitive names (cublaslt == cublasLt)."""
    by_lower = {c.lower(): c for c in LINK_ORDER}
    wanted: set[str] = set()
    todo = list(components)
    if not todo:
        raise BadInputError("no CUDA libraries to prune", hint="known: " + ", ".join(LINK_ORDER))
    while todo:
        name = todo.pop()
        c = by_lower.get(name.strip().lower())
        if c is None:
            raise BadInputError(
                f"{name!r} is not a static CUDA library slimwheel links", hint="known: " + ", ".join(LINK_ORDER)
            )
        if c not in wanted:
            wanted.add(c)
            todo.extend(DEPENDS[c])
    return tuple(c for c in LINK_ORDER if c in wanted)


def nvprune_args(targets: Iterable[Target]) -> tuple[str, ...]:
    """-gencode flags that keep exactly these targets: code=sm_XY for SASS, code=compute_XY for PTX."""
    out: list[str] = []
    for t in sorted(set(targets), key=lambda t: (t.cc, t.kind is Kind.PTX, t.variant.value)):
        code = f"sm_{t.arch}" if t.kind is Kind.SASS else f"compute_{t.arch}"
        out += ["-gencode", f"arch=compute_{t.arch},code={code}"]
    return tuple(out)


# x86_64 wheels never run on integrated (aarch64) GPUs, so their cubins are never worth keeping.
_GPUS: tuple[CC, ...] = tuple(g.cc for g in GENERATIONS if not g.integrated)


def gpus_for(supported: Iterable[CC]) -> tuple[CC, ...]:
    """The GPUs whose library cubins may be worth keeping: the known discrete generations, and every other CC the
    toolkit targets. CUDA 11.8's Kepler (3.5, 3.7) is in no generation table, yet the plan for "all" serves it with
    sm_35: without it here, nvprune dropped all 217 sm_35 cubins of cuBLAS that the plan's 3.5 needs."""
    integrated = {g.cc for g in GENERATIONS if g.integrated}
    return tuple(sorted(set(_GPUS) | {c for c in supported if c not in integrated}))


def keep_targets(
    plan_targets: Iterable[Target], available: Iterable[Target], gpus: Iterable[CC] = _GPUS
) -> tuple[tuple[Target, ...], tuple[CC, ...]]:
    """(the library targets to keep, the GPUs the plan serves that the library cannot serve at all).

    A GPU served by a plan SASS target needs every library cubin it can run: cuBLAS picks kernels per GPU, and a kernel
    may exist only as sm_70 while its neighbour has sm_75. A GPU that only the plan's PTX reaches (newer than any cubin)
    needs the library's own cubins for it, if any, else the library's highest PTX it can JIT.
    """
    plan = tuple(plan_targets)
    avail = tuple(available)
    sass = [t for t in plan if t.kind is Kind.SASS]
    ptx = [t for t in plan if t.kind is Kind.PTX]
    keep: set[Target] = set()
    unserved: list[CC] = []
    for gpu in gpus:
        by_sass = any(t.runs_on(gpu) for t in sass)
        by_ptx = not by_sass and any(t.runs_on(gpu) for t in ptx)
        if not (by_sass or by_ptx):
            continue
        cubins = {a for a in avail if a.kind is Kind.SASS and a.runs_on(gpu)}
        keep |= cubins
        if by_ptx and not cubins:
            jit = [a for a in avail if a.kind is Kind.PTX and a.runs_on(gpu)]
            if jit:
                keep.add(max(jit, key=lambda a: a.cc))
        if not cubins and not any(a.kind is Kind.PTX and a.runs_on(gpu) for a in avail):
            unserved.append(gpu)
    return tuple(sorted(keep, key=lambda t: (t.cc, t.kind is Kind.PTX, t.variant.value))), tuple(unserved)


def parse_cuobjdump_list(text: str) -> tuple[Target, ...]:
    """Targets named in `cuobjdump --list-elf/--list-ptx` output ("ELF file 3: lib.3.sm_80.cubin", "...sm_90.ptx")."""
    found: set[Target] = set()
    for m in re.finditer(r"\.sm_(\d+)([af]?)\.(cubin|ptx)\b", text):
        kind = Kind.SASS if m.group(3) == "cubin" else Kind.PTX
        found.add(Target.parse(m.group(1) + m.group(2), kind=kind))
    return tuple(sorted(found, key=lambda t: (t.cc, t.kind is Kind.PTX, t.variant.value)))


def library_targets(cuobjdump: Path, lib: Path, digest: str, cache: Path) -> tuple[Target, ...]:
    """The SASS and PTX targets a static library ships, listed once per library digest (cached)."""
    entry = cache / "contents" / f"{digest}.json"
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
        if data.get("schema") == 1:
            return tuple(Target.parse(t) for t in data["targets"])
    except (FileNotFoundError, ValueError, KeyError):
        pass
    t0 = time.monotonic()
    text = ""
    for flag in ("--list-elf", "--list-ptx"):
        proc = run_tool_status(
            [str(cuobjdump), flag, str(lib)], what=f"cuobjdump {flag} {lib.name}", separate_stderr=True
        )
        # cuobjdump exits non-zero for "does not contain device code" (host-only archives): no targets then.
        if proc.returncode != 0 and "does not contain" not in proc.stderr:
            raise ToolError(f"cuobjdump {flag} {lib} failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
        text += proc.output
    targets = parse_cuobjdump_list(text)
    log.info("%s ships %s (listed in %.1f s)", lib.name, ", ".join(map(str, targets)), time.monotonic() - t0)
    fsutil.write_text_atomic(
        entry, json.dumps({"schema": 1, "source": str(lib), "targets": [str(t) for t in targets]}, indent=1)
    )
    return targets


def cache_key(digest: str, targets: Iterable[Target], nvprune_version: str) -> str:
    """Names one pruned library: same input bytes, same targets, same nvprune -> same output."""
    spec = ",".join(sorted(str(t) for t in set(targets)))
    return hashlib.sha256(f"{digest}\n{spec}\n{nvprune_version}".encode()).hexdigest()[:24]


def check_targets(toolkit: Toolkit, targets: Iterable[Target]) -> tuple[Target, ...]:
    ts = tuple(dict.fromkeys(targets))
    if not ts:
        raise BadInputError("no GPU targets to keep", hint="give --archs (e.g. 7.5-9.0) or --targets (e.g. 80-real;90)")
    beyond = [t for t in ts if t.cc not in set(toolkit.supported)]
    if beyond:
        raise BadInputError(
            f"CUDA {toolkit.version} cannot target " + ", ".join(map(str, beyond)),
            hint="its nvcc supports: " + ", ".join(str(c) for c in sorted(toolkit.supported)),
        )
    return ts


def file_digest(path: Path, cache: Path) -> str:
    """sha256 of a library, remembered by (resolved path, size, mtime) in cache/digests.json."""
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    db_path = cache / _DIGEST_DB
    with fsutil.file_lock(cache / f"{_DIGEST_DB}.lock"):
        db = _read_db(db_path)
        if ident in db:
            return db[ident]
    t0 = time.monotonic()
    digest = fsutil.sha256_file(path)
    log.info("digest of %s (%d MB): %.1f s", path.name, st.st_size // 10**6, time.monotonic() - t0)
    with fsutil.file_lock(cache / f"{_DIGEST_DB}.lock"):
        db = _read_db(db_path)
        db[ident] = digest
        fsutil.write_text_atomic(db_path, json.dumps({"schema": 1, "digests": db}, indent=1, sort_keys=True))
    return digest


def _read_db(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, UnicodeDecodeError):
        log.warning("%s is unreadable; the digests will be recomputed", path)
        return {}
    return dict(data.get("digests", {})) if data.get("schema") == 1 else {}


def nvprune_version(nvprune: Path) -> str:
    """The tool's own version line ("V11.8.89"): part of the cache key, so a new nvprune never reuses old output."""
    proc = run_tool_status([str(nvprune), "--version"], what=f"{nvprune} --version")
    m = re.search(r"\bV(\d+\.\d+\.\d+)", proc.output)
    if proc.returncode != 0 or not m:
        raise ToolError(f"{nvprune} --version failed or printed no version: {proc.output.strip()[-300:]}")
    return m.group(1)


def _run_nvprune(nvprune: Path, targets: tuple[Target, ...], src: Path, dst: Path) -> None:
    cmd = [str(nvprune), *nvprune_args(targets), "-o", str(dst), str(src)]
    proc = run_tool_status(cmd, what=f"nvprune {src.name}", timeout=3600)
    if proc.returncode != 0:
        raise ToolError(
            f"nvprune failed on {src} (exit {proc.returncode}): {proc.output.strip()[-800:]}",
            hint="command: " + " ".join(cmd),
        )


def _prune_one(
    toolkit: Toolkit, component: str, src: Path, targets: tuple[Target, ...], version: str, cache: Path
) -> PrunedLib:
    before = src.stat().st_size
    if component in HOST_ONLY:
        return PrunedLib(component=component, source=src, pruned=src, before=before, after=before, cache_hit=False)
    digest = file_digest(src, cache)
    assert toolkit.nvprune is not None and toolkit.cuobjdump is not None  # checked by prune_libraries
    available = library_targets(Path(toolkit.cuobjdump), src, digest, cache)
    kept, unserved = keep_targets(targets, available, gpus_for(toolkit.supported))
    if unserved:
        log.warning("%s has no code for GPU(s) %s that the plan serves", src.name, ", ".join(map(str, unserved)))
    if not kept:
        raise BadInputError(
            f"{src} has no code for any GPU the targets {', '.join(map(str, targets))} serve",
            hint="it ships: " + ", ".join(map(str, available)),
        )
    key = cache_key(digest, kept, version)
    entry = cache / "lib" / key
    out = entry / src.name
    made = functools.partial(
        PrunedLib,
        component=component,
        source=src,
        pruned=out,
        before=before,
        available=available,
        kept=kept,
        unserved=unserved,
    )
    t0 = time.monotonic()
    with fsutil.file_lock(cache / "lib" / f"{key}.lock"):
        if out.is_file():
            log.info("%s: pruned copy cached (%s)", src.name, entry)
            return made(after=out.stat().st_size, cache_hit=True)
        if entry.exists():  # left incomplete by an older slimwheel or a hand edit: made again
            shutil.rmtree(entry)
        _remove_orphans(entry)  # a pruned cuBLASLt is ~0.9 GB
        with fsutil.temp_sibling(entry, directory=True) as tmp:
            _run_nvprune(toolkit.nvprune, kept, src, tmp / src.name)
            (tmp / "targets.json").write_text(
                json.dumps({"schema": 1, "source": str(src), "kept": [str(t) for t in kept], "nvprune": version})
            )
            os.replace(tmp, entry)  # the whole folder appears at once
    dt = time.monotonic() - t0
    after = out.stat().st_size
    log.info("%s: nvprune %d MB -> %d MB in %.1f s", src.name, before // 10**6, after // 10**6, dt)
    return made(after=after, cache_hit=False, seconds=dt)


def _link_folder(libs: tuple[PrunedLib, ...], cache: Path) -> Path:
    """One folder with every library under its usual name: what -L / SLIMWHEEL_STATIC_LIBDIR points at."""
    spec = "\n".join(f"{lib.component}={lib.pruned}" for lib in libs)
    key = hashlib.sha256(spec.encode()).hexdigest()[:24]
    folder = cache / "sets" / key
    with fsutil.file_lock(cache / "sets" / f"{key}.lock"):
        if folder.is_dir():
            return folder
        _remove_orphans(folder)
        with fsutil.temp_sibling(folder, directory=True) as tmp:
            for lib in libs:
                (tmp / lib.source.name).symlink_to(lib.pruned)
            os.replace(tmp, folder)
    return folder


def _remove_orphans(entry: Path) -> None:
    """Temp folders of killed runs beside a cache entry; called under the entry's lock, so none is a live run's
    (slimwheel 0.1 named them `.<key>.XXXXXXXX`, without the `.tmp` of `fsutil.temp_sibling`)."""
    fsutil.remove_stale_temps(entry, min_age_s=0, legacy=(rf"\.{re.escape(entry.name)}\.[a-z0-9_]{{8}}",))


def prune_libraries(
    toolkit: Toolkit,
    targets: tuple[Target, ...],
    components: tuple[str, ...] = ("cublas", "cublasLt", "cudart"),
    *,
    cache: Path | None = None,
) -> PruneResult:
    """nvprune the static libraries `components` need (dependencies added) to `targets`; cached.

    Raises ToolError when nvprune or a static library is missing from the toolkit, BadInputError when a target is
    beyond it or a component is unknown.
    """
    ts = check_targets(toolkit, targets)
    comps = resolve_components(components)
    for tool in ("nvprune", "cuobjdump"):
        path = getattr(toolkit, tool)
        if path is None or not Path(path).is_file():
            raise ToolError(
                f"CUDA {toolkit.version} toolkit at {toolkit.root} has no {tool}"
                + (f" ({path} is missing)" if path else ""),
                hint=static_toolkit_hint(),
            )
    sources: dict[str, Path] = {}
    for c in comps:
        src = toolkit.static_libs.get(c)
        if src is None or not Path(src).is_file():
            raise ToolError(
                f"CUDA {toolkit.version} toolkit at {toolkit.root} has no static {c} library"
                + (f" ({src} is missing)" if src else ""),
                hint=static_toolkit_hint(),
            )
        sources[c] = Path(src)
    cache = (cache or fsutil.cache_dir()) / "pruned"
    cache.mkdir(parents=True, exist_ok=True)
    assert toolkit.nvprune is not None  # checked above
    version = nvprune_version(Path(toolkit.nvprune))
    t0 = time.monotonic()
    libs = tuple(_prune_one(toolkit, c, sources[c], ts, version, cache) for c in comps)
    folder = _link_folder(libs, cache)
    log.info("prune: %d libraries ready in %s (%.1f s)", len(libs), folder, time.monotonic() - t0)
    return PruneResult(libdir=folder, libs=libs, targets=ts, nvprune_version=version)


def static_toolkit_hint(prefix: Path = Path("/")) -> str:
    """What to do when the toolkit in use cannot link statically: PyPI's CUDA (the default, 13.0) has neither static
    cuBLAS nor nvprune; Debian's CUDA 11.8 has both, and is used only when asked for by name."""
    from slimwheel.toolkit.debian11 import SETUP_SCRIPT, missing_files

    if missing_files(prefix):
        return f"static linking needs CUDA 11.8: run `sudo bash {SETUP_SCRIPT}` (Debian 12), then pass --cuda 11.8"
    return f'CUDA 11.8 with static libraries is installed ({SETUP_SCRIPT}): pass --cuda 11.8 (or cuda = "11.8")'


def result_to_json(result: PruneResult) -> dict[str, object]:
    return {
        "schema": 1,
        "libdir": str(result.libdir),
        "targets": [str(t) for t in result.targets],
        "nvprune": result.nvprune_version,
        "before": result.before,
        "after": result.after,
        "libs": [
            {
                "component": lib.component,
                "source": str(lib.source),
                "pruned": str(lib.pruned),
                "before": lib.before,
                "after": lib.after,
                "cache_hit": lib.cache_hit,
                "host_only": lib.host_only,
                "seconds": round(lib.seconds, 2),
                "available": [str(t) for t in lib.available],
                "kept": [str(t) for t in lib.kept],
                "unserved": [str(c) for c in lib.unserved],
            }
            for lib in result.libs
        ],
    }
