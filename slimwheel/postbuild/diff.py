"""`slimwheel diff OLD NEW`: where a wheel's size changed, per file, ELF section, architecture and fatbin module.

Both wheels are read by the inspect reader (the same numbers size-report shows). Files are matched by path, with the
version in `*.dist-info/` and `*.data/` folder names ignored; sections by name within a file; architectures by kind and
arch within a file; fatbin modules (one container per translation unit) by position within a file, the order the
linker placed them in: containers carry no names, and a build of the same sources links them in the same order. A
module added or removed in the middle shifts the later ones; the per-arch and per-section rows stay exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from slimwheel import shown
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.report import ElfReport, WheelReport, target_totals
from slimwheel.units import human, parse_size

SCHEMA = 1
Level = Literal["wheel", "file", "section", "arch", "module"]
LEVELS: tuple[Level, ...] = ("wheel", "file", "section", "arch", "module")
_VERSIONED_FOLDER = re.compile(r"^[^/]+?-[^/]+?\.(dist-info|data)/")


@dataclass(frozen=True, kw_only=True)
class Change:
    """One thing whose size changed. `old`/`new`: bytes (installed bytes for files, bytes in the file for sections,
    stored fatbin bytes for architectures and modules); None where it does not exist on that side. `old_zip`/`new_zip`:
    the file's compressed bytes in the wheel (file and wheel rows only)."""

    level: Level
    file: str
    what: str
    old: int | None
    new: int | None
    old_zip: int | None = None
    new_zip: int | None = None

    @property
    def delta(self) -> int:
        return (self.new or 0) - (self.old or 0)

    @property
    def zip_delta(self) -> int | None:
        if self.old_zip is None and self.new_zip is None:
            return None
        return (self.new_zip or 0) - (self.old_zip or 0)

    @property
    def percent(self) -> float | None:
        return None if not self.old else 100.0 * self.delta / self.old


@dataclass(frozen=True, kw_only=True)
class Threshold:
    """--fail-over: growth of the wheel (its bytes on disk, what an index stores) beyond `bytes` or `percent`."""

    text: str
    bytes: int | None = None
    percent: float | None = None


@dataclass(frozen=True, kw_only=True)
class WheelDiff:
    old: WheelReport
    new: WheelReport
    changes: tuple[Change, ...]  # wheel row first, then by size of the change, largest first; unchanged rows left out

    @property
    def growth(self) -> int:
        return self.new.size - self.old.size

    @property
    def growth_percent(self) -> float:
        return 100.0 * self.growth / self.old.size if self.old.size else 0.0


def parse_threshold(text: str) -> Threshold:
    """ "5%", "2.5 %", or a size: "1MiB", "500kB", "4096"."""
    t = text.strip()
    if t.endswith("%"):
        try:
            pct = float(t[:-1].strip())
        except ValueError:
            raise BadInputError(f"--fail-over {text!r}: not a percentage", hint="write e.g. 5% or 1MiB") from None
        if pct < 0:
            raise BadInputError(f"--fail-over {text!r}: a percentage below zero")
        return Threshold(text=t, percent=pct)
    return Threshold(text=t, bytes=parse_size(t, what="--fail-over"))


def _file_key(name: str) -> str:
    return _VERSIONED_FOLDER.sub(lambda m: f"*.{m.group(1)}/", name)


def _pairs(old: dict[str, int], new: dict[str, int]) -> Iterable[tuple[str, int | None, int | None]]:
    for k in sorted(set(old) | set(new)):
        yield k, old.get(k), new.get(k)


def _arch_sizes(elf: ElfReport | None) -> dict[str, int]:
    if elf is None:
        return {}
    totals = target_totals([e for fb in elf.fatbins for e in fb.entries])
    return {f"{t.kind} {t.arch}": t.stored for t in totals}


def _module_sizes(elf: ElfReport | None) -> dict[str, int]:
    if elf is None:
        return {}
    out = {}
    for i, fb in enumerate(elf.fatbins):
        archs = ",".join(f"{'sm' if e.kind == 'sass' else e.kind}_{e.arch}" for e in fb.entries) or "empty"
        out[f"module #{i} ({archs})"] = fb.size
    return out


def _by_position(old: dict[str, int], new: dict[str, int]) -> Iterable[tuple[str, int | None, int | None]]:
    """Modules are paired by position (#i); the label shows the new side's entries where both exist."""
    o, n = list(old.items()), list(new.items())
    for i in range(max(len(o), len(n))):
        if i < len(n):
            yield n[i][0], (o[i][1] if i < len(o) else None), n[i][1]
        else:
            yield o[i][0], o[i][1], None


