"""Reads a package index (PyPI by default) for `reqgraph`: which wheel pip would pick for a requirement, and what
that wheel installs and requires, without downloading it.

The project's listing comes from the simple API (PEP 691's JSON, or PEP 503's HTML that private indexes serve). The
wheel is read through one HTTP range request for its last 256 KiB, which holds the zip central directory (every
file's name) and, as wheels are written, the dist-info's METADATA; further ranges are asked only for a larger
directory or a METADATA stored earlier. Facts are cached per wheel file under the cache folder (`index/`), so a
second check of the same wheel reads nothing. PyPI's per-file metadata (PEP 658) would spare the range reads for
Requires-Dist, but not for the file list, and the mirror this was built on serves neither it nor the JSON API.

Hand-written rather than a dependency: `zipfile` does all the zip work over any seekable file and `urllib` the HTTP;
what is left is the seekable file over ranges (about 40 lines) and choosing the wheel by its tags (`packaging`).
"""

from __future__ import annotations

import html.parser
import io
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from slimwheel.fsutil import atomic_path, cache_dir
from slimwheel.inspect.wheel import requires_dist
from slimwheel.reqgraph import LookupFailed, WheelFacts, install_path

DEFAULT_INDEX = "https://pypi.org/simple/"
TAIL_BYTES = 256 * 1024  # asked first: the central directory and METADATA of most wheels
MAX_LISTING_BYTES = 32 * 2**20  # a project's listing (nvidia-cublas-cu12's is 60 kB)
MAX_WHEEL_READ = 32 * 2**20  # bytes read of one wheel, all ranges together
MAX_METADATA_BYTES = 4 * 2**20
TIMEOUT_S = 20.0
_JSON = "application/vnd.pypi.simple.v1+json"
_SCHEMA = 1


def index_url(env: Mapping[str, str] | None = None) -> str:
    """SLIMWHEEL_INDEX_URL, else PIP_INDEX_URL (the index pip installs from), else PyPI."""
    e = os.environ if env is None else env
    url = e.get("SLIMWHEEL_INDEX_URL") or e.get("PIP_INDEX_URL") or DEFAULT_INDEX
    return url if url.endswith("/") else url + "/"


class Unreachable(LookupFailed):
    """No answer at all (no network, a refused connection, a timeout): later lookups fail at once, rather than each
    waiting for its own timeout."""


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    requires_python: str
    yanked: bool


