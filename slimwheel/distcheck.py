"""Checks in the spirit of pydistcheck that matter for GPU wheels, as pure functions over a `WheelReport`.

- installed size: what a wheel takes in site-packages (and in a container image), which for CUDA code is often
  several times the download (zip deflate barely touches compressed fatbins, and does shrink everything else);
- debug symbols left in compiled objects: `.debug_*` / `.zdebug_*` sections, and a symbol table (`.symtab` with
  its `.strtab`) large enough to matter, both of which `-Wl,-s` / `strip` would have dropped;
- the release total: every wheel of one release against PyPI's per-project limit (10 GiB by default; warehouse's
  `MAX_PROJECT_SIZE`, shared/cuda-facts.md section 6), because a CUDA matrix of Pythons x platforms x CUDA majors
  reaches it within a few releases.

Each runs when check's policy asks for it; the debug-symbols check is on by default (config's `debug-symbols`), as in
pydistcheck: a setuptools torch extension came out 86 % `.debug_*` (9.5 MiB) and passed silently. Every finding
carries the exit code check uses for it (size problems are budget problems: 10; debug info has its own, 16, as its
cure is a strip, not a smaller budget), so `check.py` can turn them into its own failures unchanged. Sizes in messages
say their unit (MiB = 2**20 bytes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from slimwheel.errors import ExitCode
from slimwheel.inspect.elf import ElfReport
from slimwheel.inspect.report import WheelReport
from slimwheel.units import human, mib

FindingKind = Literal["installed-size", "debug-symbols", "release-total"]

PYPI_PROJECT_LIMIT = 10 * 2**30  # warehouse's default total per project; raised on request like the file limit
# A symbol table under this is what -fvisibility=hidden builds keep for a few exported names; over it, the object
# was not stripped (1 MiB of .symtab + .strtab is tens of thousands of symbols).
SYMTAB_LIMIT = 2**20
_DEBUG_PREFIXES = (".debug_", ".zdebug_")
_SYMBOL_SECTIONS = (".symtab", ".strtab")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One problem, shaped like check.Failure (kind, message, exit_code) so check can adopt it as is."""

    kind: FindingKind
    message: str
    exit_code: ExitCode
    bytes: int  # how much of the size it accounts for


@dataclass(frozen=True, kw_only=True)
class DebugInfo:
    """What stripping would remove from one ELF file."""

    elf: str
    debug_bytes: int  # .debug_* / .zdebug_* sections
    symtab_bytes: int  # .symtab + .strtab

    @property
    def stripped_would_save(self) -> int:
        return self.debug_bytes + self.symtab_bytes


@dataclass(frozen=True, kw_only=True)
class ReleaseTotal:
    """All wheels of one release against the project limit."""

    wheels: tuple[tuple[str, int], ...]  # (file name, bytes on disk)
    total: int  # the wheels' bytes plus `already_used`
    already_used: int  # what earlier releases of the project take on the index (0 when unknown)
    limit: int

    @property
    def share(self) -> float:
        return self.total / self.limit

    @property
    def over(self) -> bool:
        return self.total > self.limit

    def line(self) -> str:
        earlier = f" + {human(self.already_used)} already on the index" if self.already_used else ""
        return (
            f"release total: {len(self.wheels)} wheel{'s' if len(self.wheels) != 1 else ''}, "
            f"{human(self.total - self.already_used)}{earlier} = {human(self.total)} of the {human(self.limit)} "
            f"project limit ({100 * self.share:.1f}%)"
        )


def installed_size(report: WheelReport, budget_bytes: int) -> Finding | None:
    """A finding when the wheel's files take more than `budget_bytes` once installed (uncompressed)."""
    size = report.installed_size
    if size <= budget_bytes:
        return None
    return Finding(
        kind="installed-size",
        message=f"installed size {mib(size)} is over the installed-size budget of {mib(budget_bytes)} "
        f"(the download is {mib(report.size)})",
        exit_code=ExitCode.OVER_BUDGET,
        bytes=size,
    )


