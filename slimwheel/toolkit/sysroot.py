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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slimwheel.errors import BadInputError, ToolError
from slimwheel.fsutil import (
    cache_dir,
    file_lock,
    link_at,
    open_folder,
    read_at,
    replace_at,
    temp_sibling,
    write_text_atomic,
)
from slimwheel.inspect.elf import VersionDef
from slimwheel.runtime.loader import private_group, stat_problem, trust_problem
from slimwheel.tools import patchelf, run_tool, run_tool_status

log = logging.getLogger(__name__)

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


# glibc's libraries: the symbols a wheel may take from the system's C library, each with its GNU versions.
GLIBC_LIBRARIES = (
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
    "libanl.so.1",
)
CAP_HEADER = "slimwheel-glibc-cap.h"
COMPAT_HEADER = "slimwheel-gcc-compat.h"
# Debian's and Ubuntu's Python headers split pyconfig.h by architecture: /usr/include/python3.12/pyconfig.h includes
# <x86_64-linux-gnu/python3.12/pyconfig.h>, which a compiler with --sysroot looks for in the root only. This folder of
# the root holds x86_64-linux-gnu/python3.* links to the host's, and the wrappers search it last (-idirafter), so a
# build of an extension for the host's own Python finds its pyconfig.h and nothing else of the host's headers.
HOST_PYTHON_INCLUDE = "host-python-include"
MULTIARCH = "x86_64-linux-gnu"
# x86 intrinsics that GCC 11 added (its avx512*intrin.h, emmintrin.h) and GCC 10's headers lack, each as an older
# intrinsic with the same result: an unmasked load or store of 8/16/32/64-bit elements is the same bytes as the
# untyped vector load or store (vmovdqu8 and vmovdqu differ only when masked), and the lowest 32-bit element is the
# lowest lane's. They are macros, not functions, so the header needs no <immintrin.h> (which every compilation would
# then pay for) and expands only where the code uses them, after including the intrinsics headers. A project that
# declares a function of one of these names itself (a fallback of its own for old GCC) must test for the macro first.
_GCC11_INTRINSICS: tuple[tuple[str, str], ...] = (
    *((f"_mm_loadu_epi{w}(p)", "_mm_loadu_si128((const __m128i *)(p))") for w in (8, 16, 32, 64)),
    *((f"_mm256_loadu_epi{w}(p)", "_mm256_loadu_si256((const __m256i *)(p))") for w in (8, 16, 32, 64)),
    *((f"_mm512_loadu_epi{w}(p)", "_mm512_loadu_si512((const void *)(p))") for w in (8, 16)),
    *((f"_mm_storeu_epi{w}(p, a)", "_mm_storeu_si128((__m128i *)(p), (a))") for w in (8, 16)),
    *((f"_mm256_storeu_epi{w}(p, a)", "_mm256_storeu_si256((__m256i *)(p), (a))") for w in (8, 16)),
    *((f"_mm512_storeu_epi{w}(p, a)", "_mm512_storeu_si512((void *)(p), (a))") for w in (8, 16)),
    *((f"_mm_load_epi{w}(p)", "_mm_load_si128((const __m128i *)(p))") for w in (32, 64)),
    *((f"_mm256_load_epi{w}(p)", "_mm256_load_si256((const __m256i *)(p))") for w in (32, 64)),
    ("_mm_store_epi32(p, a)", "_mm_store_si128((__m128i *)(p), (a))"),
    ("_mm256_store_epi32(p, a)", "_mm256_store_si256((__m256i *)(p), (a))"),
    ("_mm256_cvtsi256_si32(a)", "_mm_cvtsi128_si32(_mm256_castsi256_si128(a))"),
    ("_mm512_cvtsi512_si32(a)", "_mm_cvtsi128_si32(_mm512_castsi512_si128(a))"),
    (
        "_mm_loadu_si32(p)",
        "__extension__({ int __sw_v; __builtin_memcpy(&__sw_v, (p), 4); _mm_cvtsi32_si128(__sw_v); })",
    ),
    (
        "_mm_loadu_si16(p)",
        "__extension__({ short __sw_v; __builtin_memcpy(&__sw_v, (p), 2); _mm_cvtsi32_si128((unsigned short)__sw_v); })",
    ),
    (
        "_mm_storeu_si32(p, a)",
        "__extension__({ int __sw_v = _mm_cvtsi128_si32(a); __builtin_memcpy((p), &__sw_v, 4); (void)0; })",
    ),
    (
        "_mm_storeu_si16(p, a)",
        "__extension__({ short __sw_v = (short)_mm_cvtsi128_si32(a); __builtin_memcpy((p), &__sw_v, 2); (void)0; })",
    ),
)
# Symbols whose older version has the same prototype and results as the default one, so that binding a reference to
# it is safe; the reason glibc added the new version. Most new versions are not like this: `totalorder` (2.31) and
# `glob` (2.27) changed their arguments or structures, and code compiled against the new header must not call the
# old one. So a symbol is pinned only when it is listed here (glibc's NEWS for each release).
_SAME_ABI: dict[str, str] = {
    **{
        f: "glibc 2.29: new versions without the SVID error-handling wrapper (_LIB_VERSION); same prototype, results"
        for f in ("exp", "exp2", "log", "log2", "pow")
    },
    **{
        f: "glibc 2.27: new versions without the SVID error-handling wrapper (_LIB_VERSION); same prototype, results"
        for f in ("expf", "exp2f", "logf", "log2f", "powf")
    },
    "memcpy": "glibc 2.14: memcpy@GLIBC_2.2.5 is memmove, which is a valid memcpy for every argument",
}


