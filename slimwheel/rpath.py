"""Where an ELF file of a wheel looks for libraries: pure path arithmetic over RPATH/RUNPATH entries. The one rule for
judging an entry (`resolve_entry`), used by check (`deps.dependency_problems`) and repair (`repair.wanted_rpath`).

An `$ORIGIN` entry is resolved from where the file installs (`install_dir`: `a/b.so` in site-packages, a `.data/data`
file in the environment's prefix) and judged by where it lands:
- inside site-packages: safe (the wheel's own folders, the nvidia-* wheels' folders, an external library's folder);
- one level above site-packages, the Python installation's own library folder (`lib/python3.12`): no wheel installs
  there and it belongs to whoever owns site-packages (in a venv, a system or a user install alike), so the entry finds
  nothing and harms nothing; check notes it, repair keeps it (jax-cuda13-plugin 0.12 names `$ORIGIN/../../nvidia/cu13/lib`
  beside the `$ORIGIN/../nvidia/cu13/lib` that finds its libraries);
- further out: unsafe, the loader searches folders no wheel controls (the environment's `lib`, `/usr/lib`, a home).
An absolute entry into a root-owned standard location (`/usr/local/cuda*/lib64`, `/usr/lib/x86_64-linux-gnu`, `/opt/..`)
is a system toolkit's: no one but root plants a library there, but where the user's machine has CUDA libraries there
the loader takes them instead of the nvidia-* wheels' (deps says when it comes before the wheel's own folders).
Anything else (`.`, an empty entry, a relative path, an absolute `/tmp/...`) makes the dynamic loader search a folder
that depends on the current directory or on the build machine, where anyone may plant a library (`libz.so.1` in the
current directory ran at import). Repair drops unsafe entries; check fails them, once per file, with their targets.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

EntryKind = Literal["inside", "python-lib", "outside", "system", "absolute", "relative", "empty"]
SITE = "<site-packages>"

# Root-owned standard locations: a CUDA toolkit's (/usr/local/cuda-13.0/lib64), the distribution's library folders,
# /opt's vendor trees. Nobody but root plants a library there; what such an entry risks is which copy of a CUDA
# library the loader takes (nvidia-dali-cuda130 2.4.0 puts /usr/local/cuda/lib64 before its own $ORIGIN/../cu13/lib).
_SYSTEM_TREES = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64")
_CUDA_TOOLKIT = re.compile(r"/usr/local/cuda(-[0-9.]+)?(/.*)?")
_TOOLKIT = re.compile(_CUDA_TOOLKIT.pattern + r"|/opt/[^/]+(/.*)?")


def system_location(entry: str) -> bool:
    """An absolute entry into a root-owned standard location (a system toolkit), not a build machine's own path."""
    p = posixpath.normpath(entry)
    return _TOOLKIT.fullmatch(p) is not None or any(p == t or p.startswith(t + "/") for t in _SYSTEM_TREES)


def norm_origin(entry: str) -> str:
    """`${ORIGIN}/./a/../b` -> `$ORIGIN/b`; other entries unchanged."""
    if entry.startswith(("$ORIGIN", "${ORIGIN}")):
        rest = entry.split("}", 1)[1] if entry.startswith("${") else entry[len("$ORIGIN") :]
        rest = rest.lstrip("/")
        return "$ORIGIN" if not rest or posixpath.normpath(rest) == "." else "$ORIGIN/" + posixpath.normpath(rest)
    return entry


# Where the install schemes of a wheel's `.data` folder land, relative to site-packages, in the POSIX layout
# (`<prefix>/lib/pythonX.Y/site-packages`, `<prefix>/bin`, `<prefix>/include/...`): what `$ORIGIN` means there.
_SCHEMES = {"platlib": "", "purelib": "", "data": "../../..", "scripts": "../../../bin", "headers": "../../../include"}


def install_dir(wheel_path: str) -> str:
    """Where a wheel file lands relative to site-packages: `a/b.so` -> `a`, `x.data/platlib/a/b.so` -> `a`,
    `x.data/data/lib/b.so` -> `../../../lib` (the environment's prefix)."""
    parts = wheel_path.split("/")
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in _SCHEMES:
        base = _SCHEMES[parts[1]]
        return (
            posixpath.normpath(posixpath.join(base, *parts[2:-1])) if base else posixpath.dirname("/".join(parts[2:]))
        )
    return posixpath.dirname("/".join(parts))


def origin_target(entry: str, elf_path: str) -> str | None:
    """The site-packages-relative folder an `$ORIGIN/...` entry of the ELF at elf_path (a wheel path) names;
    None for absolute or other entries and for folders outside site-packages."""
    r = resolve_entry(entry, elf_path)
    return r.target if r.kind == "inside" else None


