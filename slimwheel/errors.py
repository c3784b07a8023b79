"""The error types of slimwheel and the exit code each one maps to.

The library raises; only the CLI's single error boundary (`slimwheel.cli.main`) prints and exits.
"""

from __future__ import annotations

import enum
import errno


class ExitCode(enum.IntEnum):
    """Process exit statuses. Stable: CI scripts branch on them. The README's table is generated from `reason`."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    BAD_INPUT = 3
    TOOL_FAILED = 4
    NO_SPACE = 5
    OVER_BUDGET = 10
    MISSING_COVERAGE = 11
    INCONSISTENT_DEPENDENCIES = 12
    CHECK_FAILED = 13
    BAD_RECORD = 14
    DOCTOR_PROBLEMS = 15
    DEBUG_INFO = 16
    ABOVE_PLATFORM_FLOOR = 18
    UNKNOWN = 19

    @property
    def reason(self) -> str:
        """One line for a person: when slimwheel exits with this code."""
        return _REASONS[self]

    @property
    def label(self) -> str:
        """A few words for lists of codes in `--help` texts (`exit_codes`)."""
        return _LABELS[self]


_REASONS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.INTERNAL: "internal error (a bug in slimwheel; `-vv` shows the traceback)",
    ExitCode.USAGE: "command-line usage",
    ExitCode.BAD_INPUT: "bad input: a file, flag or setting that cannot be read or is malformed (the message names it)",
    ExitCode.TOOL_FAILED: "an external tool (nvcc, cmake, auditwheel, pip, nvprune) failed or is missing",
    ExitCode.NO_SPACE: (
        "no space left: the disk or the user's quota filled while slimwheel wrote (the message names the file; "
        "nothing half-written is left under an output's name)"
    ),
    ExitCode.OVER_BUDGET: "a wheel is over the size budget",
    ExitCode.MISSING_COVERAGE: "a required GPU compute capability is served neither by SASS nor by PTX",
    ExitCode.INCONSISTENT_DEPENDENCIES: (
        "a needed library is neither bundled, required nor allowed; or a file carries libstdc++ statically and exports it"
    ),
    ExitCode.CHECK_FAILED: "several kinds of check failed at once",
    ExitCode.BAD_RECORD: (
        "a wheel's RECORD does not match its files (changed after it was built): check fails it; repair, slim and "
        "variants refuse it unless `--rewrite-record`"
    ),
    ExitCode.DOCTOR_PROBLEMS: (
        "`slimwheel doctor` found a reason the wheel cannot run here (a CUDA library missing, a GPU its code cannot serve, "
        "a driver too old)"
    ),
    ExitCode.DEBUG_INFO: (
        "an ELF file is not stripped (.debug_* sections, or a symbol table over 1 MiB): strip it with "
        "`slimwheel repair --strip` (or `strip = true`, -Wl,-s), or allow it with `--no-debug-symbols`"
    ),
    ExitCode.ABOVE_PLATFORM_FLOOR: (
        "an ELF file needs newer glibc or libstdc++ symbol versions than the `--manylinux` policy allows"
    ),
    ExitCode.UNKNOWN: (
        "a verdict depends on what could not be learned (offline, the index down or silent on a requirement's "
        "files): never a pass; `--unknown=note` makes it a note"
    ),
}

_LABELS: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.INTERNAL: "internal error",
    ExitCode.USAGE: "usage",
    ExitCode.BAD_INPUT: "bad input",
    ExitCode.TOOL_FAILED: "an external tool failed",
    ExitCode.NO_SPACE: "no space left",
    ExitCode.OVER_BUDGET: "over the size budget",
    ExitCode.MISSING_COVERAGE: "missing GPU coverage",
    ExitCode.INCONSISTENT_DEPENDENCIES: "inconsistent dependencies",
    ExitCode.CHECK_FAILED: "several checks failed",
    ExitCode.BAD_RECORD: "RECORD does not match the files",
    ExitCode.DOCTOR_PROBLEMS: "doctor found problems",
    ExitCode.DEBUG_INFO: "debug info left in",
    ExitCode.ABOVE_PLATFORM_FLOOR: "above the --manylinux floor",
    ExitCode.UNKNOWN: "verdict not known",
}


def exit_codes(*codes: ExitCode) -> str:
    """`--help` texts name exit codes through this, so that they never drift from the enum: "10 over the size
    budget, 11 missing GPU coverage" (every code when none is given)."""
    return ", ".join(f"{int(c)} {c.label}" for c in (codes or tuple(ExitCode)))


class SlimwheelError(Exception):
    """Base class: a message fit for a user, and the exit code the CLI returns for it."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  hint: {self.hint}"


class BadInputError(SlimwheelError):
    """A file, a flag or a setting is wrong. The message names the file (or setting) and the problem."""

    exit_code = ExitCode.BAD_INPUT


class ConfigError(BadInputError):
    """One or more problems in the configuration; all of them are listed at once."""

    def __init__(self, problems: list[str], *, source: str = "configuration") -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:  # one problem reads best on one line (it names its own source)
            super().__init__(self.problems[0])
            return
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problems:\n{lines}")


class ToolError(SlimwheelError):
    """An external program failed or is missing."""

    exit_code = ExitCode.TOOL_FAILED


class CheckFailed(SlimwheelError):
    """A wheel failed one or more checks; `exit_code` names the kind (several kinds -> CHECK_FAILED)."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class BadRecordError(BadInputError):
    """A wheel's RECORD does not match its files: refused by every command that rewrites a wheel (repair, slim,
    variants) unless told to rewrite it; check fails such a wheel with the same exit code."""

    exit_code = ExitCode.BAD_RECORD


class NoSpaceError(SlimwheelError):
    """A write failed because the file system or the user's quota is full: the machine's state, not the input's
    fault, so not BadInputError (a CI script retries elsewhere, or frees space, on this code)."""

    exit_code = ExitCode.NO_SPACE


# The errno values of a full disk (ENOSPC) and of an exhausted quota (EDQUOT).
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def os_error(e: OSError, subject: str, doing: str) -> SlimwheelError:
    """The error for an OSError met while `doing` something to `subject` (a file the message names): a full disk or
    quota is NoSpaceError, anything else BadInputError ("cannot be written here: permission denied")."""
    reason = e.strerror or str(e)
    if e.errno in NO_SPACE_ERRNOS:
        return NoSpaceError(f"{subject}: {doing}: {reason}", hint="free some space on that disk, or write elsewhere")
    return BadInputError(f"{subject}: {doing}: {reason}")