# libstdc++ symbols newer than a target's GLIBCXX that the root's own headers define (members of class templates
# that libstdc++ instantiates for char and wchar_t and declares `extern template`), by the GLIBCXX version that added
# them: an archive instantiated from those headers defines them inside the module, hidden, so the module needs them
# of no libstdc++.so (what gcc-toolset's libstdc++_nonshared.a does for its newer compiler). GCC 9 made the string
# streams' default constructors separate (P0935): `std::stringstream ss;` compiled with GCC 9+ headers binds
# basic_stringstream() @GLIBCXX_3.4.26, which RHEL 8's libstdc++ (3.4.25) lacks; faiss 1.15 uses it. Each is the
# explicit instantiation of one member, both ABIs; no class with static data is instantiated whole (the old ABI's
# basic_string keeps an empty-string representation whose address must stay libstdc++'s own).
_STREAMS = ("basic_stringbuf", "basic_istringstream", "basic_ostringstream", "basic_stringstream")
GLIBCXX_SHIM_ARCHIVE = "libslimwheel-glibcxx.a"
_GLIBCXX_SHIMS: dict[str, tuple[str, ...]] = {
    "3.4.26": tuple(f"template {c}<{ch}>::{c}();" for c in _STREAMS for ch in ("char", "wchar_t")),
}


def _mangled_stream_ctors(cxx11: bool) -> tuple[str, ...]:
    """The symbols `_GLIBCXX_SHIMS["3.4.26"]` defines in one ABI: C1 and C2 of each default constructor."""
    names = []
    for c in _STREAMS:
        for ch in ("c", "w"):
            cls = f"{len(c)}{c}I{ch}St11char_traitsI{ch}ESaI{ch}EE"
            scope = f"St7__cxx11{cls}" if cxx11 else f"St{cls}"
            names += [f"_ZN{scope}C{k}Ev" for k in (1, 2)]
    return tuple(names)


GLIBCXX_SHIM_SYMBOLS: dict[str, tuple[str, ...]] = {
    "3.4.26": _mangled_stream_ctors(True) + _mangled_stream_ctors(False),
}


def shim_versions(allowed: frozenset[str]) -> tuple[str, ...]:
    """The GLIBCXX versions of `_GLIBCXX_SHIMS` that a target's allowed GLIBCXX versions ("3.4.24", ...) lack."""
    return tuple(v for v in _GLIBCXX_SHIMS if v not in allowed)


