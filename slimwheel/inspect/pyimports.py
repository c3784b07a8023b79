"""Where a wheel's own Python code imports one of its extension modules, and whether the package survives that import
failing: an extension module that the package reaches only through `try: import x` / `except ImportError:` with a
handler that does not raise again is an optional part. CuPy's NCCL and cuTENSOR bindings are: `cupy/cuda/nccl.py`
imports `cupy_backends.cuda.libs.nccl` under such a guard and sets `available = False` without it, so a missing
libnccl.so.2 turns a feature off instead of breaking `import cupy` (CuPy's documentation lists NCCL and cuTENSOR as
optional libraries the user installs). `check` then says so in a note instead of failing the wheel.

Read with `ast` (the standard library's own parser, so every syntax the interpreter accepts is read as it reads it).
The sources are untrusted: one `ast` refuses (syntax, nesting depth, NUL bytes) is no evidence either way, one
without the word `import` holds no import and is not parsed, and the members are read through `zipread` with its
limits. Nothing is read until a verdict
asks (`PythonImports.from_wheel` is lazy): only wheels with a library nothing provides pay for it.

Time and memory are linear in the sources, with caps (issue 41, S10: 32,000 import lines took 148 s, a 1,500-module
chain or a 2,500-term expression was a RecursionError): the syntax tree is walked with a stack of its own, the sites
are indexed by imported name once, each module's importers are gathered once and every question walks the import
graph once per module. Past a cap (a source over `MAX_SOURCE`, sources over `MAX_SOURCES`, `MAX_SITES` sites or
`MAX_STEPS` steps of walking) the reader knows nothing: every module is required as far as it can tell, which never
turns a failure into a pass (skipping the file past a cap could hide the one unguarded import).
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from slimwheel.inspect.zipread import ZipReader

# One .py member, and all of a wheel's parsed together. The syntax tree of a source costs up to about 400 times its
# size (2 MiB of `x = 1` lines: 0.9 GB), and parsing about a second per MiB here; CuPy 14.2's 339 sources are 4.1 MB,
# the largest 108 kB.
MAX_SOURCE = 512 * 1024
_DLOPEN = re.compile(rb"\b(?:CDLL|LoadLibrary)\b")
# A loader that finds the files it opens among an installed distribution's (importlib.metadata), by names it reads
# from a data file: faiss-gpu-cu12 1.14.1's faiss/loader.py opens nvidia-cuda-runtime-cu12's libcudart.so.12 so.
_BY_DISTRIBUTION = re.compile(rb"\bdistribution\([^)]*\)\.files\b")
MAX_SOURCES = 8 * 1024 * 1024
# Import sites kept for a wheel (about 200 bytes each). CuPy 13's sources import its own modules a few thousand times;
# past this many the reader gives up: no evidence either way.
MAX_SITES = 1 << 18
# Steps of walking the import graph (sites gathered, importers followed) for all the questions about one wheel.
MAX_STEPS = 1 << 22
# An extension module's file name: name.cpython-311-x86_64-linux-gnu.so, name.abi3.so, name.so
_EXT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_-]+)*\.so$")
# exception names whose handler catches a failed import
_CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True, kw_only=True, slots=True)
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


# The fields that hold statements, where `import` statements live (If, For, While, With, Try, function and class
# bodies, handlers, match cases): a source that never names import_module or __import__ is walked through these only.
_STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _sites(
    tree: ast.AST, file: str, here: str, is_package: bool, *, calls: bool = True
) -> Iterator[tuple[str, ImportSite]]:
    """(imported name, where) for every import in one source, each marked guarded or not, in source order. The tree
    is walked with a stack of its own: a 2,500-term expression nests as deep, past Python's recursion limit. Without
    `calls` (no import_module or __import__ in the source), expressions are not entered: statements only."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        for name in _imported(node, here, is_package):
            yield name, ImportSite(file=file, line=getattr(node, "lineno", 0), guarded=guarded)
        parts: list[tuple[ast.AST, bool]]
        if isinstance(node, ast.Try):
            soft = guarded or _soft_guard(node)
            parts = [(s, soft) for s in node.body]
            parts += [(p, guarded) for p in (*node.handlers, *node.orelse, *node.finalbody)]
        elif calls:
            parts = [(child, guarded) for child in ast.iter_child_nodes(node)]
        else:
            parts = [(child, guarded) for f in _STATEMENT_FIELDS for child in getattr(node, f, ())]
        stack.extend(reversed(parts))  # popped first to last: source order


