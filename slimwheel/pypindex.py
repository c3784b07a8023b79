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
"""

from __future__ import annotations

import codecs
import configparser
import contextlib
import dataclasses
import hashlib
import html
import http.client
import io
import json
import lzma
import os
import re
import secrets
import socket
import stat
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import IO

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from slimwheel.envvars import parse_bool
from slimwheel.errors import BadInputError
from slimwheel.fsutil import UnsafeFolder, cache_dir, open_private_folder
from slimwheel.inspect.wheel import requires_dist
from slimwheel.reqgraph import LookupFailed, WheelFacts, Why, install_path, is_library

DEFAULT_INDEX = "https://pypi.org/simple/"
TAIL_BYTES = 256 * 1024  # asked first: the central directory and METADATA of most wheels
_JSON = "application/vnd.pypi.simple.v1+json"
_SCHEMA = 2
_KiB, _MiB = 1024, 2**20


@dataclass(frozen=True, kw_only=True)
class IndexLimits:
    """What reading the index may cost one run (one `IndexLookup`). Far above what PyPI needs (nvidia-cublas-cu12's
    listing is 60 kB; vllm's 61 projects are read in seconds), far below what hurts a CI runner."""

    read_s: float = 20.0  # one read that receives nothing
    request_s: float = 60.0  # one request, from connecting to its last byte (a server trickling bytes included)
    run_s: float = 300.0  # every request of the run, together
    listing_bytes: int = 32 * _MiB  # one project page
    wheel_bytes: int = 32 * _MiB  # one wheel, all its range requests together
    directory_bytes: int = 8 * _MiB  # one wheel's zip central directory (about 170,000 names of 46+ bytes)
    metadata_bytes: int = 4 * _MiB  # one wheel's METADATA
    run_bytes: int = 256 * _MiB  # every answer of the run, together
    redirects: int = 5  # redirects followed for one request
    cache_entry_bytes: int = 16 * _MiB  # one cache entry read back


DEFAULT_LIMITS = IndexLimits()


# --- where to look: pip's own configuration ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """The indexes a lookup reads, as pip would install from them: `urls`, the index first and pip's extra indexes
    after it (pip merges their listings, and so does `IndexLookup`); `source` says where they were set (for
    messages); `redirect_hosts`: hosts a redirect may lead to besides the one asked; `problem`: why no index may be
    read (pip configured with `no-index`, an unreadable pip configuration, no HTTP(S) index): then every lookup fails
    with it. `skipped`: pip's indexes that are not HTTP(S) (`file:` mirrors), which are not read: a project is then
    judged from the HTTP(S) indexes alone."""

    urls: tuple[str, ...]
    source: str
    redirect_hosts: frozenset[str] = frozenset()
    problem: str = ""
    skipped: tuple[str, ...] = ()  # pip's indexes that are not HTTP(S) (a file: mirror): not read


def pip_config_files(env: Mapping[str, str], *, prefix: str | None = None, home: str | None = None) -> list[Path]:
    """pip's configuration files on Linux, lowest precedence first, as pip (`configuration.py`) loads them: the
    global ones (`$XDG_CONFIG_DIRS/pip/pip.conf`, default /etc/xdg, then /etc/pip.conf), the user's (`~/.pip/pip.conf`,
    then `$XDG_CONFIG_HOME/pip/pip.conf`; skipped when PIP_CONFIG_FILE names a file that exists), the environment's
    (`<prefix>/pip.conf`), then PIP_CONFIG_FILE. PIP_CONFIG_FILE=/dev/null: none at all."""
    own = env.get("PIP_CONFIG_FILE") or ""
    if own == os.devnull:
        return []
    home = home if home is not None else env.get("HOME") or os.path.expanduser("~")
    dirs = [d for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    files = [Path(d, "pip", "pip.conf") for d in dirs] + [Path("/etc/pip.conf")]
    if not (own and os.path.exists(own)):
        config_home = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [Path(home, ".pip", "pip.conf"), Path(config_home, "pip", "pip.conf")]
    files.append(Path(sys.prefix if prefix is None else prefix, "pip.conf"))
    if own:
        files.append(Path(own))
    return files


def _pip_settings(texts: Sequence[tuple[str, str]], env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """pip's `index-url`, `extra-index-url` and `no-index` for `pip install`, each with where it was set: the files
    (path, text) in order, each overriding the ones before, `[global]` under `[install]`, then PIP_* variables."""
    found: dict[str, tuple[str, str]] = {}
    keys = ("index-url", "extra-index-url", "no-index")
    for section in ("global", "install"):
        for path, text in texts:
            parser = configparser.RawConfigParser()
            try:
                parser.read_string(text, source=path)
            except configparser.Error as exc:
                raise BadInputError(f"{path}: pip cannot read it either ({str(exc).splitlines()[0]})") from None
            if parser.has_section(section):
                for key, value in parser.items(section):
                    if key.replace("_", "-") in keys:
                        found[key.replace("_", "-")] = (value, f"{path} [{section}]")
    for key in keys:
        var = "PIP_" + key.upper().replace("-", "_")
        if env.get(var):
            found[key] = (env[var], var)
    return found


def index_config(env: Mapping[str, str] | None = None, *, files: Sequence[Path] | None = None) -> IndexConfig:
    """The indexes to read: SLIMWHEEL_INDEX_URL (one URL: that index alone), else pip's configuration as `pip
    install` reads it (`pip_config_files`, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_NO_INDEX), else PyPI. A private
    index set for pip is thus never bypassed for public PyPI."""
    e = os.environ if env is None else env
    redirect_hosts = frozenset((e.get("SLIMWHEEL_INDEX_REDIRECT_HOSTS") or "").lower().split())
    own = (e.get("SLIMWHEEL_INDEX_URL") or "").strip()
    if own:
        return IndexConfig(urls=(_slash(own),), source="SLIMWHEEL_INDEX_URL", redirect_hosts=redirect_hosts)
    texts = []
    try:
        for path in pip_config_files(e) if files is None else files:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                texts.append((str(path), path.read_text("utf-8", "replace")))
        settings = _pip_settings(texts, e)
        no_index = parse_bool(settings["no-index"][0], name="no-index") if "no-index" in settings else None
    except (BadInputError, OSError) as exc:
        problem = f"pip's configuration cannot be read, so the index pip uses is unknown: {exc}"
        return IndexConfig(urls=(), source="pip's configuration", problem=problem)
    if no_index:
        where = settings["no-index"][1]
        return IndexConfig(urls=(), source=where, problem=f"pip is configured to read no index ({where})")
    index, source = settings.get("index-url", (DEFAULT_INDEX, "the default"))
    extra, extra_source = settings.get("extra-index-url", ("", ""))
    every = tuple(dict.fromkeys(_slash(u) for u in (index.strip(), *extra.split()) if u))
    urls = tuple(u for u in every if _is_http(u))
    skipped = tuple(u for u in every if not _is_http(u))
    if extra_source:
        source = f"{source}; extra indexes: {extra_source}"
    if not urls:
        problem = f"pip's indexes ({', '.join(map(_cut, every)) or 'none'}) are not read over HTTP(S) ({source})"
        return IndexConfig(urls=(), source=source, problem=problem, skipped=skipped)
    return IndexConfig(urls=urls, source=source, redirect_hosts=redirect_hosts, skipped=skipped)


def _is_http(url: str) -> bool:
    try:
        return urllib.parse.urlsplit(url).scheme.lower() in ("http", "https")
    except ValueError:  # "http://[::1/": no usable URL at all
        return False


def _cut(text: str, most: int = 200) -> str:
    """Text from the index as a message quotes it: at most `most` characters (a 1 MB URL is not echoed whole). The
    renderers escape it for where it is shown, as they do a wheel's names."""
    return text if len(text) <= most else f"{text[: most - 40]}...{text[-30:]} ({len(text)} characters)"


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


# --- HTTP with deadlines and byte limits ------------------------------------------------------------------------


class Unreachable(LookupFailed):
    """No answer at all (no network, a refused connection, a timeout): later lookups fail at once, rather than each
    waiting for its own timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(message, why=Why.UNREACHABLE)


class _Budget:
    """What the run may still spend: its deadline and its bytes, shared by the lookup's threads. The run's clock
    starts at its first request: `check` makes the lookup before it reads the wheel, which may take a minute."""

    def __init__(self, limits: IndexLimits) -> None:
        self.limits = limits
        self._deadline: float | None = None
        self._left = limits.run_bytes
        self._lock = threading.Lock()

    @property
    def deadline(self) -> float:
        with self._lock:
            if self._deadline is None:
                self._deadline = time.monotonic() + self.limits.run_s
            return self._deadline

    def take(self, n: int, url: str) -> None:
        with self._lock:
            if n > self._left:
                self._left = 0
                raise LookupFailed(
                    f"{_cut(url)}: the index's answers passed {self.limits.run_bytes} bytes in this run",
                    why=Why.TOO_LARGE,
                )
            self._left -= n


class _Watchdog:
    """Cuts the connections of one request at its deadline. urllib's timeout bounds each read, not the request: a
    server sending a byte every 5 s kept `check` waiting forever. Shutting the socket down wakes the blocked read."""

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._deadline = deadline
        self._conns: list[http.client.HTTPConnection] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        """Before `conn` connects: its socket, whatever it is at the deadline, is shut down then."""
        with self._lock:
            if self.fired:
                raise TimeoutError("the request's deadline passed")
            self._conns.append(conn)

    def hold(self, sock: socket.socket | None) -> None:
        """Once `conn` connected: urllib drops the connection's socket once the headers are read, leaving it to the
        answer, whose body may still trickle: that socket is shut down at the deadline too."""
        with self._lock:
            if sock is not None:
                self._socks.append(sock)
            if self.fired:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        if sock is not None:
            with contextlib.suppress(OSError):  # closed meanwhile: its descriptor is -1, never another's
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, under TLS too

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for conn in self._conns:
                self._shut(conn.sock)
            for sock in self._socks:
                self._shut(sock)

    def check(self) -> None:
        """Raises TimeoutError once the deadline has passed: what was read since may be cut short."""
        if self.fired or time.monotonic() >= self._deadline:
            raise TimeoutError("the request's deadline passed")

    def cancel(self) -> None:
        self._timer.cancel()


def _watched(base: type[http.client.HTTPConnection], dog: _Watchdog) -> type[http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            dog.watch(self)
            super().connect()
            dog.hold(self.sock)

    return Watched


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, dog: _Watchdog) -> None:
        super().__init__()
        self.dog = dog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self.dog), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, dog: _Watchdog) -> None:
        super().__init__()
        self.dog = dog

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, self.dog), req, context=self._context)  # type: ignore[attr-defined]


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects to the host asked (same scheme, or plain HTTP to HTTPS), or to a host the user named; never to
    another scheme, never from HTTPS to HTTP: an index on a private host must not hand requests, and the names in
    them, elsewhere."""

    def __init__(self, hosts: frozenset[str], most: int) -> None:
        super().__init__()
        self.hosts = hosts
        self.max_redirections = most  # type: ignore[misc]  # urllib reads this class default through self

    def http_error_302(  # urllib's check of the scheme comes later, and says only "HTTP 302"
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: http.client.HTTPMessage
    ) -> http.client.HTTPResponse | None:
        newurl = headers.get("location") or headers.get("uri") or ""
        scheme, host, port = _origin(req.full_url)
        try:
            to_scheme, to_host, to_port = _origin(urllib.parse.urljoin(req.full_url, newurl))
        except ValueError:
            to_scheme, to_host, to_port = "", "", None
        same = to_host == host and to_port == port and (to_scheme == scheme or (scheme, to_scheme) == ("http", "https"))
        named = to_host in self.hosts and to_scheme in ("https", scheme)
        if not (same or named):
            fp.close()
            raise LookupFailed(
                f"{_cut(req.full_url)}: redirected to {_cut(newurl)}, another host or scheme; not followed "
                "(SLIMWHEEL_INDEX_REDIRECT_HOSTS names hosts an index may redirect to)",
                why=Why.REFUSED,
            )
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class _Response:
    """An answer whose body is read in chunks within the request's deadline and the byte limits."""

    def __init__(self, r: http.client.HTTPResponse, url: str, dog: _Watchdog, budget: _Budget) -> None:
        self.status: int = r.status
        self.headers: Message = r.headers
        self._r, self._url, self._dog, self._budget = r, url, dog, budget

    def chunks(self, limit: int) -> Iterator[bytes]:
        got = 0
        while chunk := self._r.read(min(64 * _KiB, limit + 1 - got)):
            got += len(chunk)
            if got > limit:
                raise LookupFailed(f"{_cut(self._url)}: answer over {limit} bytes", why=Why.TOO_LARGE)
            self._dog.check()
            self._budget.take(len(chunk), self._url)
            yield chunk
        self._dog.check()  # a socket the watchdog shut down ends like a whole answer: it is not one
        if self._r.length:  # http.client's read(n) ends quietly where a connection closed early
            raise LookupFailed(
                f"{_cut(self._url)}: answer cut short, {self._r.length} of its announced bytes missing",
                why=Why.BAD_ANSWER,
            )

    def body(self, limit: int) -> bytearray:
        out = bytearray()
        for chunk in self.chunks(limit):
            out += chunk
        return out


class _Client:
    """HTTP(S) GETs within a run's `_Budget`, each with its deadline and its connections watched."""

    def __init__(self, limits: IndexLimits, redirect_hosts: frozenset[str] = frozenset()) -> None:
        self.limits = limits
        self.budget = _Budget(limits)
        self.redirect_hosts = redirect_hosts

    @contextlib.contextmanager
    def get(self, url: str, headers: Mapping[str, str]) -> Iterator[_Response]:
        """The answer to a GET of `url` (HTTP 200 or 206; any other status is a LookupFailed: 404 and 410 of kind
        NOT_FOUND), its body read by the block. Every failure of the exchange, in the block too, is a LookupFailed."""
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            raise LookupFailed(f"{_cut(url)}: not an HTTP(S) URL, not read", why=Why.REFUSED)
        now = time.monotonic()
        deadline = min(now + self.limits.request_s, self.budget.deadline)
        if deadline <= now:
            raise LookupFailed(
                f"{_cut(url)}: not asked, the run's {self.limits.run_s:g} s for the index are spent", why=Why.DEADLINE
            )
        dog = _Watchdog(deadline)
        opener = urllib.request.OpenerDirector()
        for handler in (
            urllib.request.ProxyHandler(),
            _HTTP(dog),
            _HTTPS(dog),
            _Redirects(self.redirect_hosts, self.limits.redirects),
            urllib.request.HTTPDefaultErrorHandler(),
            urllib.request.HTTPErrorProcessor(),
        ):
            opener.add_handler(handler)
        request = urllib.request.Request(url, headers={"User-Agent": "slimwheel", **headers})
        try:
            try:
                r = opener.open(request, timeout=min(self.limits.read_s, deadline - now))
            except urllib.error.HTTPError as exc:
                exc.close()
                why = Why.NOT_FOUND if exc.code in (404, 410) else Why.BAD_ANSWER
                raise LookupFailed(f"{_cut(url)}: HTTP {exc.code}", why=why) from None
            except urllib.error.URLError as exc:
                raise self._failed(
                    url, exc.reason if isinstance(exc.reason, Exception) else exc, dog, deadline
                ) from None
            except (http.client.HTTPException, OSError) as exc:
                raise self._failed(url, exc, dog, deadline) from None
            except ValueError as exc:  # a URL http.client refuses (a bad port, a control character, an IPv6 typo)
                raise LookupFailed(f"{_cut(url)}: not a usable URL ({_cut(str(exc))})", why=Why.BAD_ANSWER) from None
            with r:
                try:
                    dog.check()  # headers cut short by the watchdog parse as whole ones
                    yield _Response(r, url, dog, self.budget)
                except (http.client.HTTPException, OSError) as exc:
                    raise self._failed(url, exc, dog, deadline) from None
        finally:
            dog.cancel()

    def _failed(self, url: str, exc: BaseException, dog: _Watchdog, deadline: float) -> LookupFailed:
        """What a failed exchange means: the deadline passed (the watchdog cut it, or a read waited past it), the
        answer was not HTTP (a bad status line, headers over http.client's limits, a body cut short), or no answer
        (a refused or reset connection, a read that waited `read_s`)."""
        if dog.fired or time.monotonic() >= deadline:
            return self._late(url)
        if isinstance(exc, http.client.InvalidURL):  # found only when the request is made: a space in the host
            return LookupFailed(f"{_cut(url)}: not a usable URL ({_cut(str(exc))})", why=Why.BAD_ANSWER)
        if isinstance(exc, http.client.HTTPException) and not isinstance(exc, ConnectionError):
            what = type(exc).__name__ + (f": {_cut(str(exc))}" if str(exc) else "")
            return LookupFailed(f"{_cut(url)}: not an HTTP answer ({what})", why=Why.BAD_ANSWER)
        return Unreachable(f"{_cut(url)}: {_cut(str(exc) or type(exc).__name__)}")

    def _late(self, url: str) -> LookupFailed:
        if time.monotonic() >= self.budget.deadline:
            return LookupFailed(
                f"{_cut(url)}: the run's {self.limits.run_s:g} s for the index passed", why=Why.DEADLINE
            )
        return LookupFailed(f"{_cut(url)}: no whole answer within {self.limits.request_s:g} s", why=Why.DEADLINE)


# --- listings -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str  # "" when the listing's link is not a URL (while a listing is read: its link, joined once chosen)
    sha256: str  # 64 lower-case hex digits, or "" (none given, or not a SHA-256)
    requires_python: str
    yanked: bool


_FILENAME = re.compile(r"[A-Za-z0-9_.+!-]{1,255}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _file(
    page: str, filename: object, href: object, sha256: object, requires_python: object, yanked: bool
) -> IndexFile:
    """A listing's entry, its fields judged: a file name that is a plain name (it names nothing on disk, yet a path
    in it is never chosen), the link as given (`_joined` once chosen: joining every link of a large page was most
    of its cost), a hash only if it is a SHA-256."""
    if not all(isinstance(v, str) for v in (filename, href)) or not isinstance(requires_python, str | None):
        raise LookupFailed(f"{_cut(page)}: a file entry of the wrong shape", why=Why.BAD_ANSWER)
    assert isinstance(filename, str) and isinstance(href, str)
    digest = sha256.lower() if isinstance(sha256, str) else ""
    return IndexFile(
        filename=filename if _FILENAME.fullmatch(filename) else "",
        url=href,
        sha256=digest if _SHA256.fullmatch(digest) else "",
        requires_python=requires_python or "",
        yanked=yanked,
    )


def _joined(page: str, f: IndexFile) -> IndexFile:
    """`f` with its link joined to the page that lists it, without its fragment; "" if it is no URL."""
    try:
        url = urllib.parse.urljoin(page, f.url).partition("#")[0]
        urllib.parse.urlsplit(url).port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        url = ""
    return dataclasses.replace(f, url=url)


def _json_files(body: bytes | bytearray, page: str, add: Callable[[IndexFile], None]) -> None:
    """The files of a PEP 691 page, handed to `add` as the decoder meets them: each file's dict becomes one
    IndexFile at once, so a 32 MiB page costs its bytes and its text, not a dict per file kept to the end."""

    def hook(d: dict[str, object]) -> object:
        # Every dict comes here, innermost first, and cannot say where it stands; a dict with a "filename" is taken
        # as a file entry wherever it is. Only an index's own files can be so named: the index chooses them anyway.
        if "filename" not in d:
            return d
        hashes = d.get("hashes")
        yanked = d.get("yanked")
        add(
            _file(
                page,
                d["filename"],
                d.get("url"),
                hashes.get("sha256") if isinstance(hashes, dict) else None,
                d.get("requires-python"),
                bool(yanked),  # PEP 691: true, or a reason (a non-empty string)
            )
        )
        return None

    try:
        data = json.loads(body, object_hook=hook)
    except RecursionError:  # the decoder descends once per nesting level
        raise LookupFailed(
            f"{_cut(page)}: not a PEP 691 project page (nested too deeply)", why=Why.BAD_ANSWER
        ) from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise LookupFailed(f"{_cut(page)}: not a PEP 691 project page ({exc})", why=Why.BAD_ANSWER) from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or any(f is not None for f in files):
        raise LookupFailed(f"{_cut(page)}: not a PEP 691 project page (no list of files)", why=Why.BAD_ANSWER)


# An attribute of a start tag as HTML reads it: a name, then maybe "=" and a value double-, single- or unquoted.
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


_A_TAG = re.compile(r"<a[\s/>]", re.IGNORECASE)
MAX_TAG = 64 * _KiB


class _HtmlFiles:
    """The file links of a PEP 503 page, fed in chunks. Only `<a ...>` tags are looked at, each found by a scan
    that never goes back: html.parser over the whole page took 7 s for 4 MiB of "<" (it rescans an unfinished
    construct at each character). So a link inside a comment counts too; the index chooses its links anyway."""

    def __init__(self, page: str, add: Callable[[IndexFile], None]) -> None:
        self.page, self.add = page, add
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        text = self._text + self._decoder.decode(chunk, final)
        at = 0
        while m := _A_TAG.search(text, at):
            end = text.find(">", m.start() + 2) if text[m.end() - 1] != ">" else m.end() - 1
            if end < 0:
                at = m.start()
                break
            self._tag(text[m.start() : end + 1])
            at = end + 1
        else:
            at = max(at, len(text) - 2)  # keep a "<a" split between chunks
        self._text = text[at:]
        if len(self._text) > MAX_TAG:
            raise LookupFailed(f"{_cut(self.page)}: a tag over {MAX_TAG} characters", why=Why.BAD_ANSWER)

    def _tag(self, tag: str) -> None:
        if len(tag) > MAX_TAG:
            raise LookupFailed(f"{_cut(self.page)}: a tag over {MAX_TAG} characters", why=Why.BAD_ANSWER)
        if ".whl" not in tag:
            return  # no wheel's link: never chosen, so not parsed
        a: dict[str, str] = {}
        for m in _ATTR.finditer(tag, 2):
            a.setdefault(m.group(1).lower(), html.unescape(m.group(2) or m.group(3) or m.group(4) or ""))
        href = a.get("href", "")
        frag = href.partition("#")[2]
        name = urllib.parse.unquote(href.partition("#")[0].rsplit("/", 1)[-1])
        self.add(
            _file(
                self.page,
                name,
                href,
                frag.removeprefix("sha256=") if frag.startswith("sha256=") else None,
                a.get("data-requires-python"),
                "data-yanked" in a,
            )
        )


def parse_listing(body: bytes, content_type: str, page: str) -> list[IndexFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503)."""
    files: list[IndexFile] = []
    if content_type.split(";")[0].strip().lower() == _JSON:
        _json_files(body, page, files.append)
    else:
        _HtmlFiles(page, files.append).feed(body, final=True)
    return [_joined(page, f) for f in files]


# --- choosing the wheel ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class _Chooser:
    """`choose`, fed one file at a time: only the best candidate so far is kept (two: the best final release and
    the best pre-release, which pip takes only when no final release is admitted)."""

    req: Requirement
    machines: Sequence[str]
    pythons: Sequence[str]
    page: str = ""  # the page being read, which its files' links are relative to
    wheels: int = 0
    best_final: tuple[Version, tuple[int, int, int], IndexFile] | None = None
    best_pre: tuple[Version, tuple[int, int, int], IndexFile] | None = None
    project: str = field(init=False)

    def __post_init__(self) -> None:
        self.project = str(canonicalize_name(self.req.name))
        self.machine = self.machines[0] if self.machines else "x86_64"
        self.exact = [f"cp{p.replace('.', '')}" for p in self.pythons]

    def add(self, f: IndexFile) -> None:
        if f.yanked or not f.filename.endswith(".whl"):
            return
        try:
            name, version, build, tags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, ValueError):
            return
        if name != self.project:
            return
        if f.requires_python:
            try:
                rp = SpecifierSet(f.requires_python)
            except InvalidSpecifier:
                rp = SpecifierSet()
            if not any(rp.contains(p, prereleases=True) for p in self.pythons):
                return
        plats = {t.platform for t in tags}
        if "any" not in plats and not any(
            p.endswith(f"_{self.machine}") and p.startswith(("manylinux", "linux", "musllinux")) for p in plats
        ):
            return
        interps = {t.interpreter for t in tags}
        if not any(i.startswith(("py3", "cp3", "py2")) for i in interps):
            return
        self.wheels += 1
        if not self.req.specifier.contains(version, prereleases=True):
            return
        python_rank = next((len(self.exact) - k for k, i in enumerate(self.exact) if i in interps), 0)
        plat_rank = 1 if any(p.startswith("musllinux") for p in plats) and "any" not in plats else 2
        rank = (build[0] if build else 0, python_rank, plat_rank)
        # SpecifierSet.filter's rule: pre-releases count when the specifier asks for them, else only if nothing else
        pre = version.is_prerelease and not self.req.specifier.prereleases
        best = self.best_pre if pre else self.best_final
        if best is None or (version, rank) > (best[0], best[1]):
            entry = (version, rank, _joined(self.page, f))
            if pre:
                self.best_pre = entry
            else:
                self.best_final = entry

    def result(self) -> IndexFile:
        if not self.wheels:
            raise LookupFailed(f"no wheel of {self.project} for Linux {self.machine} on the index", why=Why.NOT_FOUND)
        best = self.best_final or self.best_pre
        if best is None:
            raise LookupFailed(
                f"no wheel of {self.project} that '{self.req.specifier}' admits for Linux {self.machine} on the index",
                why=Why.NOT_FOUND,
            )
        return best[2]


def choose(
    files: Iterable[IndexFile], req: Requirement, *, machines: Sequence[str], pythons: Sequence[str]
) -> IndexFile:
    """The wheel pip would install for `req` on Linux, the wheel's first machine and one of its Pythons: the newest
    version the specifier admits (pre-releases as pip admits them), not yanked, whose Requires-Python admits one of
    `pythons`; of its files, the highest build, then a tag of the first such Python (cp311) before abi3 and py3, then
    manylinux before musllinux. Sdists are not read (their libraries exist only once built)."""
    chooser = _Chooser(req=req, machines=machines, pythons=pythons)
    for f in files:
        chooser.add(f)
    return chooser.result()


# --- the wheel, through range requests ------------------------------------------------------------------------------


class RangeReader(io.RawIOBase):
    """A read-only seekable file over HTTP range requests, for `zipfile`; the last `TAIL_BYTES` come with the first
    request and are served from memory. At most `limit` bytes (default the limits' `wheel_bytes`) are fetched in all;
    `fetched` says how many were. devtools/torch_libs.py reads torch's wheels with it too, with a bound of its own
    (and, without a `client`, a client of its own: each request then has its deadline, the reader none)."""

    def __init__(self, url: str, *, limit: int | None = None, client: _Client | None = None) -> None:
        if client is None:
            client = _Client(IndexLimits(run_s=float("inf"), run_bytes=limit or DEFAULT_LIMITS.wheel_bytes))
        self.url, self.pos, self.fetched, self.client = url, 0, 0, client
        self.limit = client.limits.wheel_bytes if limit is None else limit
        with client.get(url, {"Range": f"bytes=-{TAIL_BYTES}"}) as r:
            status, content_range = r.status, r.headers.get("Content-Range", "")
            body = bytes(r.body(self.limit))
        if status == 206:
            m = re.fullmatch(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})", content_range.strip())
            if m is None:
                raise LookupFailed(f"{_cut(url)}: a range answer without a usable Content-Range", why=Why.BAD_ANSWER)
            first, last, self.size = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if last - first + 1 != len(body) or last != self.size - 1:
                raise LookupFailed(
                    f"{_cut(url)}: a range answer whose Content-Range {_cut(content_range)} does not match its "
                    f"{len(body)} bytes",
                    why=Why.BAD_ANSWER,
                )
            self.tail_at = first
        elif status == 200:  # the server ignores ranges: the whole file came (within the limit)
            self.size, self.tail_at = len(body), 0
        else:
            raise LookupFailed(f"{_cut(url)}: HTTP {status}", why=Why.BAD_ANSWER)
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
        if self.pos < 0:
            raise ValueError("negative seek position")
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
                raise LookupFailed(f"{_cut(self.url)}: more than {self.limit} bytes would be read", why=Why.TOO_LARGE)
            with self.client.get(self.url, {"Range": f"bytes={self.pos}-{self.pos + n - 1}"}) as r:
                status = r.status
                data = bytes(r.body(n))
            if status != 206 or len(data) != n:
                raise LookupFailed(f"{_cut(self.url)}: HTTP {status} to a range request", why=Why.BAD_ANSWER)
            self.fetched += n
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _directory_bytes(reader: RangeReader) -> int | None:
    """The central directory's size from the end records (zip64 too), or None when they are not there: known
    before `zipfile` reads the whole directory into memory (a ZipInfo of about 500 bytes per name)."""
    end = reader.tail[-(_EOCD.size + 0xFFFF) :]
    at = end.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(end):
        return None
    size = int(_EOCD.unpack_from(end, at)[5])
    loc = at - _ZIP64_LOCATOR.size
    if loc >= 0 and end[loc : loc + 4] == b"PK\x06\x07":
        offset = int(_ZIP64_LOCATOR.unpack_from(end, loc)[2])
        if reader.tail_at <= offset <= reader.size - _ZIP64_EOCD.size:
            head = reader.tail[offset - reader.tail_at : offset - reader.tail_at + _ZIP64_EOCD.size]
            if head[:4] == b"PK\x06\x06":
                size = max(size, int(_ZIP64_EOCD.unpack(head)[8]))
    return size


_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)  # what pip installs


def wheel_facts(reader: RangeReader, filename: str, limits: IndexLimits = DEFAULT_LIMITS) -> WheelFacts:
    """The facts of the wheel `reader` reads: its shared libraries' install paths and its Requires-Dist."""
    name, version, _build, _tags = parse_wheel_filename(filename)
    size = _directory_bytes(reader)
    if size is not None and size > limits.directory_bytes:
        raise LookupFailed(
            f"{_cut(filename)}: zip directory of {size} bytes, over the limit of {limits.directory_bytes}",
            why=Why.TOO_LARGE,
        )
    try:
        with zipfile.ZipFile(io.BufferedReader(reader, buffer_size=64 * _KiB)) as zf:
            files = tuple(p for n in zf.namelist() if (p := install_path(n)) is not None and is_library(p))
            meta = [i for i in zf.infolist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename)]
            if len(meta) != 1:
                raise LookupFailed(f"{_cut(filename)}: {len(meta)} dist-info METADATA files", why=Why.BAD_ANSWER)
            info = meta[0]
            if info.file_size > limits.metadata_bytes:
                raise LookupFailed(f"{_cut(filename)}: METADATA of {info.file_size} bytes", why=Why.TOO_LARGE)
            if info.flag_bits & 0x1 or info.compress_type not in _METHODS:
                raise LookupFailed(
                    f"{_cut(filename)}: METADATA encrypted or compressed by zip method {info.compress_type}",
                    why=Why.BAD_ANSWER,
                )
            with zf.open(info) as fh:
                text = fh.read(limits.metadata_bytes + 1).decode("utf-8", "replace")
    # zipfile's and the decompressors' own errors: a bad directory or header (BadZipFile, struct.error, ValueError,
    # EOFError), a "version needed to extract" above zipfile's (NotImplementedError), bad compressed data
    # (zlib.error, lzma.LZMAError; bz2 raises OSError), a CRC that does not match
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        struct.error,
        ValueError,
        EOFError,
        NotImplementedError,
        zlib.error,
        lzma.LZMAError,
        OSError,
    ) as exc:
        raise LookupFailed(f"{_cut(filename)}: not a readable wheel ({_cut(str(exc))})", why=Why.BAD_ANSWER) from None
    return WheelFacts(
        project=str(name), version=str(version), filename=filename, files=files, requires=requires_dist(text)
    )


# --- the cache of wheel facts ---------------------------------------------------------------------------------------


class _Cache:
    """Wheel facts kept across runs, one file per wheel, named by a SHA-256 of the wheel's name and the index's
    SHA-256 of its content (nothing from the index names a file). The folder is judged at each use as the NVRTC
    cache's is (`fsutil.open_private_folder`: ours, writable by no one else, no link) and files are opened
    relative to it without following links. Each entry starts with a SHA-256 of the rest, recorded when it was
    written: a damaged or altered entry is removed and read again from the index."""

    _MAGIC = b"slimwheel-index-facts"
    STALE_TEMP_S = 600.0

    def __init__(self, folder: Path, limits: IndexLimits) -> None:
        self.folder, self.limits = folder, limits
        self.refused = ""  # why the folder is not used, once it was refused

    @staticmethod
    def key(f: IndexFile) -> str:
        return hashlib.sha256(f"{f.filename}\n{f.sha256}".encode()).hexdigest()

    @contextlib.contextmanager
    def _folder(self) -> Iterator[int | None]:
        try:
            fd = open_private_folder(self.folder)
        except UnsafeFolder as exc:
            self.refused = str(exc)
            yield None
            return
        except OSError:  # cannot be created here (read-only, full): the run reads the index, as without a cache
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def load(self, key: str, filename: str) -> WheelFacts | None:
        with self._folder() as dfd:
            if dfd is None:
                return None
            name = f"{key}.json"
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except OSError:
                return None
            try:
                facts = self._verified(fd, key, filename)
            finally:
                os.close(fd)
            if facts is None:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dfd)
            return facts

    def _verified(self, fd: int, key: str, filename: str) -> WheelFacts | None:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            or st.st_size > self.limits.cache_entry_bytes
        ):
            return None
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read(self.limits.cache_entry_bytes + 1)
        head, _, payload = data.partition(b"\n")
        if head != b" ".join((self._MAGIC, key.encode(), hashlib.sha256(payload).hexdigest().encode())):
            return None
        try:
            d = json.loads(payload)
            facts = WheelFacts(
                project=d["project"],
                version=d["version"],
                filename=d["filename"],
                files=tuple(d["files"]),
                requires=tuple(d["requires"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        fields = (facts.project, facts.version, facts.filename, *facts.files, *facts.requires)
        if d.get("schema") != _SCHEMA or facts.filename != filename or not all(isinstance(v, str) for v in fields):
            return None
        return facts

    def store(self, key: str, facts: WheelFacts) -> None:
        """Best effort: a cache that cannot be written costs the next run a read of the index, nothing else."""
        payload = json.dumps(
            {
                "schema": _SCHEMA,
                "project": facts.project,
                "version": facts.version,
                "filename": facts.filename,
                "files": list(facts.files),
                "requires": list(facts.requires),
            }
        ).encode()
        data = b" ".join((self._MAGIC, key.encode(), hashlib.sha256(payload).hexdigest().encode())) + b"\n" + payload
        with self._folder() as dfd:
            if dfd is None:
                return
            self._remove_stale_temps(dfd)
            tmp = f".tmp-{secrets.token_hex(8)}"
            try:
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
                )
            except OSError:
                return
            try:
                with open(fd, "wb") as fh:
                    fh.write(data)
                os.rename(tmp, f"{key}.json", src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)

    def _remove_stale_temps(self, dfd: int) -> None:
        """A killed writer's temporary file (older than STALE_TEMP_S; a live writer's is seconds old)."""
        now = time.time()
        with contextlib.suppress(OSError), os.scandir(dfd) as entries:
            for entry in entries:
                if (
                    entry.name.startswith(".tmp-")
                    and now - entry.stat(follow_symlinks=False).st_mtime > self.STALE_TEMP_S
                ):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=dfd)


# --- the lookup -----------------------------------------------------------------------------------------------------


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
            config = index_config() if index is None else IndexConfig(urls=(_slash(index),), source="the caller")
        self.config = config
        self.machines, self.pythons = tuple(machines), tuple(pythons)
        self.limits = limits = DEFAULT_LIMITS if limits is None else limits
        self._client = _Client(limits, config.redirect_hosts)
        self._cache = _Cache(cache if cache is not None else cache_dir() / "index", limits)
        self._down: Unreachable | None = None

    @property
    def cache_refused(self) -> str:
        """Why the cache folder was not used ("" if it was): a folder others can write, or a link."""
        return self._cache.refused

    def _read_listing(self, index: str, project: str, chooser: _Chooser) -> bool:
        """Feeds the files of `project` on `index` to `chooser`; False when the index has no such project."""
        try:
            page = urllib.parse.urljoin(index, f"{project}/")
            urllib.parse.urlsplit(page).port  # noqa: B018  (raises on a port that is not a number)
        except ValueError as exc:
            raise LookupFailed(f"index {_cut(index)} is not a usable URL ({exc})", why=Why.REFUSED) from None
        if not _is_http(index):
            raise LookupFailed(f"index {_cut(index)} is not read over HTTP(S)", why=Why.REFUSED)
        chooser.page = page
        try:
            with self._client.get(page, {"Accept": f"{_JSON}, text/html;q=0.1"}) as r:
                limit = self.limits.listing_bytes
                if r.headers.get("Content-Type", "").split(";")[0].strip().lower() == _JSON:
                    _json_files(r.body(limit), page, chooser.add)
                else:
                    links = _HtmlFiles(page, chooser.add)
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
            raise LookupFailed(f"{req.name}: a direct reference ({_cut(req.url)}) is not read", why=Why.REFUSED)
        project = str(canonicalize_name(req.name))
        chooser = _Chooser(req=req, machines=self.machines, pythons=self.pythons)
        # pip merges the listings of all its indexes: so does this, and an index that fails leaves pip's choice
        # unknown (a newer version may be there), while one that has no such project (404) says so
        if not any([self._read_listing(index, project, chooser) for index in self.config.urls]):
            raise LookupFailed(
                f"{project}: no such project on {', '.join(map(_cut, self.config.urls))} ({self.config.source})",
                why=Why.NOT_FOUND,
            )
        f = chooser.result()
        if not f.url:
            raise LookupFailed(f"{f.filename}: the index links it by no usable URL", why=Why.BAD_ANSWER)
        if urllib.parse.urlsplit(f.url).scheme.lower() not in ("http", "https"):
            raise LookupFailed(
                f"{f.filename}: the index links it as {_cut(f.url)}; only HTTP(S) is read", why=Why.REFUSED
            )
        key = _Cache.key(f) if f.sha256 else ""
        if key and (cached := self._cache.load(key, f.filename)) is not None:
            return cached
        facts = wheel_facts(RangeReader(f.url, client=self._client), f.filename, self.limits)
        if key:  # without the index's SHA-256 the same name may be other bytes next time: not kept
            self._cache.store(key, facts)
        return facts
