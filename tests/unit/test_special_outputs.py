"""An output path that is a device or a pipe is written in place or refused, never renamed over: `size-report -o
/dev/null` run as root once replaced the machine's null device with a plain file. The tests use a FIFO, which the
same rename would replace (a test on /dev/null itself would break the machine if the rule regressed)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from slimwheel import fsutil
from slimwheel.errors import BadInputError


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    return fifo


def test_a_report_into_a_pipe_is_written_through_it(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(fifo.read_bytes()), daemon=True
    )  # a regression fails, not hangs
    reader.start()
    fsutil.write_text_atomic(fifo, "report\n")
    reader.join(timeout=10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe, not a file renamed onto it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fifo"]  # and no temporary file left beside it


def test_a_wheel_output_onto_a_pipe_is_refused(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    with pytest.raises(BadInputError, match="is a device, pipe or socket"), fsutil.atomic_path(fifo) as tmp:
        tmp.write_bytes(b"PK")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_special_file() -> None:
    assert fsutil.special_file(Path("/dev/null"))
    assert not fsutil.special_file(Path(__file__))
    assert not fsutil.special_file(Path(__file__).parent)
    assert not fsutil.special_file(Path("/nonexistent/x.json"))


def test_plain_files_are_still_replaced_atomically(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    fsutil.write_text_atomic(out, "new")
    assert out.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
