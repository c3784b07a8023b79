"""`size-report --format html`: a treemap of where a wheel's installed bytes go, as one self-contained HTML page.

Levels: files -> ELF sections -> architectures (in fatbin sections) -> CUDA modules (the containers holding that
architecture's code). Every rectangle's area is proportional to its bytes: children tile their parent exactly (no
padding eats area), parents are told apart by their outlines and by the tooltip (an SVG <title>) that names the
whole path. Bytes no child accounts for become an explicit node ("headers, padding"), so the tiling stays exact.
Inline SVG and CSS only: no script, no font, no link to anything outside the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from slimwheel import shown
from slimwheel.inspect.elf import FATBIN_SECTIONS
from slimwheel.inspect.report import ElfReport, WheelReport, target_totals
from slimwheel.units import human, mb, mib

NodeKind = Literal["wheel", "file", "section", "arch", "module", "rest"]
WIDTH = 1200.0
HEIGHT = 720.0


@dataclass(frozen=True, kw_only=True)
class Node:
    name: str
    kind: NodeKind
    size: int
    children: tuple[Node, ...] = ()
    arch_kind: str = ""  # arch and module nodes: sass | ptx | lto-ir


@dataclass(frozen=True, kw_only=True)
class Rect:
    x: float
    y: float
    w: float
    h: float


def _inner(name: str, kind: NodeKind, children: list[Node], total: int, rest_name: str) -> Node:
    """A node whose children are `children` plus, when they fall short of `total`, one node for the rest."""
    kids = [c for c in children if c.size > 0]
    covered = sum(c.size for c in kids)
    if total > covered and kids:
        kids.append(Node(name=rest_name, kind="rest", size=total - covered))
    return Node(name=name, kind=kind, size=max(total, covered), children=tuple(kids))


def _fatbin_children(elf: ElfReport) -> list[Node]:
    """Per (kind, arch): one node, split by module (container), from the entries' stored payload bytes."""
    out = []
    for t in target_totals([e for fb in elf.fatbins for e in fb.entries]):
        modules = []
        for i, fb in enumerate(elf.fatbins):
            n = sum(e.stored_size for e in fb.entries if (e.kind, e.arch) == (t.kind, t.arch))
            if n:
                modules.append(Node(name=f"module #{i}", kind="module", size=n, arch_kind=t.kind))
        label = f"{'sm' if t.kind == 'sass' else t.kind}_{t.arch}"
        out.append(Node(name=label, kind="arch", size=t.stored, children=tuple(modules), arch_kind=t.kind))
    return out


def _elf_node(elf: ElfReport, installed: int) -> Node:
    fat = _fatbin_children(elf)
    if elf.kind in ("fatbin", "cubin"):  # the file is its device code
        return _inner(elf.name, "file", fat, installed, "headers, padding")
    # The fatbin entries go under the fatbin section that can hold them (one per file in practice).
    host = next((s for s in FATBIN_SECTIONS if elf.sections.get(s, 0) >= sum(n.size for n in fat)), None)
    sections = []
    for name, size in sorted(elf.sections.items(), key=lambda kv: -kv[1]):
        if name == host and fat:
            sections.append(_inner(name, "section", fat, size, "headers, padding, zeros"))
        else:
            sections.append(Node(name=name or "(unnamed)", kind="section", size=size))
    return _inner(elf.name, "file", sections, installed, "ELF headers, gaps")


def build_tree(report: WheelReport) -> Node:
    elfs = {e.name: e for e in report.elfs}
    files = []
    for f in report.files:
        elf = elfs.get(f.name)
        files.append(_elf_node(elf, f.uncompressed) if elf else Node(name=f.name, kind="file", size=f.uncompressed))
    return _inner(report.path.name, "wheel", files, 0, "")


def squarify(sizes: Sequence[int], box: Rect) -> list[Rect]:
    """Rectangles tiling `box`, one per size (in the given order, which should be largest first), with areas
    proportional to the sizes and aspect ratios kept near 1 (Bruls, Huizing, van Wijk: squarified treemaps)."""
    total = sum(sizes)
    if total <= 0 or box.w <= 0 or box.h <= 0:
        return [Rect(x=box.x, y=box.y, w=0.0, h=0.0) for _ in sizes]
    scale = box.w * box.h / total
    areas = [s * scale for s in sizes]
    out: list[Rect] = []
    x, y, w, h = box.x, box.y, box.w, box.h
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        j = i + 1
        while j < len(areas) and _worst([*row, areas[j]], side) <= _worst(row, side):
            row.append(areas[j])
            j += 1
        if j == len(areas):
            row_area = w * h  # the last row takes what is left: no rounding gap at the far edge
        else:
            row_area = sum(row)
        thick = row_area / side if side else 0.0
        row_sum = sum(row)
        pos = 0.0
        for a in row:
            length = side * a / row_sum if row_sum else 0.0
            if w >= h:  # the row is a column on the left
                out.append(Rect(x=x, y=y + pos, w=thick, h=length))
            else:  # the row is a strip on top
                out.append(Rect(x=x + pos, y=y, w=length, h=thick))
            pos += length
        if w >= h:
            x, w = x + thick, w - thick
        else:
            y, h = y + thick, h - thick
        i = j
    return out


