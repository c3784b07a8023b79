"""The compiler wrappers of a sysroot (`bin/gcc`, `bin/g++`), the compat header they include first, the links to
the host's multiarch Python headers, and the one way slimwheel rewrites a file it generates in a root."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from slimwheel.errors import BadInputError
from slimwheel.fsutil import link_at, open_folder, read_at, replace_at
from slimwheel.toolkit.sysroot_model import SysrootSpec

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
        write_changed(fd, texts, executable=("gcc", "g++"))
    finally:
        os.close(fd)


# No file slimwheel generates (wrappers, headers, the shim archive) comes near this; a bigger one is not ours.
MAX_GENERATED = 16 << 20


def write_changed(folder: int, texts: Mapping[str, str], *, executable: Sequence[str]) -> None:
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
        if not same or read_at(folder, name, limit=MAX_GENERATED) != data:
            replace_at(folder, name, data, mode=mode)
