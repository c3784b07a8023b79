"""The values of a compiler sysroot (`toolkit.sysroot`): what each sysroot is made of (`SPECS`), an assembled root
(`Sysroot`: its compilers, its loader, a load probe) and its glibc-capped compilers (`GlibcCap`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slimwheel.errors import BadInputError
from slimwheel.tools import run_tool_status

SysrootName = Literal["debian11"]
STAMP = "slimwheel-sysroot.json"
# 2: the stamp records the tree's content (`tree_manifest`), verified before every use; a root of schema 1 is
# assembled again.
STAMP_SCHEMA = 2


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

    def env(self, cap: GlibcCap | None = None) -> dict[str, str]:
        """What a build needs: CMake and scikit-build-core read CC/CXX; CMake's CUDA language CUDAHOSTCXX. With
        `cap` (from `ensure_cap`), the capped compilers instead."""
        if cap is not None:
            cc, cxx = cap.folder / "gcc", cap.folder / "g++"
        else:
            cc, cxx = self.cc, self.cxx
        return {"CC": str(cc), "CXX": str(cxx), "CUDAHOSTCXX": str(cxx)}

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


CAP_HEADER = "slimwheel-glibc-cap.h"


@dataclass(frozen=True, kw_only=True)
class PinnedSymbol:
    library: str
    symbol: str
    default: str  # the version a plain link binds to (GLIBC_2.29)
    pinned: str  # the newest version the target allows, which the root's library still defines (GLIBC_2.2.5)


@dataclass(frozen=True, kw_only=True)
class GlibcCap:
    """Compilers of a sysroot whose links bind glibc symbols at versions a lower manylinux policy allows.

    glibc keeps the old version of a symbol whose behaviour it changed (`pow@GLIBC_2.2.5` beside `pow@@GLIBC_2.29`,
    which drops the SVID error handling of `_LIB_VERSION`): the old version is what the same code links to on the
    older system, and every later glibc still provides it. A `.symver` directive per such symbol, in a header every C
    and C++ compilation includes first, makes the assembler bind the reference to that version, so the link stays
    within the target. Only symbols whose old version has the same prototype and results are pinned (`_SAME_ABI`);
    the others with a new default version (`gettid`, new in 2.30; `totalorder`, whose arguments changed in 2.31) are
    `beyond`: code that uses them cannot be capped, and `check --manylinux` names them."""

    policy: str  # manylinux_2_28
    folder: Path  # holds gcc, g++ and the header
    pinned: tuple[PinnedSymbol, ...]
    beyond: tuple[tuple[str, str, str], ...]  # (library, symbol, default version) that cannot be pinned
    glibcxx_shims: tuple[str, ...] = ()  # GLIBCXX versions whose members the link archive defines (_GLIBCXX_SHIMS)

    @property
    def header(self) -> Path:
        return self.folder / CAP_HEADER

    def to_json(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "folder": str(self.folder),
            "pinned": [
                {"library": p.library, "symbol": p.symbol, "default": p.default, "pinned": p.pinned}
                for p in self.pinned
            ],
            "beyond": len(self.beyond),
            "glibcxx_shims": list(self.glibcxx_shims),
        }


def load_problems(output: str) -> list[str]:
    """The lines of `ld.so --list` output that say something could not be loaded or bound."""
    return [ln.strip() for ln in output.splitlines() if "not found" in ln or "cannot open" in ln or "error" in ln]


def spec_for(name: str) -> SysrootSpec:
    spec = SPECS.get(name.strip().lower())
    if spec is None:
        raise BadInputError(f"sysroot {name!r}: not one slimwheel assembles", hint=f"one of {', '.join(SPECS)}")
    return spec
