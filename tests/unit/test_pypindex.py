"""pypindex: the wheel pip would pick from an index, read through range requests. The index is a local HTTP server
in a thread of the test process (PEP 691 JSON or PEP 503 HTML listings, files with or without range support);
tests/unit/test_pypindex_attacks.py serves hostile ones; tests/integration/test_requirement_graph.py reads PyPI
itself."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.indexserver import wheel_bytes
from packaging.requirements import Requirement

from slimwheel import pypindex
from slimwheel.pypindex import IndexConfig, IndexFile, IndexLimits, IndexLookup, choose, index_config, parse_listing
from slimwheel.reqgraph import LookupFailed, Why


class Index:
    """What the server serves, and what it was asked."""

    def __init__(self) -> None:
        self.projects: dict[str, list[dict[str, object]]] = {}
        self.blobs: dict[str, bytes] = {}
        self.html = False
        self.ranges = True
        self.requests: list[tuple[str, str]] = []  # (path, Range header)

    def add(self, project: str, filename: str, data: bytes, **extra: object) -> None:
        self.blobs[filename] = data
        self.projects.setdefault(project, []).append({"filename": filename, "url": f"/files/{filename}", **extra})


@pytest.fixture
def index() -> Iterator[tuple[Index, str]]:
    with serve() as served:
        yield served


@contextlib.contextmanager
def serve() -> Iterator[tuple[Index, str]]:
    """An index on 127.0.0.1 in a thread, stopped when the block ends."""
    state = Index()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append((self.path, self.headers.get("Range", "")))
            if self.path.startswith("/simple/"):
                files = state.projects.get(self.path.split("/")[2])
                if files is None:
                    self.send_error(404)
                    return
                if state.html:
                    body = "".join(
                        f'<a href="{f["url"]}#sha256=ab"'
                        + (' data-yanked=""' if f.get("yanked") else "")
                        + (f' data-requires-python="{f["requires-python"]}"' if f.get("requires-python") else "")
                        + f">{f['filename']}</a>"
                        for f in files
                    ).encode()
                    kind = "text/html"
                else:
                    body, kind = json.dumps({"files": files}).encode(), "application/vnd.pypi.simple.v1+json"
                self._send(200, body, kind)
                return
            data = state.blobs.get(self.path.removeprefix("/files/"))
            if data is None:
                self.send_error(404)
                return
            rng = self.headers.get("Range", "")
            if not rng or not state.ranges:
                self._send(200, data, "application/octet-stream")
                return
            first, _, last = rng.removeprefix("bytes=").partition("-")
            start, end = (max(0, len(data) - int(last)), len(data) - 1) if not first else (int(first), int(last))
            end = min(end, len(data) - 1)
            self._send(206, data[start : end + 1], "application/octet-stream", f"bytes {start}-{end}/{len(data)}")

        def _send(self, status: int, body: bytes, kind: str, content_range: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if content_range:
                self.send_header("Content-Range", content_range)
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def lookup(url: str, cache: Path, limits: IndexLimits = pypindex.DEFAULT_LIMITS) -> IndexLookup:
    return IndexLookup(machines=("x86_64",), pythons=("3.11", "3.12"), index=url, cache=cache, limits=limits)


def sha(data: bytes) -> dict[str, object]:
    return {"hashes": {"sha256": hashlib.sha256(data).hexdigest()}}


WHL = "librmm_cu12-26.10.0-py3-none-manylinux_2_28_x86_64.whl"


def test_reads_the_files_and_requirements_and_caches_them(index: tuple[Index, str], tmp_path: Path) -> None:
    state, url = index
    data = wheel_bytes("librmm-cu12", "26.10.0", {"librmm/lib64/librmm.so": b"\x7fELF"}, ("rapids-logger==0.3.*",))
    state.add("librmm-cu12", WHL, data, hashes={"sha256": hashlib.sha256(data).hexdigest()})
    facts = lookup(url, tmp_path)(Requirement("librmm-cu12==26.10.*"))
    assert facts.files == ("librmm/lib64/librmm.so",)
    assert facts.requires == ("rapids-logger==0.3.*",)
    assert (facts.project, facts.version) == ("librmm-cu12", "26.10.0")
    wheel_reads = [r for r in state.requests if r[0].startswith("/files/")]
    assert wheel_reads == [(f"/files/{WHL}", f"bytes=-{pypindex.TAIL_BYTES}")]  # one request: the tail
    state.requests.clear()
    again = lookup(url, tmp_path)(Requirement("librmm-cu12==26.10.*"))
    assert again == facts
    assert [r for r in state.requests if r[0].startswith("/files/")] == []  # from the cache


def test_metadata_before_a_large_member_costs_one_more_range(
    index: tuple[Index, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = index
    monkeypatch.setattr(pypindex.ranges, "TAIL_BYTES", 4096)
    big = random.Random(0).randbytes(1 << 20)  # 1 MiB that deflate cannot shrink
    state.add(
        "librmm-cu12", WHL, wheel_bytes("librmm-cu12", "26.10.0", {"librmm/big.so": big}, ("x",), metadata_first=True)
    )
    facts = lookup(url, tmp_path)(Requirement("librmm-cu12"))
    assert facts.requires == ("x",)
    reads = [r for r in state.requests if r[0].startswith("/files/")]
    assert 2 <= len(reads) <= 4


def test_an_html_index_and_a_server_without_ranges(index: tuple[Index, str], tmp_path: Path) -> None:
    state, url = index
    state.html, state.ranges = True, False
    state.add("librmm-cu12", WHL, wheel_bytes("librmm-cu12", "26.10.0", {"librmm/lib64/librmm.so": b""}))
    assert lookup(url, tmp_path)(Requirement("librmm-cu12")).files == ("librmm/lib64/librmm.so",)


def test_a_server_without_ranges_is_not_read_past_the_bound(index: tuple[Index, str], tmp_path: Path) -> None:
    state, url = index
    state.ranges = False
    state.add("librmm-cu12", WHL, wheel_bytes("librmm-cu12", "26.10.0", {"a.so": random.Random(0).randbytes(8000)}))
    with pytest.raises(LookupFailed, match="answer over 1000 bytes") as e:
        lookup(url, tmp_path, IndexLimits(wheel_bytes=1000))(Requirement("librmm-cu12"))
    assert e.value.why is Why.TOO_LARGE


def test_what_cannot_be_read_says_why(index: tuple[Index, str], tmp_path: Path) -> None:
    state, url = index
    with pytest.raises(LookupFailed, match="nothing-here: no such project on http://127.0.0.1:") as e:
        lookup(url, tmp_path)(Requirement("nothing-here"))
    assert e.value.why is Why.NOT_FOUND
    state.add("junk", "junk-1.0-py3-none-any.whl", b"not a zip at all" * 10)
    with pytest.raises(LookupFailed, match="not a readable wheel"):
        lookup(url, tmp_path)(Requirement("junk"))
    with pytest.raises(LookupFailed, match="not read over HTTP"):
        lookup("file:///opt/pypi/simple/", tmp_path)(Requirement("junk"))
    for bad in ("http://[::1/", "http://h:x/"):
        with pytest.raises(LookupFailed, match="is not a usable URL") as e:
            lookup(bad, tmp_path)(Requirement("junk"))
        assert e.value.why is Why.REFUSED
    with pytest.raises(LookupFailed, match="not a usable URL"):
        lookup("http://a b/", tmp_path)(Requirement("junk"))
    with pytest.raises(LookupFailed, match="direct reference"):
        lookup(url, tmp_path)(Requirement("junk @ https://example.org/junk-1.0-py3-none-any.whl"))


def test_a_damaged_cache_entry_is_read_again(index: tuple[Index, str], tmp_path: Path) -> None:
    state, url = index
    data = wheel_bytes("librmm-cu12", "26.10.0", {"librmm/lib64/librmm.so": b""})
    state.add("librmm-cu12", WHL, data, **sha(data))
    first = lookup(url, tmp_path)(Requirement("librmm-cu12"))
    (entry,) = tmp_path.iterdir()
    good = entry.read_bytes()
    # a byte changed: the SHA-256 written with the entry no longer matches, so the index is read again
    for damaged in (b"{not json", good.replace(b"librmm.so", b"librmX.so"), good[:-1], b""):
        entry.write_bytes(damaged)
        state.requests.clear()
        assert lookup(url, tmp_path)(Requirement("librmm-cu12")) == first
        assert any(r[0].startswith("/files/") for r in state.requests)
        assert entry.read_bytes() == good  # written anew
    state.requests.clear()
    assert lookup(url, tmp_path)(Requirement("librmm-cu12")) == first
    assert not any(r[0].startswith("/files/") for r in state.requests)


def test_a_wheel_listed_without_a_hash_is_not_cached(index: tuple[Index, str], tmp_path: Path) -> None:
    # the same name may be other bytes next time: only the index's SHA-256 makes an entry mean one wheel
    state, url = index
    state.add("librmm-cu12", WHL, wheel_bytes("librmm-cu12", "26.10.0", {"librmm/lib64/librmm.so": b""}))
    assert lookup(url, tmp_path)(Requirement("librmm-cu12")).files == ("librmm/lib64/librmm.so",)
    assert list(tmp_path.iterdir()) == []


def f(filename: str, **kw: object) -> IndexFile:
    return IndexFile(
        filename=filename,
        url=f"https://x/{filename}",
        sha256="",
        requires_python=str(kw.get("requires_python", "")),
        yanked=bool(kw.get("yanked", False)),
    )


def pick(files: list[IndexFile], req: str, machine: str = "x86_64") -> str:
    return choose(files, Requirement(req), machines=(machine,), pythons=("3.11", "3.12")).filename


def test_choose_the_newest_admitted_version() -> None:
    files = [
        f("p-1.0-py3-none-manylinux_2_28_x86_64.whl"),
        f("p-2.0-py3-none-manylinux_2_28_x86_64.whl"),
        f("p-3.0rc1-py3-none-manylinux_2_28_x86_64.whl"),
        f("p-2.5-py3-none-manylinux_2_28_x86_64.whl", yanked=True),
        f("p-2.6-py3-none-manylinux_2_28_x86_64.whl", requires_python=">=3.13"),
        f("p-2.7.tar.gz"),
        f("p-2.8-py3-none-manylinux_2_28_aarch64.whl"),
        f("p-2.9-py3-none-win_amd64.whl"),
        f("other-9.0-py3-none-any.whl"),
    ]
    assert pick(files, "p") == "p-2.0-py3-none-manylinux_2_28_x86_64.whl"
    assert pick(files, "p<2") == "p-1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert pick(files, "p>=3.0rc1") == "p-3.0rc1-py3-none-manylinux_2_28_x86_64.whl"
    assert pick(files, "p", machine="aarch64") == "p-2.8-py3-none-manylinux_2_28_aarch64.whl"
    with pytest.raises(LookupFailed, match="that '>=4' admits"):
        pick(files, "p>=4")
    with pytest.raises(LookupFailed, match="no wheel of q for Linux x86_64"):
        pick([f("q-1.0.tar.gz"), f("q-1.0-py3-none-macosx_11_0_arm64.whl")], "q")


def test_choose_prefers_the_wheels_python_then_manylinux_then_the_higher_build() -> None:
    files = [
        f("p-1.0-cp310-cp310-manylinux_2_28_x86_64.whl"),
        f("p-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
        f("p-1.0-cp311-cp311-musllinux_1_2_x86_64.whl"),
        f("p-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
    ]
    assert pick(files, "p") == "p-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    built = [f("p-1.0-py3-none-any.whl"), f("p-1.0-2-py3-none-any.whl")]
    assert pick(built, "p") == "p-1.0-2-py3-none-any.whl"


def test_parse_listing_refuses_a_broken_json_page() -> None:
    with pytest.raises(LookupFailed, match="not a PEP 691 project page"):
        parse_listing(b'{"files": 3}', "application/vnd.pypi.simple.v1+json", "https://x/simple/p/")
    got = parse_listing(
        b'<a href="../../f/p-1.0-py3-none-any.whl#sha256=' + b"CAFE" * 16 + b'" data-yanked>p</a>'
        b'<A HREF="p-2.0-py3-none-any.whl#sha256=cafe">short hash</A>',
        "text/html",
        "https://x/simple/p/",
    )
    assert got == [
        IndexFile(
            filename="p-1.0-py3-none-any.whl",
            url="https://x/f/p-1.0-py3-none-any.whl",
            sha256="cafe" * 16,
            requires_python="",
            yanked=True,
        ),
        # a "hash" that is no SHA-256 is none: it could name a file (it once did, in the cache)
        IndexFile(
            filename="p-2.0-py3-none-any.whl",
            url="https://x/simple/p/p-2.0-py3-none-any.whl",
            sha256="",
            requires_python="",
            yanked=False,
        ),
    ]


def test_index_config_order(tmp_path: Path) -> None:
    nothing = {"PIP_CONFIG_FILE": os.devnull}
    assert index_config(nothing).urls == ("https://pypi.org/simple/",)
    assert index_config({**nothing, "PIP_INDEX_URL": "https://mirror/simple"}).urls == ("https://mirror/simple/",)
    own = {**nothing, "PIP_INDEX_URL": "https://mirror/simple", "SLIMWHEEL_INDEX_URL": "https://own/"}
    assert index_config(own) == IndexConfig(urls=("https://own/",), source="SLIMWHEEL_INDEX_URL")
    extra = index_config({**nothing, "PIP_EXTRA_INDEX_URL": "https://a/simple  https://b/simple/\n"})
    assert extra.urls == ("https://pypi.org/simple/", "https://a/simple/", "https://b/simple/")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pip_configuration_files_in_pips_order(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    env = {"HOME": str(home), "XDG_CONFIG_DIRS": str(xdg), "XDG_CONFIG_HOME": str(home / "cfg")}
    files = pypindex.pip_config_files(env, prefix=str(tmp_path / "venv"), home=str(home))
    assert files == [
        xdg / "pip/pip.conf",
        Path("/etc/pip.conf"),
        home / ".pip/pip.conf",
        home / "cfg/pip/pip.conf",
        tmp_path / "venv/pip.conf",
    ]
    # a PIP_CONFIG_FILE that exists replaces the user's files and comes last; /dev/null means none at all
    own = write(tmp_path / "own.conf", "")
    with_own = pypindex.pip_config_files({**env, "PIP_CONFIG_FILE": str(own)}, prefix="/p", home=str(home))
    assert with_own == [xdg / "pip/pip.conf", Path("/etc/pip.conf"), Path("/p/pip.conf"), own]
    assert pypindex.pip_config_files({**env, "PIP_CONFIG_FILE": os.devnull}) == []


def test_pip_configuration_is_honoured(tmp_path: Path) -> None:
    g = write(tmp_path / "global.conf", "[global]\nindex-url = https://global/simple\n")
    u = write(
        tmp_path / "user.conf",
        "[global]\nindex_url = https://user/simple\nextra-index-url =\n  https://x/\n  https://y/\n",
    )
    i = write(
        tmp_path / "install.conf",
        "[install]\nindex-url = https://install/simple\n[download]\nindex-url = https://no/\n",
    )
    assert index_config({}, files=[g]).urls == ("https://global/simple/",)
    assert index_config({}, files=[g, u]).urls == ("https://user/simple/", "https://x/", "https://y/")
    # [install] over [global] whichever file holds it (pip reads `pip install`'s section after the global one)
    assert index_config({}, files=[g, i, u]).urls[0] == "https://install/simple/"
    assert index_config({"PIP_INDEX_URL": "https://env/"}, files=[g, i]).urls == ("https://env/",)
    assert index_config({"SLIMWHEEL_INDEX_URL": "https://own/"}, files=[g, i]).urls == ("https://own/",)
    no = index_config({}, files=[write(tmp_path / "no.conf", "[global]\nno-index = true\n")])
    assert no.urls == () and "no index" in no.problem
    assert "no index" in index_config({"PIP_NO_INDEX": "1"}, files=[g]).problem
    # this machine's own: local mirrors as extra indexes are not read, PyPI is
    local = write(tmp_path / "local.conf", "[global]\nextra-index-url = file:///opt/pypi/simple file:///opt/m\n")
    assert index_config({}, files=[local]).urls == ("https://pypi.org/simple/",)
    assert index_config({}, files=[local]).skipped == ("file:///opt/pypi/simple/", "file:///opt/m/")
    only_local = index_config({"PIP_INDEX_URL": "file:///opt/pypi/simple"}, files=[])
    assert only_local.urls == () and "not read over HTTP(S)" in only_local.problem
    broken = index_config({}, files=[write(tmp_path / "bad.conf", "index-url = x\n")])
    assert broken.urls == () and "bad.conf" in broken.problem


def test_private_names_never_go_to_another_index_than_pips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as (public, public_url), serve() as (private, private_url):
        monkeypatch.setattr(pypindex.pipconf, "DEFAULT_INDEX", public_url)  # plays PyPI
        data = wheel_bytes("corp-secret", "1.0", {"corp/libsecret.so": b""})
        private.add("corp-secret", "corp_secret-1.0-py3-none-any.whl", data)
        conf = write(tmp_path / "pip.conf", f"[global]\nindex-url = {private_url}\n")
        env = {"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path)}
        look = IndexLookup(machines=("x86_64",), pythons=("3.12",), config=index_config(env), cache=tmp_path / "c")
        assert look(Requirement("corp-secret")).files == ("corp/libsecret.so",)
        assert public.requests == []
        assert next(r[0] for r in private.requests) == "/simple/corp-secret/"
        # without pip's configuration the name goes to the default index: what the test would catch
        none = IndexLookup(
            machines=("x86_64",), pythons=("3.12",), config=index_config({"PIP_CONFIG_FILE": os.devnull})
        )
        with pytest.raises(LookupFailed):
            none(Requirement("corp-secret"))
        assert [r[0] for r in public.requests] == ["/simple/corp-secret/"]


def test_extra_indexes_are_merged_as_pip_merges_them(tmp_path: Path) -> None:
    with serve() as (one, one_url), serve() as (two, two_url):
        one.add("p", "p-1.0-py3-none-any.whl", wheel_bytes("p", "1.0", {"p/libold.so": b""}))
        two.add("p", "p-2.0-py3-none-any.whl", wheel_bytes("p", "2.0", {"p/libnew.so": b""}))
        config = IndexConfig(urls=(one_url, two_url), source="test")
        look = IndexLookup(machines=("x86_64",), pythons=("3.12",), config=config, cache=tmp_path)
        assert look(Requirement("p")).files == ("p/libnew.so",)
        with pytest.raises(LookupFailed, match="no such project") as e:
            look(Requirement("q"))
        assert e.value.why is Why.NOT_FOUND


def test_an_index_that_does_not_answer_is_asked_once(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    look = lookup(f"http://127.0.0.1:{port}/simple/", tmp_path)
    with pytest.raises(pypindex.Unreachable, match="refused"):
        look(Requirement("a"))
    with pytest.raises(LookupFailed, match="not asked, as the index did not answer before"):
        look(Requirement("b"))


def test_a_listing_cannot_name_a_file_outside_the_cache() -> None:
    # file names from the index become cache file names: one with a path in it is never chosen
    files = [f("../../p-2.0-py3-none-any.whl"), f("sub/p-3.0-py3-none-any.whl"), f("p-1.0-py3-none-any.whl")]
    assert pick(files, "p") == "p-1.0-py3-none-any.whl"
