"""A full disk or quota (ENOSPC, EDQUOT) is its own error with its own exit code (issue 41), never "bad input"
(exit 3), a tool's failure (exit 4) or an internal error (exit 1); the message names the file. The errors are
injected here; tests/integration/test_full_disk.py fills a real 1 MiB tmpfs."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from slimwheel import cli, fsutil
from slimwheel.errors import BadInputError, ExitCode, NoSpaceError, os_error
from slimwheel.inspect import zipread
from slimwheel.tools import ToolRun, run_auditwheel
from testkit.wheelmaker import make_wheel

FULL = (errno.ENOSPC, errno.EDQUOT)


@pytest.mark.parametrize("code", FULL)
def test_a_full_disk_is_no_space(code: int) -> None:
    err = os_error(OSError(code, os.strerror(code)), "out/x.whl", "cannot be written")
    assert isinstance(err, NoSpaceError) and not isinstance(err, BadInputError)
    assert err.exit_code is ExitCode.NO_SPACE and int(ExitCode.NO_SPACE) not in (1, 3, 4)
    assert err.message == f"out/x.whl: cannot be written: {os.strerror(code)}"


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.ENOTDIR, errno.EISDIR])
def test_other_write_errors_stay_bad_input(code: int) -> None:
    err = os_error(OSError(code, os.strerror(code)), "out/x.whl", "cannot write here")
    assert type(err) is BadInputError and err.exit_code is ExitCode.BAD_INPUT


@pytest.mark.parametrize("code", FULL)
def test_a_full_disk_while_an_output_is_written_names_it_and_leaves_nothing(tmp_path: Path, code: int) -> None:
    target = tmp_path / "report.json"
    with pytest.raises(NoSpaceError) as e, fsutil.atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise OSError(code, os.strerror(code))
    assert str(target) in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_other_errors_inside_an_output_block_pass_through(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), fsutil.atomic_path(tmp_path / "r.json"):
        raise FileNotFoundError(errno.ENOENT, "gone", "some/input")  # an input's: the caller words it
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("code", "kind"), [(errno.ENOSPC, NoSpaceError), (errno.EACCES, BadInputError)])
def test_unpacking_into_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, kind: type[Exception]
) -> None:
    wheel = make_wheel(tmp_path / "dist", files={"demo/a.py": b"x = 1\n" * 100})

    def full(self: zipread.ZipReader, m: zipread.Member, target: Path, *, tee: object = None) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(zipread.ZipReader, "extract", full)
    with pytest.raises(kind) as e:
        zipread.extract(wheel, tmp_path / "out")
    assert type(e.value) is kind
    assert str(wheel) in str(e.value) and "demo/a.py" in str(e.value)


@pytest.mark.parametrize("code", FULL)
def test_the_error_boundary_words_an_unnamed_full_disk(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    # A write deep in a stage (a copy into the work folder) that no caller wrapped: exit NO_SPACE, not internal.
    def full(*args: object, **kwargs: object) -> object:
        raise OSError(code, os.strerror(code), "/cache/work/.repair.x.tmp/in.whl")

    monkeypatch.setattr(cli.cli, "main", full)
    assert cli.main(["check", "x.whl"]) == ExitCode.NO_SPACE
    err = capsys.readouterr().err
    assert "internal error" not in err and "/cache/work/.repair.x.tmp/in.whl" in err and os.strerror(code) in err


def test_the_error_boundary_still_reports_other_os_errors_as_bugs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(cli.cli, "main", broken)
    assert cli.main(["check", "x.whl"]) == ExitCode.INTERNAL
    assert "internal error: OSError" in capsys.readouterr().err


@pytest.mark.parametrize("code", FULL)
def test_auditwheel_on_a_full_disk_is_no_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    said = f"OSError: [Errno {code}] {os.strerror(code)}: '/w/.repair.x.tmp/auditwheel-tmp/tmpab/x.so'"

    def run(*args: object, **kwargs: object) -> ToolRun:
        return ToolRun(returncode=1, output=f"Traceback (most recent call last):\n  ...\n{said}\n")

    monkeypatch.setattr("slimwheel.tools.run_tool_status", run)
    with pytest.raises(NoSpaceError) as e:
        run_auditwheel(tmp_path / "x.whl", tmp_path, excludes=(), plat=None, cwd=tmp_path, shown_as=Path("dist/x.whl"))
    assert "auditwheel repair of x.whl" in e.value.message and os.strerror(code) in e.value.message