def glibcxx_shim_source(versions: Sequence[str], *, cxx11: bool) -> str:
    """One translation unit of the shim archive: the members of `versions`, in the new (cxx11) or the old ABI."""
    lines = [
        "/* slimwheel: libstdc++ members newer than the target's GLIBCXX, instantiated from the root's own headers so",
        "   that modules define them (hidden) instead of needing them of libstdc++.so (generated; do not edit). */",
        f"#define _GLIBCXX_USE_CXX11_ABI {1 if cxx11 else 0}",
        "#include <sstream>",
        "namespace std _GLIBCXX_VISIBILITY(default) {",
        "_GLIBCXX_BEGIN_NAMESPACE_VERSION",
    ]
    if cxx11:
        lines.append("_GLIBCXX_BEGIN_NAMESPACE_CXX11")
    for v in versions:
        lines += [f"/* GLIBCXX_{v} */", *_GLIBCXX_SHIMS[v]]
    if cxx11:
        lines.append("_GLIBCXX_END_NAMESPACE_CXX11")
    lines += ["_GLIBCXX_END_NAMESPACE_VERSION", "}"]
    return "\n".join(lines) + "\n"


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


def plan_cap(
    definitions: Mapping[str, Sequence[VersionDef]], allowed: frozenset[str]
) -> tuple[tuple[PinnedSymbol, ...], tuple[tuple[str, str, str], ...]]:
    """Which glibc symbols to pin, and which cannot be: for each library's symbols whose default version the
    target does not allow (`allowed`: the policy's GLIBC versions, "2.28", "2.2.5", ...), the newest allowed version
    the library also defines, when the old version is known to have the same ABI (`_SAME_ABI`). A symbol two
    libraries would pin to different versions is left unpinned (a `.symver` names no library). Pure."""
    from slimwheel.floor import split_version, version_key

    def glibc(version: str) -> str | None:  # "2.29" of GLIBC_2.29; None for GLIBC_PRIVATE and other prefixes
        prefix, number = split_version(version)
        return number if prefix == "GLIBC" and number[:1].isdigit() else None

    pins: dict[str, PinnedSymbol] = {}
    clash: set[str] = set()
    beyond: list[tuple[str, str, str]] = []
    for library, defs in sorted(definitions.items()):
        by_symbol: dict[str, list[VersionDef]] = {}
        for d in defs:
            by_symbol.setdefault(d.symbol, []).append(d)
        for symbol, vs in sorted(by_symbol.items()):
            default = next((d.version for d in vs if d.default), None)
            if default is None or glibc(default) in (None, *allowed) or symbol == default:
                continue  # not glibc's, allowed, or the absolute symbol that names a version node
            older = [d.version for d in vs if not d.default and glibc(d.version) in allowed]
            if not older or symbol not in _SAME_ABI:
                beyond.append((library, symbol, default))
                continue
            pin = PinnedSymbol(
                library=library,
                symbol=symbol,
                default=default,
                pinned=max(older, key=lambda v: version_key(split_version(v)[1])),
            )
            if symbol in pins and pins[symbol].pinned != pin.pinned:
                clash.add(symbol)
            pins.setdefault(symbol, pin)
    kept = tuple(p for name, p in sorted(pins.items()) if name not in clash)
    return kept, tuple(beyond)


def cap_header(policy: str, spec: SysrootSpec, pinned: Sequence[PinnedSymbol]) -> str:
    """The header every compilation includes first (`-include`): one `.symver` per pinned symbol. Left out of
    device passes (nvcc preprocesses device code with the host compiler and __CUDA_ARCH__ set) and of assembler
    sources; a repeated `.symver` of one version (nvcc compiles its own preprocessed output again) is accepted."""
    lines = [
        f"/* slimwheel sysroot {spec.name}, capped at {policy}: glibc {spec.glibc} symbols bound at the newest",
        f"   version {policy} allows (generated from the root's own libraries; do not edit). */",
        "#if defined(__x86_64__) && !defined(__ASSEMBLER__) && !defined(__CUDA_ARCH__)",
    ]
    lines += [
        f'__asm__(".symver {p.symbol},{p.symbol}@{p.pinned}"); /* {p.library}: not {p.default} */' for p in pinned
    ]
    lines.append("#endif")
    return "\n".join(lines) + "\n"


