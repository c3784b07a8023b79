"""slimwheel's run-time loader: makes the CUDA libraries an extension needs available before it is imported.

`slimwheel repair` copies this file into repaired wheels as `_slimwheel_loader.py`, with `CONFIG` filled in from
slimwheel/cuda/libs.py (the libraries the wheel needs, in load order, and where the nvidia-* wheels put them). The
shipped copy must work without slimwheel installed, so this module uses the standard library only.

For each library, in dependency order:
1. already loaded in this process (by torch, CuPy, ...): reuse it, after checking its major version, so the process
   never holds two copies of one CUDA library;
2. otherwise the nvidia-* wheel folder, by absolute path: first in the site-packages folder this wheel is installed in,
   then in the other absolute sys.path entries. Never the current directory, never a relative path, never a folder
   that is (or whose parent is) writable by everyone without the sticky bit;
3. with SLIMWHEEL_USE_SYSTEM_CUDA=1 only: dlopen by SONAME with the dynamic loader's normal search (system CUDA).

Failure is one ImportError that names the library, every place looked at, and the `pip install` that fixes it.
See docs/runtime.md.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import stat
import sys

CONFIG = None  # slimwheel:config (replaced by `slimwheel repair`; None in slimwheel's own copy)

log = logging.getLogger("slimwheel.loader")

USE_SYSTEM_ENV = "SLIMWHEEL_USE_SYSTEM_CUDA"
_RTLD_DI_LINKMAP = 2  # glibc's dlinfo request for the link_map (stable for decades)


class _LinkMap(ctypes.Structure):
    # Only the leading members of glibc's struct link_map; used through a pointer from dlinfo, never by value.
    _fields_ = (("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p))


def _libdl():
    for name in ("libdl.so.2", None):
        try:
            lib = ctypes.CDLL(name)
            lib.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            lib.dlinfo.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


def handle_path(handle):
    """The absolute path of a library loaded by ctypes (from its link_map), or None."""
    dl = _libdl()
    if dl is None:
        return None
    lm = ctypes.POINTER(_LinkMap)()
    if dl.dlinfo(ctypes.c_void_p(handle._handle), _RTLD_DI_LINKMAP, ctypes.byref(lm)) != 0 or not lm:
        return None
    name = lm.contents.l_name
    return os.path.realpath(os.fsdecode(name)) if name else None


def already_loaded(soname):
    """(ctypes handle, absolute path) of a library with this SONAME already in the process, or None."""
    try:
        handle = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return None
    return handle, handle_path(handle)


def mapped_libraries(maps_text=None):
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


def soname_major(soname):
    """libcublas.so.13 -> 13; libcudart.so.12.8.90 -> 12; libfoo.so -> None."""
    m = re.search(r"\.so\.(\d+)", soname)
    return int(m.group(1)) if m else None


def other_majors_loaded(soname, maps=None):
    """Paths of loaded copies of the same library with a different SONAME major (libcudart.so.12 when we need .13)."""
    stem = soname.split(".so")[0] + ".so."
    want = soname_major(soname)
    out = []
    for path in mapped_libraries() if maps is None else maps:
        base = os.path.basename(path)
        if base.startswith(stem) and soname_major(base) not in (None, want):
            out.append(path)
    return out


def unsafe_reason(path):
    """Why a folder (or file) must not be loaded from, or None when it is safe.

    Refused: relative paths, the current directory itself (a file directly in it, or a search root that is the current
    directory: what '' or '.' in sys.path means), and any path whose folder or a parent folder is writable by everyone
    without the sticky bit (anyone could plant a library there).
    """
    if not os.path.isabs(path):
        return "relative path"
    real = os.path.realpath(path)
    if _is_cwd(real) or (os.path.isfile(real) and _is_cwd(os.path.dirname(real))):
        return "the current directory"
    p = real
    while True:
        try:
            st = os.stat(p)
        except OSError as e:
            return f"cannot stat {p}: {e.strerror}"
        if st.st_mode & stat.S_IWOTH and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return f"{p} is writable by everyone"
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def _is_cwd(real):
    try:
        return real == os.path.realpath(os.getcwd())
    except OSError:
        return False


def search_roots(config, loader_file=None, path=None):
    """Folders that may hold nvidia/... library folders, best first: this wheel's site-packages, then sys.path."""
    here = os.path.dirname(os.path.abspath(loader_file or __file__))
    root = here
    for _ in range(int(config.get("depth", 1))):
        root = os.path.dirname(root)
    roots = [root]
    for entry in sys.path if path is None else path:
        if entry and os.path.isabs(entry) and os.path.isdir(entry):
            roots.append(entry)
    out = []
    seen = set()
    for r in roots:
        key = os.path.realpath(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def find_in_wheels(lib, roots):
    """(absolute path or None, [(place, outcome)]) for one library row of CONFIG; loads nothing."""
    tried = []
    for root in roots:
        folder = os.path.join(root, *lib["folder"].split("/"))
        if _is_cwd(os.path.realpath(root)):
            tried.append((folder, "refused: under the current directory"))
            continue
        candidate = os.path.join(folder, lib["soname"])
        if not os.path.isfile(candidate):
            tried.append((folder, "not there"))
            continue
        why = unsafe_reason(candidate)
        if why is not None:
            tried.append((folder, f"refused: {why}"))
            continue
        tried.append((folder, "found"))
        return os.path.realpath(candidate), tried
    return None, tried


def _check_runtime_version(lib, handle, path):
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


def driver_version():
    """cuDriverGetVersion of libcuda.so.1 (e.g. 13000), or None without a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    v = ctypes.c_int(0)
    try:
        if cuda.cuDriverGetVersion(ctypes.byref(v)) != 0:
            return None
    except AttributeError:
        return None
    return v.value


def _fmt_cuda(v):
    return f"{v // 1000}.{v % 1000 // 10}"


class LoadError(ImportError):
    pass


def _not_found_message(config, lib, tried, system):
    lines = [
        (f"{config.get('dist', 'this package')} needs {lib['soname']} (CUDA {lib['cuda_major']} {lib['component']}), "
         "which could not be loaded."),
        "  looked in:",
    ]
    lines += [f"    - {place}: {outcome}" for place, outcome in tried]
    if system:
        lines.append(f"  fix: install CUDA {lib['cuda_major']} so the system loader finds {lib['soname']}, "
                     f"or unset {USE_SYSTEM_ENV} and run: pip install '{lib['requirement']}'")
    else:
        lines.append(f"  fix: pip install '{lib['requirement']}'")
        lines.append(f"  (or set {USE_SYSTEM_ENV}=1 to load a system CUDA installation by SONAME)")
    return "\n".join(lines)


def ensure_loaded(config, *, env=None, loader_file=None, path=None):
    """Load every library of config["libs"] (in order); returns one record per library. Raises LoadError."""
    env = os.environ if env is None else env
    system = env.get(USE_SYSTEM_ENV, "") not in ("", "0")
    records = []
    driver = driver_version()
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
            roots = search_roots(config, loader_file, path)
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
