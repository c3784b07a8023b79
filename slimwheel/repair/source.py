"""The input wheel as repair reads it: unpacked, verified (RECORD, check's reader and its limits), its ELF files and
the symbols they import."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from slimwheel import torchext, wheelfile
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo, imports_by_library, scan_elfs
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.inspect.wheel import requires_dist


@dataclass(frozen=True, kw_only=True)
class RepairInput:
    """What repair learns from the input wheel before auditwheel runs."""

    dist_name: str
    names: list[str]
    elfs: dict[str, ElfInfo]
    requires: tuple[str, ...]
    record_problems: tuple[str, ...]
    imports: dict[str, frozenset[str]]  # library -> the symbols the wheel's ELF files take from it
    torch: torchext.TorchUse | None = None  # what its ELF files take from torch, if they need torch's libraries


def unpack_as(archive: Path, dest: Path, *, shown_as: Path) -> list[str]:
    """wheelfile.unpack, with messages naming the user's file instead of a temporary one."""
    try:
        return wheelfile.unpack(archive, dest)
    except BadInputError as e:
        raise BadInputError(str(e).replace(str(archive), str(shown_as))) from None


def scan_tree(root: Path, wheel: Path) -> dict[str, ElfInfo]:
    try:
        return scan_elfs(root)
    except BadInputError as e:
        raise BadInputError(f"{wheel}: {e}") from None


def read_input(wheel: Path, dest: Path, *, rewrite_record: bool) -> RepairInput:
    try:
        dist_name = parse_wheel_filename(wheel.name)[0]
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    names = wheelfile.unpack(wheel, dest)
    dist_info = wheelfile.dist_info_of(names, wheel)
    for required in ("METADATA", "WHEEL", "RECORD"):
        if not (dest / dist_info / required).is_file():
            raise BadInputError(f"{wheel}: {dist_info}/{required} is missing; not a wheel")
    try:
        meta = (dest / dist_info / "METADATA").read_text(encoding="utf-8")
        record = (dest / dist_info / "RECORD").read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{wheel}: {dist_info}/METADATA or RECORD is not UTF-8 text") from None
    problems = wheelfile.judge_record(
        wheel,
        wheelfile.record_problems(record, wheelfile.digest_tree(dest), record_name=f"{dist_info}/RECORD"),
        rewrite_record=rewrite_record,
    )
    inspect_wheel(wheel)  # check's reader and its limits (MAX_RECORDS, MAX_WRAPPERS, ZipLimits): what it refuses, we do
    elfs = scan_tree(dest, wheel)
    if not elfs:
        raise BadInputError(f"{wheel}: no ELF files in the wheel; a pure Python wheel has nothing to repair")
    imports: dict[str, set[str]] = {}
    torch_imports: dict[str, frozenset[str]] = {}
    for path, info in elfs.items():
        by_library = imports_by_library(dest / path)
        for lib, names_used in by_library.items():
            imports.setdefault(lib, set()).update(names_used)
        if any(torchext.is_torch_library(n) for n in info.needed):  # torch's libraries have no symbol versions
            torch_imports[path] = frozenset(n for ns in by_library.values() for n in ns if torchext.is_torch_symbol(n))
    torch = torchext.torch_use({p: i.needed for p, i in elfs.items()}, torch_imports)
    return RepairInput(
        dist_name=dist_name,
        names=names,
        elfs=elfs,
        requires=requires_dist(meta),
        record_problems=problems,
        imports={k: frozenset(v) for k, v in imports.items()},
        torch=torch,
    )


def rescan(root: Path, src: RepairInput, wheel: Path) -> RepairInput:
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    elfs = scan_tree(root, wheel)
    imports: dict[str, set[str]] = {}
    for path in elfs:
        for lib, used in imports_by_library(root / path).items():
            imports.setdefault(lib, set()).update(used)
    return dataclasses.replace(src, names=names, elfs=elfs, imports={k: frozenset(v) for k, v in imports.items()})
