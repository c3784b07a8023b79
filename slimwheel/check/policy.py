"""What a verdict is made of: the policy a wheel is judged against, a failure, the findings of one check, the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from slimwheel import distcheck, floor
from slimwheel.config import DEFAULT_BUDGET_BYTES, DEFAULT_DEBUG_SYMBOLS, Unknown
from slimwheel.cuda.arch import CC, CCRequest
from slimwheel.errors import ExitCode

FailureKind = Literal["budget", "coverage", "dependencies", "record", "platform"] | distcheck.FindingKind


@dataclass(frozen=True, kw_only=True)
class CheckPolicy:
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    require: tuple[CC, ...] = ()
    require_spec: str = ""  # as the user wrote it ("7.5-12.0", "toolkit"), for messages
    left_out: tuple[CC, ...] = ()  # integrated aarch64 GPUs dropped from the request for an x86_64 wheel
    # gpu-intent: (file glob, the GPUs such files are meant for), judged instead of `require` for those files
    intent: tuple[tuple[str, CCRequest], ...] = ()
    require_future: bool = False  # an open-ended request ("7.5+"): GPUs newer than the wheel's SASS must run too
    dependencies: bool = True
    installed_budget_bytes: int | None = None  # distcheck: the installed size allowed (None: not checked)
    debug_symbols: bool = DEFAULT_DEBUG_SYMBOLS  # distcheck: unstripped ELF files fail
    # A wheel with no device code fails --require-arch (by default it passes with a note: kernels built at run time)
    strict_device_code: bool = False
    manylinux: floor.Policy | None = None  # the platform floor every ELF file must stay within (None: not checked)
    # Read the package index for what the requirements' own requirements install, when a library is otherwise
    # unprovided (`reqgraph`). Off for library callers and tests; `slimwheel check` turns it on unless --offline.
    read_index: bool = False
    # A verdict that depends on what could not be learned (a folder taken on trust): a failure with its own exit
    # code, or a note where the user chose so (`--unknown`, config key `unknown`). Never a silent pass.
    unknown: Unknown = "fail"


@dataclass(frozen=True, kw_only=True)
class Failure:
    kind: FailureKind
    message: str
    exit_code: ExitCode


@dataclass(frozen=True, kw_only=True)
class Findings:
    """What one check found: failures, and notes that explain a pass (or a failure)."""

    failures: tuple[Failure, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Verdict:
    wheel: str
    ok: bool
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = field(default=())
