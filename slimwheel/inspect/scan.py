"""Reading a wheel (or a loose binary) for its report: each ELF member inflated once, its headers parsed, the whole
assembled by `slimwheel.inspect.report`.

This module starts light on purpose. size-report's cost on a small wheel is mostly start-up (issue 22: at most half
the `unzip` + `cuobjdump` route), so the members start inflating before the parsers and the report are imported:
inflating (zlib, ISA-L) releases the GIL, and the imports run beside it instead of before it. The readers are
imported where they are first needed (`_parsed`, `_assembled`); everything else comes from modules that the reading
needs anyway.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slimwheel.errors import BadInputError
from slimwheel.inspect.duplicates import DuplicateGroup, duplicate_groups, twins
from slimwheel.inspect.files import ELF_MAGIC, FATBIN_MAGIC, Buffer, mapped_file
from slimwheel.inspect.wheel import DEFAULT_LIMITS, Member, WheelArchive, WheelMeta, ZipLimits

if TYPE_CHECKING:
    from slimwheel.inspect.elf import ElfReport
    from slimwheel.inspect.nvrtc import EmbeddedSources
    from slimwheel.inspect.report import FileEntry, WheelReport

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class MemberDigest:
    """A member's size and SHA-256 as RECORD states them; `data`: the bytes of a RECORD member itself."""

    size: int
    sha256: bytes
    data: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class Taps:
    """What a caller takes from the members while they inflate for the report, so that no member inflates twice
    (check's analysis, `analysis.analyze`): every member's size and SHA-256 for the RECORD verdict (`digests`, with
    the RECORD's own bytes), the bytes of the members `keep` picks from the whole directory (`kept`: the Python
    sources), and whatever `elf` takes from each ELF member's bytes beside its report (the symbols it imports from
    torch). `elf` runs in the worker that inflated the member; it must be safe to call from several at once."""

    digests: dict[str, MemberDigest] = dataclasses.field(default_factory=dict)
    keep: Callable[[tuple[Member, ...]], frozenset[str]] = lambda _members: frozenset()
    kept: dict[str, bytes] = dataclasses.field(default_factory=dict)
    elf: Callable[[str, Buffer, ElfReport], None] | None = None


# Members hashed for RECORD that are not read for the report are inflated in batches of about this many compressed
# bytes, one batch per worker task: cuda-cccl's 2,500 headers as one task each cost 0.1 s of thread hand-offs.
_BATCH = 1 << 20


def _batches(members: Iterable[Member]) -> list[list[Member]]:
    """`members`, largest first, cut into runs of about `_BATCH` compressed bytes (a bigger member is a run alone)."""
    out: list[list[Member]] = []
    run: list[Member] = []
    size = 0
    for m in sorted(members, key=lambda m: -m.uncompressed):
        if run and size + m.compressed > _BATCH:
            out.append(run)
            run, size = [], 0
        run.append(m)
        size += m.compressed
    if run:
        out.append(run)
    return out


def _metadata_file(name: str) -> bool:
    """A WHEEL or METADATA file of a top-level .dist-info folder: what `WheelArchive.metadata` reads."""
    folder, _, leaf = name.partition("/")
    return folder.endswith(".dist-info") and leaf in ("WHEEL", "METADATA")


def _hasher() -> Any:
    import hashlib  # only check's RECORD verdict hashes: size-report never imports it

    return hashlib.sha256()


def _sha256(data: Buffer) -> bytes:
    h = _hasher()
    h.update(data)  # a whole member at once: hashlib releases the GIL for large buffers
    digest: bytes = h.digest()
    return digest


def _candidate(archive: WheelArchive, m: Member) -> bool:
    return m.uncompressed >= 16 and archive.head(m, 4)[:4] in (ELF_MAGIC, FATBIN_MAGIC)


def report_members(archive: WheelArchive) -> list[Member]:
    """The members the report inflates (ELF and .fatbin files, by their first bytes), largest first; size-report reads
    no other member past the zip directory, check's analysis inflates every one (RECORD)."""
    return sorted((m for m in archive.members if _candidate(archive, m)), key=lambda m: -m.uncompressed)


def _parsed(data: Buffer, name: str) -> ElfReport:
    from slimwheel.inspect.elf import read_elf  # the first worker to finish inflating loads the parsers

    return read_elf(data, name)