def _worst(row: list[float], side: float) -> float:
    s = sum(row)
    if s <= 0 or side <= 0:
        return float("inf")
    return max(max(side * side * r / (s * s), (s * s) / (side * side * r)) if r > 0 else float("inf") for r in row)


_SECTION_CLASS = {
    ".text": "text",
    ".rodata": "rodata",
    ".data": "data",
    ".nv_fatbin": "fatbin",
    "__nv_relfatbin": "fatbin",
}


def _css_class(node: Node, depth: int) -> str:
    if node.kind in ("arch", "module"):
        return f"n {node.kind} {node.arch_kind}"
    if node.kind == "section":
        return f"n section s-{_SECTION_CLASS.get(node.name, 'other')}"
    return f"n {node.kind} d{min(depth, 3)}"


def _svg(node: Node, box: Rect, path: list[str], depth: int, out: list[str]) -> None:
    here = [*path, node.name]
    title = " / ".join(here) + f": {node.size} bytes ({human(node.size)})"
    out.append(
        f'<rect class="{_css_class(node, depth)}" x="{box.x:.3f}" y="{box.y:.3f}" width="{box.w:.3f}" '
        f'height="{box.h:.3f}" data-bytes="{node.size}" data-level="{node.kind}" data-depth="{depth}">'
        f"<title>{shown.html(title)}</title></rect>"
    )
    if node.children:
        kids = sorted(node.children, key=lambda c: -c.size)
        for child, r in zip(kids, squarify([c.size for c in kids], box), strict=True):
            _svg(child, r, here, depth + 1, out)
    elif box.w > 56 and box.h > 15:
        # Leaves carry their label when it fits; parents are named in tooltips and in the table below.
        chars = int(box.w / 6.5)
        label = node.name if len(node.name) <= chars else node.name[: max(chars - 1, 1)] + "…"
        out.append(f'<text x="{box.x + 3:.3f}" y="{box.y + 12:.3f}">{shown.html(label)}</text>')


_CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h2{font-size:16px;margin:18px 0 4px} p{margin:4px 0}
svg{background:#fff;border:1px solid #999}
rect.n{stroke:#fff;stroke-width:.5}
rect.wheel{fill:#eee}
rect.file{fill:#d9d9d9;stroke:#222;stroke-width:2}
rect.section{stroke:#555;stroke-width:1}
rect.s-text{fill:#8fb3de} rect.s-rodata{fill:#c3a6e0} rect.s-data{fill:#e6c88f} rect.s-other{fill:#c8c8c8}
rect.s-fatbin{fill:#9fd49f}
rect.arch{stroke:#2d5e2d;stroke-width:1}
rect.arch.sass,rect.module.sass{fill:#7cc47c} rect.arch.ptx,rect.module.ptx{fill:#f0a860}
rect.arch.lto-ir,rect.module.lto-ir{fill:#e07d9a}
rect.rest{fill:#f4f4f4}
rect.module{stroke:#fff;stroke-width:.6}
rect.n:hover{fill-opacity:.75}
text{font-size:11px;fill:#111;pointer-events:none}
table{border-collapse:collapse;margin-top:8px} td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
td.r{text-align:right} .sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
"""

_LEGEND = (
    ("#8fb3de", ".text (host code)"),
    ("#c3a6e0", ".rodata"),
    ("#7cc47c", "SASS (cubin) by architecture"),
    ("#f0a860", "PTX by architecture"),
    ("#c8c8c8", "other sections"),
    ("#d9d9d9", "files that are not ELF"),
    ("#f4f4f4", "headers, padding, gaps"),
)


def render_html(reports: Sequence[WheelReport], *, width: float = WIDTH, height: float = HEIGHT) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>slimwheel size report</title>",
        f"<style>{_CSS}</style></head><body>",
        '<h1 style="font-size:18px">slimwheel size report</h1>',
        "<p>Area is proportional to installed bytes: files, their ELF sections, the fatbin section's architectures, "
        "and the CUDA modules holding each architecture. Hover for names and exact sizes. "
        "MiB = 2**20 bytes, MB = 10**6 bytes.</p>",
        "<p>"
        + " ".join(f'<span class="sw" style="background:{c}"></span>{shown.html(t)}&nbsp;&nbsp;' for c, t in _LEGEND)
        + "</p>",
    ]
    for report in reports:
        tree = build_tree(report)
        parts.append(f"<h2>{shown.html(report.path.name)}</h2>")
        parts.append(
            f"<p>wheel {mib(report.size)} ({mb(report.size)}) on disk, {mib(report.installed_size)} "
            f"({mb(report.installed_size)}) installed; targets: {shown.html(' '.join(map(str, report.targets)) or '-')}"
            "</p>"
        )
        svg: list[str] = []
        _svg(tree, Rect(x=0.0, y=0.0, w=width, h=height), [], 0, svg)
        parts.append(
            f'<svg width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img">' + "".join(svg) + "</svg>"
        )
        parts.append("<table><tr><th>file</th><th>installed</th><th>share</th><th>in the wheel (zip)</th></tr>")
        total = report.installed_size or 1
        for f in sorted(report.files, key=lambda f: -f.uncompressed)[:15]:
            parts.append(
                f"<tr><td>{shown.html(f.name)}</td><td class=r>{human(f.uncompressed)}</td>"
                f"<td class=r>{100 * f.uncompressed / total:.1f}%</td><td class=r>{human(f.compressed)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
