"""Reports for people and machines: a terminal table (rich), Markdown for CI job summaries, versioned JSON.

Sizes always carry their unit: MiB = 2**20 bytes, MB = 10**6 bytes (said once in every report).
"""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slimwheel import distcheck, shown, textable
from slimwheel.textable import Cell, Column, Style, styled

if TYPE_CHECKING:  # check imports the dependency rules (packaging, pyelftools): size-report needs none of them
    from rich.console import Console  # imported where used: size-report's tables are drawn without rich
    from rich.text import Text

    from slimwheel.check import Verdict
from slimwheel.inspect.devicecode import future_line, kernelless_line, no_device_code_line
from slimwheel.inspect.duplicates import fix_text
from slimwheel.inspect.report import (
    SCHEMA,
    WheelReport,
    coverage_rows,
    report_to_json,
    target_totals,
)
from slimwheel.units import human, mb, mib

UNITS_NOTE = "MiB = 2**20 bytes, MB = 10**6 bytes"
TOP_FILES = 12
_MAIN_SECTIONS = (".text", ".nv_fatbin", "__nv_relfatbin", ".rodata")
_HOW = {"sass": "SASS", "ptx": "PTX JIT", "none": "not at all", "n/a": "n/a"}
_KIND_LABEL = {"lto-ir": "LTO-IR", "tile-ir": "Tile IR"}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _coverage(report: WheelReport) -> list[tuple[str, str, str, str]]:
    """coverage_rows, with integrated GPUs shown as not applicable to an x86_64 wheel."""
    from slimwheel.cuda.arch import CC, generation

    out = []
    for cc, gpu, how, via in coverage_rows(report):
        g = generation(CC.parse(cc))
        if g is not None and g.integrated and report.is_x86_64:
            how = "n/a"
            via = "aarch64 only"
        out.append((cc, gpu, how, via))
    return out


def _alternative_lines(report: WheelReport) -> list[str]:
    """One line per alternative: its coverage and driver floor, never merged with the others'."""
    out = []
    for a in report.alternatives:
        ptx = f"; PTX JIT only: {', '.join(a.ptx_only)}" if a.ptx_only else ""
        floor = f"; driver >= {a.driver_floor}" if a.driver_floor else ""
        if a.ptx_driver_floor and a.ptx_driver_floor != a.driver_floor:
            floor += f" ({a.ptx_driver_floor} to JIT-compile its PTX)"
        out.append(f"{a.file} (CUDA {a.cuda}): SASS: {', '.join(a.sass) or '-'}{ptx}{floor}")
    return out


def _coverage_lines(report: WheelReport) -> list[str]:
    empty = [line for line in (future_line(report), no_device_code_line(report), kernelless_line(report)) if line]
    if report.alternatives:
        return [
            f"{len(report.alternatives)} alternatives, one loaded per process by CUDA version; each serves:",
            *(f"  {line}" for line in _alternative_lines(report)),
            *empty,
        ]
    return [_coverage_summary(report), *empty]


def _coverage_summary(report: WheelReport) -> str:
    rows = _coverage(report)
    by = {k: [cc for cc, _, how, _ in rows if how == k] for k in ("sass", "ptx", "none")}
    parts = [
        f"SASS: {', '.join(by['sass']) or '-'}",
        f"PTX JIT only: {', '.join(by['ptx']) or '-'}",
        f"not at all: {', '.join(by['none']) or '-'}",
    ]
    return "; ".join(parts)


