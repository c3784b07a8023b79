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

`slimwheel sysroot` assembles it and prints the environment; `[tool.slimwheel] sysroot = "debian11"` makes `build`
use it (CC, CXX, CUDAHOSTCXX).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slimwheel.errors import BadInputError, ToolError
from slimwheel.fsutil import cache_dir, file_lock, temp_sibling, write_text_atomic
from slimwheel.tools import patchelf, run_tool, run_tool_status

log = logging.getLogger(__name__)

SysrootName = Literal["debian11"]
STAMP = "slimwheel-sysroot.json"
STAMP_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class SysrootSpec:
    name: SysrootName
    suite: str  # Debian's code name
    glibc: str
    gcc: str  # major version: the binaries are x86_64-linux-gnu-gcc-<gcc>
    policy: str  # the manylinux policy whose symbol versions the root's glibc and libstdc++ stay within
    packages: tuple[str, ...]


SPECS: dict[str, SysrootSpec] = {
    "debian11": SysrootSpec(
        name="debian11",
        suite="bullseye",
        glibc="2.31",
        gcc="10",
        policy="manylinux_2_31",
        packages=(
            # glibc and the kernel headers
            "libc6",
            "libc6-dev",
            "linux-libc-dev",
            "libcrypt1",
            "libcrypt-dev",
            "libnsl2",
            "libnsl-dev",
            "libtirpc3",
            "libtirpc-dev",
            # GCC 10: drivers, compilers, libgcc, libstdc++ and the run-time libraries a link may name
            "gcc-10",
            "g++-10",
            "cpp-10",
            "gcc-10-base",
            "libgcc-10-dev",
            "libstdc++-10-dev",
            "libstdc++6",
            "libgcc-s1",
            "libgomp1",
            "libitm1",
            "libatomic1",
            "libquadmath0",
            "libcc1-0",
            # what cc1/cc1plus/lto1 need to run
            "libisl23",
            "libmpc3",
            "libmpfr6",
            "libgmp10",
            "zlib1g",
            "libzstd1",
        ),
    ),
}
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


@dataclass(frozen=True, kw_only=True)
class Sysroot:
    spec: SysrootSpec
    root: Path
    packages: dict[str, str]  # package -> version, as downloaded

    @property
    def cc(self) -> Path:
        return self.root / "bin" / "gcc"

    @property
    def cxx(self) -> Path:
        return self.root / "bin" / "g++"

    def env(self) -> dict[str, str]:
        """What a build needs: CMake and scikit-build-core read CC/CXX; CMake's CUDA language CUDAHOSTCXX."""
        return {"CC": str(self.cc), "CXX": str(self.cxx), "CUDAHOSTCXX": str(self.cxx)}

    @property
    def loader(self) -> Path:
        return self.root / "lib64" / "ld-linux-x86-64.so.2"

    def library_path(self) -> list[Path]:
        return [self.root / "lib" / "x86_64-linux-gnu", self.root / "usr" / "lib" / "x86_64-linux-gnu"]

    def load_probe(self, path: Path, library_dirs: Sequence[Path] = ()) -> list[str]:
        """Load `path` and what it needs with the root's own dynamic loader, glibc and libstdc++ (`ld.so --list`,
        which checks every symbol version a loaded file requires), `library_dirs` (the nvidia-* wheels' folders)
        searched after the root's; returns the loader's complaints (version `GLIBC_2.32' not found, a library not
        found), empty when everything loads as it would on Debian 11."""
        dirs = [*self.library_path(), *library_dirs]
        cmd = [str(self.loader), "--library-path", os.pathsep.join(map(str, dirs)), "--list", str(path)]
        out = run_tool_status(
            cmd,
            what=f"ld.so --list {path.name} (sysroot {self.spec.name})",
            check=False,
            env={"PATH": os.environ.get("PATH", "")},
        ).output
        return load_problems(out)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.spec.name,
            "debian": self.spec.suite,
            "glibc": self.spec.glibc,
            "gcc": self.spec.gcc,
            "policy": self.spec.policy,
            "root": str(self.root),
            "packages": dict(sorted(self.packages.items())),
            "env": self.env(),
        }


def load_problems(output: str) -> list[str]:
    """The lines of `ld.so --list` output that say something could not be loaded or bound."""
    return [ln.strip() for ln in output.splitlines() if "not found" in ln or "cannot open" in ln or "error" in ln]


def spec_for(name: str) -> SysrootSpec:
    spec = SPECS.get(name.strip().lower())
    if spec is None:
        raise BadInputError(f"sysroot {name!r}: not one slimwheel assembles", hint=f"one of {', '.join(SPECS)}")
    return spec


def wrapper_script(root: Path, program: str, spec: SysrootSpec) -> str:
    """The compiler wrapper: the root's driver with --sysroot, found relative to the wrapper itself (the root may
    be moved, or carried to another machine)."""
    return (
        "#!/bin/sh\n"
        f"# slimwheel sysroot {spec.name}: Debian {spec.suite}'s {program}-{spec.gcc} against its own glibc "
        f"{spec.glibc} and libstdc++\n"
        'root="$(cd "$(dirname "$0")/.." && pwd)"\n'
        f'exec "$root/usr/bin/x86_64-linux-gnu-{program}-{spec.gcc}" --sysroot="$root" "$@"\n'
    )


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


def _read_stamp(root: Path, spec: SysrootSpec) -> Sysroot | None:
    try:
        data = json.loads((root / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("schema") != STAMP_SCHEMA or data.get("name") != spec.name or not (root / "bin" / "g++").is_file():
        return None
    return Sysroot(spec=spec, root=root, packages={str(k): str(v) for k, v in dict(data.get("packages", {})).items()})


def ensure_sysroot(name: str, *, env: Mapping[str, str] | None = None, into: Path | None = None) -> Sysroot:
    """The sysroot `name`, assembled once into `into` (default: <cache>/sysroots/<name>) and reused after."""
    spec = spec_for(name)
    e = dict(os.environ if env is None else env)
    root = Path(into) if into is not None else cache_dir(e) / "sysroots" / spec.name
    found = _read_stamp(root, spec)
    if found is not None:
        return found
    with file_lock(root.parent / f".{root.name}.lock"):
        found = _read_stamp(root, spec)
        if found is not None:
            return found
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
        (tree / "bin").mkdir()
        for prog in ("gcc", "g++"):
            w = tree / "bin" / prog
            w.write_text(wrapper_script(tree, prog, spec), encoding="utf-8")
            w.chmod(0o755)
        sysroot = Sysroot(spec=spec, root=root, packages=packages)
        stamp = {"schema": STAMP_SCHEMA, **sysroot.to_json()}
        write_text_atomic(tree / STAMP, json.dumps(stamp, indent=2) + "\n")
        if root.exists():
            shutil.rmtree(root)
        os.replace(tree, root)
    log.info("assembled sysroot %s at %s", spec.name, root)
    return sysroot
