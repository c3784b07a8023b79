"""`slimwheel slim`: a wheel someone already built, with the device code that no requested GPU uses dropped.

Flow: inspect the input -> the compute capabilities to keep (check.required_ccs, the rule `check --require-arch`
uses, so integrated aarch64 GPUs leave an x86_64 request the same way) -> unpack a copy -> every ELF file's fatbin
containers compacted in place (fatbin_edit) -> new version -> packed with a fresh RECORD (repair.pack) -> inspected
and checked with the requested CCs required. The input wheel is only read.

Naming: the slimmed wheel gets a local version label (`1.2.0+slim.sm90`; `2.1+cu130.slim.sm90` when the version has
one already) rather than a build tag. A build tag would make pip prefer the slim wheel over the universal one of the
same version wherever both are found, and it is invisible in `pip list`; a local label says what the install is,
matches `==1.2.0` pins, and PyPI refuses to host it, so a slim wheel meant for one cluster cannot reach everyone.
The filename's version and METADATA's Version agree; the tags are unchanged.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from slimwheel import check as checkmod
from slimwheel import fsutil
from slimwheel.config import DEFAULT_BUDGET
from slimwheel.cuda.arch import CC, CCRequest, parse_cc_set
from slimwheel.errors import BadInputError
from slimwheel.fatbin_edit import Dropped, PtxMode, SlimRequest, slim_elf
from slimwheel.inspect.elf import is_elf
from slimwheel.inspect.fatbin import MAGIC_BYTES
from slimwheel.inspect.report import WheelReport, inspect_wheel
from slimwheel.inspect.wheel import WheelArchive
from slimwheel.wheelfile import pack, unpack, verify_record

log = logging.getLogger(__name__)
SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class FileSlim:
    """One ELF file of the wheel: its installed bytes (unchanged: freed bytes become zeros) and what it lost."""

    name: str
    size: int
    containers: int
    dropped: tuple[Dropped, ...]

    @property
    def dropped_bytes(self) -> int:
        return sum(d.bytes for d in self.dropped)

    def by_arch(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(kind, arch) -> (entries, bytes) dropped."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for d in self.dropped:
            n, b = out.get((d.kind, d.arch), (0, 0))
            out[(d.kind, d.arch)] = (n + 1, b + d.bytes)
        return out


@dataclass(frozen=True, kw_only=True)
class Rewritten:
    """A wheel written by `rewrite_wheel`: where, and what each ELF file lost."""

    wheel: Path
    version: str
    files: tuple[FileSlim, ...]


@dataclass(frozen=True, kw_only=True)
class SlimResult:
    source: Path
    request: SlimRequest
    left_out: tuple[CC, ...]  # integrated GPUs dropped from the request for an x86_64 wheel
    rewritten: Rewritten
    before: WheelReport
    after: WheelReport
    verdict: checkmod.Verdict


def parse_ptx(spec: str) -> tuple[PtxMode, tuple[CC, ...]]:
    """--ptx: "needed" (only PTX a requested GPU needs), "newest" (each module's newest PTX too), or CCs whose PTX
    to keep ("9.0", "8.0,12.0")."""
    s = spec.strip().lower()
    if s in ("needed", ""):
        return "needed", ()
    if s == "newest":
        return "newest", ()
    try:
        return "needed", parse_cc_set(s)
    except BadInputError as e:
        raise BadInputError(f"--ptx {spec!r}: {e.message}", hint="needed, newest, or compute capabilities") from None


def local_version(version: str, label: str) -> str:
    """`version` with `label` appended to its local part (PEP 440): 1.2.0 -> 1.2.0+LABEL, 2.1+cu130 -> 2.1+cu130.LABEL."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise BadInputError(f"version {version!r} is not a PEP 440 version") from None
    new = f"{version}.{label}" if v.local else f"{version}+{label}"
    try:
        Version(new)
    except InvalidVersion:
        raise BadInputError(f"local version label {label!r} is not valid (PEP 440: letters, digits, dots)") from None
    return new


def slim_label(ccs: tuple[CC, ...], ptx: PtxMode, ptx_ccs: tuple[CC, ...]) -> str:
    """slim.sm80.sm90 (+ .ptx for the newest PTX, .ptx90 for listed PTX)."""
    parts = ["slim", *(f"sm{cc.sm}" for cc in sorted(set(ccs)))]
    if ptx == "newest":
        parts.append("ptx")
    parts += [f"ptx{cc.sm}" for cc in sorted(set(ptx_ccs))]
    return ".".join(parts)


def _replace_version(metadata: str, new: str, *, where: str) -> str:
    head, sep, body = metadata.partition("\n\n")
    text, n = re.subn(r"(?m)^Version:[ \t]*.*$", f"Version: {new}", head, count=1)
    if n != 1:
        raise BadInputError(f"{where}: no Version field")
    return text + sep + body


def rewrite_wheel(
    wheel: Path,
    out_dir: Path,
    request: SlimRequest,
    *,
    version: str | None,
    variant: str | None = None,
    extra_files: Callable[[str], Mapping[str, bytes]] | None = None,
) -> Rewritten:
    """Write a copy of `wheel` into out_dir with every fatbin slimmed to `request`. `version`: the new version (a
    different one renames the .dist-info and .data folders and METADATA's Version), or None to keep it. `variant`: a
    wheel-variant label appended to the filename. `extra_files(dist_info)`: files to add, by path in the wheel."""
    wheel = Path(wheel)
    try:
        parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    with WheelArchive(wheel) as archive:
        meta = archive.metadata()
    stem = wheel.name.removesuffix(".whl")
    dist_prefix = meta.dist_info.removesuffix(".dist-info")  # name-version as the wheel spells it
    old_version = dist_prefix.split("-", 1)[1] if "-" in dist_prefix else meta.version
    new_version = version or old_version
    parts = stem.split("-")
    if parts[1] != old_version:
        raise BadInputError(
            f"{wheel}: the file name's version {parts[1]!r} differs from its .dist-info folder's {old_version!r}"
        )
    parts[1] = new_version
    if variant is not None:
        parts.append(variant)
    target = Path(out_dir) / ("-".join(parts) + ".whl")
    if target.resolve() == wheel.resolve():
        raise BadInputError(f"{wheel}: the output would overwrite the input wheel; choose another output folder")
    log.info("%s -> %s", wheel.name, target.name)
    files: list[FileSlim] = []
    with tempfile.TemporaryDirectory(prefix="slimwheel-slim-") as tmp_s:
        root = Path(tmp_s) / "w"
        names = unpack(wheel, root)
        for name in sorted(names):
            path = root / name
            with path.open("rb") as fh:
                head = fh.read(4)
            if not (is_elf(head) or head == MAGIC_BYTES):
                continue
            data = path.read_bytes()
            try:
                out = slim_elf(data, name, request)
            except BadInputError as e:
                raise BadInputError(f"{wheel}: {e.message}", hint=e.hint) from None
            if out.dropped:
                path.write_bytes(out.data)  # the unpacked copy, never the input
            if out.containers:
                files.append(FileSlim(name=name, size=len(data), containers=out.containers, dropped=out.dropped))
        dist_info = meta.dist_info
        if new_version != old_version:
            new_prefix = f"{dist_prefix.split('-', 1)[0]}-{new_version}"
            for suffix in (".dist-info", ".data"):
                if (root / f"{dist_prefix}{suffix}").is_dir():
                    (root / f"{dist_prefix}{suffix}").rename(root / f"{new_prefix}{suffix}")
            dist_info = f"{new_prefix}.dist-info"
            meta_path = root / dist_info / "METADATA"
            meta_path.write_text(
                _replace_version(meta_path.read_text(encoding="utf-8"), new_version, where=f"{wheel}: METADATA"),
                encoding="utf-8",
            )
        for rel, content in (extra_files(dist_info) if extra_files else {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(content)
        pack(root, dist_info, target)
    return Rewritten(wheel=target, version=new_version, files=tuple(files))


def slim(
    wheel: Path,
    out_dir: Path,
    *,
    archs: str,
    ptx: str = "needed",
    budget: str | int = DEFAULT_BUDGET,
    rewrite_record: bool = False,
) -> SlimResult:
    """Slim `wheel` into out_dir to the GPUs of `archs` (a coverage request: "9.0", "8.0-9.0", "8.0+"). An input whose
    RECORD does not match its files is refused as repair refuses it (`wheelfile.judge_record`)."""
    wheel = Path(wheel)
    verify_record(wheel, rewrite_record=rewrite_record)
    before = inspect_wheel(wheel)
    ccs, left_out = checkmod.required_ccs(archs, before)
    if not ccs:
        raise BadInputError(f"--archs {archs!r}: names no GPU to keep code for")
    mode, ptx_ccs = parse_ptx(ptx)
    request = SlimRequest(ccs=ccs, ptx=mode, ptx_ccs=ptx_ccs)
    if not before.fatbin_entries:
        raise BadInputError(f"{wheel}: no fatbin (CUDA device code) in any ELF file: nothing to slim")
    rewritten = rewrite_wheel(
        wheel, out_dir, request, version=local_version(before.version, slim_label(ccs, mode, ptx_ccs))
    )
    after = inspect_wheel(rewritten.wheel)
    policy = checkmod.make_policy(after, budget=budget, require_arch=CCRequest.of(ccs))
    verdict = checkmod.check_wheel(after, policy)
    return SlimResult(source=wheel, request=request, left_out=left_out, rewritten=rewritten, before=before,
                      after=after, verdict=verdict)  # fmt: skip


def sizes_json(before: WheelReport, after: WheelReport) -> dict[str, int]:
    return {
        "before_bytes": before.size,
        "after_bytes": after.size,
        "before_installed_bytes": before.installed_size,
        "after_installed_bytes": after.installed_size,
        "before_fatbin_bytes": sum(e.fatbin_bytes for e in before.elfs),
        "after_fatbin_bytes": sum(e.fatbin_bytes for e in after.elfs),
    }


def files_json(files: tuple[FileSlim, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "bytes": f.size,
            "fatbins": f.containers,
            "dropped_bytes": f.dropped_bytes,
            "dropped": [
                {"kind": kind, "arch": arch, "entries": n, "bytes": b}
                for (kind, arch), (n, b) in sorted(f.by_arch().items(), key=lambda kv: -kv[1][1])
            ],
        }
        for f in files
    ]


def result_to_json(r: SlimResult) -> dict[str, Any]:
    """Versioned ("schema": 1); sizes in bytes."""
    return {
        "schema": SCHEMA,
        "input": str(r.source),
        "wheel": str(r.rewritten.wheel),
        "version": r.rewritten.version,
        "keep": {
            "ccs": [str(cc) for cc in r.request.ccs],
            "ptx": r.request.ptx,
            "ptx_ccs": [str(cc) for cc in r.request.ptx_ccs],
            "left_out": [str(cc) for cc in r.left_out],
        },
        "targets_before": [str(t) for t in r.before.targets],
        "targets_after": [str(t) for t in r.after.targets],
        "sizes": sizes_json(r.before, r.after),
        "files": files_json(r.rewritten.files),
        "check": checkmod.verdict_to_json(r.verdict),
    }


def copy_unchanged(wheel: Path, out_dir: Path) -> Path:
    """The input wheel, byte for byte, into out_dir (written atomically); returns its new path."""
    target = Path(out_dir) / Path(wheel).name
    if target.resolve() == Path(wheel).resolve():
        return target
    with fsutil.atomic_path(target) as tmp:
        shutil.copyfile(wheel, tmp)
    return target
