"""HTTP(S) for the index reader: GETs within one run's deadline and bytes (`IndexLimits`), each request with a
deadline of its own from connecting to its last byte (a watchdog shuts its sockets down), redirects kept on the host
asked. Every failure of an exchange ends in a `LookupFailed` whose `why` says which kind of "unknown" it is."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.message import Message
from typing import IO

from slimwheel.reqgraph import LookupFailed, Why

KiB, MiB = 1024, 2**20


@dataclass(frozen=True, kw_only=True)
class IndexLimits:
    """What reading the index may cost one run (one `IndexLookup`). Far above what PyPI needs (nvidia-cublas-cu12's
    listing is 60 kB; vllm's 61 projects are read in seconds), far below what hurts a CI runner."""

    read_s: float = 20.0  # one read that receives nothing
    request_s: float = 60.0  # one request, from connecting to its last byte (a server trickling bytes included)
    run_s: float = 300.0  # every request of the run, together
    listing_bytes: int = 32 * MiB  # one project page
    wheel_bytes: int = 32 * MiB  # one wheel, all its range requests together
    directory_bytes: int = 8 * MiB  # one wheel's zip central directory (about 170,000 names of 46+ bytes)
    metadata_bytes: int = 4 * MiB  # one wheel's METADATA
    run_bytes: int = 256 * MiB  # every answer of the run, together
    redirects: int = 5  # redirects followed for one request
    cache_entry_bytes: int = 16 * MiB  # one cache entry read back


DEFAULT_LIMITS = IndexLimits()


def cut(text: str, most: int = 200) -> str:
    """Text from the index as a message quotes it: at most `most` characters (a 1 MB URL is not echoed whole). The
    renderers escape it for where it is shown, as they do a wheel's names."""
    return text if len(text) <= most else f"{text[: most - 40]}...{text[-30:]} ({len(text)} characters)"


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
                    f"{cut(url)}: the index's answers passed {self.limits.run_bytes} bytes in this run",
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
                f"{cut(req.full_url)}: redirected to {cut(newurl)}, another host or scheme; not followed "
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
        while chunk := self._r.read(min(64 * KiB, limit + 1 - got)):
            got += len(chunk)
            if got > limit:
                raise LookupFailed(f"{cut(self._url)}: answer over {limit} bytes", why=Why.TOO_LARGE)
            self._dog.check()
            self._budget.take(len(chunk), self._url)
            yield chunk
        self._dog.check()  # a socket the watchdog shut down ends like a whole answer: it is not one
        if self._r.length:  # http.client's read(n) ends quietly where a connection closed early
            raise LookupFailed(
                f"{cut(self._url)}: answer cut short, {self._r.length} of its announced bytes missing",
                why=Why.BAD_ANSWER,
            )

    def body(self, limit: int) -> bytearray:
        out = bytearray()
        for chunk in self.chunks(limit):
            out += chunk
        return out


class Client:
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
            raise LookupFailed(f"{cut(url)}: not an HTTP(S) URL, not read", why=Why.REFUSED)
        now = time.monotonic()
        deadline = min(now + self.limits.request_s, self.budget.deadline)
        if deadline <= now:
            raise LookupFailed(
                f"{cut(url)}: not asked, the run's {self.limits.run_s:g} s for the index are spent", why=Why.DEADLINE
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
                raise LookupFailed(f"{cut(url)}: HTTP {exc.code}", why=why) from None
            except urllib.error.URLError as exc:
                raise self._failed(
                    url, exc.reason if isinstance(exc.reason, Exception) else exc, dog, deadline
                ) from None
            except (http.client.HTTPException, OSError) as exc:
                raise self._failed(url, exc, dog, deadline) from None
            except ValueError as exc:  # a URL http.client refuses (a bad port, a control character, an IPv6 typo)
                raise LookupFailed(f"{cut(url)}: not a usable URL ({cut(str(exc))})", why=Why.BAD_ANSWER) from None
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
            return LookupFailed(f"{cut(url)}: not a usable URL ({cut(str(exc))})", why=Why.BAD_ANSWER)
        if isinstance(exc, http.client.HTTPException) and not isinstance(exc, ConnectionError):
            what = type(exc).__name__ + (f": {cut(str(exc))}" if str(exc) else "")
            return LookupFailed(f"{cut(url)}: not an HTTP answer ({what})", why=Why.BAD_ANSWER)
        return Unreachable(f"{cut(url)}: {cut(str(exc) or type(exc).__name__)}")

    def _late(self, url: str) -> LookupFailed:
        if time.monotonic() >= self.budget.deadline:
            return LookupFailed(f"{cut(url)}: the run's {self.limits.run_s:g} s for the index passed", why=Why.DEADLINE)
        return LookupFailed(f"{cut(url)}: no whole answer within {self.limits.request_s:g} s", why=Why.DEADLINE)
