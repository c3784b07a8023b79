"""The error types of slimwheel and the exit code each one maps to.

The library raises; only the CLI's single error boundary (`slimwheel.cli.main`) prints and exits.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit statuses, documented in the README. Stable: CI scripts branch on them."""

    OK = 0
    INTERNAL = 1  # a bug in slimwheel: the traceback is shown with -v
    USAGE = 2  # click's own code for bad command-line usage
    BAD_INPUT = 3  # a file or setting that cannot be read or is malformed
    TOOL_FAILED = 4  # an external program (nvcc, auditwheel, pip, cmake) failed
    OVER_BUDGET = 10  # a wheel is larger than the size budget
    MISSING_COVERAGE = 11  # a required GPU compute capability is served neither by SASS nor by PTX
    INCONSISTENT_DEPENDENCIES = 12  # a needed library neither bundled, required nor allowed; an exported static libstdc++
    CHECK_FAILED = 13  # several different checks failed at once
    BAD_RECORD = 14  # the wheel's RECORD does not match its files (changed after it was built)
    DOCTOR_PROBLEMS = 15  # doctor found a reason the wheel cannot run here (a library, a GPU, the driver)
    ABOVE_PLATFORM_FLOOR = 18  # an ELF file needs newer glibc/libstdc++ symbol versions than --manylinux allows


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
