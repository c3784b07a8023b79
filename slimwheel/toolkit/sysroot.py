"""A low platform floor without a container: an old Debian release's compiler, glibc and libstdc++ as a sysroot.

A wheel's glibc and GLIBCXX floor is set by the headers and libraries it is linked against, not by the machine that
builds it. `debian11` is Debian 11 (bullseye): glibc 2.31, GCC 10.2 with its libstdc++ (GLIBCXX_3.4.28), exactly
auditwheel's manylinux_2_31 limits. Its .debs are fetched with `apt-get download` under a private apt configuration
(`cuda12.private_apt`: the system's apt state is neither read nor written, nothing is installed) and unpacked with
`dpkg-deb -x` into slimwheel's cache; the compiler runs from there:

- `bin/gcc`, `bin/g++`: the root's own gcc-10/g++-10 with `--sysroot=<root>`, so headers (C++ too), crt files, libc,
  libstdc++ and libgcc all come from the root. nvcc takes `bin/g++` as its host compiler (-ccbin, CUDAHOSTCXX):
  CUDA 13.0's host_config.h accepts GCC up to 15 and sets no lower bound; its CCCL needs C++17, which GCC 10 has.
- the libraries cc1/cc1plus/lto1 need (isl, mpc, mpfr, gmp, zlib, zstd) are the root's copies, found through an
  RPATH into `compiler-libs/` (patchelf), so the compiler runs on hosts without them; the host needs glibc >= 2.31
  to run the root's binaries, and its binutils (as, ld) assemble and link.
- absolute symbolic links inside the root are made relative, so that the linker's sysroot lookups stay inside it.
- GCC 10 lacks intrinsics that GCC 11 added and current code uses (faiss 1.15's AVX-512 code calls
  `_mm256_loadu_epi8`): both wrappers include `bin/slimwheel-gcc-compat.h` first, which defines each as the older
  intrinsic with the same result (`compat_header`).

`slimwheel sysroot` assembles it and prints the environment; `[tool.slimwheel] sysroot = "debian11"` makes `build`
use it (CC, CXX, CUDAHOSTCXX).

The parts: `sysroot_model` (the specs, `Sysroot`, `GlibcCap`), `sysroot_wrappers` (the compiler wrappers and
headers), `sysroot_cap` (compilers capped at an older manylinux policy), `sysroot_verify` (a cached root judged
before use); here, assembling a root and finding it again (`ensure_sysroot`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from slimwheel.errors import ToolError
from slimwheel.fsutil import cache_dir, file_lock, open_folder, read_at, temp_sibling, write_text_atomic
from slimwheel.toolkit.sysroot_cap import (
    GLIBC_LIBRARIES,
    GLIBCXX_SHIM_ARCHIVE,
    GLIBCXX_SHIM_SYMBOLS,
    cap_for,
    cap_header,
    cap_wrapper,
    ensure_cap,
    glibcxx_shim_source,
    plan_cap,
    shim_versions,
)
from slimwheel.toolkit.sysroot_model import (
    CAP_HEADER,
    SPECS,
    STAMP,
    STAMP_SCHEMA,
    GlibcCap,
    PinnedSymbol,
    Sysroot,
    SysrootName,
    SysrootSpec,
    load_problems,
    spec_for,
)
from slimwheel.toolkit.sysroot_verify import judge_root_folder, manifest_problem, tree_manifest, verify_root
from slimwheel.toolkit.sysroot_wrappers import (
    COMPAT_HEADER,
    HOST_PYTHON_INCLUDE,
    MAX_GENERATED,
    MULTIARCH,
    compat_header,
    link_host_python_includes,
    wrapper_script,
    write_wrappers,
)
from slimwheel.tools import patchelf, run_tool

__all__ = [
    "CAP_HEADER",
    "COMPAT_HEADER",
    "GLIBCXX_SHIM_ARCHIVE",
    "GLIBCXX_SHIM_SYMBOLS",
    "GLIBC_LIBRARIES",
    "HOST_PYTHON_INCLUDE",
    "MULTIARCH",
    "SPECS",
    "STAMP",
    "STAMP_SCHEMA",
    "GlibcCap",
    "PinnedSymbol",
    "Sysroot",
    "SysrootName",
    "SysrootSpec",
    "cap_for",
    "cap_header",
    "cap_wrapper",
    "compat_header",
    "ensure_cap",
    "ensure_sysroot",
    "glibcxx_shim_source",
    "judge_root_folder",
    "link_host_python_includes",
    "load_problems",
    "manifest_problem",
    "plan_cap",
    "relative_symlinks",
    "shim_versions",
    "spec_for",
    "tree_manifest",
    "verify_root",
    "wrapper_script",
    "write_wrappers",
]


log = logging.getLogger(__name__)


# The compiler's own libraries, copied where the compiler finds them through its RPATH (globs in the root).
_COMPILER_LIBS = (
    "usr/lib/x86_64-linux-gnu/libisl.so.23*",
    "usr/lib/x86_64-linux-gnu/libmpc.so.3*",
    "usr/lib/x86_64-linux-gnu/libmpfr.so.6*",
    "usr/lib/x86_64-linux-gnu/libgmp.so.10*",
    "lib/x86_64-linux-gnu/libz.so.1*",
    "lib/x86_64-linux-gnu/libzstd.so.1*",
)
_COMPILER_PROGRAMS = ("cc1", "cc1plus", "lto1")


def relative_symlinks(root: Path) -> int:
    """Rewrite absolute symbolic links under root (/lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...) to
    relative ones inside root; returns how many."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                continue
            target = os.readlink(p)
            if target.startswith("/"):
                inside = root / target.lstrip("/")
                p.unlink()
                p.symlink_to(os.path.relpath(inside, p.parent))
                n += 1
    return n


