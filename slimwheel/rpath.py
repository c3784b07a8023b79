"""Where an ELF file of a wheel looks for libraries: pure path arithmetic over RPATH/RUNPATH entries.

An entry is safe only when it names a folder inside site-packages through `$ORIGIN`: the wheel's own folders, the
nvidia-* wheels' folders, an external library's folder. Anything else (`.`, an empty entry, a relative path, an
absolute `/tmp/...`) makes the dynamic loader search a folder that depends on the current directory or on the build
machine, where anyone may plant a library (`libz.so.1` in the current directory ran at import). Repair drops such
entries; check fails them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def norm_origin(entry: str) -> str:
    """`${ORIGIN}/./a/../b` -> `$ORIGIN/b`; other entries unchanged."""
    if entry.startswith(("$ORIGIN", "${ORIGIN}")):
        rest = entry.split("}", 1)[1] if entry.startswith("${") else entry[len("$ORIGIN") :]
        rest = rest.lstrip("/")
        return "$ORIGIN" if not rest or posixpath.normpath(rest) == "." else "$ORIGIN/" + posixpath.normpath(rest)
    return entry


def install_dir(wheel_path: str) -> str:
    """Where a wheel file lands relative to site-packages: `x.data/platlib/a/b.so` -> `a`."""
    parts = wheel_path.split("/")
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("platlib", "purelib"):
        parts = parts[2:]
    return posixpath.dirname("/".join(parts))


def origin_target(entry: str, elf_path: str) -> str | None:
    """The site-packages-relative folder an `$ORIGIN/...` entry of the ELF at elf_path (a wheel path) names;
    None for absolute or other entries and for folders outside site-packages."""
    n = norm_origin(entry)
    if not n.startswith("$ORIGIN"):
        return None
    rest = n[len("$ORIGIN") :].lstrip("/")
    target = posixpath.normpath(posixpath.join(install_dir(elf_path), rest)) if rest else install_dir(elf_path) or "."
    return None if target == ".." or target.startswith("../") else target


@dataclass(frozen=True, kw_only=True)
class UnsafeEntry:
    entry: str
    why: str


def unsafe_entries(entries: Iterable[str], elf_path: str) -> tuple[UnsafeEntry, ...]:
    """The entries of a search path that do not name a folder inside site-packages through $ORIGIN (module doc)."""
    out = []
    for e in entries:
        if e == "":
            why = "an empty entry searches the current directory"
        elif norm_origin(e).startswith("$ORIGIN"):
            if origin_target(e, elf_path) is not None:
                continue
            why = "it leaves site-packages"
        elif e.startswith("/"):
            why = "an absolute path on the build machine; anyone who can write there on the user's machine plants a library"
        else:
            why = "a relative path is searched from the current directory"
        out.append(UnsafeEntry(entry=e, why=why))
    return tuple(out)


def split_search_path(value: str | None) -> tuple[str, ...]:
    """DT_RPATH/DT_RUNPATH text -> entries, empty entries kept (the loader reads them as the current directory)."""
    return tuple(value.split(":")) if value else ()


def deepen(entries: Sequence[str]) -> tuple[str, ...]:
    """The search path of a file moved one folder down: every $ORIGIN entry gets one more `..`."""
    out = []
    for e in entries:
        n = norm_origin(e)
        if n.startswith("$ORIGIN"):
            n = norm_origin("$ORIGIN/../" + n[len("$ORIGIN") :].lstrip("/"))
        out.append(n)
    return tuple(out)


def with_folders(current: Sequence[str], elf_path: str, folders: Iterable[str], keep: Iterable[str] = ()) -> tuple[str, ...] | None:
    """`current` (normalized) plus the `keep` entries and an `$ORIGIN/<relative path>` entry for each site-packages
    folder, without duplicates; None when nothing changes."""
    here = install_dir(elf_path)
    now = [norm_origin(e) for e in current]
    extra = [norm_origin(e) for e in keep]
    extra += [norm_origin("$ORIGIN/" + posixpath.relpath(f, here or ".")) for f in dict.fromkeys(folders)]
    final = list(dict.fromkeys([*now, *extra]))
    return tuple(final) if final != now else None
