"""slimwheel's run-time loader: makes the CUDA libraries an extension needs available before it is imported.

`slimwheel repair` copies this file into repaired wheels as `_slimwheel_loader.py`, with `CONFIG` filled in from
slimwheel/cuda/libs.py (the libraries the wheel needs, in load order, and where the nvidia-* wheels put them). The
shipped copy must work without slimwheel installed, so this module uses the standard library only.

For each library, in dependency order:
1. already loaded in this process (by torch, CuPy, ...): reuse it, after checking its major version, so the process
   never holds two copies of one CUDA library;
2. otherwise the nvidia-* wheel folder, by absolute path: first in the site-packages folder this wheel is installed in,
   then in the other absolute sys.path entries. Never a relative entry, never a folder at or under the current
   directory (except the package's own site-packages), and never a library that another user could swap: every
   folder the path resolution passes through (as given and as resolved through symlinks), every symlink and the file
   must belong to root or the current user and be writable by nobody else (sticky folders like /tmp excepted);
3. with SLIMWHEEL_USE_SYSTEM_CUDA=1 (a boolean) only: dlopen by SONAME with the dynamic loader's normal search.

Failure is one ImportError that names the library, every place looked at, and the `pip install` that fixes it.
See docs/runtime.md.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

CONFIG: dict[str, Any] | None = None  # slimwheel:config (replaced by `slimwheel repair`; None in slimwheel's own copy)

if TYPE_CHECKING:  # the shipped copy may run on Pythons that cannot evaluate these at run time
    Root = tuple[str, "str | None"]  # (search root, why it is refused or None)

log = logging.getLogger("slimwheel.loader")

USE_SYSTEM_ENV = "SLIMWHEEL_USE_SYSTEM_CUDA"
_RTLD_DI_LINKMAP = 2  # glibc's dlinfo request for the link_map (stable for decades)


class _LinkMap(ctypes.Structure):
    # Only the leading members of glibc's struct link_map; used through a pointer from dlinfo, never by value.
    _fields_ = (("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p))


def _libdl() -> ctypes.CDLL | None:
    """dlinfo from the handle of the program itself (dlopen(NULL): searches no folder). glibc >= 2.34 keeps it in
    libc; older ones in libdl, which the Python binary or libpython links. Never `CDLL("libdl.so.2")`: with an empty
    element in LD_LIBRARY_PATH that name is looked up in the current directory, and a file planted there would run."""
    try:
        lib = ctypes.CDLL(None)
        lib.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.dlinfo.restype = ctypes.c_int
        return lib
    except (OSError, AttributeError):
        return None


def handle_path(handle: ctypes.CDLL) -> str | None:
    """The absolute path of a library loaded by ctypes (from its link_map), or None."""
    dl = _libdl()
    if dl is None:
        return None
    lm = ctypes.POINTER(_LinkMap)()
    if dl.dlinfo(ctypes.c_void_p(handle._handle), _RTLD_DI_LINKMAP, ctypes.byref(lm)) != 0 or not lm:
        return None
    name = lm.contents.l_name
    return os.path.realpath(os.fsdecode(name)) if name else None


def loaded_path(soname: str, maps: list[str] | None = None) -> str | None:
    """The file of a library with this SONAME that is mapped into the process (libcudart.so.13, or a versioned file
    name under it such as libcudart.so.13.0.96), or None. Read from /proc/self/maps: no dynamic-loader search."""
    for path in mapped_libraries() if maps is None else maps:
        base = os.path.basename(path)
        if base == soname or base.startswith(soname + "."):
            return path
    return None


def already_loaded(soname: str) -> tuple[ctypes.CDLL, str | None] | None:
    """(ctypes handle, absolute path) of a library with this SONAME already in the process, or None. The handle comes
    from the mapped file's absolute path with RTLD_NOLOAD: a bare SONAME would make the dynamic loader open (and, for
    a FIFO, block on) whatever an empty LD_LIBRARY_PATH element finds in the current directory."""
    path = loaded_path(soname)
    if path is None:
        return None
    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return None
    return handle, handle_path(handle) or path


def mapped_libraries(maps_text: str | None = None) -> list[str]:
    """Paths of the shared objects mapped into this process (from /proc/self/maps)."""
    if maps_text is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                maps_text = f.read()
        except OSError:
            return []
    seen = []
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5] and parts[5] not in seen:
            seen.append(parts[5])
    return seen


def soname_major(soname: str) -> int | None:
    """libcublas.so.13 -> 13; libcudart.so.12.8.90 -> 12; libfoo.so -> None."""
    m = re.search(r"\.so\.(\d+)", soname)
    return int(m.group(1)) if m else None


def other_majors_loaded(soname: str, maps: list[str] | None = None) -> list[str]:
    """Paths of loaded copies of the same library with a different SONAME major (libcudart.so.12 when we need .13)."""
    stem = soname.split(".so")[0] + ".so."
    want = soname_major(soname)
    out = []
    for path in mapped_libraries() if maps is None else maps:
        base = os.path.basename(path)
        if base.startswith(stem) and soname_major(base) not in (None, want):
            out.append(path)
    return out


# The loader ships inside other people's wheels and must not import slimwheel, so it keeps its own copy of the
# boolean vocabulary of slimwheel.envvars.parse_bool; tests/unit/test_runtime_loader_logic.py checks that both agree.
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A boolean environment variable: 1/0, true/false, yes/no, on/off (any case); unset or empty is `default`.

    Anything else is a LoadError naming the variable: `SLIMWHEEL_USE_SYSTEM_CUDA=false` must never mean "on".
    """
    value = env.get(name)
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise LoadError(f"{name}={value!r} is not a boolean: use 1/0, true/false, yes/no or on/off (or leave it unset)")


_MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP)


def lookups(path: str) -> list[tuple[str, os.stat_result]]:
    """What resolving the absolute `path` consults, in order, as the kernel walks it: every directory a name is looked
    up in, every symlink followed (by its own path) and the object reached, as (path, lstat result) pairs.

    A symlink's target is walked from the physical folder the link sits in (or from / when it is absolute), so a
    folder is listed both where a path names it and where a link leads. Raises OSError when the path cannot be
    resolved (missing, not a directory, a symlink loop).
    """
    if not os.path.isabs(path):
        raise ValueError(f"not an absolute path: {path!r}")
    out = [("/", os.lstat("/"))]
    todo = [p for p in reversed(path.split("/")) if p not in ("", ".")]
    cur = "/"
    links = 0
    while todo:
        name = todo.pop()
        if name == "..":
            cur = os.path.dirname(cur)  # physical already, and its parents were consulted on the way down
            continue
        nxt = os.path.join(cur, name)
        st = os.lstat(nxt)
        out.append((nxt, st))
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_SYMLINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = "/"
            todo.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), nxt)
        cur = nxt
    return out


def _user(uid: int) -> str:
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    import grp

    try:
        return f"gid {gid} ({grp.getgrgid(gid).gr_name})"
    except KeyError:
        return f"gid {gid}"


