"""Wheel files: unpack, pack (RECORD with hashes, deterministic zip), RECORD verification, and the Requires-Dist
lines of METADATA.

Kept here rather than taken from `wheel.wheelfile.WheelFile`: that class writes RECORD itself but neither sorts the
entries nor honours a fixed date when SOURCE_DATE_EPOCH is unset, and it reads members without the bounds
`slimwheel.inspect.zipread` puts on untrusted archives. Reading goes through `zipread`; `twine check` and pip read what
`pack` writes (tests/integration/test_repair_wheels.py).

Environment, as auditwheel honours it: SOURCE_DATE_EPOCH (member dates, default 1980-01-01) and
AUDITWHEEL_ZIP_COMPRESSION_LEVEL (deflate level 0-9, default zlib's 6).
"""

from __future__ import annotations

import base64
import csv
import enum
import hashlib
import io
import logging
import os
import stat
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from slimwheel import fsutil
from slimwheel.errors import BadInputError, BadRecordError
from slimwheel.inspect.scan import MemberDigest
from slimwheel.inspect.zipread import Member, ZipReader, extract, ratio_problem

log = logging.getLogger("slimwheel.wheelfile")


def record_line(name: str, data: bytes) -> list[str]:
    return [name, f"sha256={_b64digest(hashlib.sha256(data).digest())}", str(len(data))]


