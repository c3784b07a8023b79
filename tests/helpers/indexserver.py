"""Package indexes for the tests of slimwheel.pypindex: wheels made in memory, and a raw TCP server on 127.0.0.1 that
answers each request with scripted bytes and pauses (a hostile index: trickling, cut, malformed). Every server runs
in daemon threads, stops when its block ends, and lives at most `MAX_LIFE_S` whatever happens."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import struct
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

MAX_LIFE_S = 120.0
JSON = "application/vnd.pypi.simple.v1+json"


def wheel_bytes(
    name: str,
    version: str,
    files: dict[str, bytes],
    requires: tuple[str, ...] = (),
    *,
    metadata_first: bool = False,
    method: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    buf = io.BytesIO()
    meta = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}\n".format(
        name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(buf, "w", method) as z:
        if metadata_first:
            z.writestr(f"{dist}/METADATA", meta)
        for path, data in files.items():
            z.writestr(path, data)
        if not metadata_first:
            z.writestr(f"{dist}/METADATA", meta)
        z.writestr(f"{dist}/RECORD", "")
    return buf.getvalue()


def patched_members(data: bytes, *, method: int | None = None, flags: int = 0) -> bytes:
    """`data` (a zip) with every member's compression method set to `method` and `flags` or-ed into its flag bits,
    in its local header and its central directory entry alike (what zipfile then believes)."""
    out = bytearray(data)
    zf = zipfile.ZipFile(io.BytesIO(data))
    for info in zf.infolist():
        for at, flag_at, method_at in ((info.header_offset, 6, 8),):
            out[at + flag_at : at + flag_at + 2] = struct.pack("<H", info.flag_bits | flags)
            if method is not None:
                out[at + method_at : at + method_at + 2] = struct.pack("<H", method)
    at = zf.start_dir
    while out[at : at + 4] == b"PK\x01\x02":
        (bits,) = struct.unpack_from("<H", out, at + 8)
        struct.pack_into("<H", out, at + 8, bits | flags)
        if method is not None:
            struct.pack_into("<H", out, at + 10, method)
        n, m, k = struct.unpack_from("<3H", out, at + 28)
        at += 46 + n + m + k
    return bytes(out)


def answer(status: str = "200 OK", body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer, with its Content-Length unless `headers` says otherwise."""
    head = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items() if v)
    return f"HTTP/1.1 {status}\r\n{lines}\r\n".encode() + body


def ranged(data: bytes, range_header: str) -> bytes:
    """The answer of a server with range support to a GET of `data`."""
    if not range_header:
        return answer(body=data)
    first, _, last = range_header.removeprefix("bytes=").partition("-")
    start, end = (max(0, len(data) - int(last)), len(data) - 1) if not first else (int(first), int(last))
    end = min(end, len(data) - 1)
    return answer("206 Partial Content", data[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})


@dataclass
class Request:
    path: str
    headers: dict[str, str]


Step = bytes | float  # bytes are sent, a float is a pause in seconds
Script = Callable[[Request], Iterable[Step]]


@dataclass
class Hostile:
    url: str  # the index's URL, ".../simple/"
    base: str  # "http://127.0.0.1:PORT"
    requests: list[Request] = field(default_factory=list)


@contextlib.contextmanager
def hostile(script: Script) -> Iterator[Hostile]:
    """A server that answers each request with `script(request)`: bytes sent as they come, floats slept."""
    stop = threading.Event()
    born = time.monotonic()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    port = server.getsockname()[1]
    state = Hostile(url=f"http://127.0.0.1:{port}/simple/", base=f"http://127.0.0.1:{port}")

    def alive() -> bool:
        return not stop.is_set() and time.monotonic() - born < MAX_LIFE_S

    def one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                got = conn.recv(4096)
                if not got:
                    return
                head += got
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            request = Request(path=lines[0].split(" ")[1] if " " in lines[0] else "", headers=headers)
            state.requests.append(request)
            conn.settimeout(MAX_LIFE_S)  # sendall's timeout is for the whole answer: a slow reader must not cut it
            for step in script(request):
                if not alive():
                    return
                if isinstance(step, float):
                    stop.wait(step)
                else:
                    conn.sendall(step)

    def serve() -> None:
        while alive():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(5)
        server.close()


def listing(files: list[dict[str, object]]) -> bytes:
    return answer(
        body=json.dumps({"meta": {"api-version": "1.0"}, "files": files}).encode(), headers={"Content-Type": JSON}
    )
