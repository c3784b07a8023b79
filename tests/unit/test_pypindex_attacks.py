"""The package index as an attacker (issue 41: S4, S7, S8, S9, S13 and the 15 answers that ended in "internal
error"): each attack is generated here and served from 127.0.0.1 (tests/helpers/indexserver.py); each must end in
facts or a LookupFailed of the right kind, within its time and memory bounds, with nothing written outside the
cache folder."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import time
import tracemalloc
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from helpers.indexserver import (
    JSON,
    Hostile,
    Request,
    Script,
    Step,
    answer,
    hostile,
    listing,
    patched_members,
    ranged,
    wheel_bytes,
)
from packaging.requirements import Requirement

from slimwheel import fsutil, pypindex
from slimwheel.cli import main
from slimwheel.pypindex import IndexConfig, IndexLimits, IndexLookup
from slimwheel.reqgraph import LookupFailed, RequirementGraph, Why
from testkit.binsynth import elf as synth_elf
from testkit.wheelmaker import make_wheel

WHL = "p-1.0-py3-none-manylinux_2_28_x86_64.whl"
GOOD = wheel_bytes("p", "1.0", {"p/libp.so": b"\x7fELF"}, ("q>=1",))
FAST = IndexLimits(read_s=5.0, request_s=1.5, run_s=4.0)


def look(
    server: Hostile, tmp_path: Path, limits: IndexLimits = FAST, redirect_hosts: frozenset[str] = frozenset()
) -> IndexLookup:
    cfg = IndexConfig(urls=(server.url,), source="test", redirect_hosts=redirect_hosts)
    return IndexLookup(machines=("x86_64",), pythons=("3.12",), config=cfg, cache=tmp_path / "cache", limits=limits)


def index_of(wheel: bytes | None = GOOD, *, entry: Mapping[str, object] | None = None) -> Script:
    """A script: the project page lists WHL (or `entry`), and the file is `wheel` served with ranges."""

    def script(r: Request) -> Iterable[Step]:
        if r.path.startswith("/simple/"):
            yield listing([dict(entry or {"filename": WHL, "url": f"/files/{WHL}"})])
        elif wheel is not None:
            yield ranged(wheel, r.headers.get("range", ""))

    return script


def fails(lookup: IndexLookup, req: str = "p") -> LookupFailed:
    with pytest.raises(LookupFailed) as e:
        lookup(Requirement(req))
    return e.value


# --- S7: one deadline per request and per run -------------------------------------------------------------------


def trickle(prefix: bytes) -> Script:
    """A server that sends `prefix` and then one byte every 0.3 s, for as long as it is let."""

    def script(r: Request) -> Iterable[Step]:
        yield prefix
        for _ in range(1000):
            yield b"x"
            yield 0.3

    return script


@pytest.mark.parametrize(
    "prefix",
    [
        b"",  # the status line never ends
        b"HTTP/1.1 200 OK\r\nX-Slow: ",  # a header never ends
        b"HTTP/1.1 200 OK\r\nContent-Type: " + JSON.encode() + b"\r\nContent-Length: 99999999\r\n\r\n",  # the body
    ],
)
def test_a_trickling_server_is_cut_at_the_request_deadline(prefix: bytes, tmp_path: Path) -> None:
    with hostile(trickle(prefix)) as server:
        start = time.monotonic()
        e = fails(look(server, tmp_path))
        took = time.monotonic() - start
    assert e.why is Why.DEADLINE, e
    assert "no whole answer within 1.5 s" in str(e)
    assert 1.4 < took < 3.0


def test_the_run_has_one_deadline_for_all_its_requests(tmp_path: Path) -> None:
    # every project trickles: the walk over 12 requirements ends at the run's deadline, not 12 request deadlines
    with hostile(trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ")) as server:
        limits = IndexLimits(read_s=5.0, request_s=2.0, run_s=3.0)
        graph = RequirementGraph([f"p{i}" for i in range(12)], [{}], look(server, tmp_path, limits))
        start = time.monotonic()
        unknown = graph.unknown
        took = time.monotonic() - start
    assert took < 5.5, took
    assert len(unknown) == 12 and {u.why for u in unknown} == {Why.DEADLINE}
    assert any("the run's 3 s for the index" in u.detail for u in unknown)


def test_the_runs_clock_starts_at_its_first_request(tmp_path: Path) -> None:
    # check makes the lookup before reading the wheel (a minute for a large one): that time is not the index's
    with hostile(index_of()) as server:
        lookup = look(server, tmp_path, IndexLimits(run_s=0.5))
        time.sleep(0.7)
        assert lookup(Requirement("p")).files == ("p/libp.so",)


def test_check_is_not_kept_past_the_index_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # S7 as the issue ran it: `slimwheel check` on a wheel whose library only the index could account for
    monkeypatch.setattr(pypindex, "DEFAULT_LIMITS", IndexLimits(read_s=5.0, request_s=1.5, run_s=3.0))
    ext = synth_elf(needed=("libcorp.so.1", "libc.so.6"))
    whl = make_wheel(tmp_path, name="faiss", files={"faiss/_x.abi3.so": ext}, requires=("corp-blas",))
    with hostile(trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ")) as server:
        monkeypatch.setenv("SLIMWHEEL_INDEX_URL", server.url)
        monkeypatch.setenv("SLIMWHEEL_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("SLIMWHEEL_OFFLINE", raising=False)
        start = time.monotonic()
        rc = main(["check", str(whl)])
        took = time.monotonic() - start
    assert [r.path for r in server.requests] == ["/simple/corp-blas/"]
    assert took < 6, took
    out = capsys.readouterr()
    assert rc != 0 and "libcorp.so.1" in out.out + out.err
    assert "no whole answer within 1.5 s" in out.out + out.err, out


# --- S8: no file: URLs, S13: redirects stay on the host ----------------------------------------------------------


def test_file_urls_in_a_listing_are_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.whl"
    os.mkfifo(fifo)  # opening it for reading would hang
    for url in (f"file://{fifo}", f"FILE:{fifo}", "ftp://127.0.0.1/x.whl", "data:,x", "/a\x00b"):
        with hostile(index_of(entry={"filename": WHL, "url": url})) as server:
            start = time.monotonic()
            e = fails(look(server, tmp_path))
        assert e.why is Why.REFUSED or e.why is Why.BAD_ANSWER, (url, e)
        assert time.monotonic() - start < 2
    with pytest.raises(LookupFailed, match="not read over HTTP") as refused:
        IndexLookup(machines=("x86_64",), pythons=("3.12",), index=f"file://{tmp_path}/", cache=tmp_path)(
            Requirement("p")
        )
    assert refused.value.why is Why.REFUSED


def redirecting(to: str) -> Script:
    def script(r: Request) -> Iterable[Step]:
        yield answer("302 Found", headers={"Location": to + r.path})

    return script


def test_redirects_to_another_host_are_not_followed_unless_named(tmp_path: Path) -> None:
    with hostile(index_of()) as elsewhere:
        other = elsewhere.base.replace("127.0.0.1", "localhost")
        with hostile(redirecting(other)) as server:
            e = fails(look(server, tmp_path))
            assert e.why is Why.REFUSED and "another host or scheme" in str(e)
            assert elsewhere.requests == []  # the project's name never reached it
            named = look(server, tmp_path, redirect_hosts=frozenset({"localhost"}))
            assert named(Requirement("p")).files == ("p/libp.so",)
        with hostile(redirecting("file://")) as server:
            assert fails(look(server, tmp_path)).why is Why.REFUSED


def test_a_redirect_on_the_same_host_is_followed_and_a_loop_ends(tmp_path: Path) -> None:
    def script(r: Request) -> Iterable[Step]:
        if r.path.startswith("/old/"):
            yield answer("301 Moved", headers={"Location": r.path.replace("/old/", "/simple/", 1)})
        elif r.path.startswith("/loop"):
            yield answer("302 Found", headers={"Location": "/loop"})
        else:
            yield from index_of()(r)

    with hostile(script) as server:
        moved = IndexConfig(urls=(server.base + "/old/",), source="test")
        lookup = IndexLookup(machines=("x86_64",), pythons=("3.12",), config=moved, cache=tmp_path, limits=FAST)
        assert lookup(Requirement("p")).files == ("p/libp.so",)
        loop = IndexConfig(urls=(server.base + "/loop/",), source="test")
        e = fails(IndexLookup(machines=("x86_64",), pythons=("3.12",), config=loop, cache=tmp_path, limits=FAST))
        assert e.why is Why.BAD_ANSWER and "HTTP 302" in str(e)


# --- the 15 answers that were internal errors, and their kin -----------------------------------------------------

DEEP = b'{"files": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
DEEP_ENTRY = (
    b'{"files": [{"filename": "p-1.0-py3-none-any.whl", "url": "x", "hashes": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}"
)


def page(body: bytes, kind: str = JSON) -> bytes:
    return answer(body=body, headers={"Content-Type": kind})


def entry(**fields: object) -> bytes:
    return page(json.dumps({"files": [{"filename": WHL, "url": f"/files/{WHL}", **fields}]}).encode())


LISTINGS = {
    "nested JSON": (page(DEEP), Why.BAD_ANSWER),
    "nested JSON in an entry": (page(DEEP_ENTRY), Why.BAD_ANSWER),
    "JSON that is a list": (page(b"[1, 2]"), Why.BAD_ANSWER),
    "files that are no list": (page(b'{"files": {"a": 1}}'), Why.BAD_ANSWER),
    "a file that is a number": (page(b'{"files": [3]}'), Why.BAD_ANSWER),
    "a file name that is a number": (page(b'{"files": [{"filename": 3, "url": "x"}]}'), Why.BAD_ANSWER),
    "a URL that is a list": (page(b'{"files": [{"filename": "p-1.0-py3-none-any.whl", "url": []}]}'), Why.BAD_ANSWER),
    "not UTF-8": (page(b'{"files": ["\xff\xfe"]}'), Why.BAD_ANSWER),
    "not JSON": (page(b"<html>"), Why.BAD_ANSWER),
    "an IPv6 typo": (entry(url="http://[::1/x.whl"), Why.BAD_ANSWER),
    "a port that is no number": (entry(url="http://127.0.0.1:http/x.whl"), Why.BAD_ANSWER),
    "a port out of range": (entry(url="http://127.0.0.1:99999999/x.whl"), Why.BAD_ANSWER),
    "a control character in the URL": (entry(url="http://127.0.0.1/a\x00b\r\nX: y"), Why.BAD_ANSWER),
    "a host that is not IDNA": (entry(url="http://" + "\u00e9" * 70 + "/x.whl"), Why.BAD_ANSWER),
    "no host": (entry(url="http://:80/x.whl"), Why.UNREACHABLE),
    "a bad status line": (b"HTTP/1.1 two hundred\r\n\r\n", Why.BAD_ANSWER),
    "not HTTP at all": (b"\x00\x01\x02 garbage\r\n\r\n", Why.BAD_ANSWER),
    "an HTTP/0.9 status, read as an empty page": (b"HTTP/0.9 200 OK\r\n\r\n", Why.NOT_FOUND),
    "closed without an answer": (b"", Why.UNREACHABLE),
    "a header line over 64 KiB": (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", Why.BAD_ANSWER),
    "over 100 headers": (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 120 + b"\r\n", Why.BAD_ANSWER),
    "a truncated body": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n{", Why.BAD_ANSWER),
    "a bad chunk size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", Why.BAD_ANSWER),
    "a server error": (answer("503 Unavailable"), Why.BAD_ANSWER),
    "a listing over the limit": (page(b" " * (1 << 20 | 1) + b"{}"), Why.TOO_LARGE),
    "an unclosed tag": (page(b'<a href="' + b"x" * (1 << 17), "text/html"), Why.BAD_ANSWER),
}


@pytest.mark.parametrize("name", LISTINGS)
def test_a_malformed_listing_is_a_typed_failure(name: str, tmp_path: Path) -> None:
    raw, why = LISTINGS[name]

    def script(r: Request) -> Iterable[Step]:
        yield raw if r.path.startswith("/simple/") else ranged(GOOD, r.headers.get("range", ""))

    with hostile(script) as server:
        start = time.monotonic()
        e = fails(look(server, tmp_path, IndexLimits(read_s=5.0, request_s=5.0, listing_bytes=1 << 20)))
    assert e.why is why, (name, e)
    assert time.monotonic() - start < 5


def zip_with_cd_claiming(size: int) -> bytes:
    """GOOD with its end record claiming a central directory of `size` bytes."""
    data = bytearray(GOOD)
    at = data.rfind(b"PK\x05\x06")
    data[at + 12 : at + 16] = size.to_bytes(4, "little")
    return bytes(data)


def wheel_answer(raw: bytes) -> Script:
    def script(r: Request) -> Iterable[Step]:
        yield listing([{"filename": WHL, "url": f"/files/{WHL}"}]) if r.path.startswith("/simple/") else raw

    return script


def served(data: bytes) -> Script:
    return index_of(data)


def metadata_twice() -> bytes:
    return wheel_bytes("p", "1.0", {"p/libp.so": b"", "q-1.dist-info/METADATA": b"Name: q"})


WHEELS: dict[str, tuple[Script, Why]] = {
    "a range answer without Content-Range": (wheel_answer(answer("206 Partial", b"PK")), Why.BAD_ANSWER),
    "a Content-Range that lies": (
        wheel_answer(answer("206 Partial", b"PK", {"Content-Range": "bytes 0-99/100"})),
        Why.BAD_ANSWER,
    ),
    "a Content-Range of 99 digits": (
        wheel_answer(answer("206 Partial", b"PK", {"Content-Range": "bytes 0-1/" + "9" * 99})),
        Why.BAD_ANSWER,
    ),
    "not a zip": (served(b"not a zip" * 100), Why.BAD_ANSWER),
    "a truncated zip": (served(GOOD[: len(GOOD) // 2]), Why.BAD_ANSWER),
    "METADATA by compression method 99": (served(patched_members(GOOD, method=99)), Why.BAD_ANSWER),
    "METADATA by deflate64": (served(patched_members(GOOD, method=9)), Why.BAD_ANSWER),
    "METADATA encrypted": (served(patched_members(GOOD, flags=1)), Why.BAD_ANSWER),
    "bad deflate data": (
        served(patched_members(wheel_bytes("p", "1.0", {}, method=zipfile.ZIP_STORED), method=8)),
        Why.BAD_ANSWER,
    ),
    "bad bzip2 data": (
        served(patched_members(wheel_bytes("p", "1.0", {}, method=zipfile.ZIP_STORED), method=12)),
        Why.BAD_ANSWER,
    ),
    "bad lzma data": (
        served(patched_members(wheel_bytes("p", "1.0", {}, method=zipfile.ZIP_STORED), method=14)),
        Why.BAD_ANSWER,
    ),
    "a central directory over the limit": (served(zip_with_cd_claiming(64 << 20)), Why.TOO_LARGE),
    "two METADATA files": (served(metadata_twice()), Why.BAD_ANSWER),
    "a wheel that is not found": (wheel_answer(answer("404 Not Found")), Why.NOT_FOUND),
}


@pytest.mark.parametrize("name", WHEELS)
def test_a_malformed_wheel_is_a_typed_failure(name: str, tmp_path: Path) -> None:
    script, why = WHEELS[name]
    with hostile(script) as server:
        e = fails(look(server, tmp_path))
    assert e.why is why, (name, e)


def test_lzma_and_bzip2_metadata_are_read_as_pip_reads_them(tmp_path: Path) -> None:
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        with hostile(served(wheel_bytes("p", "1.0", {"p/libp.so": b""}, ("q",), method=method))) as server:
            facts = look(server, tmp_path)(Requirement("p"))
        assert (facts.files, facts.requires) == (("p/libp.so",), ("q",))


def test_the_run_has_a_byte_limit(tmp_path: Path) -> None:
    with hostile(index_of()) as server:
        lookup = look(server, tmp_path, IndexLimits(run_bytes=len(GOOD)))
        e = fails(lookup)
    assert e.why is Why.TOO_LARGE and "passed" in str(e)


# --- S9: a 32 MiB listing is neither costly nor kept -------------------------------------------------------------


def big_listing(kind: str, size: int = 32 << 20) -> bytes:
    """Just under `size` bytes of listing: PyPI-shaped entries of versions 0.0.N, and the wheel WHL."""
    parts, total, n = [], 0, 0
    last = {"filename": WHL, "url": f"/files/{WHL}", "hashes": {"sha256": "0" * 64}}
    while True:
        f = {
            "filename": f"p-0.0.{n}-py3-none-manylinux_2_28_x86_64.whl",
            "url": f"/files/p-0.0.{n}-py3-none-manylinux_2_28_x86_64.whl",
            "hashes": {"sha256": hashlib.sha256(str(n).encode()).hexdigest()},
            "requires-python": ">=3.8",
            "yanked": False,
        }
        if kind == "json":
            text = json.dumps(f) + ", "
        else:
            text = (
                f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}" '  # type: ignore[index]
                f'data-requires-python="&gt;=3.8">{f["filename"]}</a>\n'
            )
        if total + len(text) > size - 1024:
            break
        parts.append(text)
        total += len(text)
        n += 1
    if kind == "json":
        return ('{"meta": {"api-version": "1.0"}, "files": [' + "".join(parts) + json.dumps(last) + "]}").encode()
    return ("".join(parts) + f'<a href="{last["url"]}">{WHL}</a>').encode()


@pytest.mark.parametrize(("kind", "size", "most"), [("json", 32 << 20, 80 << 20), ("html", 8 << 20, 2 << 20)])
def test_a_32_mib_listing_costs_little_memory_and_is_not_kept(kind: str, size: int, most: int, tmp_path: Path) -> None:
    # JSON: the page's bytes and its text (measured: 69 MiB for 31 MiB, 20 s under tracemalloc, 2.9 s without);
    # HTML is read as it comes (0.2 MiB at any size: 8 MiB here, as tracemalloc slows the test sevenfold)
    body = big_listing(kind, size)
    assert size - (2 << 20) < len(body) <= size
    raw = answer(body=body, headers={"Content-Type": JSON if kind == "json" else "text/html"})

    def script(r: Request) -> Iterable[Step]:
        yield raw if r.path.startswith("/simple/") else ranged(GOOD, r.headers.get("range", ""))

    with hostile(script) as server:
        # generous deadlines: tracemalloc slows the JSON read sevenfold, and the 2 cores may be busy (60 s proved too tight)
        lookup = look(server, tmp_path, IndexLimits(request_s=240.0, run_s=240.0))
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            start = time.monotonic()
            facts = lookup(Requirement("p>=1"))
            took = time.monotonic() - start
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert facts.filename == WHL
    # the issue measured about 290 MB for the JSON page, kept for the run
    assert peak - before < most, f"{(peak - before) >> 20} MiB"
    assert after - before < 1 << 20, f"{(after - before) >> 10} KiB kept"
    assert took < 240


def test_an_html_page_of_tiny_links_is_read_in_bounded_time(tmp_path: Path) -> None:
    # 4 MiB of "<a href=x>": html.parser over the whole page was quadratic on runs like "</"; the scan is not
    tiny = (b"<a href=x>", b"<a href=p-1-py3-none-any.whl>", b"<a href=q-1-py3-none-any.whl>")
    for body in (*(t * ((4 << 20) // len(t)) for t in tiny), b"</" * (2 << 20), b"<" * (4 << 20), b"<!--" * (1 << 20)):
        start = time.monotonic()

        def script(r: Request, body: bytes = body) -> Iterable[Step]:
            yield page(body, "text/html")

        with hostile(script) as server:
            e = fails(look(server, tmp_path, IndexLimits(request_s=30.0, run_s=30.0)))
        # no wheel of p, or p-1's "wheel" is this page again: not a zip
        assert e.why in (Why.NOT_FOUND, Why.BAD_ANSWER), e
        assert time.monotonic() - start < 15, body[:10]


# --- S4: nothing from the index names a file; the cache is judged as the NVRTC cache is ------------------------------


def test_a_listed_hash_or_name_never_names_a_file(tmp_path: Path) -> None:
    evil = {"sha256": "../../../../" + str(tmp_path / "outside")}
    for fields in (
        {"filename": WHL, "url": f"/files/{WHL}", "hashes": evil},
        {"filename": "../../" + WHL, "url": f"/files/{WHL}", "hashes": {"sha256": "a" * 64}},
        {"filename": WHL, "url": f"/files/{WHL}", "hashes": {"sha256": "A" * 64}},
    ):
        expect = pytest.raises(LookupFailed) if fields["filename"] != WHL else contextlib.nullcontext()
        with hostile(index_of(entry=fields)) as server, expect:
            look(server, tmp_path)(Requirement("p"))
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert [m for m in made if not m.startswith("cache")] == []
    assert all(re.fullmatch(r"cache(/[0-9a-f]{64}\.json)?", m) for m in made), made


@pytest.mark.parametrize("planted", ["mode 0777", "a link", "a link to a folder", "a file", "a parent writable by all"])
def test_a_cache_folder_others_could_write_is_not_used(planted: str, tmp_path: Path) -> None:
    cache = tmp_path / "c" / "index"
    cache.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if planted == "mode 0777":
        cache.mkdir(mode=0o700)
        cache.chmod(0o777)
    elif planted == "a link":
        cache.symlink_to(elsewhere)
    elif planted == "a link to a folder":
        cache.symlink_to(elsewhere, target_is_directory=True)
    elif planted == "a file":
        cache.write_text("x")
    else:
        cache.parent.chmod(0o777)
    data = GOOD
    entry_ = {"filename": WHL, "url": f"/files/{WHL}", "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
    with hostile(index_of(entry=entry_)) as server:
        cfg = IndexConfig(urls=(server.url,), source="test")
        lookup = IndexLookup(machines=("x86_64",), pythons=("3.12",), config=cfg, cache=cache, limits=FAST)
        assert lookup(Requirement("p")).files == ("p/libp.so",)
        assert lookup.cache_refused, planted
    assert list(elsewhere.iterdir()) == []
    if cache.is_dir() and not cache.is_symlink():
        assert [p.name for p in cache.iterdir()] == []


def test_open_private_folder_judges_owner_mode_and_links(tmp_path: Path) -> None:
    ok = tmp_path / "ok"
    fd = fsutil.open_private_folder(ok)
    os.close(fd)
    assert stat.S_IMODE(ok.stat().st_mode) == 0o700
    with pytest.raises(fsutil.UnsafeFolder, match="owned by another user"):
        fsutil.open_private_folder(ok, uid=os.geteuid() + 12345)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /tmp: others may add names but not replace ours
    os.close(fsutil.open_private_folder(sticky / "cache"))
    open_all = tmp_path / "open"
    open_all.mkdir()
    open_all.chmod(0o777)
    with pytest.raises(fsutil.UnsafeFolder, match="writable by everyone"):
        fsutil.open_private_folder(open_all / "cache")


def test_a_cache_entry_planted_or_altered_is_not_believed(tmp_path: Path) -> None:
    digest = hashlib.sha256(GOOD).hexdigest()
    fields = {"filename": WHL, "url": f"/files/{WHL}", "hashes": {"sha256": digest}}
    with hostile(index_of(entry=fields)) as server:
        first = look(server, tmp_path)(Requirement("p"))
        (entry_file,) = (tmp_path / "cache").iterdir()
        good = entry_file.read_bytes()
        head, _, payload = good.partition(b"\n")
        lie = payload.replace(b"p/libp.so", b"p/libevil.so")
        forged_hash = head.rsplit(b" ", 1)[0] + b" " + hashlib.sha256(lie).hexdigest().encode() + b"\n" + lie
        other = tmp_path / "other.json"
        other.write_bytes(forged_hash)
        for plant in ("altered", "a link", "writable by others"):
            entry_file.unlink()
            if plant == "altered":
                entry_file.write_bytes(head + b"\n" + lie)
            elif plant == "a link":
                entry_file.symlink_to(other)  # its own hash matches: only the link gives it away
            else:
                entry_file.write_bytes(forged_hash)
                entry_file.chmod(0o666)
            before = len(server.requests)
            assert look(server, tmp_path)(Requirement("p")) == first, plant
            assert len(server.requests) > before + 1, plant  # the wheel was read again
            assert entry_file.read_bytes() == good and not entry_file.is_symlink()