def diff_reports(old: WheelReport, new: WheelReport) -> WheelDiff:
    changes: list[Change] = [
        Change(
            level="wheel",
            file="",
            what="wheel",
            old=old.installed_size,
            new=new.installed_size,
            old_zip=old.size,
            new_zip=new.size,
        )
    ]
    old_files = {_file_key(f.name): f for f in old.files}
    new_files = {_file_key(f.name): f for f in new.files}
    old_elfs = {_file_key(e.name): e for e in old.elfs}
    new_elfs = {_file_key(e.name): e for e in new.elfs}
    rest: list[Change] = []
    for key in sorted(set(old_files) | set(new_files)):
        of, nf = old_files.get(key), new_files.get(key)
        rest.append(
            Change(
                level="file",
                file=key,
                what=key,
                old=of.uncompressed if of else None,
                new=nf.uncompressed if nf else None,
                old_zip=of.compressed if of else None,
                new_zip=nf.compressed if nf else None,
            )
        )
        oe, ne = old_elfs.get(key), new_elfs.get(key)
        if oe is None and ne is None:
            continue
        for name, a, b in _pairs(oe.sections if oe else {}, ne.sections if ne else {}):
            rest.append(Change(level="section", file=key, what=name, old=a, new=b))
        for name, a, b in _pairs(_arch_sizes(oe), _arch_sizes(ne)):
            rest.append(Change(level="arch", file=key, what=name, old=a, new=b))
        for name, a, b in _by_position(_module_sizes(oe), _module_sizes(ne)):
            rest.append(Change(level="module", file=key, what=name, old=a, new=b))
    changed = [c for c in rest if c.old != c.new or c.old_zip != c.new_zip]
    # Largest first, by whichever of installed or zip bytes changed more (slimming keeps a file's size, not its zip).
    changed.sort(key=lambda c: (-max(abs(c.delta), abs(c.zip_delta or 0)), LEVELS.index(c.level), c.file, c.what))
    return WheelDiff(old=old, new=new, changes=(*changes, *changed))


def over_threshold(d: WheelDiff, t: Threshold) -> str | None:
    """Why the growth is over `t`, or None."""
    if t.bytes is not None and d.growth > t.bytes:
        return f"the wheel grew by {d.growth} bytes ({human(d.growth)}), more than --fail-over {t.text}"
    if t.percent is not None and d.growth > 0 and d.growth_percent > t.percent:
        return f"the wheel grew by {d.growth_percent:.2f}% ({human(d.growth)}), more than --fail-over {t.text}"
    return None


def raise_over(d: WheelDiff, t: Threshold | None) -> None:
    """CheckFailed with OVER_BUDGET (10): a growth beyond the allowed one is a size budget, relative to OLD."""
    if t is not None and (why := over_threshold(d, t)):
        raise CheckFailed(f"{d.new.path.name}: {why}", ExitCode.OVER_BUDGET)


def _signed(n: int | None) -> str:
    if n is None:
        return ""
    return ("+" if n > 0 else "-" if n < 0 else "±") + human(abs(n))


def _size(n: int | None) -> str:
    return "-" if n is None else human(n)


def _pct(c: Change) -> str:
    if c.old is None:
        return "new"
    if c.new is None:
        return "removed"
    p = c.percent
    return "" if p is None else f"{p:+.1f}%"


def diff_to_json(d: WheelDiff, threshold: Threshold | None = None) -> dict[str, Any]:
    """Versioned ("schema": 1); sizes in bytes."""
    return {
        "schema": SCHEMA,
        "old": {
            "wheel": str(d.old.path),
            "bytes": d.old.size,
            "installed_bytes": d.old.installed_size,
            "targets": [str(t) for t in d.old.targets],
        },
        "new": {
            "wheel": str(d.new.path),
            "bytes": d.new.size,
            "installed_bytes": d.new.installed_size,
            "targets": [str(t) for t in d.new.targets],
        },
        "growth_bytes": d.growth,
        "growth_percent": round(d.growth_percent, 4),
        "fail_over": None if threshold is None else threshold.text,
        "over": None if threshold is None else over_threshold(d, threshold),
        "changes": [
            {
                "level": c.level,
                "file": c.file,
                "what": c.what,
                "old_bytes": c.old,
                "new_bytes": c.new,
                "delta_bytes": c.delta,
                **(
                    {"old_zip_bytes": c.old_zip, "new_zip_bytes": c.new_zip, "zip_delta_bytes": c.zip_delta}
                    if c.zip_delta is not None
                    else {}
                ),
            }
            for c in d.changes
        ],
    }


