"""A sysroot's compilers capped at an older manylinux policy: glibc symbols pinned to versions the target allows
(`.symver` in a header every compilation includes first), and libstdc++ members newer than its GLIBCXX defined
inside the module by a shim archive."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from slimwheel.errors import ToolError
from slimwheel.fsutil import file_lock, open_folder, read_at, replace_at, temp_sibling
from slimwheel.inspect.elf import VersionDef
from slimwheel.toolkit.sysroot_model import CAP_HEADER, GlibcCap, PinnedSymbol, Sysroot, SysrootSpec
from slimwheel.toolkit.sysroot_wrappers import MAX_GENERATED, write_changed
from slimwheel.tools import run_tool

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
            write_changed(fd, texts, executable=("gcc", "g++"))
        finally:
            os.close(fd)
    return GlibcCap(policy=target.name, folder=folder, pinned=pinned, beyond=beyond, glibcxx_shims=shims)


def _ensure_shim_archive(sysroot: Sysroot, shims: Sequence[str], fd: int, folder: Path) -> None:
    """The shim archive in the cap folder (descriptor `fd`), rebuilt unless its stamp holds both the sources it was
    built from and the SHA-256 of the archive there now: an archive changed after it was built is linked into no
    wheel."""
    sources = "".join(glibcxx_shim_source(shims, cxx11=c) for c in (True, False))
    stamp_name = f"{GLIBCXX_SHIM_ARCHIVE}.src"
    archive = read_at(fd, GLIBCXX_SHIM_ARCHIVE, limit=MAX_GENERATED)
    stamp = read_at(fd, stamp_name, limit=MAX_GENERATED)
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
