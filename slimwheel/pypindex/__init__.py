"""Reads a package index (PyPI by default) for `reqgraph`: which wheel pip would pick for a requirement, and what
that wheel installs and requires, without downloading it.

The project's listing comes from the simple API (PEP 691's JSON, or PEP 503's HTML that private indexes serve). The
wheel is read through one HTTP range request for its last 256 KiB, which holds the zip central directory (every
file's name) and, as wheels are written, the dist-info's METADATA; further ranges are asked only for a larger
directory or a METADATA stored earlier. Facts are cached per wheel file under the cache folder (`index/`), so a
second check of the same wheel reads nothing. PyPI's per-file metadata (PEP 658) would spare the range reads for
Requires-Dist, but not for the file list, and the mirror this was built on serves neither it nor the JSON API.

The index is as untrusted as a wheel (docs/security.md): every request has a deadline from its first byte to its
last, and so has the run; every answer and the run's answers together have byte limits (`IndexLimits`); only HTTP(S)
is spoken, redirects stay on the host asked unless `SLIMWHEEL_INDEX_REDIRECT_HOSTS` names another; the indexes are
pip's own (`index_config`), so names of private projects go where pip would send them. Whatever an index answers
ends in facts or a `LookupFailed` whose `why` says which kind of "unknown" it is.

Hand-written rather than a dependency: `zipfile` does all the zip work over any seekable file and `urllib` the HTTP;
what is left is the seekable file over ranges and choosing the wheel by its tags (`packaging`).

The parts: `client` (HTTP with deadlines and byte limits), `pipconf` (pip's configuration: which indexes),
`listing` (project pages and the wheel `choose` picks), `ranges` (the wheel through range requests, `wheel_facts`),
`cache` (wheel facts kept across runs); the lookup itself, `IndexLookup`, is here.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.fsutil import cache_dir
from slimwheel.pypindex.cache import Cache
from slimwheel.pypindex.client import DEFAULT_LIMITS, Client, IndexLimits, Unreachable, cut
from slimwheel.pypindex.listing import JSON_TYPE, Chooser, HtmlFiles, IndexFile, choose, json_files, parse_listing
from slimwheel.pypindex.pipconf import DEFAULT_INDEX, IndexConfig, index_config, is_http, pip_config_files, slash
from slimwheel.pypindex.ranges import TAIL_BYTES, RangeReader, wheel_facts
from slimwheel.reqgraph import LookupFailed, WheelFacts, Why

__all__ = [
    "DEFAULT_INDEX",
    "DEFAULT_LIMITS",
    "TAIL_BYTES",
    "IndexConfig",
    "IndexFile",
    "IndexLimits",
    "IndexLookup",
    "RangeReader",
    "Unreachable",
    "choose",
    "index_config",
    "parse_listing",
    "pip_config_files",
    "wheel_facts",
]


class IndexLookup:
    """`reqgraph.Lookup` over the indexes `index_config` names: a requirement -> the facts of the wheel `choose`
    picks for the wheel being judged (`machines`, `pythons`: where it installs), or a LookupFailed saying why not.
    Listings are read streaming and dropped once the wheel is chosen; wheel facts are kept in `cache` (a folder)
    across runs. One instance is one run: its `limits` bound the time and bytes of all its requests together."""

    def __init__(
        self,
        *,
        machines: Sequence[str],
        pythons: Sequence[str],
        index: str | None = None,
        cache: Path | None = None,
        config: IndexConfig | None = None,
        limits: IndexLimits | None = None,
    ) -> None:
        if config is None:
            config = index_config() if index is None else IndexConfig(urls=(slash(index),), source="the caller")
        self.config = config
        self.machines, self.pythons = tuple(machines), tuple(pythons)
        self.limits = limits = DEFAULT_LIMITS if limits is None else limits
        self._client = Client(limits, config.redirect_hosts)
        self._cache = Cache(cache if cache is not None else cache_dir() / "index", limits)
        self._down: Unreachable | None = None

    @property
    def cache_refused(self) -> str:
        """Why the cache folder was not used ("" if it was): a folder others can write, or a link."""
        return self._cache.refused

    def _read_listing(self, index: str, project: str, chooser: Chooser) -> bool:
        """Feeds the files of `project` on `index` to `chooser`; False when the index has no such project."""
        try:
            page = urllib.parse.urljoin(index, f"{project}/")
            urllib.parse.urlsplit(page).port  # noqa: B018  (raises on a port that is not a number)
        except ValueError as exc:
            raise LookupFailed(f"index {cut(index)} is not a usable URL ({exc})", why=Why.REFUSED) from None
        if not is_http(index):
            raise LookupFailed(f"index {cut(index)} is not read over HTTP(S)", why=Why.REFUSED)
        chooser.page = page
        try:
            with self._client.get(page, {"Accept": f"{JSON_TYPE}, text/html;q=0.1"}) as r:
                limit = self.limits.listing_bytes
                if r.headers.get("Content-Type", "").split(";")[0].strip().lower() == JSON_TYPE:
                    json_files(r.body(limit), page, chooser.add)
                else:
                    links = HtmlFiles(page, chooser.add)
                    for chunk in r.chunks(limit):
                        links.feed(chunk)
                    links.feed(b"", final=True)
        except LookupFailed as exc:
            if exc.why is Why.NOT_FOUND:
                return False
            raise
        return True

    def __call__(self, req: Requirement) -> WheelFacts:
        if self._down is not None:
            raise LookupFailed(f"not asked, as the index did not answer before ({self._down})", why=Why.UNREACHABLE)
        try:
            return self._lookup(req)
        except Unreachable as exc:
            self._down = exc
            raise

    def _lookup(self, req: Requirement) -> WheelFacts:
        if self.config.problem:
            raise LookupFailed(self.config.problem, why=Why.REFUSED)
        if req.url:
            raise LookupFailed(f"{req.name}: a direct reference ({cut(req.url)}) is not read", why=Why.REFUSED)
        project = str(canonicalize_name(req.name))
        chooser = Chooser(req=req, machines=self.machines, pythons=self.pythons)
        # pip merges the listings of all its indexes: so does this, and an index that fails leaves pip's choice
        # unknown (a newer version may be there), while one that has no such project (404) says so
        if not any([self._read_listing(index, project, chooser) for index in self.config.urls]):
            raise LookupFailed(
                f"{project}: no such project on {', '.join(map(cut, self.config.urls))} ({self.config.source})",
                why=Why.NOT_FOUND,
            )
        f = chooser.result()
        if not f.url:
            raise LookupFailed(f"{f.filename}: the index links it by no usable URL", why=Why.BAD_ANSWER)
        if urllib.parse.urlsplit(f.url).scheme.lower() not in ("http", "https"):
            raise LookupFailed(
                f"{f.filename}: the index links it as {cut(f.url)}; only HTTP(S) is read", why=Why.REFUSED
            )
        key = Cache.key(f) if f.sha256 else ""
        if key and (cached := self._cache.load(key, f.filename)) is not None:
            return cached
        facts = wheel_facts(RangeReader(f.url, client=self._client), f.filename, self.limits)
        if key:  # without the index's SHA-256 the same name may be other bytes next time: not kept
            self._cache.store(key, facts)
        return facts