def render_json(d: WheelDiff, threshold: Threshold | None = None) -> str:
    return json.dumps(diff_to_json(d, threshold), indent=2) + "\n"


def render_markdown(d: WheelDiff, threshold: Threshold | None = None, *, rows: int = 40) -> str:
    """A block for $GITHUB_STEP_SUMMARY: the verdict, then the largest changes."""
    why = over_threshold(d, threshold) if threshold else None
    mark = "❌" if why else ("📈" if d.growth > 0 else "📉" if d.growth < 0 else "✅")
    lines = [
        f"### {mark} slimwheel diff: {shown.md_code(d.old.path.name)} → {shown.md_code(d.new.path.name)}",
        "",
        f"Wheel: {human(d.old.size)} → {human(d.new.size)} (**{_signed(d.growth)}**, {d.growth_percent:+.2f}%); "
        f"installed: {human(d.old.installed_size)} → {human(d.new.installed_size)} "
        f"({_signed(d.new.installed_size - d.old.installed_size)}).",
    ]
    if threshold is not None:
        lines.append("")
        lines.append(
            f"**Over the limit:** {shown.md_text(why)}"
            if why
            else f"Within --fail-over {shown.md_text(threshold.text)}."
        )
    if set(d.old.targets) != set(d.new.targets):
        gone = sorted(str(t) for t in set(d.old.targets) - set(d.new.targets))
        added = sorted(str(t) for t in set(d.new.targets) - set(d.old.targets))
        lines += ["", f"GPU targets: added {', '.join(added) or '-'}; removed {', '.join(gone) or '-'}."]
    body = [c for c in d.changes if c.level != "wheel"]
    lines += ["", "| level | file | what | old | new | change | % |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for c in body[:rows]:
        # a section's name is the file's; module and architecture labels are ours, from parsed numbers
        what = "" if c.level == "file" else shown.md_code(c.what, table=True) if c.level == "section" else c.what
        change = _signed(c.delta) + (f" (zip {_signed(c.zip_delta)})" if c.zip_delta is not None else "")
        lines.append(
            f"| {c.level} | {shown.md_code(c.file, table=True)} | {what} | {_size(c.old)} | {_size(c.new)} | {change} | "
            f"{_pct(c)} |"
        )
    if not body:
        lines.append("| - | - | no change | | | | |")
    if len(body) > rows:
        lines.append(f"\n{len(body) - rows} smaller changes not shown (`--format json` lists all).")
    lines += ["", "_Sizes: KiB/MiB = 2\\*\\*10/2\\*\\*20 bytes; files: installed bytes, zip bytes in brackets._", ""]
    return "\n".join(lines)


def render_table(d: WheelDiff, console: Console, threshold: Threshold | None = None, *, rows: int = 40) -> None:
    console.print(
        f"{shown.markup(d.old.path.name)} -> {shown.markup(d.new.path.name)}: wheel {human(d.old.size)} -> {human(d.new.size)} "
        f"({_signed(d.growth)}, {d.growth_percent:+.2f}%), installed {human(d.old.installed_size)} -> "
        f"{human(d.new.installed_size)}"
    )
    table = Table(show_edge=False, pad_edge=False)
    for col, justify in (
        ("level", "left"),
        ("file", "left"),
        ("what", "left"),
        ("old", "right"),
        ("new", "right"),
        ("change", "right"),
        ("%", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    body = [c for c in d.changes if c.level != "wheel"]
    for c in body[:rows]:
        change = _signed(c.delta) + (f" (zip {_signed(c.zip_delta)})" if c.zip_delta is not None else "")
        table.add_row(
            c.level,
            shown.markup(c.file),
            "" if c.level == "file" else shown.markup(c.what),
            _size(c.old),
            _size(c.new),
            change,
            _pct(c),
        )
    console.print(table)
    if len(body) > rows:
        console.print(f"{len(body) - rows} smaller changes not shown (--format json lists all)")
    if threshold is not None:
        why = over_threshold(d, threshold)
        console.print(
            f"over the limit: {shown.markup(why)}" if why else f"within --fail-over {shown.markup(threshold.text)}"
        )
    console.print("sizes: KiB/MiB = 2**10/2**20 bytes; files: installed bytes, zip bytes in brackets")
