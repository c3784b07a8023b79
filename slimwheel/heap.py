"""Freed buffers go back to the operating system: glibc's malloc with a fixed mmap threshold.

The commands that rewrite a wheel (slim, variants, repair) pass many buffers of hundreds of KiB to a few MiB through
the heap in turn: zip blocks, member hashes, inflated ELF members read by worker threads. glibc serves an allocation
above its mmap threshold with its own mapping, returned on free, but it raises that threshold to the size of each such
buffer freed (up to 32 MiB), after which the same buffers come from the heap and its per-thread arenas, whose freed
space stays in the process. Peak RSS then grows with the wheel's history instead of its largest member: measured
on the 2-core build machine (`/usr/bin/time -f %M slimwheel -q slim --archs 9.0 --budget 100GiB -o DIR WHEEL`),
cupy-cuda13x 14.2.0 peaked at 81.1 MB, torchvision 0.26.0 at 58.5 MB and jax-cuda13-plugin 0.12.0.1 at 43.2 MB;
with the threshold fixed at 1 MiB here, at 58.4, 44.2 and 39.8 MB (31 MB of each is the interpreter and slimwheel's
modules). glibc's `MALLOC_MMAP_THRESHOLD_` does the same from the environment.

`mallopt` is glibc's; elsewhere (musl, macOS) this does nothing. The process's own setting wins over slimwheel's: an
`MALLOC_MMAP_THRESHOLD_` in the environment is left as it is.
"""

from __future__ import annotations

import os
import sys

THRESHOLD = 1 << 20  # bytes: allocations this large or larger are mapped, and unmapped when freed
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def return_freed_buffers(threshold: int = THRESHOLD) -> bool:
    """Fix glibc malloc's mmap threshold for this process. True when it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    import ctypes  # only here: 5 ms of import that size-report does without

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
