"""Judging a cached sysroot before it is used: the tree against the manifest recorded at assembly, and its folders
by the run-time loader's rule (no one else may change them)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from slimwheel.errors import BadInputError
from slimwheel.runtime.loader import private_group, stat_problem, trust_problem
from slimwheel.toolkit.sysroot_model import STAMP
from slimwheel.toolkit.sysroot_wrappers import COMPAT_HEADER, HOST_PYTHON_INCLUDE

# What slimwheel rewrites on every use, left out of the manifest: the stamp itself, the wrappers and their header
# (`write_wrappers`: compared with their text each time), the links to the host's Python headers (host-dependent) and
# the capped compilers (`ensure_cap`: their folder opened without links, their files compared or hashed).
_GENERATED = frozenset({STAMP, HOST_PYTHON_INCLUDE, "caps", "bin/gcc", "bin/g++", f"bin/{COMPAT_HEADER}"})


def tree_manifest(root: Path) -> dict[str, str]:
    """What the root holds, by posix path (slimwheel's generated parts left out): "d" a folder, "l:<target>" a link,
    "f<mode>:<sha256>" a file. Walked without following links. Every entry is judged as the run-time loader judges
    a library folder (`runtime.loader.stat_problem`: owner root or this user, writable by no one else), and a FIFO,
    socket or device is refused: each is BadInputError naming it."""
    out: dict[str, str] = {}
    uid = os.geteuid()
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath).relative_to(root).as_posix()
        here = "" if here == "." else f"{here}/"
        dirnames[:] = sorted(d for d in dirnames if f"{here}{d}" not in _GENERATED)
        for name in (*dirnames, *sorted(filenames)):
            rel = f"{here}{name}"
            if rel in _GENERATED:
                continue
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            private = bool(st.st_mode & stat.S_IWGRP) and private_group(st.st_gid, st.st_uid)
            if why := stat_problem(path, st, uid=uid, group_is_private=private):
                raise BadInputError(f"sysroot: {why}", hint=f"remove {root} to assemble the sysroot again")
            if stat.S_ISLNK(st.st_mode):
                out[rel] = f"l:{os.readlink(path)}"
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "d"
            elif stat.S_ISREG(st.st_mode):
                out[rel] = f"f{stat.S_IMODE(st.st_mode):o}:{_sha256_regular(path)}"
            else:
                raise BadInputError(
                    f"sysroot: {path} is a FIFO, socket or device, which no package put there",
                    hint=f"remove {root} to assemble the sysroot again",
                )
    return out


def _sha256_regular(path: str) -> str:
    """SHA-256 of the regular file `path`, opened without following a link or waiting on a FIFO."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInputError(f"sysroot: {path} changed into something other than a file while it was read")
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_problem(recorded: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """The first difference between the manifest recorded at assembly and the tree now, worded; None if none."""
    for rel in sorted(set(recorded) | set(now)):
        was, cur = recorded.get(rel), now.get(rel)
        if was == cur:
            continue
        if was is None:
            return f"{rel} was not there when it was assembled (planted)"
        if cur is None:
            return f"{rel} is gone since it was assembled"
        return f"{rel} changed since it was assembled ({_kind(was)} then, {_kind(cur)} now)"
    return None


def _kind(entry: str) -> str:
    if entry == "d":
        return "a folder"
    if entry.startswith("l:"):
        return f"a link to {entry[2:]}"
    mode, digest = entry[1:].split(":", 1)
    return f"a file of mode {mode}, sha256 {digest[:12]}"


def judge_root_folder(root: Path) -> None:
    """Refuse a sysroot folder someone else could change, by the run-time loader's rule for library folders
    (`runtime.loader.trust_problem`: every folder and link on the way, owner root or this user, writable by no one
    else), or one that is itself a link."""
    if why := trust_problem(str(root.absolute())):
        raise BadInputError(f"sysroot at {root}: {why}")
    if root.is_symlink():
        raise BadInputError(
            f"sysroot at {root}: is a link; slimwheel assembles a sysroot in a folder of its own",
            hint="remove the link, or name a folder",
        )


def verify_root(root: Path, recorded: Mapping[str, str]) -> None:
    """Refuse a cached sysroot whose tree is not what was assembled (a trojaned compiler, a planted library or
    link, a changed mode) or whose folders someone else could change; BadInputError names the first problem."""
    judge_root_folder(root)
    if why := manifest_problem(recorded, tree_manifest(root)):
        raise BadInputError(
            f"sysroot at {root}: {why}; it is not used", hint=f"remove {root} to assemble the sysroot again"
        )