@dataclass(frozen=True, kw_only=True)
class SearchEntry:
    """One RPATH/RUNPATH entry of one file, resolved and judged (module doc)."""

    entry: str  # as the file writes it
    kind: EntryKind
    target: str  # the folder it names: `nvidia/cu13/lib` (in site-packages), `<site-packages>/../x`, `/usr/lib`
    why: str  # empty for a safe entry

    @property
    def safe(self) -> bool:
        return self.kind in ("inside", "python-lib")


def resolve_entry(entry: str, elf_path: str) -> SearchEntry:
    """The one rule for a search path entry of the file at elf_path (a wheel path), module doc."""
    if entry == "":
        return SearchEntry(
            entry=entry,
            kind="empty",
            target="the current directory",
            why="an empty entry searches the current directory",
        )
    n = norm_origin(entry)
    if n.startswith("$ORIGIN"):
        rest = n[len("$ORIGIN") :].lstrip("/")
        target = posixpath.normpath(posixpath.join(install_dir(elf_path) or ".", rest or "."))
        ups = 0
        for part in target.split("/"):
            if part != "..":
                break
            ups += 1
        if ups == 0:
            return SearchEntry(entry=entry, kind="inside", target=target, why="")
        shown = f"{SITE}/{target}"
        if ups == 1 and target != "..":
            return SearchEntry(
                entry=entry,
                kind="python-lib",
                target=shown,
                why="outside site-packages, in the Python installation's own library folder, where no "
                "wheel installs: it finds nothing, harmless",
            )
        return SearchEntry(
            entry=entry,
            kind="outside",
            target=shown,
            why="it leaves site-packages and the Python installation's library folder",
        )
    if entry.startswith("/") and system_location(entry):
        # A CUDA toolkit's folder risks a second CUDA runtime; another root-owned folder (mooncake-transfer-engine's
        # /usr/lib64/boost1.78) risks another build of whatever libraries the machine keeps there.
        cuda = _CUDA_TOOLKIT.fullmatch(posixpath.normpath(entry)) is not None
        return SearchEntry(
            entry=entry,
            kind="system",
            target=entry,
            why="a system toolkit location (root-owned): where the user's machine has a CUDA toolkit or CUDA libraries "
            "there, the loader takes those instead of the nvidia-* wheels' (a second CUDA runtime beside torch's)"
            if cuda
            else "a system location (root-owned): where the user's machine keeps libraries there under the names "
            "the file asks for (another build or version), the loader takes those instead of the wheel's own or "
            "its requirements' (for CUDA libraries, a second CUDA runtime beside torch's)",
        )
    if entry.startswith("/"):
        return SearchEntry(
            entry=entry,
            kind="absolute",
            target=entry,
            why="an absolute path on the build machine; anyone who can write there on the user's "
            "machine plants a library",
        )
    return SearchEntry(
        entry=entry, kind="relative", target=f"./{entry}", why="a relative path is searched from the current directory"
    )


def resolve_entries(entries: Iterable[str], elf_path: str) -> tuple[SearchEntry, ...]:
    """Each distinct entry once, in the order the loader searches them (duplicates add nothing)."""
    return tuple(resolve_entry(e, elf_path) for e in dict.fromkeys(entries))


def unsafe_entries(entries: Iterable[str], elf_path: str) -> tuple[SearchEntry, ...]:
    """The distinct entries of a search path that are not safe (module doc)."""
    return tuple(e for e in resolve_entries(entries, elf_path) if not e.safe)


def describe(entries: Iterable[SearchEntry]) -> str:
    """`'$ORIGIN/../../x' -> <site-packages>/../x (why); ...` for a one-line message per file."""
    return "; ".join(
        repr(e.entry) + (f" -> {e.target}" if e.target != e.entry else "") + (f" ({e.why})" if e.why else "")
        for e in entries
    )


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


def with_folders(
    current: Sequence[str], elf_path: str, folders: Iterable[str], keep: Iterable[str] = ()
) -> tuple[str, ...] | None:
    """`current` (normalized) plus the `keep` entries and an `$ORIGIN/<relative path>` entry for each site-packages
    folder, without duplicates; None when nothing changes."""
    here = install_dir(elf_path)
    now = [norm_origin(e) for e in current]
    extra = [norm_origin(e) for e in keep]
    extra += [norm_origin("$ORIGIN/" + posixpath.relpath(f, here or ".")) for f in dict.fromkeys(folders)]
    final = list(dict.fromkeys([*now, *extra]))
    return tuple(final) if final != now else None
