"""Fuzzing the index reader: listings (JSON and HTML), wheels read through ranges, and whole HTTP answers, arbitrary
and mutated, end in facts or a LookupFailed, nothing else (the issue 41 "internal error" class)."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterable

import pytest
from helpers.fuzzing import fuzz
from helpers.indexserver import JSON, Request, Step, answer, hostile, listing, patched_members, ranged, wheel_bytes
from hypothesis import given
from hypothesis import strategies as st
from packaging.requirements import Requirement

from slimwheel import pypindex
from slimwheel.pypindex import IndexConfig, IndexLimits, IndexLookup, parse_listing, wheel_facts
from slimwheel.reqgraph import LookupFailed, WheelFacts

WHL = "p-1.0-py3-none-manylinux_2_28_x86_64.whl"
PAGE = "https://x/simple/p/"
GOOD_JSON = json.dumps(
    {
        "meta": {"api-version": "1.0"},
        "files": [
            {"filename": WHL, "url": f"../../f/{WHL}", "hashes": {"sha256": "ab" * 32}, "requires-python": ">=3"},
            {"filename": "p-0.9.tar.gz", "url": "p-0.9.tar.gz", "yanked": "bad"},
        ],
    }
).encode()
GOOD_HTML = (
    f'<html><body><a href="../../f/{WHL}#sha256={"ab" * 32}" data-requires-python="&gt;=3">{WHL}</a>'
    '<!-- <a href="x.whl"> --><a data-yanked href=p-0.9-py3-none-any.whl>old</a></body></html>'
).encode()
GOOD_WHEEL = wheel_bytes("p", "1.0", {"p/libp.so": b"\x7fELF" * 8, "p/__init__.py": b""}, ("q>=1; extra == 'x'",))
FUZZ = fuzz(600)
SERVED = fuzz(150)


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "word", "cut", "insert", "nest"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word" and len(data) >= 8:
            pos = min(pos, len(data) - 8)
            data[pos : pos + 8] = draw(st.binary(min_size=8, max_size=8))
        elif op == "cut":
            del data[pos:]
        elif op == "nest":  # deep nesting and long runs of one construct: the recursion and quadratic classes
            data[pos:pos] = draw(st.sampled_from([b"[", b"{", b"<", b"</", b"<a ", b'"', b"\\"])) * draw(
                st.integers(1, 5000)
            )
        else:
            data[pos:pos] = draw(st.binary(max_size=16))
    return bytes(data)


def _listing(body: bytes, kind: str) -> None:
    try:
        files = parse_listing(body, kind, PAGE)
    except LookupFailed:
        return
    for f in files:
        assert isinstance(f.filename, str) and "/" not in f.filename
        assert f.sha256 == "" or len(f.sha256) == 64


@FUZZ
@given(st.one_of(mutated(GOOD_JSON), st.binary(max_size=256)))
def test_fuzz_json_listings(body: bytes) -> None:
    _listing(body, JSON)


@FUZZ
@given(st.one_of(mutated(GOOD_HTML), st.binary(max_size=256), st.text(max_size=256).map(str.encode)))
def test_fuzz_html_listings(body: bytes) -> None:
    _listing(body, "text/html")


class Wheel(pypindex.RangeReader):
    """A RangeReader over bytes in memory: everything is its tail, so no request is made."""

    def __init__(self, data: bytes) -> None:
        io.RawIOBase.__init__(self)
        self.url, self.pos, self.fetched, self.limit = "mem", 0, len(data), len(data)
        self.tail, self.size, self.tail_at = data, len(data), 0


ODD = [patched_members(GOOD_WHEEL, method=m) for m in (0, 9, 12, 14, 99)] + [patched_members(GOOD_WHEEL, flags=1)]


@FUZZ
@given(st.one_of(mutated(GOOD_WHEEL), st.sampled_from(ODD).flatmap(mutated), st.binary(max_size=128)))
def test_fuzz_wheels(data: bytes) -> None:
    try:
        facts = wheel_facts(Wheel(data), WHL)
    except LookupFailed:
        return
    assert isinstance(facts, WheelFacts) and facts.version == "1.0"


def _answers() -> st.SearchStrategy[bytes]:
    page = answer(body=GOOD_JSON, headers={"Content-Type": JSON})
    html = answer(body=GOOD_HTML, headers={"Content-Type": "text/html"})
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n<a hr\r\n0\r\n\r\n"
    return st.one_of(mutated(page), mutated(html), mutated(chunked), st.binary(max_size=64))


@SERVED
@given(_answers(), mutated(ranged(GOOD_WHEEL, "bytes=-262144")))
def test_fuzz_whole_http_answers(tmp_path_factory: pytest.TempPathFactory, page: bytes, wheel: bytes) -> None:
    def script(r: Request) -> Iterable[Step]:
        if r.path.startswith("/simple/"):
            yield page
            yield listing([{"filename": WHL, "url": f"/files/{WHL}"}])  # a second answer on a kept-alive line
        else:
            yield wheel

    cache = tmp_path_factory.mktemp("cache")
    with hostile(script) as server:
        config = IndexConfig(urls=(server.url,), source="fuzz")
        limits = IndexLimits(read_s=2.0, request_s=2.0, run_s=4.0)
        lookup = IndexLookup(machines=("x86_64",), pythons=("3.12",), config=config, cache=cache, limits=limits)
        start = time.monotonic()
        with contextlib.suppress(LookupFailed):
            lookup(Requirement("p"))
        assert time.monotonic() - start < 5


def test_the_mutations_reach_the_reader() -> None:
    # the fuzzers above would pass on a reader that refused everything: the unmutated inputs are read
    assert parse_listing(GOOD_JSON, JSON, PAGE)[0].filename == WHL
    assert len(parse_listing(GOOD_HTML, "text/html", PAGE)) == 3  # the link in a comment counts too
    assert wheel_facts(Wheel(GOOD_WHEEL), WHL).files == ("p/libp.so",)