def cap_wrapper(program: str, spec: SysrootSpec, policy: str, *, shim: bool = False) -> str:
    """The capped driver: the root's with the cap header included first; with `shim` (g++ only), a link (an `-o`
    output and no -c/-S/-E/-M) also takes the shim archive, after the inputs and before the driver's own -lstdc++,
    its symbols hidden (--exclude-libs) so the module does not export them."""
    head = (
        "#!/bin/sh\n"
        f"# slimwheel sysroot {spec.name} capped at {policy}: the root's {program} with {CAP_HEADER} included first\n"
        'here="$(cd "$(dirname "$0")" && pwd)"\n'
    )
    run = f'exec "$here/../../bin/{program}" -include "$here/{CAP_HEADER}" "$@"'
    if not shim:
        return head + run + "\n"
    return (
        head + "link=0\n"
        'for a in "$@"; do\n'
        '  case "$a" in\n'
        "    -c|-S|-E|-M|-MM|-fsyntax-only) link=0; break ;;\n"
        "    -o|-o*) link=1 ;;\n"
        "  esac\n"
        "done\n"
        'if [ "$link" = 1 ]; then\n'
        f'  {run} -Wl,--exclude-libs,{GLIBCXX_SHIM_ARCHIVE} "$here/{GLIBCXX_SHIM_ARCHIVE}"\n'
        "fi\n" + run + "\n"
    )


def _build_shim_archive(sysroot: Sysroot, versions: Sequence[str], archive: Path) -> bytes:
    """Compile the shim's two translation units with the root's own g++ and archive them (the host's ar); returns
    the archive's bytes (a few kB), which the caller puts in place."""
    with temp_sibling(archive, directory=True) as tmp:
        objects = []
        for cxx11 in (True, False):
            src = tmp / f"glibcxx-shim-{'cxx11' if cxx11 else 'old'}.cpp"
            src.write_text(glibcxx_shim_source(versions, cxx11=cxx11), encoding="utf-8")
            obj = src.with_suffix(".o")
            run_tool(
                [str(sysroot.cxx), "-O2", "-fPIC", "-std=gnu++17", "-c", str(src), "-o", str(obj)],
                what=f"compile the libstdc++ shim ({src.name})",
            )
            objects.append(str(obj))
        out = tmp / archive.name
        run_tool(["ar", "rcs", str(out), *objects], what=f"ar {archive.name}")
        return out.read_bytes()


def ensure_cap(sysroot: Sysroot, policy: str) -> GlibcCap:
    """The capped compilers of `sysroot` for `policy` (a manylinux policy older than the root's), written once into
    `<root>/caps/<policy>/` and rewritten when the header would change. The root's library versions are read with
    slimwheel's ELF reader."""
    from slimwheel.floor import parse_target
    from slimwheel.inspect.elf import file_version_definitions

    target = parse_target(policy)
    allowed = target.versions.get("x86_64", {}).get("GLIBC", frozenset())
    libdir = sysroot.root / "lib" / "x86_64-linux-gnu"
    definitions = {}
    for lib in GLIBC_LIBRARIES:
        path = libdir / lib
        if path.exists():
            definitions[lib] = file_version_definitions(path.resolve(), f"{sysroot.spec.name}/{lib}")
    if "libc.so.6" not in definitions:
        raise ToolError(f"sysroot {sysroot.spec.name} at {sysroot.root} has no {libdir / 'libc.so.6'}")
    pinned, beyond = plan_cap(definitions, frozenset(allowed))
    shims = shim_versions(frozenset(target.versions.get("x86_64", {}).get("GLIBCXX", frozenset())))
    folder = sysroot.root / "caps" / target.name
    texts = {CAP_HEADER: cap_header(target.name, sysroot.spec, pinned)}
    texts.update(
        {
            prog: cap_wrapper(prog, sysroot.spec, target.name, shim=bool(shims) and prog == "g++")
            for prog in ("gcc", "g++")
        }
    )
    os.close(open_folder(sysroot.root, ["caps"], create=True))  # its lock is made in it: never through a link
    with file_lock(sysroot.root / "caps" / f".{target.name}.lock"):
        fd = open_folder(sysroot.root, ["caps", target.name], create=True)
        try:
            if shims:
                _ensure_shim_archive(sysroot, shims, fd, folder)
            _write_changed(fd, texts, executable=("gcc", "g++"))
        finally:
            os.close(fd)
    return GlibcCap(policy=target.name, folder=folder, pinned=pinned, beyond=beyond, glibcxx_shims=shims)


