"""File output that never leaves half-written files: write to a temp file beside the target, then os.replace."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from slimwheel.errors import BadInputError


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yields a temporary path in target's folder; on success it replaces target, on error it is removed."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:  # an output path the user gave that cannot be written: bad input, not a crash
        raise BadInputError(f"{target}: cannot write here: {e.strerror or e}") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            # mkstemp creates 0600; outputs are ordinary files, readable as the umask allows.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(target: Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """SLIMWHEEL_CACHE, else $XDG_CACHE_HOME/slimwheel, else ~/.cache/slimwheel."""
    e = os.environ if env is None else env
    if e.get("SLIMWHEEL_CACHE"):
        return Path(e["SLIMWHEEL_CACHE"])
    base = e.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "slimwheel"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive fcntl lock on `path` (created, with its folder, if missing), held for the with-block; the kernel
    releases it if the process dies, so a crashed run never leaves a cache locked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 4 MiB blocks (static CUDA libraries are up to ~1 GB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
