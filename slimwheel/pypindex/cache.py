"""The index reader's cache of wheel facts across runs, one file per wheel in a private folder (`<cache>/index`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from slimwheel.fsutil import UnsafeFolder, open_private_folder
from slimwheel.pypindex.client import IndexLimits
from slimwheel.pypindex.listing import IndexFile
from slimwheel.reqgraph import WheelFacts

_SCHEMA = 2


class Cache:
    """Wheel facts kept across runs, one file per wheel, named by a SHA-256 of the wheel's name and the index's
    SHA-256 of its content (nothing from the index names a file). The folder is judged at each use as the NVRTC
    cache's is (`fsutil.open_private_folder`: ours, writable by no one else, no link) and files are opened
    relative to it without following links. Each entry starts with a SHA-256 of the rest, recorded when it was
    written: a damaged or altered entry is removed and read again from the index."""

    _MAGIC = b"slimwheel-index-facts"
    STALE_TEMP_S = 600.0

    def __init__(self, folder: Path, limits: IndexLimits) -> None:
        self.folder, self.limits = folder, limits
        self.refused = ""  # why the folder is not used, once it was refused

    @staticmethod
    def key(f: IndexFile) -> str:
        return hashlib.sha256(f"{f.filename}\n{f.sha256}".encode()).hexdigest()

    @contextlib.contextmanager
    def _folder(self) -> Iterator[int | None]:
        try:
            fd = open_private_folder(self.folder)
        except UnsafeFolder as exc:
            self.refused = str(exc)
            yield None
            return
        except OSError:  # cannot be created here (read-only, full): the run reads the index, as without a cache
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def load(self, key: str, filename: str) -> WheelFacts | None:
        with self._folder() as dfd:
            if dfd is None:
                return None
            name = f"{key}.json"
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except OSError:
                return None
            try:
                facts = self._verified(fd, key, filename)
            finally:
                os.close(fd)
            if facts is None:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dfd)
            return facts

    def _verified(self, fd: int, key: str, filename: str) -> WheelFacts | None:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            or st.st_size > self.limits.cache_entry_bytes
        ):
            return None
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read(self.limits.cache_entry_bytes + 1)
        head, _, payload = data.partition(b"\n")
        if head != b" ".join((self._MAGIC, key.encode(), hashlib.sha256(payload).hexdigest().encode())):
            return None
        try:
            d = json.loads(payload)
            facts = WheelFacts(
                project=d["project"],
                version=d["version"],
                filename=d["filename"],
                files=tuple(d["files"]),
                requires=tuple(d["requires"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        fields = (facts.project, facts.version, facts.filename, *facts.files, *facts.requires)
        if d.get("schema") != _SCHEMA or facts.filename != filename or not all(isinstance(v, str) for v in fields):
            return None
        return facts

    def store(self, key: str, facts: WheelFacts) -> None:
        """Best effort: a cache that cannot be written costs the next run a read of the index, nothing else."""
        payload = json.dumps(
            {
                "schema": _SCHEMA,
                "project": facts.project,
                "version": facts.version,
                "filename": facts.filename,
                "files": list(facts.files),
                "requires": list(facts.requires),
            }
        ).encode()
        data = b" ".join((self._MAGIC, key.encode(), hashlib.sha256(payload).hexdigest().encode())) + b"\n" + payload
        with self._folder() as dfd:
            if dfd is None:
                return
            self._remove_stale_temps(dfd)
            tmp = f".tmp-{secrets.token_hex(8)}"
            try:
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
                )
            except OSError:
                return
            try:
                with open(fd, "wb") as fh:
                    fh.write(data)
                os.rename(tmp, f"{key}.json", src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)

    def _remove_stale_temps(self, dfd: int) -> None:
        """A killed writer's temporary file (older than STALE_TEMP_S; a live writer's is seconds old)."""
        now = time.time()
        with contextlib.suppress(OSError), os.scandir(dfd) as entries:
            for entry in entries:
                if (
                    entry.name.startswith(".tmp-")
                    and now - entry.stat(follow_symlinks=False).st_mtime > self.STALE_TEMP_S
                ):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=dfd)