def _ensure_shim_archive(sysroot: Sysroot, shims: Sequence[str], fd: int, folder: Path) -> None:
    """The shim archive in the cap folder (descriptor `fd`), rebuilt unless its stamp holds both the sources it was
    built from and the SHA-256 of the archive there now: an archive changed after it was built is linked into no
    wheel."""
    sources = "".join(glibcxx_shim_source(shims, cxx11=c) for c in (True, False))
    stamp_name = f"{GLIBCXX_SHIM_ARCHIVE}.src"
    archive = read_at(fd, GLIBCXX_SHIM_ARCHIVE, limit=_MAX_GENERATED)
    stamp = read_at(fd, stamp_name, limit=_MAX_GENERATED)
    if archive is not None and stamp == _shim_stamp(sources, archive):
        return
    built = _build_shim_archive(sysroot, shims, folder / GLIBCXX_SHIM_ARCHIVE)
    replace_at(fd, GLIBCXX_SHIM_ARCHIVE, built)
    replace_at(fd, stamp_name, _shim_stamp(sources, built))


def _shim_stamp(sources: str, archive: bytes) -> bytes:
    return f"/* sha256 {hashlib.sha256(archive).hexdigest()} */\n{sources}".encode()


def cap_for(sysroot: Sysroot, manylinux: str) -> GlibcCap | None:
    """The capped compilers for a target policy (`manylinux`, as `check --manylinux` takes it) older than the
    root's own, else None: a root within the target needs no cap."""
    from slimwheel.floor import parse_target

    if not manylinux.strip():
        return None
    target, own = parse_target(manylinux), parse_target(sysroot.spec.policy)
    if target.priority <= own.priority:
        return None
    return ensure_cap(sysroot, target.name)


def load_problems(output: str) -> list[str]:
    """The lines of `ld.so --list` output that say something could not be loaded or bound."""
    return [ln.strip() for ln in output.splitlines() if "not found" in ln or "cannot open" in ln or "error" in ln]


def spec_for(name: str) -> SysrootSpec:
    spec = SPECS.get(name.strip().lower())
    if spec is None:
        raise BadInputError(f"sysroot {name!r}: not one slimwheel assembles", hint=f"one of {', '.join(SPECS)}")
    return spec


def compat_header(spec: SysrootSpec) -> str:
    """The header both wrappers include first: the intrinsics newer GCCs have and the root's lacks
    (`_GCC11_INTRINSICS`), each defined only where the root's GCC is older than 11 and the name is not a macro
    already; left out of device passes and assembler sources, as the cap header is."""
    lines = [
        f"/* slimwheel sysroot {spec.name}: what GCC {spec.gcc} lacks of newer GCCs, as older equivalents",
        "   (written by slimwheel; do not edit). */",
        "#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 11 \\",
        "    && !defined(__ASSEMBLER__) && !defined(__CUDA_ARCH__)",
    ]
    for call, body in _GCC11_INTRINSICS:
        name = call.split("(", 1)[0]
        lines += [f"#ifndef {name}", f"#define {call} {body}", "#endif"]
    lines.append("#endif")
    return "\n".join(lines) + "\n"


def wrapper_script(root: Path, program: str, spec: SysrootSpec) -> str:
    """The compiler wrapper: the root's driver with --sysroot and the compat header, found relative to the wrapper
    itself (the root may be moved, or carried to another machine)."""
    return (
        "#!/bin/sh\n"
        f"# slimwheel sysroot {spec.name}: Debian {spec.suite}'s {program}-{spec.gcc} against its own glibc "
        f"{spec.glibc} and libstdc++\n"
        'root="$(cd "$(dirname "$0")/.." && pwd)"\n'
        f'exec "$root/usr/bin/x86_64-linux-gnu-{program}-{spec.gcc}" --sysroot="$root" '
        f'-include "$root/bin/{COMPAT_HEADER}" -idirafter "$root/{HOST_PYTHON_INCLUDE}" "$@"\n'
    )


