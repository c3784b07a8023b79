"""The input wheel as repair reads it, once: unpacked through the bounded reader with every member hashed as it
inflates (RECORD verified from those hashes), then each ELF file parsed once from its unpacked copy by check's own
reader and limits (`inspect.scan.inspect_unpacked`: a wheel check refuses, repair refuses). Everything repair later
asks of the input (ELF facts, the symbols its files import, member sizes, Python sources) comes from that one read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from slimwheel import torchext, wheelfile
from slimwheel.errors import BadInputError
from slimwheel.inspect.dynamic import ElfInfo, imports_by_library, read_dynamic
from slimwheel.inspect.elf import ElfReport
from slimwheel.inspect.pyimports import MAX_SOURCE, PythonImports
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_unpacked
from slimwheel.inspect.wheel import WheelArchive, requires_dist


@dataclass(frozen=True, kw_only=True)
class RepairInput:
    """What repair learns from the input wheel before auditwheel runs."""

    dist_name: str
    names: list[str]
    elfs: dict[str, ElfInfo]
    requires: tuple[str, ...]
    record_problems: tuple[str, ...]
    imports: dict[str, frozenset[str]]  # library -> the symbols the wheel's ELF files take from it (GNU versions)
    sizes: dict[str, tuple[int, int]]  # member -> (bytes in the wheel, bytes installed)
    python: PythonImports  # the package's Python sources, read from the unpacked copy on first use
    torch: torchext.TorchUse | None = None  # what its ELF files take from torch, if they need torch's libraries


def unpack_as(archive: Path, dest: Path, *, shown_as: Path) -> list[str]:
    """wheelfile.unpack, with messages naming the user's file instead of a temporary one."""
    try:
        return wheelfile.unpack(archive, dest)
    except BadInputError as e:
        raise BadInputError(str(e).replace(str(archive), str(shown_as))) from None


def report_of(
    archive: Path, root: Path, names: list[str], *, shown_as: Path, opened: WheelArchive | None = None
) -> WheelReport:
    """`inspect_unpacked` (check's reader and its limits over the unpacked files: MAX_RECORDS, MAX_WRAPPERS), with
    messages naming the user's file. `opened`: the wheel open already (its directory read once)."""
    try:
        return inspect_unpacked(archive, root, names, archive=opened)
    except BadInputError as e:
        raise BadInputError(e.message.replace(str(archive), str(shown_as)), hint=e.hint) from None


def elf_facts(report: WheelReport) -> dict[str, ElfInfo]:
    """The dynamic facts of the report's ELF files (bare .fatbin files are none), by path in the wheel."""
    return {e.name: ElfInfo.from_report(e) for e in report.elfs if e.kind != "fatbin"}


def versioned_imports(elfs: Iterable[ElfReport]) -> dict[str, frozenset[str]]:
    """library -> the symbols the files import from it by GNU symbol version (`ElfReport.version_needs`): what the
    requirement floors compare with the major's first release."""
    out: dict[str, set[str]] = {}
    for e in elfs:
        for need in e.version_needs:
            out.setdefault(need.library, set()).update(need.symbols)
    return {k: frozenset(v) for k, v in out.items()}


def _python_sources(root: Path, names: list[str]) -> Callable[[], Generator[tuple[str, bytes | None]]]:
    """The .py files of the unpacked wheel one at a time, as `PythonImports.from_wheel` gives a wheel's (None for a
    file over MAX_SOURCE: not read)."""

    def load() -> Generator[tuple[str, bytes | None]]:
        for name in names:
            if name.endswith(".py"):
                path = root / name
                yield name, (path.read_bytes() if path.stat().st_size <= MAX_SOURCE else None)

    return load


def read_input(wheel: Path, dest: Path, *, rewrite_record: bool) -> RepairInput:
    try:
        dist_name = parse_wheel_filename(wheel.name)[0]
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    # One read of the input: its directory read and judged once, every member inflated once (hashed for RECORD as
    # it is written out), the ELF files parsed from the unpacked copies and the metadata read from them.
    with WheelArchive(wheel) as archive:
        names, digests = wheelfile.unpack_digested(wheel, dest, reader=archive)
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
            wheelfile.record_problems(record, digests, record_name=f"{dist_info}/RECORD"),
            rewrite_record=rewrite_record,
        )
        report = report_of(wheel, dest, names, shown_as=wheel, opened=archive)
    elfs = elf_facts(report)
    if not elfs:
        raise BadInputError(f"{wheel}: no ELF files in the wheel; a pure Python wheel has nothing to repair")
    return RepairInput(
        dist_name=dist_name,
        names=names,
        elfs=elfs,
        requires=requires_dist(meta),
        record_problems=problems,
        imports=versioned_imports(report.elfs),
        sizes={f.name: (f.compressed, f.uncompressed) for f in report.files},
        python=PythonImports(_python_sources(dest, names)),
        torch=_torch_use(dest, elfs),
    )


def _torch_use(root: Path, elfs: Mapping[str, ElfInfo]) -> torchext.TorchUse | None:
    """What the files that need torch's libraries take from torch: torch's libraries have no symbol versions, so
    their undefined symbols are read, from those files only."""
    torch_imports: dict[str, frozenset[str]] = {}
    for path, info in elfs.items():
        if any(torchext.is_torch_library(n) for n in info.needed):
            names = imports_by_library(root / path).values()
            torch_imports[path] = frozenset(n for ns in names for n in ns if torchext.is_torch_symbol(n))
    return torchext.torch_use({p: i.needed for p, i in elfs.items()}, torch_imports)


def after_patch(root: Path, src: RepairInput, removed: Iterable[str], patched: Iterable[str]) -> RepairInput:
    """The input after unvendoring: the removed files gone, and the files whose NEEDED entries patchelf rewrote read
    again (patchelf renames their symbol-version needs too, which the floors read); nothing else changed."""
    gone = set(removed)
    elfs = {p: i for p, i in src.elfs.items() if p not in gone}
    imports: dict[str, set[str]] = {}
    fresh: dict[str, dict[str, frozenset[str]]] = {}
    for path in patched:
        info = read_dynamic(root / path, path)
        if info is not None:
            elfs[path] = info
        fresh[path] = imports_by_library(root / path)
    for lib, used in src.imports.items():
        imports.setdefault(lib, set()).update(used)
    for by_lib in fresh.values():
        for lib, used in by_lib.items():
            if lib:
                imports.setdefault(lib, set()).update(used)
    return dataclasses.replace(
        src,
        names=[n for n in src.names if n not in gone],
        elfs=elfs,
        imports={k: frozenset(v) for k, v in imports.items()},
    )
