"""Options that several commands share, defined once, and the click types that parse option values at the edge.

The options that are also `[tool.slimwheel]` keys (budget, require-arch, manylinux, installed-budget, debug-symbols)
stay text here: the command hands them to `config.load`, which parses every source (CLI, env, pyproject) once and
reports every bad value with where it came from; commands then pass `Config.parsed` on. Options with no config key
(`slim --archs`, `--ptx`) are parsed by their click type, so the command body only sees typed values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from slimwheel.cuda.arch import parse_require_arch
from slimwheel.cuda.versions import CudaVersion, parse_request
from slimwheel.errors import BadInputError, ExitCode

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # generic from click 8.2 on; the project supports 8.1, where subscripting it fails at run time
    _ParamType = click.ParamType[Any, Any]
else:
    _ParamType = click.ParamType


class _Parsed(_ParamType):
    """A value read by one of the project's parsers. A bad value is a BadInputError naming the option and the value
    (exit BAD_INPUT, as the same mistake in pyproject.toml gives), not click's usage error."""

    def __init__(self, name: str, parse: Callable[[str], object]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):  # a default already typed
            return value
        option = param.opts[0] if param is not None and param.opts else self.name
        try:
            return self._parse(value)
        except BadInputError as e:
            # parse_ptx's messages name the option already; the coverage parser's do not.
            message = e.message if e.message.startswith(option) else f"{option} {value!r}: {e.message}"
            raise BadInputError(message, hint=e.hint) from None


REQUIRE_ARCH = _Parsed("require-arch", parse_require_arch)


def _parse_ptx(value: str) -> object:
    from slimwheel.postbuild.slim import parse_ptx  # the fatbin editor: loaded by `slim` alone, not by `check`

    return parse_ptx(value)


PTX_KEEP = _Parsed("ptx", _parse_ptx)
# A release to build with or find ("13.0", "auto": None), by the rule config's `cuda` key uses.
CUDA_REQUEST = _Parsed("cuda", parse_request)


def _cuda_version(value: str) -> CudaVersion | None:
    return CudaVersion.parse(value) if value.strip() else None  # "": not given, as before the type


# The release a wheel was built with (repair --cuda): any version, not only those slimwheel builds with.
CUDA_VERSION = _Parsed("cuda", _cuda_version)


def offline_option(help: str | None = None) -> Callable[[F], F]:
    """--offline: whether a verdict may read the package index (`read_index`)."""
    return click.option(
        "--offline",
        is_flag=True,
        default=None,
        help=help
        or "Do not read the package index (SLIMWHEEL_INDEX_URL, else pip's index-url and extra-index-url, else PyPI) "
        "for the libraries "
        "that the requirements' own requirements install; asked only when a needed library is otherwise "
        "unaccounted for. Env: SLIMWHEEL_OFFLINE=1.",
    )


def read_index(offline: bool | None) -> bool:
    """Whether the verdict may read the index: not with --offline, nor with SLIMWHEEL_OFFLINE set true."""
    from slimwheel.check import may_read_index  # the checks: not loaded by commands that only share --format

    return may_read_index(os.environ, offline=offline)


def unknown_option() -> Callable[[F], F]:
    """--unknown, the config key `unknown` (parsed by config.load): what a verdict that depends on what could not be
    learned is. One option for every command that judges (check, slim, variants), handed on as `Config.unknown`."""
    from slimwheel.config import UNKNOWN_MODES

    return click.option(
        "--unknown",
        type=click.Choice(UNKNOWN_MODES),
        default=None,
        help="A verdict that depends on what could not be learned (offline, the index down or silent on a "
        f"requirement's files) is never a pass: 'fail' (default, exit {ExitCode.UNKNOWN:d}) or 'note'. "
        "Config key: unknown.",
    )


def budget_option(help: str) -> Callable[[F], F]:
    """--budget, the config key `budget` (parsed by config.load); `help` says what the command holds to it."""
    return click.option("--budget", default=None, help=help)


def require_arch_option(help: str | None = None) -> Callable[[F], F]:
    """--require-arch, the config key `require-arch` (parsed by config.load)."""
    return click.option(
        "--require-arch",
        default=None,
        help=help
        or "Compute capabilities every wheel must serve by SASS or PTX: 7.5-12.0, 8.0+, 9.0, 'toolkit' "
        "(all that the wheel's CUDA major can target), 'auto' (default: those from the oldest the wheel has code "
        "for up: no newer GPU lost), or 'none'. Config key: require-arch.",
    )


def manylinux_option() -> Callable[[F], F]:
    return click.option(
        "--manylinux",
        default=None,
        metavar="POLICY",
        help="Fail ELF files that need newer glibc/libstdc++ symbol versions (GLIBC_*, GLIBCXX_*, CXXABI_*, "
        "GCC_*) than this manylinux policy allows (auditwheel's policy data), naming each symbol: 2_28, "
        "manylinux_2_31, manylinux2014. Config key: manylinux.",
    )


def installed_budget_option() -> Callable[[F], F]:
    return click.option(
        "--installed-budget",
        default=None,
        metavar="SIZE",
        help="Largest installed size (files uncompressed), e.g. 200MiB. Config key: installed-budget.",
    )


def debug_symbols_option() -> Callable[[F], F]:
    return click.option(
        "--debug-symbols/--no-debug-symbols",
        default=None,
        help="Fail ELF files left unstripped (.debug_* sections, a symbol table over 1 MiB), exit "
        f"{ExitCode.DEBUG_INFO:d}; on by default. Config key: debug-symbols.",
    )


def format_option(choices: Sequence[str], default: str, *, help: str | None = None) -> Callable[[F], F]:
    """--format (parameter `fmt`): the output forms a command has."""
    return click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default=default, show_default=True, help=help
    )


def slim_archs_option() -> Callable[[F], F]:
    return click.option(
        "--archs",
        required=True,
        type=REQUIRE_ARCH,
        metavar="TEXT",  # the help's wording from before the type parsed it
        help="GPUs to keep code for: 9.0, 8.0-9.0, 8.0+, 8.6,9.0. Each CUDA module keeps the cubin (or PTX) "
        "the driver would pick for each of them.",
    )


def ptx_keep_option() -> Callable[[F], F]:
    return click.option(
        "--ptx",
        type=PTX_KEEP,
        metavar="TEXT",
        default="needed",
        show_default=True,
        help="PTX to keep: needed (only where a requested GPU has no cubin), newest (each module's newest PTX "
        "too: newer GPUs still JIT-compile it), or compute capabilities (9.0) whose PTX to keep.",
    )