def link_host_python_includes(root: Path, host_include: Path = Path("/usr/include")) -> list[str]:
    """`<root>/host-python-include/x86_64-linux-gnu/python3.*`: one link per multiarch Python header folder of this
    host (`host_include`), stale ones removed; returns their names. Runs where the build runs (every
    `ensure_sysroot`), since a root is assembled on one machine and may be carried to another. The folder is opened
    without following links (a link planted there made the clean-up delete dotfiles wherever it pointed); anything in
    it but links and dotfiles (a planted header folder the compilers would search) is refused."""
    found = {p.name: p for p in sorted((host_include / MULTIARCH).glob("python3*")) if p.is_dir()}
    fd = open_folder(root, [HOST_PYTHON_INCLUDE, MULTIARCH], create=True)
    try:
        for old in os.listdir(fd):
            if old in found:
                continue
            st = os.stat(old, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise BadInputError(
                    f"{root / HOST_PYTHON_INCLUDE / MULTIARCH / old}: a folder slimwheel did not put there, in a folder "
                    "every compilation searches",
                    hint=f"remove {root} to assemble the sysroot again",
                )
            if stat.S_ISLNK(st.st_mode) or old.startswith("."):
                os.unlink(old, dir_fd=fd)
        for name, target in found.items():
            try:
                if os.readlink(name, dir_fd=fd) == str(target):
                    continue
            except OSError:
                pass  # missing, or not a link: replaced below
            link_at(fd, name, str(target))
    finally:
        os.close(fd)
    return sorted(found)


def write_wrappers(root: Path, spec: SysrootSpec) -> None:
    """`bin/gcc`, `bin/g++` and the compat header, rewritten where their text changed (a root assembled by an
    earlier slimwheel gets the current ones), and the links to this host's multiarch Python headers."""
    link_host_python_includes(root)
    fd = open_folder(root, ["bin"], create=True)
    try:
        texts = {COMPAT_HEADER: compat_header(spec)}
        texts.update({prog: wrapper_script(root, prog, spec) for prog in ("gcc", "g++")})
        _write_changed(fd, texts, executable=("gcc", "g++"))
    finally:
        os.close(fd)


# No file slimwheel generates (wrappers, headers, the shim archive) comes near this; a bigger one is not ours.
_MAX_GENERATED = 16 << 20


def _write_changed(folder: int, texts: Mapping[str, str], *, executable: Sequence[str]) -> None:
    """Each file of `texts` in the folder descriptor `folder`, replaced (a file created fresh, renamed over the old
    name) where its text or mode differs, so a compiler wrapper a running build uses is replaced whole or not at
    all, and a link, FIFO or hard link planted under its name is replaced, never written through or chmod'ed;
    those named in `executable` are 0755, the rest 0644."""
    for name, text in texts.items():
        data, mode = text.encode(), 0o755 if name in executable else 0o644
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            same = stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == mode and st.st_nlink == 1
        except FileNotFoundError:
            same = False
        if not same or read_at(folder, name, limit=_MAX_GENERATED) != data:
            replace_at(folder, name, data, mode=mode)


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


def _read_stamp(root: Path, spec: SysrootSpec) -> tuple[Sysroot, dict[str, str]] | None:
    """The sysroot the stamp describes and the manifest it recorded, or None when the root must be assembled (no
    root, no stamp or an unreadable one, another schema or sysroot)."""
    if not os.path.lexists(root):
        return None
    judge_root_folder(root)
    fd = open_folder(root)
    try:
        raw = read_at(fd, STAMP, limit=_MAX_GENERATED)
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


def verify_root(root: Path, recorded: Mapping[str, str]) -> None:
    """Refuse a cached sysroot whose tree is not what was assembled (a trojaned compiler, a planted library or
    link, a changed mode) or whose folders someone else could change; BadInputError names the first problem."""
    judge_root_folder(root)
    if why := manifest_problem(recorded, tree_manifest(root)):
        raise BadInputError(
            f"sysroot at {root}: {why}; it is not used", hint=f"remove {root} to assemble the sysroot again"
        )


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