def _names(target: str, name: str) -> bool:
    return name == target or name.startswith(target + ".")


class _OutOfSteps(Exception):
    """The walk of one wheel's import graph ran past MAX_STEPS."""


# One node's importers, as the walk meets them: a guarded site (an ImportSite) or the module that imports it unguarded.
_Event = ImportSite | str


class PythonImports:
    """The import sites of a wheel's Python sources, parsed on first use."""

    def __init__(self, load: Callable[[], Generator[tuple[str, bytes | None]]]) -> None:
        """`load` gives each .py source, None for one over MAX_SOURCE (not read)."""
        self._load = load
        self._unparsed: list[tuple[int, str, str, bytes]] | None = None  # sources not parsed yet (`_pending`)
        self._whole = False  # the sources may hold more than MAX_SITES sites: all parsed at once (`_pending`)
        self._always: list[tuple[int, str, str, bytes]] = []  # sources every question parses (`_parse_for`)
        self._sites: list[tuple[str, ImportSite, str | None]] = []  # (imported, site, importing module), as parsed
        self._rank: list[tuple[int, int]] = []  # each site's place in the sources: (source, site)
        self._keys: list[str] = []  # the imported names, sorted
        self._order: list[int] = []  # the site of each sorted name
        self._events: dict[str, tuple[_Event, ...]] = {}  # a module's importers, gathered once (`_importers`)
        self._steps = 0
        self._optional: dict[str, OptionalModule | None] = {}  # path -> `optional`, asked per library of the file
        self._preloading: dict[tuple[str, tuple[bytes, ...]], str] = {}  # (package, names) -> `preloading`
        self._own: dict[tuple[str, bytes], str] = {}  # (package, file name) -> `loading_own`

    @classmethod
    def from_sources(cls, sources: Mapping[str, bytes | None]) -> PythonImports:
        """Sources held already, in the wheel's order (None for one over `MAX_SOURCE`, as `from_wheel` gives it)."""

        def load() -> Generator[tuple[str, bytes | None]]:
            yield from sources.items()

        return cls(load)

    @classmethod
    def from_wheel(cls, wheel: Path) -> PythonImports:
        def load() -> Generator[tuple[str, bytes | None]]:
            """The sources one at a time: only the one being parsed is held (64 MiB of them were all kept)."""
            with ZipReader(wheel) as z:
                for m in z.members:
                    if m.name.endswith(".py"):
                        yield m.name, (z.read(m) if m.uncompressed <= MAX_SOURCE else None)

        return cls(load)

    def preloading(self, package: str, names: tuple[bytes, ...]) -> str:
        """The first Python source of the top-level folder `package` that opens shared libraries itself (ctypes'
        CDLL or LoadLibrary) and names one of `names` (b"nvidia" for the nvidia-* wheels' folders): the package loads
        them before its extensions, which then take the loaded copies by SONAME (faiss-gpu 1.15.1's
        `_preload_gpu_libs`), or that finds the files it opens among an installed distribution's (faiss-gpu-cu12
        1.14.1's `faiss/loader.py`, whose names come from a JSON file). "" when none does. Whether that code runs
        before the extension is not proven: a source that does this at all is taken as the package's loader. A byte
        search, linear, under the same caps."""
        key = (package, names)
        if key not in self._preloading:
            self._preloading[key] = next(
                (
                    file
                    for file, text in self._package_sources(package)
                    if _DLOPEN.search(text) and (any(n in text for n in names) or _BY_DISTRIBUTION.search(text))
                ),
                "",
            )
        return self._preloading[key]

    def loading_own(self, package: str, name: bytes) -> str:
        """The first Python source of the top-level folder `package` that names the file `name` (b"libdgl.so"), where
        the package opens shared libraries itself (some source of it calls ctypes' CDLL or LoadLibrary): the package
        loads its own library by path before the files that need it, which then take the loaded copy by SONAME (dgl
        0.6's `_ffi/base.py` opens the libdgl.so that `_ffi/libinfo.py` names before its Cython module, which needs
        it; hidet 0.6 opens libhidet_runtime.so before libhidet.so). "" when none does. As with `preloading`, that
        the code runs first is not proven. A byte search, linear, under the same caps."""
        key = (package, name)
        if key not in self._own:
            naming, opens = "", False
            for file, text in self._package_sources(package):
                opens = opens or _DLOPEN.search(text) is not None
                naming = naming or (file if name in text else "")
                if naming and opens:
                    break
            self._own[key] = naming if opens else ""
        return self._own[key]

    def _package_sources(self, package: str) -> Iterator[tuple[str, bytes]]:
        """The read Python sources of the top-level folder `package`, in the wheel's order, until MAX_SOURCES bytes of
        them have been read: past the cap nothing more is given, so what the byte searches above did not find by then
        they do not find (no evidence either way)."""
        read = 0
        with contextlib.closing(self._load()) as sources:
            for file, text in sources:
                if text is None or file.split("/", 1)[0] != package:
                    continue
                read += len(text)
                if read > MAX_SOURCES:
                    return
                yield file, text

    def _pending(self) -> list[tuple[int, str, str, bytes]]:
        """The sources that hold the word `import`, as (rank, file, module, text), read once, unparsed; [] past a
        cap on the sources (then nothing is known). Their sizes are capped (`MAX_SOURCES`), so holding them is."""
        if self._unparsed is None:
            unparsed: list[tuple[int, str, str, bytes]] = []
            always: list[tuple[int, str, str, bytes]] = []
            size = bound = 0
            with contextlib.closing(self._load()) as sources:
                for rank, (file, text) in enumerate(sources):
                    here = source_module(file)
                    if here is None or (text is not None and b"import" not in text):
                        continue
                    size += MAX_SOURCE + 1 if text is None else len(text)
                    if text is None or len(text) > MAX_SOURCE or size > MAX_SOURCES:
                        # more than the caps allow: no evidence for any module, and nothing more is read
                        unparsed, always = [], []
                        break
                    if b"import_module" in text or b"__import__" in text or b"coding" in text or not text.isascii():
                        always.append((rank, file, here, text))  # parsed at the first question (`_parse_for`)
                    else:
                        unparsed.append((rank, file, here, text))
                    # At most two sites per `import` word (from x import a) and one more per comma; a source that is
                    # not ASCII may spell names otherwise: one per byte.
                    bound += len(text) if not text.isascii() else 2 * text.count(b"import") + text.count(b",")
            self._unparsed = unparsed
            # Past MAX_SITES nothing is known, whatever was asked: where the sources may hold that many, all are
            # parsed at the first question, as they always were; below it, only those a question can concern.
            self._whole = bound > MAX_SITES
            self._always = always
        return self._unparsed

    def _parse_for(self, module: str) -> None:
        """Parse every source not parsed yet that can import `module` or a module under it. A site names the
        module's last part only as a word of the source or, for a relative import, of the importing module's own
        name; a source that calls import_module or __import__ (a string may spell a name with escapes), that is not
        ASCII (identifiers are compared after NFKC normalization) or names its encoding is parsed in any case. Most
        questions then parse a few of a package's sources: CuPy's 339 cost 0.6 s when parsed whole."""
        unparsed = self._pending()
        last = module.rsplit(".", 1)[-1]
        word = last.encode()
        todo, self._always = self._always, []
        if self._whole:
            todo, self._unparsed = todo + unparsed, []
        else:
            rest: list[tuple[int, str, str, bytes]] = []
            for u in unparsed:
                (todo if word in u[3] or last in u[2].split(".") else rest).append(u)
            self._unparsed = rest
        if not todo:
            return
        sites = self._sites
        for rank, file, here, text in todo:
            try:
                tree = ast.parse(text, filename=file)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # no evidence either way
            is_package = file.endswith("__init__.py")
            calls = b"import_module" in text or b"__import__" in text
            for name, site in _sites(tree, file, here, is_package, calls=calls):
                sites.append((name, site, here))
                self._rank.append((rank, len(sites)))
            del tree
            if len(sites) > MAX_SITES:
                # as past the caps on the sources: no evidence for any module, and nothing more is parsed
                self._unparsed, self._sites, self._rank = [], [], []
                sites = self._sites
                break
        self._order = sorted(range(len(sites)), key=lambda i: sites[i][0])
        self._keys = [sites[i][0] for i in self._order]

    def _all(self) -> list[tuple[str, ImportSite, str | None]]:
        return self._sites

    def _matching(self, module: str) -> list[int]:
        """The sites that import `module` or a module under it (which imports it first), in source order: two runs
        of the sorted names."""
        self._parse_for(module)
        keys = self._keys
        lo = bisect.bisect_left(keys, module)
        hi = bisect.bisect_right(keys, module)
        under = bisect.bisect_left(keys, module + ".")
        end = bisect.bisect_left(keys, module + "/")  # "/" follows "." in code-point order: the end of "module.*"
        picked = [self._order[i] for i in (*range(lo, hi), *range(under, end))]
        self._spend(len(picked) + 1)
        return sorted(picked, key=self._rank.__getitem__)  # the sources' order, whatever order they were parsed in

    def _spend(self, steps: int) -> None:
        self._steps += steps
        if self._steps > MAX_STEPS:
            raise _OutOfSteps

    def sites_of(self, module: str) -> tuple[tuple[ImportSite, str | None], ...]:
        """Where the package's own sources import `module` (not counting the module itself)."""
        sites = self._all()
        try:
            matching = self._matching(module)
        except _OutOfSteps:
            return ()
        return tuple((sites[i][1], sites[i][2]) for i in matching if sites[i][2] != module)

    def optional(self, path: str) -> OptionalModule | None:
        """Whether the extension module at `path` is an optional part: imported by the package, and every import of
        it is guarded, or made by a module that is itself optional (CuPy's `cupyx/_cutensor.so` through
        `cupyx/cutensor.py`, which `cupy/linalg/_einsum.py` imports under a guard). None when it is not, or when the
        package never imports it (a module only users import, or one loaded by compiled code: no evidence)."""
        if path not in self._optional:
            module = extension_module(path)
            try:
                guards = None if module is None else self._guards(module)
            except _OutOfSteps:
                guards = None  # too much to walk: no evidence
            self._optional[path] = (
                None
                if module is None or guards is None
                else OptionalModule(module=module, guards=tuple(dict.fromkeys(guards)))
            )
        return self._optional[path]

    def _importers(self, module: str) -> tuple[_Event, ...]:
        """The guarded sites that import `module` and the modules that import it unguarded (each once), in source
        order; gathered once per module for every question."""
        events = self._events.get(module)
        if events is None:
            sites = self._all()
            out: list[_Event] = []
            seen: set[str] = set()
            for i in self._matching(module):
                _name, site, here = sites[i]
                if here == module:
                    continue
                if site.guarded:
                    out.append(site)
                elif here is not None and here not in seen:
                    seen.add(here)
                    out.append(here)
            events = self._events[module] = tuple(out)
        return events

    def _guards(self, module: str) -> list[ImportSite] | None:
        """The guarded sites every unguarded path of imports from `module` ends in, or None where one does not: a
        module the package never imports (users import it: required), a cycle, or a package whose own import leads
        back to a module under it (importing that module imports the package first). One depth-first walk with a
        stack of its own: each module is visited once whatever the number of paths to it."""
        state: dict[str, bool] = {module: False}  # False while on the walk's path, True once done
        edges: dict[str, list[str]] = {}  # module -> the modules that import it unguarded
        guards: list[ImportSite] = []
        stack: list[tuple[str, Iterator[_Event]]] = []

        def enter(node: str) -> bool:
            events = self._importers(node)
            if not events:
                return False  # nothing in the package imports it: required as far as we know
            edges[node] = [e for e in events if isinstance(e, str)]
            stack.append((node, iter(events)))
            return True

        if not enter(module):
            return None
        while stack:
            node, events = stack[-1]
            event = next(events, None)
            if event is None:
                state[node] = True
                stack.pop()
                continue
            self._spend(1)
            if isinstance(event, ImportSite):
                guards.append(event)
            elif event in state:
                if not state[event]:
                    return None  # a cycle of unguarded imports
            else:
                state[event] = False
                if not enter(event):
                    return None
        return None if self._leads_back(edges) else guards

    def _leads_back(self, edges: dict[str, list[str]]) -> bool:
        """Whether a package among the walked modules is reached from a module under it (`edges`: each walked module
        -> its unguarded importers): one backward search from each such package."""
        walked = sorted(edges)
        back: dict[str, list[str]] = {}
        for node, importers in edges.items():
            for importer in importers:
                back.setdefault(importer, []).append(node)
        for package in walked:
            first = bisect.bisect_left(walked, package + ".")
            if first == len(walked) or not walked[first].startswith(package + "."):
                continue  # no walked module lies under it
            seen, todo = {package}, [package]
            while todo:
                for below in back.get(todo.pop(), ()):
                    self._spend(1)
                    if _names(package, below) and below != package:
                        return True
                    if below not in seen:
                        seen.add(below)
                        todo.append(below)
        return False
