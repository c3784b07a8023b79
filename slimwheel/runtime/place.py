"""Where the run-time loader goes in a repaired wheel, and putting it there (repair's last step before packing).

The loader runs from the outermost regular package of each Python extension module; an extension module outside any
regular package moves behind a shim (see `slimwheel.runtime.generate`).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.versions import MAJOR_DRIVER, RELEASE_DRIVER, driver_key
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.rpath import deepen, install_dir
from slimwheel.runtime import generate
from slimwheel.tools import set_rpath

log = logging.getLogger("slimwheel.runtime.place")

_EXT_RE = re.compile(r"^(?P<module>[A-Za-z_][A-Za-z0-9_]*)\.(?:cpython-[^.]+|abi3|cp\d+[^.]*)?\.?so$")


class DriverFloor(TypedDict):
    min_cuda: int  # what cuDriverGetVersion must report: 13000 for CUDA 13.0
    min_driver: str
    why: str


def driver_floor(major: int, report_floor: str | None = None, why: str | None = None) -> DriverFloor:
    """The loader's driver check: the CUDA version cuDriverGetVersion must report, and the driver that gives it.
    `report_floor`: the wheel report's floor (it knows PTX and fatbin compression); used when it is a driver of the
    release table at or above the major's first driver."""
    base = MAJOR_DRIVER[major]
    if not (report_floor and report_floor in RELEASE_DRIVER.values() and driver_key(report_floor) >= driver_key(base)):
        report_floor, why = None, None
    floor_driver = report_floor or base
    release = next((r for r, d in sorted(RELEASE_DRIVER.items()) if d == floor_driver), (major, 0))
    return DriverFloor(
        min_cuda=release[0] * 1000 + release[1] * 10,
        min_driver=floor_driver,
        why=why or f"CUDA {major} needs driver {floor_driver} or newer",
    )


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


def install_loader(
    work: Path,
    names: Sequence[str],
    elfs: Mapping[str, ElfInfo],
    *,
    needed: Sequence[cudalibs.RuntimeLib],
    reqs: Mapping[str, str],
    dist_name: str,
    driver: DriverFloor,
    wheel_name: str,
) -> list[str]:
    """Write the loader (and shims) into the unpacked wheel at `work`; returns the files added or changed."""
    # whether a shim candidate defines PyInit_<module>: read with the rest of its ELF facts (`ElfInfo.python_module`)
    plan = plan_loader(list(names), elfs, lambda path, _module: elfs[path].python_module)
    ordered = cudalibs.load_order(list(needed))
    needed_sonames = {lib.soname for lib in needed}
    all_reqs = dict(reqs)
    for lib in ordered:
        all_reqs.setdefault(lib.package, lib.package)
    added: list[str] = []

    def loader_text(folder: str) -> str:
        where = install_dir(folder + "/x")
        depth = len(where.split("/")) if where else 0
        cfg = generate.loader_config(
            dist=dist_name, libs=ordered, needed=needed_sonames, requirements=all_reqs, depth=depth, driver=dict(driver)
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
            raise BadInputError(f"{wheel_name}: both {ext_path} and {shim} exist; cannot put a loader shim there")
        (work / hidden).mkdir(parents=True, exist_ok=True)
        moved = posixpath.join(hidden, posixpath.basename(ext_path))
        os.replace(work / ext_path, work / moved)
        info = elfs[ext_path]
        if info.search_path:
            set_rpath(
                work / moved,
                deepen(info.search_path),
                use_rpath_tag=bool(info.rpath) and not info.runpath,
                name=ext_path,
            )
        (work / hidden / f"{generate.LOADER_NAME}.py").write_text(loader_text(hidden), encoding="utf-8")
        (work / shim).write_text(
            generate.shim_source(module=leaf, ext_filename=posixpath.basename(ext_path)), encoding="utf-8"
        )
        added += [shim, moved, f"{hidden}/{generate.LOADER_NAME}.py"]
    if not plan.packages and not plan.shims:
        log.warning("no Python extension module found: the wheel gets no loader (it relies on RPATH alone)")
    return added
