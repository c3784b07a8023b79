"""heap: glibc's mmap threshold fixed for the commands that rewrite wheels (what it saves: slimwheel/heap.py)."""

from __future__ import annotations

import platform

import pytest

from slimwheel import heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's; elsewhere nothing is set")
def test_the_threshold_is_set_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert heap.return_freed_buffers() is True


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert heap.return_freed_buffers() is False


def test_nothing_is_set_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr("slimwheel.heap.sys.platform", "darwin")
    assert heap.return_freed_buffers() is False