def _b64digest(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def dist_info_of(names: Sequence[str], wheel: Path) -> str:
    tops = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1:
        raise BadInputError(f"{wheel}: expected one .dist-info folder, found {tops or 'none'}")
    return tops[0]


def unpack(wheel: Path, dest: Path) -> list[str]:
    """Extract a wheel through the bounded reader (`inspect.zipread`: unsafe, duplicate or clashing names, special
    members, lying sizes and corrupt data are refused, exit 3). Returns the file names."""
    return extract(wheel, dest)


def unpack_digested(
    wheel: Path, dest: Path, *, reader: ZipReader | None = None
) -> tuple[list[str], dict[str, MemberDigest]]:
    """`unpack`, each member hashed while it inflates: RECORD is verified (`record_problems`) without reading the
    files a second time. `reader`: the wheel already open (repair reads its directory once)."""
    hashes: dict[str, tuple[int, Any]] = {}

    def tee(m: Member) -> Callable[[bytes], object]:
        h = hashlib.sha256()
        hashes[m.name] = (m.uncompressed, h)  # the reader holds each member to its declared size
        return h.update

    names = extract(wheel, dest, tee=tee, reader=reader)
    return names, {n: MemberDigest(size=size, sha256=h.digest()) for n, (size, h) in hashes.items()}


def zip_time() -> tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        t = time.gmtime(max(int(epoch), 315532800))
        return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
    return (1980, 1, 1, 0, 0, 0)


def compression_level() -> int | None:
    value = os.environ.get("AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "").strip()
    if not value:
        return None
    if not value.isdigit() or not 0 <= int(value) <= 9:
        raise BadInputError(f"AUDITWHEEL_ZIP_COMPRESSION_LEVEL={value!r}: expected a number from 0 to 9")
    return int(value)


# A file's bytes as a stream: called with a sink, feeds it the bytes in order (at most a few MiB at once).
Source = Callable[[Callable[[bytes], object]], None]
_BLOCK = 1 << 22


def file_source(path: Path) -> Source:
    def feed(sink: Callable[[bytes], object]) -> None:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(_BLOCK), b""):
                sink(block)

    return feed


def _bytes_source(content: bytes) -> Source:
    def feed(sink: Callable[[bytes], object]) -> None:
        sink(content)

    return feed


def pack(root: Path, dist_info: str, target: Path, *, verify: Callable[[Path], None] | None = None) -> None:
    """Write root as a wheel (`pack_to`), atomically: a temp file beside target, renamed. `verify(written)` judges the
    complete temporary file before it takes target's name; if it raises, nothing is left under either name."""
    with fsutil.atomic_path(target) as tmp:
        pack_to(root, dist_info, tmp, label=target)
        if verify is not None:
            verify(tmp)


def pack_to(
    root: Path,
    dist_info: str,
    out: Path,
    *,
    sources: Mapping[str, Source] | None = None,
    extra: Mapping[str, bytes] | None = None,
    omit: frozenset[str] = frozenset(),
    label: Path | None = None,
) -> None:
    """Write root as a wheel to `out`: RECORD rewritten with hashes, entries sorted, dist-info last, fixed
    timestamps. Each member streams through the zip (hashed and deflated in blocks: memory holds a block, never a
    file); `sources` gives the bytes of some members instead of their file under root (slim's edited libraries,
    of the same length); `extra`: members that are not files under root (a variant's variant.json); `omit`: files
    under root left out of the wheel and its RECORD (slim's cubins for none of the requested GPUs). Every member is
    held to the reader's inflate rule (`zipread.ratio_problem`): slimwheel never writes a wheel that it would refuse
    to read."""
    extra = dict(extra or {})
    on_disk = {rel: entry.stat() for rel, entry in fsutil.files_under(root)}  # one stat per file, from the walk
    record_name = f"{dist_info}/RECORD"
    files = sorted((set(on_disk) | set(extra)) - {record_name} - omit, key=lambda f: (f.startswith(dist_info + "/"), f))
    date = zip_time()
    level = compression_level()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    sources = dict(sources or {})
    for name, content in extra.items():
        sources[name] = _bytes_source(content)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        for name in files:
            path = root / name
            st = None if name in extra else on_disk[name]
            executable = st is not None and st.st_mode & stat.S_IXUSR
            zi = zipfile.ZipInfo(name, date_time=date)
            zi.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.file_size = len(extra[name]) if st is None else st.st_size  # known up front: zipfile picks zip64 from it
            _set_level(zi, level)
            h = hashlib.sha256()
            counts = [0, 0]  # bytes, non-zero bytes
            with zf.open(zi, "w") as member:

                def sink(block: bytes, member: IO[bytes] = member, h: Any = h, counts: list[int] = counts) -> None:
                    h.update(block)
                    counts[0] += len(block)
                    counts[1] += len(block) - block.count(0)
                    member.write(block)

                (sources.get(name) or file_source(path))(sink)
            problem = ratio_problem(counts[0], counts[1], zi.compress_size)
            if problem is not None:
                raise BadInputError(f"{label or out}: member {name!r} {problem}; slimwheel would refuse to read it")
            writer.writerow([name, f"sha256={_b64digest(h.digest())}", str(counts[0])])
        writer.writerow([record_name, "", ""])
        zi = zipfile.ZipInfo(record_name, date_time=date)
        zi.external_attr = (0o644 | stat.S_IFREG) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(zi, buf.getvalue(), compresslevel=level)


def _set_level(zi: zipfile.ZipInfo, level: int | None) -> None:
    """The deflate level of a member written through ZipFile.open, which takes it from the ZipInfo alone (its
    attribute is `compress_level` from Python 3.13, `_compresslevel` before)."""
    if level is None:
        return
    if hasattr(zi, "compress_level"):
        zi.compress_level = level
    else:
        zi._compresslevel = level  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------------------ RECORD


class RecordFault(enum.Enum):
    """What a RECORD problem says of the wheel: its files differ from what RECORD lists (changed after the build, or
    written by a broken tool: the commands that rewrite a wheel refuse it), or RECORD's text is malformed while what it
    says of every file is true (rewritten without asking)."""

    MISMATCH = "mismatch"
    MALFORMED = "malformed"


@dataclass(frozen=True, kw_only=True)
class RecordProblem:
    message: str
    fault: RecordFault = RecordFault.MISMATCH

    def __str__(self) -> str:
        return self.message


def record_problems(record_text: str, members: Mapping[str, MemberDigest], *, record_name: str) -> list[RecordProblem]:
    """What is wrong with a RECORD against the members it describes: a member it does not list, an entry with no
    member (ghost), a wrong size or hash, an unparsable line. RECORD itself (and signatures beside it) carry no hash."""
    problems: list[RecordProblem] = []
    listed: dict[str, tuple[str, str]] = {}
    try:
        rows = list(csv.reader(io.StringIO(record_text)))
    except csv.Error as e:
        return [RecordProblem(message=f"{record_name}: not CSV: {e}")]
    for i, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != 3:
            problems.append(
                RecordProblem(message=f"{record_name} line {i}: expected path,hash,size, got {len(row)} fields")
            )
            continue
        if row[0] in listed:
            problems.append(RecordProblem(message=f"{record_name} line {i}: {row[0]} is listed twice"))
        listed[row[0]] = (row[1], row[2])
    unsigned = {record_name, record_name + ".jws", record_name + ".p7s"}
    for name, digest in sorted(members.items()):
        if name not in listed:
            if name not in unsigned:
                problems.append(RecordProblem(message=f"{name} is in the wheel but not in {record_name}"))
            continue
        hash_text, size_text = listed[name]
        if name in unsigned and not hash_text:
            continue
        algo, eq, value = hash_text.partition("=")
        actual = _b64digest(digest.sha256)
        if not eq and hash_text == actual:
            # mlx-cuda 0.30.0's libmlx.so: the digest is right, its "sha256=" is missing. pip 26.3 installs the
            # wheel; wheel 0.48's `wheel unpack` stops at the line (ValueError).
            problems.append(
                RecordProblem(
                    message=f"{record_name}: {name}'s hash has no algorithm ('{hash_text[:12]}...', where RECORD "
                    "writes 'sha256=<digest>'); the digest is the file's SHA-256, so the file is as built: pip "
                    "installs the wheel, tools that read RECORD's hashes (`wheel unpack`) stop at that line",
                    fault=RecordFault.MALFORMED,
                )
            )
        elif algo != "sha256" or not eq:
            problems.append(RecordProblem(message=f"{record_name}: {name} has no sha256 hash ({hash_text or 'empty'})"))
        elif value != actual:
            problems.append(
                RecordProblem(message=f"{record_name}: {name} has the wrong hash (RECORD {value}, file {actual})")
            )
        if size_text != str(digest.size):
            problems.append(
                RecordProblem(
                    message=f"{record_name}: {name} has the wrong size (RECORD {size_text or 'empty'}, file "
                    f"{digest.size})"
                )
            )
    for name in sorted(set(listed) - set(members)):
        problems.append(RecordProblem(message=f"{record_name} lists {name}, which is not in the wheel"))
    return problems


def archive_record_problems(wheel: Path) -> list[RecordProblem]:
    """`record_problems` of a wheel file, its members hashed as they stream out of the zip (`inspect.zipread`:
    bounded memory, sizes held to what each member declares). `check` hashes them while it reads the wheel for its
    report instead (`inspect.scan.inspect_wheel(taps=...)`, then `record_problems_of`)."""
    with ZipReader(wheel) as z:
        digests: dict[str, MemberDigest] = {}
        for m in z.members:
            h = hashlib.sha256()
            if m.name.endswith(".dist-info/RECORD"):
                data = z.read(m)
                h.update(data)
                digests[m.name] = MemberDigest(size=m.uncompressed, sha256=h.digest(), data=data)
                continue
            z.stream(m, h.update)
            digests[m.name] = MemberDigest(size=m.uncompressed, sha256=h.digest())
    return record_problems_of(wheel, digests)


def record_problems_of(wheel: Path, digests: Mapping[str, MemberDigest]) -> list[RecordProblem]:
    """`record_problems` from every member's digest, the RECORD's bytes among them (`MemberDigest.data`)."""
    dist_info = dist_info_of(list(digests), wheel)
    record_name = f"{dist_info}/RECORD"
    got = digests.get(record_name)
    if got is None or got.data is None:
        return [RecordProblem(message=f"{record_name} is missing")]
    try:
        record = got.data.decode("utf-8")
    except UnicodeDecodeError:
        return [RecordProblem(message=f"{record_name} is not UTF-8 text")]
    return record_problems(record, digests, record_name=record_name)


def judge_record(wheel: Path, problems: Sequence[RecordProblem], *, rewrite_record: bool) -> tuple[str, ...]:
    """THE rule of the commands that write a wheel from another (repair, slim, variants): an input whose RECORD does
    not match its files was changed after it was built and is refused with exit 14 (what check fails it with), unless
    `rewrite_record` (--rewrite-record): then each problem is a warning and the output gets a correct RECORD. A
    malformed RECORD that is true of every file (`RecordFault.MALFORMED`) is a warning either way. Returns what was
    wrong (the output's RECORD is new)."""
    mismatched = [p.message for p in problems if p.fault is RecordFault.MISMATCH]
    if mismatched and not rewrite_record:
        raise BadRecordError(
            f"{wheel}: RECORD does not match the wheel's files ({len(mismatched)} problem(s)): "
            + "; ".join(mismatched[:5])
            + ("; ..." if len(mismatched) > 5 else ""),
            hint="a wheel whose files changed after it was built; if you changed them on purpose, pass "
            "--rewrite-record",
        )
    for p in problems:
        why = "--rewrite-record" if p.fault is RecordFault.MISMATCH else "the output's RECORD is written anew"
        log.warning("%s: %s (RECORD rewritten, %s)", wheel.name, p.message, why)
    return tuple(p.message for p in problems)


def digest_tree(root: Path) -> dict[str, MemberDigest]:
    """Size and SHA-256 of every file under root, by posix path, read in blocks (`fsutil.files_under`: linear)."""
    out = {}
    for rel, entry in fsutil.files_under(root):
        h = hashlib.sha256()
        size = 0
        with open(entry.path, "rb") as fh:
            for block in iter(lambda: fh.read(_BLOCK), b""):
                h.update(block)
                size += len(block)
        out[rel] = MemberDigest(size=size, sha256=h.digest())
    return out


# ------------------------------------------------------------------------------------------------ METADATA requirements


def without_platforms(wheel_name: str, wheel_text: str, platforms: Iterable[str]) -> tuple[str, str]:
    """(file name, WHEEL text) of a wheel with the platform tags `platforms` dropped: from the name's compressed tag
    set (`pkg-1.0-py3-none-manylinux1_x86_64.manylinux_2_34_x86_64.whl`) and from WHEEL's `Tag:` lines. A tag the
    wheel would be left without is kept (the name stays valid; the caller drops only tags it has replaced)."""
    drop = set(platforms)
    stem, sep, ext = wheel_name.rpartition(".")
    head, py, abi, plat = stem.rsplit("-", 3)
    kept = [p for p in plat.split(".") if p not in drop]
    if not kept:
        return wheel_name, wheel_text
    lines = [
        line
        for line in wheel_text.splitlines(keepends=True)
        if not (line.startswith("Tag:") and line.split(":", 1)[1].strip().rsplit("-", 1)[-1] in drop)
    ]
    return f"{head}-{py}-{abi}-{'.'.join(kept)}{sep}{ext}", "".join(lines)


def add_requires_dist(
    metadata: str, reqs: Mapping[str, str], *, path: str
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """METADATA with Requires-Dist lines for reqs; a package the wheel already requires (unconditionally) keeps the
    maintainer's own requirement. Returns (text, the requirement strings added, the wheel's own requirements kept in
    their place), so that what is reported is what was written."""
    head, sep, body = metadata.partition("\n\n")
    if not sep:
        head, body = metadata.rstrip("\n"), ""
    existing: dict[str, str] = {}
    for line in head.splitlines():
        if line.lower().startswith("requires-dist:"):
            value = line.split(":", 1)[1].strip()
            try:
                r = Requirement(value)
            except InvalidRequirement as e:
                raise BadInputError(f"{path}: invalid Requires-Dist {value!r}: {e}") from None
            if r.marker is None or "extra" not in str(r.marker):
                existing.setdefault(str(canonicalize_name(r.name)), value)
    added, kept = [], []
    for pkg, req in reqs.items():
        if (own := existing.get(str(canonicalize_name(pkg)))) is not None:
            log.info("%s already requires %s; keeping its own requirement", path, pkg)
            kept.append(own)
            continue
        added.append(req)
    lines = head.rstrip("\n") + "".join(f"\nRequires-Dist: {r}" for r in added)
    return lines + "\n\n" + body, tuple(added), tuple(dict.fromkeys(kept))


def merge_requires_dist(metadata: str, reqs: Sequence[str], *, path: str) -> tuple[str, tuple[str, ...]]:
    """METADATA with each requirement merged in; returns (text, the resulting requirement of each project).

    The rule: one unconditional Requires-Dist line per project. If the wheel already has one for that project, the
    result is the intersection: its own specifiers (kept as written when they already contain every clause asked for,
    e.g. `scipy-openblas32>=0.3.28,<0.4` stays as is for `scipy-openblas32`), plus the clauses asked for that it lacks.
    Both statements come from the maintainer (the build's metadata and the repair's flags), and a version that
    violates either would break the wheel, so neither may be dropped; which one is "stricter" cannot be decided for
    specifier sets in general, the intersection is. Lines with a marker (extras, platforms) are left alone and do not
    count: the library is needed wherever the wheel installs. Two requirements on one project merge the same way."""
    wanted: dict[str, Requirement] = {}
    for text in reqs:
        r = Requirement(text)
        key = str(canonicalize_name(r.name))
        wanted[key] = _intersect(wanted[key], r) if key in wanted else r
    head, sep, body = metadata.partition("\n\n")
    if not sep:
        head, body = metadata.rstrip("\n"), ""
    lines = head.rstrip("\n").split("\n")
    result: dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line.lower().startswith("requires-dist:"):
            continue
        value = line.split(":", 1)[1].strip()
        try:
            r = Requirement(value)
        except InvalidRequirement as e:
            raise BadInputError(f"{path}: invalid Requires-Dist {value!r}: {e}") from None
        key = str(canonicalize_name(r.name))
        if key not in wanted or r.marker is not None or r.url or key in result:
            continue
        merged = _intersect(r, wanted[key])
        if merged is r:
            log.info("%s already requires %s; keeping it", path, value)
        else:
            log.info("%s: Requires-Dist %s becomes %s (both bounds kept)", path, value, merged)
            lines[i] = f"Requires-Dist: {merged}"
        result[key] = str(merged)
    for key, r in wanted.items():
        if key not in result:
            lines.append(f"Requires-Dist: {r}")
            result[key] = str(r)
    return "\n".join(lines) + "\n\n" + body, tuple(result[k] for k in wanted)


def _intersect(have: Requirement, want: Requirement) -> Requirement:
    """have, itself when it already holds every specifier clause and extra of want; else both combined."""
    new_clauses = [s for s in want.specifier if s not in set(have.specifier)]
    # An exact pin that every new clause admits already says all of it: torchvision's `torch==2.11.0` with the
    # `torch==2.11.*` its C++ API asks for stays `torch==2.11.0`, not `torch==2.11.*,==2.11.0`.
    pins = [Version(s.version) for s in have.specifier if s.operator == "==" and "*" not in s.version]
    if any(all(s.contains(p, prereleases=True) for s in new_clauses) for p in pins):
        new_clauses = []
    if not new_clauses and want.extras <= have.extras:
        return have
    extras = sorted(have.extras | want.extras)
    spec = have.specifier & SpecifierSet(",".join(str(s) for s in new_clauses))
    return Requirement(f"{have.name}{'[' + ','.join(extras) + ']' if extras else ''}{spec}")


def parse_requirements(requires: Iterable[str]) -> tuple[list[Requirement], list[str]]:
    """Requires-Dist lines parsed (packaging), and the ones that do not parse."""
    out, bad = [], []
    for r in requires:
        try:
            out.append(Requirement(r))
        except InvalidRequirement:
            bad.append(r)
    return out, bad
