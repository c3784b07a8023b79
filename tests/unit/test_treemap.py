"""`size-report --format html`: the page parses, every rectangle's area is proportional to its bytes, children tile
their parent, and the page references nothing outside itself."""

from __future__ import annotations

import random
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel.cli import main
from slimwheel.postbuild.treemap import Rect, squarify
from testkit.binsynth import elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rects: list[dict[str, str]] = []
        self.tags: list[str] = []
        self.attrs_seen: list[tuple[str, str]] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = {k: v or "" for k, v in attrs}
        self.attrs_seen += list(a.items())
        if tag == "rect":
            self.rects.append(a)

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def _wheel(tmp_path: Path) -> Path:
    rng = random.Random(5)
    mods = b"".join(
        pad8(
            fatbin(
                [
                    fatbin_entry(sm=sm, payload=bytes(rng.randrange(256) for _ in range(n)))
                    for sm, n in ((80, 3000 + 800 * i), (90, 5000 + 64 * i))
                ]
                + [fatbin_entry(kind="ptx", sm=90, payload=b"\x01" * 2048)]
            )
        )
        for i in range(3)
    )
    lib = elf(sections={".text": b"\x90" * 9000, ".rodata": b"r" * 1500, ".nv_fatbin": mods})
    return make_wheel(
        tmp_path,
        name="pkg",
        tag="cp312-abi3-manylinux_2_28_x86_64",
        files={"pkg/_ext.abi3.so": lib, "pkg/__init__.py": b"# " + b"x" * 700, "pkg/data.bin": b"d" * 4000},
    )


@pytest.fixture
def page(tmp_path: Path) -> tuple[_Page, str]:
    out = tmp_path / "report.html"
    assert main(["size-report", str(_wheel(tmp_path)), "--format", "html", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    p = _Page()
    p.feed(text)
    return p, text


def _area(r: dict[str, str]) -> float:
    return float(r["width"]) * float(r["height"])


def test_areas_are_proportional_to_bytes(page: tuple[_Page, str]) -> None:
    p, _ = page
    rects = p.rects
    root = rects[0]
    assert root["data-level"] == "wheel"
    k = _area(root) / int(root["data-bytes"])
    levels = {r["data-level"] for r in rects}
    assert {"file", "section", "arch", "module"} <= levels
    for r in rects:
        b = int(r["data-bytes"])
        w, h = float(r["width"]), float(r["height"])
        # coordinates carry 3 decimals: the area may be off by about half a thousandth of the perimeter
        assert abs(w * h - k * b) <= 0.002 * (w + h) + 1e-6, r


def test_children_tile_their_parent(page: tuple[_Page, str]) -> None:
    p, _ = page
    rects = p.rects
    # rects are emitted depth-first: a parent is followed by its subtree
    for i, r in enumerate(rects):
        d = int(r["data-depth"])
        kids = []
        for s in rects[i + 1 :]:
            sd = int(s["data-depth"])
            if sd <= d:
                break
            if sd == d + 1:
                kids.append(s)
        if not kids:
            continue
        assert sum(int(s["data-bytes"]) for s in kids) == int(r["data-bytes"])
        x0, y0 = float(r["x"]), float(r["y"])
        x1, y1 = x0 + float(r["width"]), y0 + float(r["height"])
        for s in kids:
            assert x0 - 1e-3 <= float(s["x"]) and float(s["x"]) + float(s["width"]) <= x1 + 1e-3
            assert y0 - 1e-3 <= float(s["y"]) and float(s["y"]) + float(s["height"]) <= y1 + 1e-3


def test_the_page_references_nothing_outside_itself(page: tuple[_Page, str]) -> None:
    p, text = page
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(p.tags)
    for name, value in p.attrs_seen:
        assert name not in ("src", "href", "xlink:href"), (name, value)
        assert "://" not in value and "url(" not in value
    assert "://" not in text and "@import" not in text and "url(" not in text


def test_names_from_the_wheel_are_escaped(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, name="pkg", files={"pkg/<script>alert(1)</script>.py": b"x" * 100})
    out = tmp_path / "r.html"
    assert main(["size-report", str(w), "--format", "html", "-o", str(out)]) == 0
    p = _Page()
    p.feed(out.read_text())
    assert "script" not in p.tags


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 10**9), min_size=1, max_size=40), w=st.floats(10, 2000), h=st.floats(10, 2000))
def test_squarify_tiles_the_box(sizes: list[int], w: float, h: float) -> None:
    sizes = sorted(sizes, reverse=True)
    rects = squarify(sizes, Rect(x=0.0, y=0.0, w=w, h=h))
    total = sum(sizes)
    for s, r in zip(sizes, rects, strict=True):
        assert r.w >= -1e-9 and r.h >= -1e-9
        assert (
            r.x >= -1e-6 and r.y >= -1e-6 and r.x + r.w <= w * (1 + 1e-9) + 1e-6 and r.y + r.h <= h * (1 + 1e-9) + 1e-6
        )
        assert abs(r.w * r.h - w * h * s / total) <= 1e-6 * w * h
    assert abs(sum(r.w * r.h for r in rects) - w * h) <= 1e-6 * w * h
