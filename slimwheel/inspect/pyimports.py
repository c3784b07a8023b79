"""Where a wheel's own Python code imports one of its extension modules, and whether the package survives that import
failing: an extension module that the package reaches only through `try: import x` / `except ImportError:` with a
handler that does not raise again is an optional part. CuPy's NCCL and cuTENSOR bindings are: `cupy/cuda/nccl.py`
imports `cupy_backends.cuda.libs.nccl` under such a guard and sets `available = False` without it, so a missing
libnccl.so.2 turns a feature off instead of breaking `import cupy` (CuPy's documentation lists NCCL and cuTENSOR as
optional libraries the user installs). `check` then says so in a note instead of failing the wheel.

Read with `ast` (the standard library's own parser, so every syntax the interpreter accepts is read as it reads it).
The sources are untrusted: a file over `MAX_SOURCE` bytes, or one `ast` refuses (syntax, nesting depth, NUL bytes), is
no evidence either way, and the members are read through `zipread` with its limits. Nothing is read until a verdict
asks (`PythonImports.from_wheel` is lazy): only wheels with a library nothing provides pay for it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from slimwheel.inspect.zipread import ZipReader

MAX_SOURCE = 2 * 1024 * 1024  # one .py member; larger ones (generated tables) are not read
MAX_SOURCES = 64 * 1024 * 1024  # all .py members of a wheel together
# An extension module's file name: name.cpython-311-x86_64-linux-gnu.so, name.abi3.so, name.so
_EXT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_-]+)*\.so$")
# exception names whose handler catches a failed import
_CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True, kw_only=True)
class ImportSite:
    file: str  # the .py member of the wheel
    line: int
    guarded: bool  # inside try whose handler catches ImportError and does not raise again

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, kw_only=True)
class OptionalModule:
    """An extension module the package imports only where it survives the import failing."""

    module: str  # cupy_backends.cuda.libs.nccl
    guards: tuple[ImportSite, ...]  # the guarded imports every path to it goes through


def _install_root(name: str) -> str | None:
    """The path as installed in site-packages; None for what is not imported from there."""
    parts = name.split("/")
    if len(parts) >= 3 and parts[0].endswith(".data"):
        return "/".join(parts[2:]) if parts[1] in ("purelib", "platlib") else None
    if parts[0].endswith((".dist-info", ".data")):
        return None
    return name


def extension_module(path: str) -> str | None:
    """The dotted name an extension module file in the wheel is imported as; None where it is none (a shared library in
    `pkg.libs/`, a file in `.data/`, a name that is no identifier)."""
    rel = _install_root(path)
    if rel is None:
        return None
    *folders, leaf = rel.split("/")
    m = _EXT.match(leaf)
    if m is None or not all(f.isidentifier() for f in folders):
        return None
    return ".".join([*folders, m.group("name")])


def source_module(path: str) -> str | None:
    """The dotted name of a .py member (a package's `__init__.py` is the package); None where it is none."""
    rel = _install_root(path)
    if rel is None or not rel.endswith(".py"):
        return None
    *folders, leaf = rel[: -len(".py")].split("/")
    if not all(f.isidentifier() for f in folders) or not leaf.isidentifier():
        return None
    return ".".join(folders) if leaf == "__init__" else ".".join([*folders, leaf])


def _handler_names(h: ast.ExceptHandler) -> set[str]:
    if h.type is None:
        return {"BaseException"}
    elts = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
    return {e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else "" for e in elts}


def _soft_guard(node: ast.Try) -> bool:
    """The try statement survives a failed import: a handler catches it and does not raise again at its top."""
    return any(
        _handler_names(h) & _CATCHES_IMPORT and not any(isinstance(s, ast.Raise) for s in h.body) for h in node.handlers
    )


def _resolve(module: str | None, level: int, here: str, is_package: bool) -> str | None:
    if level == 0:
        return module
    base = here.split(".") if is_package else here.split(".")[:-1]
    if level - 1 > len(base):
        return None
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])]) or None


