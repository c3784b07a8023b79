"""Opening the files slimwheel inspects: regular files only, mapped rather than read.

Every command's inputs come through here (wheels through `zipread`, loose binaries through `mapped_file`), so a
folder, a FIFO or a device such as /dev/zero is refused at once instead of read until memory runs out or waited on
for ever.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from slimwheel.errors import BadInputError

# Readers take any of these: bytes in memory, or a read-only map of a file.
Buffer = bytes | bytearray | mmap.mmap

# The first bytes of the two kinds of file the readers parse, known here so that finding them (in a wheel's members,
# before any member is inflated) needs neither parser loaded: an ELF file, and a fatbin container (u32 0xBA55ED50,
# little-endian; slimwheel.inspect.fatbin reads the rest).
ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = b"\x50\xed\x55\xba"


def open_regular(path: Path, label: str | None = None, *, folder: str = "a folder, not a file") -> int:
    """A read-only descriptor of the regular file `path` (symlinks to one are followed). `label` names it in errors."""
    label = label or str(path)
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise BadInputError(f"{label}: is {folder}")
        if not stat.S_ISREG(st.st_mode):
            raise BadInputError(f"{label}: not a regular file (a FIFO, socket or device); refusing to read it")
        # O_NONBLOCK: should the path become a FIFO after the check, opening it must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise BadInputError(f"{label}: no such file") from None
    except OSError as e:
        raise BadInputError(f"{label}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInputError(f"{label}: not a regular file; refusing to read it")
    return fd


@contextlib.contextmanager
def mapped_file(path: Path, label: str | None = None) -> Iterator[Buffer]:
    """A regular file's bytes, mapped read-only (b"" when empty): nothing is copied into memory up front."""
    fd = open_regular(path, label)
    try:
        if os.fstat(fd).st_size == 0:
            yield b""
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
            yield mm
    finally:
        os.close(fd)


def release(data: Buffer, start: int, end: int) -> None:
    """Give back the pages of `data[start:end]` once read, when `data` maps a file: they count in the process's
    resident memory while mapped, so scanning a slimmed library's zeroed containers (13 MiB in cupy-cuda13x 14.2's
    thrust module) or a data section held all of it at once. The map stays valid: reading those bytes again faults
    them back in from the page cache. Bytes in memory are left alone."""
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    first = start - start % mmap.PAGESIZE
    last = min(len(data), end)
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)