def _driver_lines(report: WheelReport) -> list[str]:
    lines = []
    cuda = f"CUDA {report.cuda_major}" if report.cuda_major else "CUDA major unknown"
    lines.append(f"{cuda} ({report.cuda_major_why}); fatbin compression: {', '.join(report.compression) or '-'}")
    if report.alternatives:
        # the floors of the mixture would mix the alternatives': each one's is on its own line
        lines.append("minimum driver: per alternative (above)")
        lines.extend(f"  - {w}" for w in report.driver_why if "alternative" in w)
        return lines
    if report.driver_floor:
        from slimwheel.cuda.arch import Kind

        sass = any(t.kind is Kind.SASS for t in report.targets)
        if report.ptx_driver_floor and not sass and report.ptx_driver_floor == report.driver_floor:
            # PTX only (gpt4all 2.8.2): the one floor is the JIT's; "(SASS)" named code the wheel does not have
            floor = f"{report.driver_floor} (its code is PTX only, JIT-compiled by the driver)"
        elif report.ptx_driver_floor:
            floor = (
                f"{report.driver_floor}{' (SASS)' if sass else ''}; {report.ptx_driver_floor} for GPUs that "
                "JIT-compile the PTX"
            )
        else:
            floor = report.driver_floor
        lines.append(f"minimum driver: {floor}")
    lines.extend(f"  - {w}" for w in report.driver_why)
    return lines


def report_text(report: WheelReport, *, width: int, color: bool, entries: bool = False) -> str:
    """The readable terminal report of one wheel (`slimwheel.textable`: see there why not rich)."""
    # Names, requirements and messages come from the wheel: escaped for the terminal (slimwheel.shown).
    t = shown.terminal
    out = [
        f"{styled(t(report.path.name), Style.BOLD, color=color)}  {t(report.name)} {t(report.version)}",
        f"  {mb(report.size)} ({mib(report.size)}) on disk, {mib(report.installed_size)} installed, "
        f"{len(report.files)} files, {len(report.elfs)} ELF; sizes: {UNITS_NOTE}",
    ]

    def put(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str | Cell]]) -> None:
        out.extend(textable.table(title, columns, rows, width=width, color=color))

    ordered = sorted(report.files, key=lambda f: -f.compressed)
    rows: list[Sequence[str | Cell]] = [
        (t(f.name), human(f.compressed), human(f.uncompressed), _pct(f.share)) for f in ordered[:TOP_FILES]
    ]
    if len(ordered) > TOP_FILES:
        rest = ordered[TOP_FILES:]
        rows.append(
            (
                f"... {len(rest)} more",
                human(sum(f.compressed for f in rest)),
                human(sum(f.uncompressed for f in rest)),
                _pct(sum(f.share for f in rest)),
            )
        )
    put(
        "Largest files",
        (
            Column("file", fold=True),
            Column("in wheel", right=True),
            Column("installed", right=True),
            Column("share", right=True),
        ),
        rows,
    )
    if report.duplicates:
        _duplicates_table(report, put)
        out.extend(f"  {t(fix_text(g))}" for g in report.duplicates if g.soname_chain)
    if report.elfs:
        main_secs = [s for s in _MAIN_SECTIONS if any(s in e.sections for e in report.elfs)]
        debug = _debug_infos(report)
        rows = []
        for e in report.elfs:
            # debug info has a column of its own (when a file has any), and is not counted again in "other"
            dbg = debug.get(e.name)
            other = sum(v for k, v in e.sections.items() if k not in main_secs) - (
                dbg.stripped_would_save if dbg else 0
            )
            rows.append(
                (
                    t(e.name),
                    human(e.size),
                    *[human(e.sections[s]) if s in e.sections else "" for s in main_secs],
                    *([Cell(human(dbg.stripped_would_save), Style.RED) if dbg else ""] if debug else []),
                    human(other),
                    str(len(e.fatbins)),
                )
            )
        put(
            "ELF files: section sizes (installed)",
            (
                Column("file", fold=True),
                Column("size", right=True),
                *(Column(s, right=True) for s in main_secs),
                *([Column("debug info", right=True)] if debug else []),
                Column("other", right=True),
                Column("fatbins", right=True),
            ),
            rows,
        )
        if debug:
            out.append(f"  {_debug_line(debug)}")
        rows = []
        for e in report.elfs:
            paths = "\n".join(
                t(p) for p in (f"RPATH {e.rpath}" if e.rpath else "", f"RUNPATH {e.runpath}" if e.runpath else "") if p
            )
            rows.append((t(e.name), t(e.soname or ""), paths, t(", ".join(e.needed))))
        put(
            "ELF files: dynamic linking",
            tuple(Column(c, fold=True) for c in ("file", "SONAME", "RPATH / RUNPATH", "NEEDED")),
            rows,
        )
    totals = target_totals(report.fatbin_entries)
    if totals:
        rows = []
        for tot in totals:
            ratio = f"{tot.stored / tot.uncompressed:.2f}" if tot.uncompressed else ""
            rows.append(
                (
                    _KIND_LABEL.get(tot.kind, tot.kind.upper()),
                    tot.arch,
                    str(tot.count),
                    human(tot.stored),
                    human(tot.uncompressed),
                    ratio,
                )
            )
        put(
            "Fatbin entries by kind and arch (all ELF files)",
            (
                Column("kind"),
                Column("arch"),
                Column("entries", right=True),
                Column("stored", right=True),
                Column("uncompressed", right=True),
                Column("ratio", right=True),
            ),
            rows,
        )
    if entries:
        _entries_tables(report, put)
    style = {"sass": Style.GREEN, "ptx": Style.YELLOW, "none": Style.RED, "n/a": Style.DIM}
    put(
        "GPU coverage",
        tuple(Column(c, fold=c == "target") for c in ("CC", "GPU", "runs by", "target")),
        [(cc, gpu, Cell(_HOW[how], style[how]), t(via)) for cc, gpu, how, via in _coverage(report)],
    )
    out.extend(f"  {t(line)}" for line in _coverage_lines(report))
    out.extend(f"  {t(line)}" for line in _driver_lines(report))
    return "\n".join(out) + "\n"


