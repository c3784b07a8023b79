"""Stripping the ELF files of an unpacked wheel that the debug-symbols check fails (`repair --strip`, `strip = true`).

The rule of what is "not stripped" is distcheck's (`debug_info`, `unstripped`), so a stripped wheel passes the check
that asked for the strip. Files the check passes are left byte for byte as they are: binutils rewrites every file it
touches, and a file with nothing to remove has no reason to change. The work is GNU strip's (`--strip-unneeded`:
debug sections and the static symbol table go; `.dynsym`, which the dynamic loader uses, and the device code in
`.nv_fatbin` stay). It runs before auditwheel and patchelf, on the files as the compiler left them.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from slimwheel import distcheck
from slimwheel.errors import ToolError
from slimwheel.inspect.scan import inspect_binary
from slimwheel.tools import run_tool
from slimwheel.units import human

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Stripped:
    """One file stripped: its member name and its size before and after."""

    member: str
    before: int
    after: int

    def line(self) -> str:
        return f"{self.member}: {human(self.before)} -> {human(self.after)}"


def strip_program() -> str:
    found = shutil.which("strip")
    if found is None:
        raise ToolError(
            "strip not found: stripping debug info needs GNU binutils' strip",
            hint="install binutils (apt-get install binutils), or leave --strip off",
        )
    return found


def strip_members(root: Path, members: Iterable[str]) -> tuple[Stripped, ...]:
    """Strip, in place, each ELF file `root / member` that distcheck finds unstripped; the others are not touched."""
    todo = []
    for member in members:
        path = root / member
        if distcheck.unstripped(distcheck.debug_info(inspect_binary(path))):
            todo.append(member)
    if not todo:
        return ()
    program = strip_program()
    out = []
    for member in todo:
        path = root / member
        before = path.stat().st_size
        # shown by member name: the unpacked copy's folder is repair's business, not the user's
        run_tool([program, "--strip-unneeded", str(path)], what=f"strip of {member}", timeout=1800)
        out.append(Stripped(member=member, before=before, after=path.stat().st_size))
        log.info("stripped %s", out[-1].line())
    return tuple(out)
