"""Kernel sources embedded for runtime compilation (slimwheel_nvrtc_embed, docs/nvrtc.md), found in built binaries.

SlimWheelNvrtc.cmake puts one record per embedding in the ELF section `slimwheel_nvrtc`:

    b"SLWNVRTC1\\n" + ten ASCII digits (the manifest's length) + b"\\n" + manifest (JSON) + the files back to back

The manifest names each file with its offset (from the end of the manifest), size and SHA-256, the CUDA major the
binary was built for and the NVRTC it loads (SONAME, nvidia-* wheel folder and package). Records follow each other,
possibly with zero bytes between them (the linker aligns each array).

Such a binary serves every compute capability the NVRTC of its CUDA major can target: a cubin for the exact GPU when
NVRTC knows it, PTX for the newest architecture it knows otherwise (`served_ccs`). The wheel must require the NVRTC
package (`EmbeddedSources.nvrtc_package`) and its loader should preload the library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slimwheel.cuda.arch import CC
from slimwheel.cuda.versions import CudaVersion, supported_archs
from slimwheel.errors import BadInputError

SECTION = "slimwheel_nvrtc"
MAGIC = b"SLWNVRTC1\n"
_HEAD = len(MAGIC) + 11  # magic, ten digits, newline
_MAX_MANIFEST = 1 << 20  # a manifest names files; a megabyte of JSON is already absurd


@dataclass(frozen=True, kw_only=True)
class EmbeddedFile:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True, kw_only=True)
class EmbeddedSources:
    """One slimwheel_nvrtc_embed() record: the files of one bundle and the NVRTC that compiles them."""

    bundle: str
    cuda_major: int
    nvrtc_soname: str
    nvrtc_folder: str
    nvrtc_package: str
    sources: int  # the first `sources` files are compilable sources, the rest headers they include
    files: tuple[EmbeddedFile, ...]
    record_bytes: int  # the whole record in the section: magic, manifest and files

    @property
    def source_bytes(self) -> int:
        return sum(f.size for f in self.files)


def parse_section(data: bytes | memoryview, *, where: str) -> tuple[EmbeddedSources, ...]:
    """Every record in the bytes of a `slimwheel_nvrtc` section. Malformed input is a BadInputError naming `where`."""
    mv = memoryview(data)
    out: list[EmbeddedSources] = []
    pos = 0
    while pos < len(mv):
        if mv[pos] == 0:  # alignment padding between records
            pos += 1
            continue
        record = _parse_record(mv, pos, where=f"{where} [{SECTION} at +{pos:#x}]")
        out.append(record)
        pos += record.record_bytes
    return tuple(out)


def _parse_record(mv: memoryview, pos: int, *, where: str) -> EmbeddedSources:
    # Imported here: every wheel report imports this module, few wheels carry a record (hashlib loads OpenSSL).
    import hashlib
    import json

    head = bytes(mv[pos : pos + _HEAD])
    if len(head) < _HEAD or not head.startswith(MAGIC) or head[-1:] != b"\n" or not head[len(MAGIC) : -1].isdigit():
        raise BadInputError(f"{where}: not a slimwheel NVRTC record (starts with {head[:16]!r})")
    length = int(head[len(MAGIC) : -1])
    start = pos + _HEAD
    if length > _MAX_MANIFEST or start + length > len(mv):
        raise BadInputError(f"{where}: manifest of {length} bytes does not fit in the section")
    try:
        manifest = json.loads(bytes(mv[start : start + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInputError(f"{where}: manifest is not JSON ({e})") from None
    data_start = start + length
    m = _Manifest(manifest, where)
    files: list[EmbeddedFile] = []
    end = data_start
    for i, entry in enumerate(m.array("files")):
        f = _Manifest(entry, f"{where} files[{i}]")
        name, offset, size, digest = f.text("name"), f.number("offset"), f.number("bytes"), f.text("sha256")
        lo, hi = data_start + offset, data_start + offset + size
        if hi > len(mv):
            raise BadInputError(f"{where}: file {name!r} ({size} bytes at +{offset}) ends past the section")
        if hashlib.sha256(mv[lo:hi]).hexdigest() != digest:
            raise BadInputError(f"{where}: file {name!r} does not match the SHA-256 in its manifest")
        files.append(EmbeddedFile(name=name, size=size, sha256=digest))
        end = max(end, hi)
    nvrtc = _Manifest(m.obj("nvrtc"), f"{where} nvrtc")
    sources = m.number("sources")
    if m.number("schema") != 1 or not 0 < sources <= len(files):
        raise BadInputError(f"{where}: unknown schema or bad source count in the manifest")
    # The compiler adds the literal's terminating NUL; it belongs to the record.
    if end < len(mv) and mv[end] == 0:
        end += 1
    return EmbeddedSources(
        bundle=m.text("bundle"),
        cuda_major=m.number("cuda_major"),
        nvrtc_soname=nvrtc.text("soname"),
        nvrtc_folder=nvrtc.text("folder"),
        nvrtc_package=nvrtc.text("package"),
        sources=sources,
        files=tuple(files),
        record_bytes=end - pos,
    )


class _Manifest:
    """Typed access to one JSON object of a manifest; a missing or mistyped key is a BadInputError."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise BadInputError(f"{where}: manifest entry is not an object")
        self._obj: dict[str, Any] = obj
        self._where = where

    def _get(self, key: str, kind: type) -> Any:
        value: Any = self._obj.get(key)
        negative = isinstance(value, int) and value < 0
        if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or negative)):
            raise BadInputError(f"{self._where}: manifest key {key!r} missing or not a {kind.__name__}")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, str)
        return value

    def number(self, key: str) -> int:
        value: int = self._get(key, int)
        return value

    def array(self, key: str) -> list[Any]:
        value: list[Any] = self._get(key, list)
        return value

    def obj(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._get(key, dict)
        return value


def served_ccs(sources: EmbeddedSources, *, nvrtc: CudaVersion | None = None) -> tuple[CC, ...]:
    """Compute capabilities the embedded sources are compiled for natively (a cubin), by the given NVRTC release or,
    by default, the oldest NVRTC the wheel can meet: the first release of its CUDA major (requirement floor
    `>=<major>.0`). GPUs newer than the last of these still run, through PTX that the driver compiles."""
    release = nvrtc or CudaVersion(sources.cuda_major, 0)
    if release.major != sources.cuda_major:
        raise BadInputError(f"{sources.bundle}: built for the NVRTC of CUDA {sources.cuda_major}, not {release}")
    return supported_archs(release)


def describe(records: Sequence[EmbeddedSources]) -> list[dict[str, object]]:
    """JSON-ready rows for reports: bundle, bytes, files, what serves them and the package the wheel must require."""
    return [
        {
            "bundle": r.bundle,
            "files": [f.name for f in r.files],
            "source_bytes": r.source_bytes,
            "record_bytes": r.record_bytes,
            "cuda_major": r.cuda_major,
            "requires": r.nvrtc_package,
            "nvrtc": f"{r.nvrtc_folder}/{r.nvrtc_soname}",
            "serves": [str(cc) for cc in served_ccs(r)],
            "newer_gpus": "PTX compiled by the driver",
        }
        for r in records
    ]


# Libraries that compile device code at run time: NVRTC (CUDA C++ to PTX/cubin) and nvJitLink (PTX/LTO-IR to cubin),
# under their SONAMEs or the hashed names auditwheel gives vendored copies (cumm-cu120: libnvrtc-<hash>.so.12).
_RUNTIME_COMPILERS = ("libnvrtc", "libnvJitLink", "libnvjitlink")
# The nvidia-* wheels (and CUDA Python's bindings, through which cuda-cccl compiles) that bring them.
_COMPILER_PACKAGES = ("nvidia-cuda-nvrtc", "nvidia-nvjitlink", "cuda-bindings", "cuda-python")


def runtime_compiler(libraries: Sequence[str]) -> str | None:
    """The first of `libraries` (a file's NEEDED and the CUDA libraries it opens) that compiles device code at run
    time, or None."""
    return next((lib for lib in libraries if lib.startswith(_RUNTIME_COMPILERS)), None)


def compiler_requirement(requires_dist: Sequence[str]) -> str | None:
    """The first requirement that brings a runtime compiler (NVRTC, nvJitLink, CUDA Python), as said to people: with
    the extra it holds under, if any (cuda-core 1.2.2 requires `cuda-bindings[all]==12.*` under its extra `cu12` and
    `==13.*` under `cu13`, and nothing unconditionally); None when none does."""
    for req in requires_dist:
        name = req.split(";", 1)[0].strip().lower().replace("_", "-")
        if name.startswith(_COMPILER_PACKAGES):
            # packaging's parser, only here: importing it costs size-report more start-up than reading a small wheel
            from packaging.requirements import InvalidRequirement, Requirement

            spec, _, marker = req.partition(";")
            try:
                extras = _EXTRA.findall(str(Requirement(req).marker or ""))
            except InvalidRequirement:
                extras = []
            if extras:
                return f"{spec.strip()} with its extra {' or '.join(extras)}"
            return spec.strip() + (f" where {marker.strip()}" if marker.strip() else "")
    return None


_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