def _read_stamp(root: Path, spec: SysrootSpec) -> tuple[Sysroot, dict[str, str]] | None:
    """The sysroot the stamp describes and the manifest it recorded, or None when the root must be assembled (no
    root, no stamp or an unreadable one, another schema or sysroot)."""
    if not os.path.lexists(root):
        return None
    judge_root_folder(root)
    fd = open_folder(root)
    try:
        raw = read_at(fd, STAMP, limit=MAX_GENERATED)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("schema") != STAMP_SCHEMA or data.get("name") != spec.name:
        return None
    files, packages = data.get("files"), data.get("packages")
    if not isinstance(files, dict) or not isinstance(packages, dict):
        return None
    sysroot = Sysroot(spec=spec, root=root, packages={str(k): str(v) for k, v in packages.items()})
    return sysroot, {str(k): str(v) for k, v in files.items()}


def ensure_sysroot(name: str, *, env: Mapping[str, str] | None = None, into: Path | None = None) -> Sysroot:
    """The sysroot `name`, assembled once into `into` (default: <cache>/sysroots/<name>) and, verified against what
    was recorded at assembly (`verify_root`), reused after."""
    spec = spec_for(name)
    e = dict(os.environ if env is None else env)
    root = (Path(into) if into is not None else cache_dir(e) / "sysroots" / spec.name).absolute()
    root.parent.mkdir(parents=True, exist_ok=True)
    judge_root_folder(root.parent)
    with file_lock(root.parent / f".{root.name}.lock"):
        found = _read_stamp(root, spec)
        if found is not None:
            sysroot, recorded = found
            verify_root(root, recorded)
            write_wrappers(root, spec)
            return sysroot
        return _assemble(spec, root)


def _assemble(spec: SysrootSpec, root: Path) -> Sysroot:
    from slimwheel.toolkit.cuda12 import DEBIAN_KEYRING, private_apt

    if os.uname().machine != "x86_64":
        raise ToolError(f"sysroot {spec.name} is x86_64; this host is {os.uname().machine}")
    for tool in ("apt-get", "dpkg-deb", "as", "ld"):
        if shutil.which(tool) is None:
            raise ToolError(
                f"assembling sysroot {spec.name} needs {tool}", hint="a Debian or Ubuntu host with binutils"
            )
    patchelf_bin = patchelf()
    if not DEBIAN_KEYRING.is_file():
        raise ToolError(
            f"{DEBIAN_KEYRING} is missing: it verifies Debian's archive", hint="apt-get install debian-archive-keyring"
        )
    with temp_sibling(root, directory=True) as tmp:
        state, debs, tree = tmp / "apt", tmp / "debs", tmp / "root"
        for sub in ("lists/partial", "cache/archives/partial"):
            (state / sub).mkdir(parents=True)
        debs.mkdir()
        opts, sources = private_apt(state, spec.suite, "main")
        (state / "sources.list").write_text(sources, encoding="utf-8")
        (state / "status").touch()
        run_tool(
            ["apt-get", *opts, "update"], what=f"apt-get update (Debian {spec.suite} main, private lists)", timeout=1800
        )
        run_tool(
            ["apt-get", *opts, "download", *spec.packages],
            what=f"apt-get download ({spec.suite})",
            cwd=debs,
            timeout=1800,
        )
        packages: dict[str, str] = {}
        for deb in sorted(debs.glob("*.deb")):
            pkg, version, _arch = deb.name.removesuffix(".deb").split("_")
            packages[pkg] = version.replace("%3a", ":")
            run_tool(["dpkg-deb", "-x", str(deb), str(tree)], what=f"dpkg-deb -x {deb.name}", timeout=600)
        missing = sorted(set(spec.packages) - set(packages))
        if missing:
            raise ToolError(f"apt-get download left out {', '.join(missing)} of Debian {spec.suite}")
        relative_symlinks(tree)
        libs = tree / "compiler-libs"
        libs.mkdir()
        for pattern in _COMPILER_LIBS:
            for f in tree.glob(pattern):
                shutil.copy2(f, libs / f.name, follow_symlinks=False)
        gcc_dir = tree / "usr" / "lib" / "gcc" / "x86_64-linux-gnu" / spec.gcc
        for prog in _COMPILER_PROGRAMS:
            # DT_RPATH, not RUNPATH: it also serves the libraries' own needs (libmpc needs libmpfr and libgmp).
            run_tool(
                [
                    patchelf_bin,
                    "--force-rpath",
                    "--set-rpath",
                    "$ORIGIN/../../../../../compiler-libs",
                    str(gcc_dir / prog),
                ],
                what=f"patchelf {prog}",
            )
        write_wrappers(tree, spec)
        sysroot = Sysroot(spec=spec, root=root, packages=packages)
        stamp = {"schema": STAMP_SCHEMA, **sysroot.to_json(), "files": tree_manifest(tree)}
        write_text_atomic(tree / STAMP, json.dumps(stamp, indent=2) + "\n")
        # What stood under the root's name (a root of an older schema, or one that failed its stamp) goes; a link
        # goes as a link, never followed.
        if os.path.isdir(root) and not os.path.islink(root):
            shutil.rmtree(root)
        elif os.path.lexists(root):
            os.unlink(root)
        os.replace(tree, root)
    log.info("assembled sysroot %s at %s", spec.name, root)
    return sysroot