def _counted(path: Path, records: int, elf: ElfReport) -> int:
    """`records` plus the fatbin containers and entries of `elf`, refused past `MAX_RECORDS` for the whole wheel (as
    for one file)."""
    from slimwheel.inspect.fatbin import MAX_RECORDS

    records += sum(1 + len(fb.entries) for fb in elf.fatbins)
    if records > MAX_RECORDS:
        raise BadInputError(f"{path}: more than {MAX_RECORDS} fatbin containers and entries in the wheel's files")
    return records


def _file_entries(members: tuple[Member, ...], wheel_size: int) -> tuple[FileEntry, ...]:
    from slimwheel.inspect.report import FileEntry

    return tuple(
        FileEntry(
            name=m.name,
            compressed=m.compressed,
            uncompressed=m.uncompressed,
            share=m.compressed / wheel_size if wheel_size else 0.0,
        )
        for m in members
    )


def _assembled(
    path: Path,
    meta: Any,
    wheel_size: int,
    files: tuple[FileEntry, ...],
    elfs: tuple[ElfReport, ...],
    duplicates: tuple[DuplicateGroup, ...] = (),
) -> WheelReport:
    from slimwheel.inspect.report import assemble

    return assemble(path, meta, wheel_size, files, elfs, duplicates)


def _sonames(elfs: Iterable[ElfReport]) -> dict[str, str]:
    return {e.name: e.soname for e in elfs if e.soname}


def inspect_wheel(
    path: Path,
    limits: ZipLimits = DEFAULT_LIMITS,
    *,
    workers: int | None = None,
    meanwhile: Callable[[], object] | None = None,
    taps: Taps | None = None,
) -> WheelReport:
    """Read a wheel once: the zip directory for every file, and each ELF (or .fatbin) member inflated once.

    Members go through `zipread` (bounded, lie-refusing; big ones spooled and mapped, see `ZipLimits`); the fatbin
    containers and entries of the whole wheel are bounded by `MAX_RECORDS`, as those of one file are. `workers`:
    members read at once (default up to 4; 1 keeps memory to one member, as slim's check of its own output does).
    `meanwhile`: work for the calling thread while the members inflate (size-report imports its renderer there).

    The calling thread does its own work while the workers inflate, and nothing else runs Python then: a thread that
    imports beside it holds the GIL for whole switch intervals (5 ms) each time the caller makes a system call, which
    made the 235 directory reads of cumm-cu120's wheel take 47 ms where they take 2 ms alone.

    `taps`: what the caller takes from the members in the same pass (`Taps`): every member's size and SHA-256 (and
    the bytes of its RECORD), hashed as it inflates for the report, the other members inflated by the same workers
    in batches; the bytes of the members it keeps; what its `elf` takes from each ELF member: `check`'s RECORD
    verdict, Python sources and torch symbols without inflating anything a second time (`analysis.analyze`).
    """
    path = Path(path)
    t0 = time.perf_counter()
    with WheelArchive(path, limits) as archive:
        candidates = report_members(archive)
        # Inflating releases the GIL: big members overlap each other and the work below. Largest first keeps the
        # workers busy.
        workers = max(1, min(workers or 4, os.cpu_count() or 1, len(candidates)))
        # the hashers outlive the readers that hand them work: a refusal ends the readers first
        with ThreadPoolExecutor(max_workers=workers) as hasher, ThreadPoolExecutor(max_workers=workers) as pool:
            reading = _Reading(path, archive, taps, hasher)
            futures = [pool.submit(reading.elf, m) for m in candidates]
            chosen = {m.name for m in candidates}
            rest = [m for m in archive.members if m.name not in chosen and reading.hashed_apart(m)]
            hashes = [pool.submit(reading.batch, batch) for batch in _batches(rest)]
            try:
                # While the members inflate: the parsers (which the workers need first), the caller's own work, the
                # metadata, and the report's modules (imported by `_file_entries`).
                import slimwheel.inspect.elf  # noqa: F401

                if meanwhile is not None:
                    meanwhile()
                meta = reading.metadata()
                wheel_size = archive.size
                files = _file_entries(archive.members, wheel_size)
                log.info(
                    "%s: zip directory and metadata, %d files, %d ELF: %.2f s",
                    path.name,
                    len(files),
                    len(candidates),
                    time.perf_counter() - t0,
                )
                by_name: dict[str, ElfReport] = {}
                records = 0
                for future in futures:
                    r = future.result()
                    records = _counted(path, records, r)
                    by_name[r.name] = r
                for h in hashes:
                    h.result()
            finally:
                for future in futures:  # on a refusal, members not started yet are not read at all
                    future.cancel()
                for h in hashes:
                    h.cancel()
        elfs = tuple(by_name[m.name] for m in archive.members if m.name in by_name)
        log.info("%s: ELF and fatbin headers of %d files: %.2f s", path.name, len(elfs), time.perf_counter() - t0)
        duplicates = duplicate_groups(archive.members, reading.sha256, _sonames(elfs))
    return _assembled(path, meta, wheel_size, files, elfs, duplicates)


