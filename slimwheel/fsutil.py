"""File output that never leaves half-written files: write to a temp file beside the target, then os.replace; and
clean-up of the temp files that killed runs leave behind."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from slimwheel.errors import NO_SPACE_ERRNOS, BadInputError, os_error

log = logging.getLogger("slimwheel.fsutil")


# tempfile's random part of a name: 8 characters of this alphabet (tempfile._RandomNameSequence)
_RANDOM = "[a-z0-9_]{8}"
STALE_AFTER_S = 60.0


def _temp_name(target: Path) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(target.name)}\.{_RANDOM}\.tmp")


def remove_stale_temps(target: Path, *, min_age_s: float = STALE_AFTER_S, legacy: tuple[str, ...] = ()) -> list[Path]:
    """Remove the temporary siblings of `target` (`.<name>.XXXXXXXX.tmp`, made by `temp_sibling`) that runs killed
    before their clean-up left behind; returns what was removed.

    A live run holds an flock on its temp file or folder for as long as it exists, and the kernel drops it when the
    process dies: so an entry we can lock is an orphan, whoever made it, with or without a lock around the target.
    `min_age_s` spares an entry made in the instant between its creation and its flock; callers that hold the
    target's own lock (where no other run can be writing) pass 0. `legacy`: regular expressions for names earlier
    slimwheel releases used (which held no flock on them: pass them only under the target's lock).
    """
    ours = _temp_name(target)
    old = [re.compile(p) for p in legacy]
    return _remove_orphans(
        target.parent, lambda name: bool(ours.fullmatch(name) or any(p.fullmatch(name) for p in old)), min_age_s
    )


def _remove_orphans(folder: Path, matches: Callable[[str], bool], min_age_s: float) -> list[Path]:
    """Remove the entries of `folder` whose names match and whose flock can be taken (no live run holds it)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    now = time.time()
    for entry in entries:
        if not matches(entry.name):
            continue
        path = Path(entry.path)
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < min_age_s:
            continue  # never made by us, or too young to judge
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone meanwhile, or someone else's that we cannot even open
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live run's
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(fd)
    for path in removed:
        log.info("removed %s, left behind by a run that was killed", path)
    return removed


@contextlib.contextmanager
def work_dir(prefix: str) -> Iterator[Path]:
    """A new folder `<prefix>XXXXXXXX` in the temporary folder ($TMPDIR), held with an flock while the block runs and
    removed after it. The orphans that killed runs left under the same prefix (ours, unlocked, older than
    STALE_AFTER_S) go first, as `temp_sibling`'s do: slim unpacks whole wheels there (up to GBs each)."""
    base = Path(tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + _RANDOM)
    _remove_orphans(base, lambda name: bool(pattern.fullmatch(name)), STALE_AFTER_S)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


@contextlib.contextmanager
def temp_sibling(target: Path, *, directory: bool = False) -> Iterator[Path]:
    """A new temporary file (or folder) beside `target`, `.<name>.XXXXXXXX.tmp`, held with an flock while the block
    runs and removed after it unless it was renamed (onto `target`). Orphans of killed runs go first
    (`remove_stale_temps`), so a crash costs disk space only until the next run that writes `target`.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    if directory:
        tmp = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    else:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp_path = Path(tmp)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield tmp_path
    finally:
        if tmp_path.is_dir() and not tmp_path.is_symlink():
            shutil.rmtree(tmp_path, ignore_errors=True)
        elif tmp_path.exists() or tmp_path.is_symlink():
            tmp_path.unlink()
        os.close(fd)


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yields a temporary path in target's folder; on success it replaces target, on error it is removed.
    Temporary files that killed runs left beside target are removed first (see `temp_sibling`)."""
    with atomic_paths([target]) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_paths(targets: Sequence[Path]) -> Iterator[tuple[Path, ...]]:
    """`atomic_path` for several outputs that stand or fall together (the wheels of one `variants` run): each
    target's temporary path; only when the block succeeds are they renamed, all of them, onto their targets."""
    with contextlib.ExitStack() as stack:
        tmps = []
        for target in map(Path, targets):
            if special_file(target):
                raise BadInputError(
                    f"{target}: is a device, pipe or socket, not a file: an output is written to a temporary file and "
                    "renamed onto its path, which would replace it; name a file"
                )
            try:
                tmps.append(stack.enter_context(temp_sibling(target)))
            except OSError as e:  # an output path the user gave that cannot be written: bad input, not a crash
                raise os_error(e, str(target), "cannot write here") from None
        try:
            yield tuple(tmps)
        except OSError as e:
            if e.errno not in NO_SPACE_ERRNOS:
                raise  # a reader's or a bug's: the caller's to word
            # A full disk while the outputs were written: name them (a write() error names no file).
            raise os_error(e, ", ".join(map(str, targets)), "cannot be written") from None
        umask = os.umask(0)
        os.umask(umask)
        for tmp_path, target in zip(tmps, targets, strict=True):
            if tmp_path.is_file():
                # mkstemp creates 0600; outputs are ordinary files, readable as the umask allows.
                os.chmod(tmp_path, 0o666 & ~umask)
            os.replace(tmp_path, target)


def special_file(path: Path) -> bool:
    """Whether `path` (followed through links) is a device, pipe or socket: /dev/null, /dev/stdout, a FIFO. Renaming a
    temporary file onto one replaces it with a plain file: a report written "atomically" to /dev/null as root left
    the machine without its null device (apt's key checks then failed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_text_atomic(target: Path, text: str) -> None:
    """`text` into `target` through a temporary file and a rename, so a reader never sees half of it; a device or pipe
    the user names (`-o /dev/stdout`, `-o /dev/null`, a FIFO) is written in place instead, never replaced."""
    if special_file(target):
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """SLIMWHEEL_CACHE, else $XDG_CACHE_HOME/slimwheel, else ~/.cache/slimwheel; always absolute. A relative
    SLIMWHEEL_CACHE is taken from the current directory now (tools that run in other folders, auditwheel in repair's
    work folder, then get a path that still means it); a relative XDG_CACHE_HOME is ignored, as the XDG spec says."""
    e = os.environ if env is None else env
    if e.get("SLIMWHEEL_CACHE"):
        return Path(e["SLIMWHEEL_CACHE"]).absolute()
    xdg = e.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base.absolute() / "slimwheel"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive fcntl lock on `path` (created, with its folder, if missing), held for the with-block; the kernel
    releases it if the process dies, so a crashed run never leaves a cache locked.

    The lock file is opened without following a link (a link planted there made the lock create a file wherever it
    pointed) and without waiting for a writer (a FIFO planted there hung the run); anything but a regular file is
    refused, naming it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise os_error(e, str(path), "cannot be opened as a lock file (a link, or not writable)") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInputError(f"{path}: a lock file must be a regular file; this is a FIFO, socket or device")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# Opening a folder or file inside a checked folder: never through a link, never waiting on a FIFO.
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_folder(path: Path, parts: Sequence[str] = (), *, create: bool = False) -> int:
    """A descriptor of the folder `path`/`parts[0]`/..., each part opened inside the one before with O_NOFOLLOW (and
    made, 0755, where missing with `create`, `path` too): no link is followed at `path` itself or below it, so whatever is then
    done through the descriptor (`read_at`, `replace_at`, `link_at`, unlinking with dir_fd) stays inside. A link or a
    non-folder on the way is BadInputError naming it. The caller closes the descriptor."""
    where = Path(path)
    if create:
        where.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(where, _NOFOLLOW_DIR)
    except OSError as e:
        raise os_error(e, str(where), "cannot be opened as a folder (a link, or not a folder)") from None
    for part in parts:
        where = where / part
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            nxt = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
        except OSError as e:
            os.close(fd)
            raise os_error(e, str(where), "cannot be opened as a folder (a link, or not a folder)") from None
        os.close(fd)
        fd = nxt
    return fd


def read_at(folder: int, name: str, *, limit: int) -> bytes | None:
    """The bytes of the regular file `name` in the folder descriptor `folder`, or None when it is missing, a link, not
    a regular file (a FIFO is never waited on) or larger than `limit`."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


def _fresh_name(name: str) -> str:
    """A temporary name beside `name` in temp_sibling's form, so its orphan rule (`remove_stale_temps`) applies."""
    return f".{name}.{''.join(secrets.choice(_TEMP_ALPHABET) for _ in range(8))}.tmp"


_TEMP_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"


def replace_at(folder: int, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """`name` in the folder descriptor `folder` becomes a new regular file holding `data`: written to a file created
    fresh beside it (O_CREAT|O_EXCL|O_NOFOLLOW), its mode set on the descriptor, then renamed over whatever `name`
    was (a file, a link, a FIFO: replaced, never written through)."""
    for _ in range(100):
        tmp = _fresh_name(name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary name beside {name}")
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        raise


def link_at(folder: int, name: str, target: str) -> None:
    """`name` in the folder descriptor `folder` becomes a symbolic link to `target`: made fresh beside it and renamed
    over whatever `name` was."""
    for _ in range(100):
        tmp = _fresh_name(name)
        try:
            os.symlink(target, tmp, dir_fd=folder)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary name beside {name}")
    try:
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        raise


def files_under(root: Path, *, links: bool = True) -> list[tuple[str, os.DirEntry[str]]]:
    """Every file under `root` (an unpacked wheel) as (posix path relative to root, its directory entry), sorted by
    that path; `links`: whether a link to a file counts as one (as `Path.is_file` says). One scandir per folder and
    strings, not `sorted(root.rglob("*"))`: on a wheel of 60,000 members that built, compared and re-parsed Path
    objects 1.8 million times in each of unpack's checks, the RECORD hashes, the ELF scan and the packer."""
    out: list[tuple[str, os.DirEntry[str]]] = []
    todo = [("", str(root))]
    while todo:
        prefix, folder = todo.pop()
        with os.scandir(folder) as it:
            for entry in it:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    todo.append((rel + "/", entry.path))
                elif entry.is_file(follow_symlinks=links) and (links or not entry.is_symlink()):
                    out.append((rel, entry))
    out.sort(key=lambda item: item[0].split("/"))  # Path's order (by parts): "a/b" before "a-b/c"
    return out


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 4 MiB blocks (static CUDA libraries are up to ~1 GB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


class UnsafeFolder(OSError):
    """A folder others could write into, swap or point elsewhere: not used. The message says which object and why."""


def open_private_folder(path: Path, *, uid: int | None = None) -> int:
    """A descriptor (O_DIRECTORY) of the folder `path`, created 0700 if missing, judged as the NVRTC cache's folder
    is (`Cache::open_dir` in cmake/include/slimwheel/nvrtc.hpp): the folder itself a folder, not a link, owned by
    `uid` (default: this process's) and writable by no one else; every folder above it, as resolved, owned by root
    or `uid` and not writable by everyone unless sticky (like /tmp). The folder is opened without following a link
    and judged on that descriptor, so a swap between the judgment and its use is seen; callers work relative to it
    (`dir_fd`, O_NOFOLLOW). Raises UnsafeFolder naming what fails, OSError if it cannot be made or opened."""
    uid = os.geteuid() if uid is None else uid
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    above = Path(os.path.realpath(path.parent))
    for folder in (*reversed(above.parents), above):
        st = os.stat(folder)
        if st.st_uid not in (0, uid):
            raise UnsafeFolder(f"{folder} (above {path}) is owned by another user (uid {st.st_uid})")
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise UnsafeFolder(f"{folder} (above {path}) is writable by everyone")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path) or e.errno == errno.ENOTDIR:
            raise UnsafeFolder(f"{path} is not a folder (a symbolic link is refused too)") from None
        raise
    st = os.fstat(fd)
    problem = (
        f"{path} is owned by another user (uid {st.st_uid})"
        if st.st_uid != uid
        else f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700)"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        else ""
    )
    if problem:
        os.close(fd)
        raise UnsafeFolder(problem)
    return fd