def _imported(node: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    """The dotted names one statement or call imports (each with its parents implied)."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = _resolve(node.module, node.level, here, is_package)
        if base is not None:
            yield base
            yield from (f"{base}.{a.name}" for a in node.names if a.name != "*")
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if fname in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            yield node.args[0].value


def _sites(tree: ast.AST, file: str, here: str, is_package: bool) -> Iterator[tuple[str, ImportSite]]:
    """(imported name, where) for every import in one source, each marked guarded or not."""

    def walk(node: ast.AST, guarded: bool) -> Iterator[tuple[str, ImportSite]]:
        for name in _imported(node, here, is_package):
            yield name, ImportSite(file=file, line=getattr(node, "lineno", 0), guarded=guarded)
        if isinstance(node, ast.Try):
            soft = guarded or _soft_guard(node)
            for s in node.body:
                yield from walk(s, soft)
            for part in (*node.handlers, *node.orelse, *node.finalbody):
                yield from walk(part, guarded)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, guarded)

    yield from walk(tree, False)


def _names(target: str, name: str) -> bool:
    return name == target or name.startswith(target + ".")


class PythonImports:
    """The import sites of a wheel's Python sources, parsed on first use."""

    def __init__(self, load: Callable[[], Mapping[str, bytes]]) -> None:
        self._load = load
        self._sites: list[tuple[str, ImportSite, str | None]] | None = None  # (imported, site, importing module)
        self._optional: dict[str, OptionalModule | None] = {}  # path -> `optional`, asked per library of the file

    @classmethod
    def from_sources(cls, sources: Mapping[str, bytes]) -> PythonImports:
        return cls(lambda: sources)

    @classmethod
    def from_wheel(cls, wheel: Path) -> PythonImports:
        def load() -> dict[str, bytes]:
            out: dict[str, bytes] = {}
            total = 0
            with ZipReader(wheel) as z:
                for m in z.members:
                    if not m.name.endswith(".py") or m.uncompressed > MAX_SOURCE or total > MAX_SOURCES:
                        continue
                    total += m.uncompressed
                    out[m.name] = z.read(m)
            return out

        return cls(load)

    def _all(self) -> list[tuple[str, ImportSite, str | None]]:
        if self._sites is None:
            sites: list[tuple[str, ImportSite, str | None]] = []
            for file, text in self._load().items():
                here = source_module(file)
                if here is None or len(text) > MAX_SOURCE:
                    continue
                try:
                    tree = ast.parse(text, filename=file)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue  # no evidence either way
                is_package = file.endswith("__init__.py")
                sites.extend((name, site, here) for name, site in _sites(tree, file, here, is_package))
            self._sites = sites
        return self._sites

    def sites_of(self, module: str) -> tuple[tuple[ImportSite, str | None], ...]:
        """Where the package's own sources import `module` (not counting the module itself)."""
        return tuple((s, here) for name, s, here in self._all() if _names(module, name) and here != module)

    def optional(self, path: str) -> OptionalModule | None:
        """Whether the extension module at `path` is an optional part: imported by the package, and every import of
        it is guarded, or made by a module that is itself optional (CuPy's `cupyx/_cutensor.so` through
        `cupyx/cutensor.py`, which `cupy/linalg/_einsum.py` imports under a guard). None when it is not, or when the
        package never imports it (a module only users import, or one loaded by compiled code: no evidence)."""
        if path not in self._optional:
            module = extension_module(path)
            guards = None if module is None else self._guards(module, frozenset({module}))
            self._optional[path] = (
                None
                if module is None or guards is None
                else OptionalModule(module=module, guards=tuple(dict.fromkeys(guards)))
            )
        return self._optional[path]

    def _guards(self, module: str, seen: frozenset[str]) -> list[ImportSite] | None:
        sites = self.sites_of(module)
        if not sites:
            return None
        guards: list[ImportSite] = []
        for site, importer in sites:
            if site.guarded:
                guards.append(site)
                continue
            if importer is None or importer in seen or any(_names(importer, m) for m in seen):
                return None  # an unguarded import from the package itself, or a cycle: required as far as we know
            got = self._guards(importer, seen | {importer})
            if got is None:
                return None
            guards.extend(got)
        return guards