_Put = Callable[[str, Sequence[Column], Sequence[Sequence["str | Cell"]]], None]


def _duplicates_table(report: WheelReport, put: _Put) -> None:
    t = shown.terminal
    wasted, wasted_installed = report.duplicate_waste
    put(
        f"Byte-identical files: {human(wasted)} wasted in the wheel, {human(wasted_installed)} installed",
        (
            Column("files", fold=True),
            Column("each", right=True),
            Column("wasted in wheel", right=True),
            Column("installed", right=True),
        ),
        [
            ("\n".join(t(n) for n in g.names), human(g.size), human(g.wasted_compressed), human(g.wasted_uncompressed))
            for g in report.duplicates
        ],
    )


def _entries_tables(report: WheelReport, put: _Put) -> None:
    """`--entries`: each fatbin's members, one table per container."""
    t = shown.terminal
    for e in report.elfs:
        for i, fb in enumerate(e.fatbins):
            put(
                f"{t(e.name)}: fatbin {i + 1} at {fb.offset:#x} [{t(fb.section or 'file')}], {human(fb.size)}"
                + ("" if fb.kernels else ", no kernels"),
                tuple(Column(c) for c in ("kind", "arch", "compression", "stored", "uncompressed", "PTX ISA")),
                [
                    (
                        en.kind,
                        en.arch,
                        en.compression,
                        human(en.stored_size),
                        human(en.uncompressed_size),
                        f"{en.ptx_isa[0]}.{en.ptx_isa[1]}" if en.ptx_isa else "",
                    )
                    for en in fb.entries
                ],
            )


def _debug_infos(report: WheelReport) -> dict[str, distcheck.DebugInfo]:
    """The ELF files check's debug-symbols rule fails, by name, with what stripping them would remove."""
    infos = (distcheck.debug_info(e) for e in report.elfs)
    return {i.elf: i for i in infos if distcheck.unstripped(i)}


def _debug_line(debug: Mapping[str, distcheck.DebugInfo]) -> str:
    total = sum(i.stripped_would_save for i in debug.values())
    n = len(debug)
    return (
        f"debug info: {human(total)} installed in {n} ELF file{'s' if n != 1 else ''} not stripped (.debug_* "
        "sections, symbol tables over 1 MiB): check fails it; `slimwheel repair --strip` removes it"
    )