def _get(url: str, *, headers: Mapping[str, str] | None = None, limit: int) -> tuple[int, Mapping[str, str], bytes]:
    """(status, headers, body) of a GET, the body read up to `limit` bytes (more is an error, never read whole)."""
    req = urllib.request.Request(url, headers={"User-Agent": "slimwheel", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            body = r.read(limit + 1)
            if len(body) > limit:
                raise LookupFailed(f"{url}: answer over {limit} bytes")
            return r.status, r.headers, body
    except urllib.error.HTTPError as exc:
        raise LookupFailed(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"{url}: {reason}") from None


class _Links(html.parser.HTMLParser):
    """The file links of a PEP 503 page."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        a = dict(attrs)
        href = a.get("href") or ""
        url, _, frag = urllib.parse.urljoin(self.base, href).partition("#")
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        self.files.append(
            IndexFile(
                filename=name,
                url=url,
                sha256=frag.removeprefix("sha256=") if frag.startswith("sha256=") else "",
                requires_python=a.get("data-requires-python") or "",
                yanked="data-yanked" in a,
            )
        )


def parse_listing(body: bytes, content_type: str, page: str) -> list[IndexFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503)."""
    if content_type.split(";")[0].strip() == _JSON:
        try:
            data = json.loads(body)
            return [
                IndexFile(
                    filename=str(f["filename"]),
                    url=urllib.parse.urljoin(page, str(f["url"])),
                    sha256=str((f.get("hashes") or {}).get("sha256", "")),
                    requires_python=str(f.get("requires-python") or ""),
                    yanked=bool(f.get("yanked")),
                )
                for f in data["files"]
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LookupFailed(f"{page}: not a PEP 691 project page ({exc})") from None
    parser = _Links(page)
    parser.feed(body.decode("utf-8", "replace"))
    return parser.files


def choose(
    files: Sequence[IndexFile], req: Requirement, *, machines: Sequence[str], pythons: Sequence[str]
) -> IndexFile:
    """The wheel pip would install for `req` on Linux, the wheel's first machine and one of its Pythons: the newest
    version the specifier admits (pre-releases as pip admits them), not yanked, whose Requires-Python admits one of
    `pythons`; of its files, the highest build, then a tag of the first such Python (cp311) before abi3 and py3, then
    manylinux before musllinux. Sdists are not read (their libraries exist only once built)."""
    project = canonicalize_name(req.name)
    machine = machines[0] if machines else "x86_64"
    exact = [f"cp{p.replace('.', '')}" for p in pythons]
    parsed: list[tuple[Version, tuple[int, int, int], IndexFile]] = []  # version, (build, Python, platform), file
    for f in files:
        if f.yanked or not f.filename.endswith(".whl"):
            continue
        try:
            name, version, build, tags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, ValueError):
            continue
        if name != project:
            continue
        if f.requires_python:
            try:
                rp = SpecifierSet(f.requires_python)
            except InvalidSpecifier:
                rp = SpecifierSet()
            if not any(rp.contains(p, prereleases=True) for p in pythons):
                continue
        plats = {t.platform for t in tags}
        if "any" not in plats and not any(
            p.endswith(f"_{machine}") and p.startswith(("manylinux", "linux", "musllinux")) for p in plats
        ):
            continue
        interps = {t.interpreter for t in tags}
        if not any(i.startswith(("py3", "cp3", "py2")) for i in interps):
            continue
        python_rank = next((len(exact) - k for k, i in enumerate(exact) if i in interps), 0)
        plat_rank = 1 if any(p.startswith("musllinux") for p in plats) and "any" not in plats else 2
        parsed.append((version, (build[0] if build else 0, python_rank, plat_rank), f))
    if not parsed:
        raise LookupFailed(f"no wheel of {project} for Linux {machine} on the index")
    allowed = set(req.specifier.filter({v for v, _, _ in parsed}))
    best = [p for p in parsed if p[0] in allowed]
    if not best:
        raise LookupFailed(f"no wheel of {project} that '{req.specifier}' admits for Linux {machine} on the index")
    return max(best, key=lambda p: (p[0], p[1]))[2]


class RangeReader(io.RawIOBase):
    """A read-only seekable file over HTTP range requests, for `zipfile`; the last `TAIL_BYTES` come with the first
    request and are served from memory. At most `limit` bytes (default `MAX_WHEEL_READ`) are fetched in all; `fetched`
    says how many were. devtools/torch_libs.py reads torch's wheels with it too, with a bound of its own."""

    def __init__(self, url: str, *, limit: int | None = None) -> None:
        self.url, self.pos, self.fetched = url, 0, 0
        self.limit = MAX_WHEEL_READ if limit is None else limit
        status, headers, body = _get(url, headers={"Range": f"bytes=-{TAIL_BYTES}"}, limit=self.limit)
        if status == 206:
            m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", headers.get("Content-Range", "").strip())
            if m is None:
                raise LookupFailed(f"{url}: a range answer without Content-Range")
            self.size = int(m.group(3))
            self.tail_at = int(m.group(1))
        elif status == 200:  # the server ignores ranges: the whole file came (within the limit)
            self.size, self.tail_at = len(body), 0
        else:
            raise LookupFailed(f"{url}: HTTP {status}")
        self.tail = body
        self.fetched = len(body)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        if self.pos >= self.tail_at:
            data = self.tail[self.pos - self.tail_at : self.pos - self.tail_at + n]
        else:
            n = min(n, self.tail_at - self.pos)
            if self.fetched + n > self.limit:
                raise LookupFailed(f"{self.url}: more than {self.limit} bytes would be read")
            status, _h, data = _get(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + n - 1}"}, limit=n)
            if status != 206 or len(data) != n:
                raise LookupFailed(f"{self.url}: HTTP {status} to a range request")
            self.fetched += n
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


def read_wheel(url: str, filename: str) -> WheelFacts:
    """The facts of the wheel at `url`: its install paths and its Requires-Dist."""
    name, version, _build, _tags = parse_wheel_filename(filename)
    try:
        with zipfile.ZipFile(io.BufferedReader(RangeReader(url), buffer_size=64 * 1024)) as zf:
            names = zf.namelist()
            meta = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(meta) != 1:
                raise LookupFailed(f"{filename}: {len(meta)} dist-info METADATA files")
            info = zf.getinfo(meta[0])
            if info.file_size > MAX_METADATA_BYTES:
                raise LookupFailed(f"{filename}: METADATA of {info.file_size} bytes")
            with zf.open(info) as fh:
                text = fh.read(MAX_METADATA_BYTES + 1).decode("utf-8", "replace")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise LookupFailed(f"{filename}: not a readable wheel ({exc})") from None
    files = tuple(p for n in names if (p := install_path(n)) is not None)
    return WheelFacts(
        project=str(name), version=str(version), filename=filename, files=files, requires=requires_dist(text)
    )


class IndexLookup:
    """`reqgraph.Lookup` over an index: a requirement -> the facts of the wheel `choose` picks for the wheel being
    judged (`machines`, `pythons`: where it installs). Listings are kept for the process; wheel facts in
    `cache` (a folder) across runs, keyed by file name and hash."""

    def __init__(
        self,
        *,
        machines: Sequence[str],
        pythons: Sequence[str],
        index: str | None = None,
        cache: Path | None = None,
    ) -> None:
        self.index = index or index_url()
        self.machines, self.pythons = tuple(machines), tuple(pythons)
        self.cache = cache if cache is not None else cache_dir() / "index"
        self._listings: dict[str, list[IndexFile]] = {}
        self._down: Unreachable | None = None

    def listing(self, project: str) -> list[IndexFile]:
        if project not in self._listings:
            if not self.index.startswith(("https://", "http://")):
                raise LookupFailed(f"index {self.index} is not read over HTTP(S)")
            page = urllib.parse.urljoin(self.index, f"{project}/")
            _status, headers, body = _get(
                page, headers={"Accept": f"{_JSON}, text/html;q=0.1"}, limit=MAX_LISTING_BYTES
            )
            self._listings[project] = parse_listing(body, headers.get("Content-Type", ""), page)
        return self._listings[project]

    def __call__(self, req: Requirement) -> WheelFacts:
        if self._down is not None:
            raise LookupFailed(f"not asked, as the index did not answer before ({self._down})")
        try:
            return self._lookup(req)
        except Unreachable as exc:
            self._down = exc
            raise

    def _lookup(self, req: Requirement) -> WheelFacts:
        if req.url:
            raise LookupFailed(f"{req.name}: a direct reference ({req.url}) is not read")
        project = str(canonicalize_name(req.name))
        f = choose(self.listing(project), req, machines=self.machines, pythons=self.pythons)
        key = self.cache / f"{(f.sha256[:16] + '-') if f.sha256 else ''}{f.filename}.json"
        try:
            data = json.loads(key.read_text("utf-8"))
            if data.get("schema") == _SCHEMA:
                return WheelFacts(
                    project=project,
                    version=str(data["version"]),
                    filename=f.filename,
                    files=tuple(data["files"]),
                    requires=tuple(data["requires"]),
                )
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not cached (or a damaged entry): read again
        facts = read_wheel(f.url, f.filename)
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(key) as tmp:
                tmp.write_text(
                    json.dumps(
                        {
                            "schema": _SCHEMA,
                            "version": facts.version,
                            "files": list(facts.files),
                            "requires": list(facts.requires),
                        }
                    ),
                    encoding="utf-8",
                )
        except OSError:
            pass  # a cache that cannot be written only costs the next run a read
        return facts