class _Reading:
    """The members of one wheel as `inspect_wheel` reads them, each inflated once: the ELF members for the report,
    and what `taps` asks beside it. Its methods run in the scan's workers (`elf`, `batch`) and in the calling
    thread (`metadata`); each member is one worker's, so the dictionaries are written once per name."""

    def __init__(self, path: Path, archive: WheelArchive, taps: Taps | None, hasher: ThreadPoolExecutor) -> None:
        self.path = path
        self.archive = archive
        self.taps = taps
        self.hasher = hasher
        # Members whose size and CRC-32 match another's: hashed even for size-report, to state byte-identical files
        # (`duplicates`); most wheels have none, so size-report hashes nothing.
        self.dup = twins(archive.members)
        self.sha256: dict[str, bytes] = {}
        self.keep = taps.keep(archive.members) if taps is not None else frozenset()
        # WHEEL and METADATA: hashed as the metadata is read from them (`metadata`)
        self.meta_members = {m.name for m in archive.members if _metadata_file(m.name)} if taps is not None else set()

    def _failed(self, e: BadInputError) -> BadInputError:
        prefix = f"{self.path}: "
        return e if e.message.startswith(prefix) else BadInputError(prefix + e.message, hint=e.hint)

    def hashed_apart(self, m: Member) -> bool:
        """`m` is hashed by `batch` (it is read for no report): every member for the taps, twins for size-report."""
        return m.name not in self.meta_members and (self.taps is not None or m.name in self.dup)

    def elf(self, m: Member) -> ElfReport:
        wanted = self.taps is not None or m.name in self.dup
        try:
            with self.archive.open(m) as data:
                # A big member is hashed by another thread while this one parses it (hashlib releases the GIL): on a
                # wheel of one big library (cuFFT, spconv, jax's PJRT) the second core is idle otherwise.
                hashing = self.hasher.submit(_sha256, data) if wanted and m.uncompressed >= _BATCH else None
                try:
                    parsed = _parsed(data, m.name)
                    if self.taps is not None and self.taps.elf is not None:
                        self.taps.elf(m.name, data, parsed)
                    if m.name in self.keep:
                        self._done(m, None, bytes(data))
                finally:  # the bytes stay valid until the hash is done, whatever the parse did
                    digest = hashing.result() if hashing is not None else _sha256(data) if wanted else None
                if digest is not None:
                    self._done(m, digest, None)
                return parsed
        except BadInputError as e:
            raise self._failed(e) from None

    def batch(self, members: list[Member]) -> None:
        try:
            for m in members:
                if m.uncompressed <= _BATCH:  # one call inflates it (`read`), with every check `stream` makes
                    self._read(m)
                else:
                    self._streamed(m)
        except BadInputError as e:
            raise self._failed(e) from None

    def metadata(self) -> WheelMeta:
        """The wheel's metadata, its files hashed as they are read (and those of another .dist-info folder)."""
        if self.taps is None:
            return self.archive.metadata()
        meta = self.archive.metadata(read=self._read)
        for m in self.archive.members:
            if m.name in self.meta_members and m.name not in self.sha256:
                self._read(m)
        return meta

    def _read(self, m: Member) -> bytes:
        data = self.archive.read(m)
        self._done(m, _sha256(data), data)
        return data

    def _streamed(self, m: Member) -> None:
        h = _hasher()
        held: list[bytes] = []
        hold = m.name.endswith(".dist-info/RECORD") or m.name in self.keep

        def sink(block: bytes) -> None:
            h.update(block)
            if hold:
                held.append(bytes(block))

        self.archive.stream(m, sink)
        self._done(m, h.digest(), b"".join(held) if hold else None)

    def _done(self, m: Member, digest: bytes | None, data: bytes | None) -> None:
        """What the pass keeps of member `m`: its hash (for RECORD and twins), its bytes if the taps keep them."""
        if data is not None and m.name in self.keep and self.taps is not None:
            self.taps.kept[m.name] = data
        if digest is None:
            return
        self.sha256[m.name] = digest
        if self.taps is not None:
            record = data if m.name.endswith(".dist-info/RECORD") else None
            self.taps.digests[m.name] = MemberDigest(size=m.uncompressed, sha256=digest, data=record)