def reports_text(reports: Sequence[WheelReport], *, color: bool, entries: bool = False) -> str:
    """size-report's table format: each wheel's report, a blank line between them; as wide as the terminal when
    colour goes to one, else 160 columns (logs, files, pipes)."""
    width = 160
    if color:
        import shutil

        width = shutil.get_terminal_size((160, 24)).columns
    return "\n".join(report_text(r, width=width, color=color, entries=entries) for r in reports)


def render_markdown(reports: Sequence[WheelReport], verdicts: Sequence[Verdict] = (), *, entries: bool = False) -> str:
    """Markdown for a CI job summary ($GITHUB_STEP_SUMMARY)."""
    out: list[str] = []
    by_wheel = {v.wheel: v for v in verdicts}
    for r in reports:
        out.append(f"### {shown.md_code(r.path.name)}\n")
        v = by_wheel.get(str(r.path))
        if v is not None:
            out.append(("**check: passed**" if v.ok else "**check: FAILED**") + "\n")
            out.extend(f"- :x: {f.kind}: {shown.md_text(f.message)}" for f in v.failures)
            out.extend(f"- {shown.md_text(n, line_start=True)}" for n in v.notes)
            out.append("")
        out.append(
            f"{shown.md_text(r.name, line_start=True)} {shown.md_text(r.version)}: **{mb(r.size)} ({mib(r.size)})** on "
            f"disk, {mib(r.installed_size)} "
            f"installed, {len(r.files)} files ({shown.md_text(UNITS_NOTE)}).\n"
        )
        out.append("| file | in wheel | installed | share |\n| --- | ---: | ---: | ---: |")
        for f in sorted(r.files, key=lambda f: -f.compressed)[:TOP_FILES]:
            out.append(
                f"| {shown.md_code(f.name, table=True)} | {human(f.compressed)} | {human(f.uncompressed)} | "
                f"{_pct(f.share)} |"
            )
        out.append("")
        if debug := _debug_infos(r):
            out.append(f"- :warning: {shown.md_text(_debug_line(debug), line_start=True)}\n")
        if r.elfs:
            out.append("| ELF | size | .text | .nv_fatbin | .rodata | fatbins | SONAME | RPATH / RUNPATH | NEEDED |")
            out.append("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
            for e in r.elfs:
                sec = [human(e.sections[s]) if s in e.sections else "" for s in (".text", ".nv_fatbin", ".rodata")]
                paths = " / ".join(p for p in (e.rpath, e.runpath) if p)
                out.append(
                    f"| {shown.md_code(e.name, table=True)} | {human(e.size)} | {' | '.join(sec)} | {len(e.fatbins)} | "
                    f"{shown.md_code(e.soname or '', table=True)} | {shown.md_code(paths, table=True)} | "
                    f"{', '.join(shown.md_code(n, table=True) for n in e.needed)} |"
                )
            out.append("")
        totals = target_totals(r.fatbin_entries)
        if totals:
            out.append("| kind | arch | entries | stored | uncompressed |\n| --- | --- | ---: | ---: | ---: |")
            for t in totals:
                out.append(f"| {t.kind} | {t.arch} | {t.count} | {human(t.stored)} | {human(t.uncompressed)} |")
            out.append("")
        if entries:
            for e in r.elfs:
                for i, fb in enumerate(e.fatbins):
                    out.append(
                        f"{shown.md_code(e.name)} fatbin {i + 1}: "
                        + ", ".join(
                            f"{en.kind} {en.arch} ({en.compression}, {human(en.stored_size)} stored, "
                            f"{human(en.uncompressed_size)})"
                            for en in fb.entries
                        )
                        + ("" if fb.kernels else " (no kernels)")
                    )
            out.append("")
        out.append("| CC | GPU | runs by | target |\n| --- | --- | --- | --- |")
        for cc, gpu, how, via in _coverage(r):
            out.append(f"| {cc} | {gpu} | {_HOW[how]} | {via} |")  # targets and GPU names: ours, from numbers
        out.append("")
        out.append(
            "\n".join(
                f"- {shown.md_text(line.strip(), line_start=True)}"
                if r.alternatives
                else shown.md_text(line, line_start=True)
                for line in _coverage_lines(r)
            )
            + "\n"
        )
        out.extend(f"- {shown.md_text(line.strip().removeprefix('- '), line_start=True)}" for line in _driver_lines(r))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(reports: Sequence[WheelReport], verdicts: Sequence[Verdict] | None = None) -> str:
    """{"schema": 1, "wheels": [...], "verdicts": [...] (check only)}."""
    wheels = []
    for r in reports:
        d = report_to_json(r)
        d.pop("schema")
        wheels.append(d)
    doc: dict[str, Any] = {"schema": SCHEMA, "units": "bytes", "wheels": wheels}
    if verdicts is not None:
        from slimwheel.check import verdict_to_json

        doc["verdicts"] = [verdict_to_json(v) for v in verdicts]
    import json  # only this format needs it: the table and Markdown reports start without it

    return json.dumps(doc, indent=2) + "\n"


def verdicts_text(verdicts: Sequence[Verdict], *, notes: bool = True, color: bool) -> str:
    """PASS/FAIL per wheel with its failures; its notes unless `notes` is off (`-q`: only errors and the verdict).
    Plain lines, styled by `textable` (no rich: importing it and drawing with it cost `check` of a small wheel 25-30 ms,
    a fifth of its run). Names and messages come from the wheel: escaped for the terminal (slimwheel.shown)."""
    lines = []
    for v in verdicts:
        head = styled("PASS", Style.GREEN, color=color) if v.ok else styled("FAIL", Style.RED, color=color)
        lines += [f"{head} {shown.terminal(_wheel_name(v))}", *_verdict_lines(v, notes=notes)]
    return "".join(f"{line}\n" for line in lines)


def render_verdicts(verdicts: Sequence[Verdict], console: Console, *, notes: bool = True) -> None:
    """`verdicts_text`'s lines on a rich console (slim's and variants' reports, drawn with rich tables around them)."""
    for v in verdicts:
        head = "[green]PASS[/green]" if v.ok else "[red]FAIL[/red]"
        console.print(f"{head} {shown.markup(_wheel_name(v))}", highlight=False)
        for line in _verdict_lines(v, notes=notes):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def _wheel_name(v: Verdict) -> str:
    return v.wheel.rsplit("/", 1)[-1]


def _verdict_lines(v: Verdict, *, notes: bool) -> list[str]:
    """The lines under a wheel's PASS/FAIL line: each failure with its exit code, then its notes (unless `notes` is
    off), escaped for the terminal."""
    failures = [f"  - {f.kind} (exit {int(f.exit_code)}): {shown.terminal(f.message)}" for f in v.failures]
    return failures + [f"  - {shown.terminal(n)}" for n in (v.notes if notes else ())]


def color_wanted(env: Mapping[str, str], *, tty: bool) -> bool:
    """Colour or not: NO_COLOR set and not empty switches it off (no-color.org), then FORCE_COLOR set and not empty
    switches it on (pipes, CI logs that render ANSI), else colour exactly when the output is a terminal."""
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return tty


def table_text(draw: Callable[[Console], None], *, color: bool) -> str:
    """Render with rich into a string: colours when `color` (see color_wanted), plain text otherwise."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=160 if not color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        # Text from wheels is escaped for markup (slimwheel.shown), not for emoji codes: a member named
        # `lib:thumbs_up:.so` must show as written. Our own text has none, and every cell no longer pays the search.
        emoji=False,
        soft_wrap=False,
    )
    draw(console)
    return buf.getvalue()


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\] ", re.M)  # ninja: "[12/48] Building CUDA object ..."
_MAKE_STEP = re.compile(r"^\[\s*(\d+)%\] ", re.M)  # make: "[ 50%] Building CUDA object ..."


def build_steps(log_tail: str) -> str | None:
    """The build tool's own step count in the newest lines of its log: "12/48 steps", "50%", or None."""
    ninja = _NINJA_STEP.findall(log_tail)
    if ninja:
        done, total = ninja[-1]
        return f"{done}/{total} steps"
    make = _MAKE_STEP.findall(log_tail)
    return f"{make[-1]}%" if make else None


def _tail(path: Path, size: int = 8192) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:  # the log is written by another process; not there yet, or rotated away: no count this time
        return ""


def elapsed(seconds: float) -> str:
    """12.3 s, 4:05, 1:02:03."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressLine:
    """Phase progress on stderr. On a terminal: one line, redrawn four times a second, with the running phase, its
    elapsed time, the total time, the phase number and, while a build log is named, the build tool's step count.
    Elsewhere (CI logs, pipes): one plain line when a phase starts and one when it ends, nothing redrawn, and the same
    line as the terminal's every `heartbeat` seconds while a phase runs: a CI log that says nothing for five minutes
    reads as a hung job. A phase that writes a log names it when it starts, on both."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float | None = 60.0,
    ) -> None:
        self.console = console
        self.clock = clock
        self.started = clock()
        self.phase: str | None = None
        self.phase_started = self.started
        self.count = 0
        self.log: Path | None = None
        self.heartbeat = heartbeat
        self._beat: tuple[threading.Thread, threading.Event] | None = None
        from rich.live import Live  # only the build's progress line redraws

        self._live = Live(self, console=console, refresh_per_second=4, transient=True) if live else None

    def line(self) -> str:
        """What the terminal shows now."""
        now = self.clock()
        parts = [f"[{self.phase}] {elapsed(now - self.phase_started)}", f"phase {self.count}"]
        steps = build_steps(_tail(self.log)) if self.log is not None else None
        if steps:
            parts.append(steps)
        parts.append(f"total {elapsed(now - self.started)}")
        return ", ".join(parts)

    def __rich__(self) -> Text:
        from rich.text import Text

        return Text(self.line() if self.phase else "")

    def start(self, phase: str, log: Path | None = None) -> None:
        self._stop_beat()
        self.phase, self.phase_started, self.log = phase, self.clock(), log
        self.count += 1
        if self._live is None:
            self.console.print(f"[{phase}] ...", highlight=False, markup=False)
        if log is not None:
            # where to look while it runs, not only when it fails
            self.console.print(f"[{phase}] log: {shown.terminal(str(log))}", highlight=False, markup=False)
        if self._live is None:
            if self.heartbeat is not None:
                stop = threading.Event()
                thread = threading.Thread(target=self._beats, args=(stop, self.heartbeat), daemon=True)
                self._beat = (thread, stop)
                thread.start()
        elif not self._live.is_started:
            self._live.start()

    def _beats(self, stop: threading.Event, every: float) -> None:
        while not stop.wait(every):
            if self.phase is not None:
                self.console.print(self.line(), highlight=False, markup=False, soft_wrap=True)

    def _stop_beat(self) -> None:
        if self._beat is not None:
            thread, stop = self._beat
            stop.set()
            thread.join()
            self._beat = None

    def done(self, phase: str, seconds: float, detail: str = "") -> None:
        self._stop_beat()
        self.phase, self.log = None, None
        tail = f"  {detail}" if detail else ""
        # printed above the live line (rich keeps the live line at the bottom); seconds as a plain number, because
        # scripts read these lines from CI logs (lab/bench/compare-example.py)
        self.console.print(f"[{phase}] done in {seconds:.1f} s{tail}", highlight=False, markup=False, soft_wrap=True)

    def close(self) -> None:
        self._stop_beat()
        if self._live is not None and self._live.is_started:
            self._live.stop()