def private_group(gid: int, owner_uid: int) -> bool:
    """True when `gid` is the user private group of `owner_uid` (same name, the owner's primary group, no other
    members): Debian and Ubuntu give every user one and a umask of 002, so the user's own folders are 0775."""
    import grp
    import pwd

    try:
        owner = pwd.getpwuid(owner_uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return owner.pw_gid == gid and group.gr_name == owner.pw_name and set(group.gr_mem) <= {owner.pw_name}


def stat_problem(path: str, st: os.stat_result, *, uid: int, group_is_private: bool) -> str | None:
    """Why one object on the way to a library lets someone else choose what is loaded, or None. Pure.

    Refused: an owner other than root and `uid` (the owner can rename or replace anything in it); a directory or file
    writable by others, or by a group that is not its owner's private group, unless it is a directory with the
    sticky bit (like /tmp: others may add names but not replace ours, and whatever they add has them as owner,
    which this rule refuses in turn). A symlink's own mode means nothing; its owner does.
    """
    if st.st_uid not in (0, uid):
        return f"{path} is owned by {_user(st.st_uid)}, not by root or the current user"
    mode = st.st_mode
    if stat.S_ISLNK(mode) or (stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
        return None
    kind = "folder" if stat.S_ISDIR(mode) else "file"
    if mode & stat.S_IWOTH:
        return f"{path}: {kind} writable by everyone (mode {stat.S_IMODE(mode):04o}, no sticky bit)"
    if mode & stat.S_IWGRP and not group_is_private:
        return f"{path}: {kind} writable by group {_group(st.st_gid)} (mode {stat.S_IMODE(mode):04o}, no sticky bit)"
    return None


def trust_problem(path: str, *, uid: int | None = None) -> str | None:
    """Why the library at absolute `path` must not be loaded, or None: the first object on the way (see `lookups`:
    each folder as given and as resolved, each symlink and the folder it sits in, the file) that fails `stat_problem`.
    """
    uid = os.geteuid() if uid is None else uid
    try:
        chain = lookups(path)
    except (OSError, ValueError) as e:
        return f"cannot resolve {path}: {e}"
    for p, st in chain:
        # the group database is asked only about group-writable objects (it may be a slow network service)
        private = bool(st.st_mode & stat.S_IWGRP) and private_group(st.st_gid, st.st_uid)
        why = stat_problem(p, st, uid=uid, group_is_private=private)
        if why is not None:
            return why
    return None


def _cwd() -> str | None:
    try:
        return os.path.realpath(os.getcwd())
    except OSError:
        return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def own_root(config: Mapping[str, Any], loader_file: str | None = None) -> str:
    """The site-packages folder this wheel is installed in (`depth` folders above the loader)."""
    root = os.path.dirname(os.path.abspath(loader_file or __file__))
    for _ in range(int(config.get("depth", 1))):
        root = os.path.dirname(root)
    return root


def site_dirs() -> list[str]:
    """Python's own installation folders: the site-packages of this interpreter (or venv) and the user site."""
    import site

    dirs = list(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return dirs


def search_roots(
    own: str | None, path: Sequence[object], cwd: str | None = None, installed: Sequence[str] | None = None
) -> list[Root]:
    """[(root, refusal or None)]: folders that may hold nvidia/... library folders, best first: `own` (the package's
    own site-packages, or None), then the entries of `path` (sys.path). Duplicates (by resolved path) and missing
    folders are left out.

    Refused: '' and other relative entries (Python resolves them against the current directory at each import), and
    any other folder at or under the current directory `cwd` (PYTHONPATH=sub arrives absolute, so the place decides,
    not the spelling). Not refused for that: the package's own site-packages (a package that lives there brings its
    code from there anyway) and Python's installation folders (`installed`, default `site_dirs()`), which lie under
    the current directory by coincidence (a shell in the venv's folder); and nothing when the current directory is /,
    under which everything lies. The trust rule still judges every one of them.
    """
    cwd = _cwd() if cwd is None else os.path.realpath(cwd)
    keep = {os.path.realpath(d) for d in (site_dirs() if installed is None else installed)}
    if own:
        keep.add(os.path.realpath(own))
    out: list[Root] = []
    seen = set()
    for entry in ([own] if own else []) + [e for e in path if isinstance(e, str)]:
        relative = not os.path.isabs(entry)
        if relative and cwd is None:
            continue  # no current directory (deleted): relative entries name nothing
        full = os.path.join(cwd, entry) if relative and cwd is not None else entry
        if not os.path.isdir(full):
            continue
        real = os.path.realpath(full)
        if real in seen or (relative and real in keep):
            continue  # a relative name of an installation folder: searched under its absolute sys.path entry
        seen.add(real)
        if relative:
            out.append((f"{entry!r} in sys.path", f"refused: a relative entry, it means the current directory {cwd}"))
        elif cwd not in (None, "/") and real not in keep and _under(real, cwd):
            out.append((entry, f"refused: under the current directory {cwd}"))
        else:
            out.append((entry, None))
    return out


def find_in_wheels(
    lib: Mapping[str, Any], roots: Sequence[Root], *, uid: int | None = None
) -> tuple[str | None, list[tuple[str, str]]]:
    """(absolute path or None, [(place, outcome)]) for one library row of CONFIG; loads nothing."""
    tried = []
    for root, refusal in roots:
        if refusal is not None:
            tried.append((root, refusal))
            continue
        folder = os.path.join(root, *lib["folder"].split("/"))
        candidate = os.path.join(folder, lib["soname"])
        if not os.path.isfile(candidate):
            tried.append((folder, "not there"))
            continue
        why = trust_problem(candidate, uid=uid)
        if why is not None:
            tried.append((folder, f"refused: {why}"))
            continue
        tried.append((folder, "found"))
        return os.path.realpath(candidate), tried
    return None, tried


def _check_runtime_version(lib: Mapping[str, Any], handle: ctypes.CDLL, path: str | None) -> str | None:
    """cudart reports its own version: a library with the right SONAME but another major is refused."""
    if lib["component"] != "cudart":
        return None
    try:
        fn = handle.cudaRuntimeGetVersion
    except AttributeError:
        return None
    v = ctypes.c_int(0)
    if fn(ctypes.byref(v)) != 0:
        return None
    if v.value // 1000 != lib["cuda_major"]:
        return f"{path} reports CUDA runtime {v.value // 1000}.{v.value % 1000 // 10}, not CUDA {lib['cuda_major']}"
    return None


DRIVER_SONAME = "libcuda.so.1"
# Where glibc's loader looks after LD_LIBRARY_PATH and /etc/ld.so.conf (its built-in trusted folders, x86_64 and
# aarch64 multiarch and lib64 layouts), and where WSL puts the driver.
_DEFAULT_LIB_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/lib/wsl/lib",
)


def _ld_so_conf(path: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    """The folders /etc/ld.so.conf lists, its `include` globs followed (4 levels at most)."""
    import glob

    out: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include") and depth < 4:
            for pattern in line.split()[1:]:
                pattern = pattern if pattern.startswith("/") else os.path.join(os.path.dirname(path), pattern)
                for conf in sorted(glob.glob(pattern)):
                    out += _ld_so_conf(conf, depth + 1)
        elif line.startswith("/"):
            out.append(line)
    return out


def driver_candidates(env: Mapping[str, str] | None = None, conf: Sequence[str] | None = None) -> list[str]:
    """Absolute paths the driver library may have, in the dynamic loader's order of folders: the absolute entries
    of LD_LIBRARY_PATH (an empty or relative entry means the current directory: left out), /etc/ld.so.conf's
    folders, glibc's default folders."""
    env = os.environ if env is None else env
    folders = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/")]
    folders += _ld_so_conf() if conf is None else list(conf)
    folders += _DEFAULT_LIB_DIRS
    return [os.path.join(d, DRIVER_SONAME) for d in dict.fromkeys(os.path.normpath(d) for d in folders)]


def driver_handle(env: Mapping[str, str] | None = None, *, uid: int | None = None) -> ctypes.CDLL | None:
    """The driver library: the copy already in the process (torch loads it), else the first of `driver_candidates`
    that exists and passes `trust_problem`, opened by its absolute path. None without one. Never dlopen by name."""
    hit = already_loaded(DRIVER_SONAME)
    if hit is not None:
        return hit[0]
    for path in driver_candidates(env):
        if not os.path.isfile(path):
            continue
        why = trust_problem(path, uid=uid)
        if why is not None:
            log.debug("slimwheel loader: driver %s refused: %s", path, why)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            log.debug("slimwheel loader: driver %s: %s", path, e)
    return None


def driver_version(env: Mapping[str, str] | None = None) -> int | None:
    """cuDriverGetVersion of the driver library (e.g. 13000), or None without a driver (see `driver_handle`)."""
    cuda = driver_handle(env)
    if cuda is None:
        return None
    v = ctypes.c_int(0)
    try:
        if cuda.cuDriverGetVersion(ctypes.byref(v)) != 0:
            return None
    except AttributeError:
        return None
    return v.value


def _fmt_cuda(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


class LoadError(ImportError):
    pass


def _not_found_message(
    config: Mapping[str, Any], lib: Mapping[str, Any], tried: list[tuple[str, str]], system: bool
) -> str:
    lines = [
        (
            f"{config.get('dist', 'this package')} needs {lib['soname']} (CUDA {lib['cuda_major']} {lib['component']}), "
            "which could not be loaded."
        ),
        "  looked in:",
    ]
    lines += [f"    - {place}: {outcome}" for place, outcome in tried]
    if system:
        lines.append(
            f"  fix: install CUDA {lib['cuda_major']} so the system loader finds {lib['soname']}, "
            f"or unset {USE_SYSTEM_ENV} and run: pip install '{lib['requirement']}'"
        )
    else:
        lines.append(f"  fix: pip install '{lib['requirement']}'")
        lines.append(f"  (or set {USE_SYSTEM_ENV}=1 to load a system CUDA installation by SONAME)")
    return "\n".join(lines)


def ensure_loaded(
    config: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    loader_file: str | None = None,
    path: Sequence[object] | None = None,
) -> dict[str, Any]:
    """Load every library of config["libs"] (in order); returns one record per library. Raises LoadError."""
    env = os.environ if env is None else env
    system = env_flag(env, USE_SYSTEM_ENV)
    records = []
    driver = driver_version(env)
    floor = config.get("driver")
    if driver is not None and floor and driver < floor["min_cuda"]:
        raise LoadError(
            f"{config.get('dist', 'this package')}: the NVIDIA driver supports CUDA {_fmt_cuda(driver)} "
            f"(cuDriverGetVersion {driver}), but this wheel needs CUDA {_fmt_cuda(floor['min_cuda'])} "
            f"({floor['why']}).\n  fix: update the NVIDIA driver to {floor['min_driver']} or newer"
        )
    roots = None
    for lib in config["libs"]:
        rec = {"component": lib["component"], "soname": lib["soname"], "path": None, "via": None}
        others = other_majors_loaded(lib["soname"])
        if others:
            raise LoadError(
                f"{config.get('dist', 'this package')} needs {lib['soname']}, but another major version is already "
                f"loaded in this process: {', '.join(others)}. Two CUDA majors in one process crash.\n"
                f"  fix: install the build of this package for that CUDA major, or use one CUDA major everywhere"
            )
        hit = already_loaded(lib["soname"])
        if hit is not None:
            handle, where = hit
            bad = _check_runtime_version(lib, handle, where)
            if bad:
                raise LoadError(f"{config.get('dist', 'this package')}: already loaded {lib['soname']} is wrong: {bad}")
            rec.update(path=where, via="already-loaded")
            records.append(rec)
            log.debug("slimwheel loader: %s already loaded from %s", lib["soname"], where)
            continue
        tried = [("already-loaded libraries of this process", "not loaded")]
        if system:
            try:
                handle = ctypes.CDLL(lib["soname"], mode=os.RTLD_GLOBAL)
            except OSError as e:
                tried.append((f"system search for {lib['soname']} ({USE_SYSTEM_ENV}=1)", str(e)))
                if lib.get("needed", True):
                    raise LoadError(_not_found_message(config, lib, tried, True)) from None
                continue
            where = handle_path(handle)
            bad = _check_runtime_version(lib, handle, where)
            if bad:
                raise LoadError(f"{config.get('dist', 'this package')}: {bad}")
            rec.update(path=where, via="system")
            records.append(rec)
            continue
        if roots is None:
            roots = search_roots(own_root(config, loader_file), sys.path if path is None else path)
        found, more = find_in_wheels(lib, roots)
        tried += more
        if found is None:
            if lib.get("needed", True):
                raise LoadError(_not_found_message(config, lib, tried, False))
            continue  # a dependency loaded only to fix the order; the library that needs it finds it itself
        try:
            handle = ctypes.CDLL(found, mode=os.RTLD_GLOBAL)
        except OSError as e:
            tried[-1] = (os.path.dirname(found), f"found, but dlopen failed: {e}")
            raise LoadError(_not_found_message(config, lib, tried, False)) from None
        bad = _check_runtime_version(lib, handle, found)
        if bad:
            raise LoadError(f"{config.get('dist', 'this package')}: {bad}")
        rec.update(path=found, via="wheel")
        records.append(rec)
        log.debug("slimwheel loader: %s loaded from %s", lib["soname"], found)
    return {"schema": 1, "driver_version": driver, "libraries": records}


STATE = None
if CONFIG is not None:
    STATE = ensure_loaded(CONFIG)