def debug_info(elf: ElfReport) -> DebugInfo:
    """What stripping would remove: the rule `debug_symbols`, size-report's debug column and `strip` share. Nothing
    for a standalone cubin (EM_CUDA, device code the driver loads): nvcc gives every cubin a small `.debug_frame`
    (544 B in each of flashinfer-cubin 0.6.13's 15,970), host `strip` does not handle it, and its device debug info is
    the compiler's to leave out (no -G/-lineinfo), as for the cubins inside fatbins, which this never counts."""
    if elf.kind == "cubin":
        return DebugInfo(elf=elf.name, debug_bytes=0, symtab_bytes=0)
    debug = sum(n for s, n in elf.sections.items() if s.startswith(_DEBUG_PREFIXES))
    symtab = sum(elf.sections.get(s, 0) for s in _SYMBOL_SECTIONS)
    return DebugInfo(elf=elf.name, debug_bytes=debug, symtab_bytes=symtab)


def unstripped(info: DebugInfo, *, symtab_limit: int = SYMTAB_LIMIT) -> bool:
    """Whether a file fails the debug-symbols check (and `strip` strips it): debug sections, or a symbol table over
    `symtab_limit`."""
    return info.debug_bytes > 0 or info.symtab_bytes > symtab_limit


def debug_symbols(report: WheelReport, *, symtab_limit: int = SYMTAB_LIMIT) -> tuple[Finding, ...]:
    """One finding per ELF file with debug sections, or with a symbol table larger than `symtab_limit`."""
    out = []
    for info in (debug_info(e) for e in report.elfs):
        if not unstripped(info, symtab_limit=symtab_limit):
            continue
        why = []
        if info.debug_bytes:
            why.append(f"{human(info.debug_bytes)} of .debug_* sections")
        if info.symtab_bytes > symtab_limit:
            why.append(f"a {human(info.symtab_bytes)} symbol table (.symtab/.strtab)")
        out.append(
            Finding(
                kind="debug-symbols",
                message=f"{info.elf}: not stripped: {' and '.join(why)}; strip it to save "
                f"{human(info.stripped_would_save)} installed: `slimwheel repair --strip` (or `strip = true` in "
                "[tool.slimwheel] for `slimwheel build`), or link with -Wl,-s; `--no-debug-symbols` allows it",
                exit_code=ExitCode.DEBUG_INFO,
                bytes=info.stripped_would_save,
            )
        )
    return tuple(out)


def release_total(
    reports: Iterable[WheelReport], *, limit: int = PYPI_PROJECT_LIMIT, already_used: int = 0
) -> ReleaseTotal:
    """The wheels of one release (one report per file; the same file twice counts once) against `limit`."""
    wheels: dict[str, int] = {}
    for r in reports:
        wheels[r.path.name] = r.size
    ordered = tuple(sorted(wheels.items()))
    return ReleaseTotal(
        wheels=ordered, total=sum(n for _, n in ordered) + already_used, already_used=already_used, limit=limit
    )


def release_finding(total: ReleaseTotal) -> Finding | None:
    """A finding when the release does not fit the project limit."""
    if not total.over:
        return None
    return Finding(
        kind="release-total",
        message=total.line() + ": over the limit; ask PyPI for more, or drop wheels (one abi3 wheel per platform "
        "serves every Python)",
        exit_code=ExitCode.OVER_BUDGET,
        bytes=total.total,
    )


def findings(report: WheelReport, *, installed_budget: int | None = None, debug: bool = False) -> tuple[Finding, ...]:
    """The per-wheel checks a policy switched on, in a stable order."""
    out: list[Finding] = []
    if installed_budget is not None and (f := installed_size(report, installed_budget)) is not None:
        out.append(f)
    if debug:
        out.extend(debug_symbols(report))
    return tuple(out)