def inspect_unpacked(path: Path, root: Path, names: list[str], *, archive: WheelArchive | None = None) -> WheelReport:
    """The report of wheel `path` from its files unpacked under `root` (`names`, as `wheelfile.unpack` gives them):
    the zip directory and metadata from the wheel, each ELF read from its unpacked file, mapped, one at a time. What
    slim and variants read their input through, so that the input is inflated once (by the unpack) and memory holds
    at most one file's scanned pages. `archive`: the wheel, open already (the one the files were unpacked from, by
    repair): its directory as read then, its metadata from the unpacked files, so the wheel is read once."""
    path = Path(path)
    if archive is not None:
        meta = archive.metadata(read=lambda m: (Path(root) / m.name).read_bytes())
        wheel_size = archive.size
        files = _file_entries(archive.members, wheel_size)
        members = archive.members
    else:
        with WheelArchive(path) as opened:
            meta = opened.metadata()
            wheel_size = opened.size
            files = _file_entries(opened.members, wheel_size)
            members = opened.members
    # byte-identical files, hashed from their unpacked copies: the few whose size and CRC-32 match another's
    sha256: dict[str, bytes] = {}
    for name in sorted(twins(members) & set(names)):
        try:
            with mapped_file(Path(root) / name, name) as data:
                sha256[name] = _sha256(data)
        except BadInputError as e:
            raise BadInputError(f"{path}: {e.message}", hint=e.hint) from None
    elfs: list[ElfReport] = []
    records = 0
    for name in names:
        try:
            with mapped_file(Path(root) / name, name) as data:
                if len(data) < 16 or data[:4] not in (ELF_MAGIC, FATBIN_MAGIC):
                    continue
                elf = _parsed(data, name)
        except BadInputError as e:
            raise BadInputError(f"{path}: {e.message}", hint=e.hint) from None
        records = _counted(path, records, elf)
        elfs.append(elf)
    return _assembled(path, meta, wheel_size, files, tuple(elfs), duplicate_groups(members, sha256, _sonames(elfs)))


def inspect_file(
    path: Path, limits: ZipLimits = DEFAULT_LIMITS, *, meanwhile: Callable[[], object] | None = None
) -> WheelReport:
    """A wheel, or a loose binary (shared library, object file, executable, .fatbin) reported as a wheel of one
    file: what size-report and check show for a wheel, for a build's output before it is packaged. `meanwhile`: as
    for `inspect_wheel` (called once in any case)."""
    path = Path(path)
    if path.suffix.lower() == ".whl":
        return inspect_wheel(path, limits, meanwhile=meanwhile)  # its errors say what is wrong with a wheel
    with mapped_file(path) as data:  # refuses folders, FIFOs and devices before reading a byte
        if data[:2] == b"PK":
            return inspect_wheel(path, limits, meanwhile=meanwhile)
        if meanwhile is not None:
            meanwhile()
        elf = dataclasses.replace(_parsed(data, str(path)), name=path.name)  # a BadInputError names the file
        size = len(data)
    # No tags: an x86_64 binary gets a platform tag, so that integrated aarch64 GPUs are left out as for a wheel.
    tags = ("py3-none-linux_x86_64",) if elf.machine == "EM_X86_64" else ()
    meta = WheelMeta(name=path.name, version="(binary)", tags=tags, requires_dist=(), dist_info="")
    from slimwheel.inspect.report import FileEntry

    files = (FileEntry(name=path.name, compressed=size, uncompressed=size, share=1.0),)
    return _assembled(path, meta, size, files, (elf,))


def inspect_binary(path: Path) -> ElfReport:
    """A loose shared library, object, executable or .fatbin file (regular files only; mapped, not read)."""
    path = Path(path)
    with mapped_file(path) as data:
        return _parsed(data, str(path))


def wheel_embedded_sources(path: Path) -> dict[str, tuple[EmbeddedSources, ...]]:
    """The records of every ELF member of a wheel that has some, by member name."""
    return {elf.name: elf.nvrtc for elf in inspect_wheel(Path(path)).elfs if elf.nvrtc}
