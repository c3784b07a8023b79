"""Copies of CUDA libraries a wheel carries (`cuda.libs.vendored`): found, removed, and the files that needed them
pointed at the nvidia-* wheels' SONAMEs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.repair.source import RepairInput
from slimwheel.tools import replace_needed

log = logging.getLogger("slimwheel.repair")


@dataclass(frozen=True, kw_only=True)
class Unvendored:
    """A copy of a CUDA library the input wheel carried (auditwheel's `libcudart-5a077122.so.12.0.107`)."""

    file: str
    soname: str  # the name the wheel's files needed it by
    replaced_by: str | None  # the SONAME they need now (libcudart.so.12); None: dropped (libnvrtc-builtins)
    package: str  # the nvidia-* wheel that provides it
    compressed: int  # bytes in the input wheel
    installed: int


def find_copies(src: RepairInput) -> tuple[Unvendored, ...]:
    """The input's copies of CUDA libraries, each with the SONAME that replaces it (of the wheel's CUDA major where
    the name fits two: libcurand.so.10)."""
    found = {p: v for p in src.elfs if (v := cudalibs.vendored(p)) is not None}
    if not found:
        return ()
    majors = {v.candidates[0].cuda_major for v in found.values() if len(v.candidates) == 1 and not v.companion}
    sizes = src.sizes
    out = []
    for path, v in sorted(found.items()):
        lib = next((c for c in v.candidates if c.cuda_major in majors), v.candidates[-1])
        soname = src.elfs[path].soname or path.rsplit("/", 1)[-1]
        out.append(
            Unvendored(
                file=path,
                soname=soname,
                replaced_by=None if v.companion else lib.soname,
                package=lib.package,
                compressed=sizes[path][0],
                installed=sizes[path][1],
            )
        )
    return tuple(out)


def remove_copies(root: Path, src: RepairInput, copies: Sequence[Unvendored], wheel: Path) -> list[str]:
    """Remove the copies; every other ELF file that needs one (by its SONAME or by its file name) needs the nvidia-*
    wheels' SONAME instead. torchvision 0.26.0's image.so needs libnvjpeg.36e11081.so.13, the file whose SONAME is
    still libnvjpeg.so.13. Returns the files patched."""
    changes = {name: u.replaced_by for u in copies for name in (u.soname, u.file.rsplit("/", 1)[-1])}
    gone = {u.file for u in copies}
    patched: list[str] = []
    for path, info in src.elfs.items():
        if path in gone:
            continue
        mine = {old: new for old, new in changes.items() if old in info.needed}
        if mine:
            # a NEEDED the file already has under its new name is dropped rather than listed twice
            mine = {o: (None if n in info.needed else n) for o, n in mine.items()}
            replace_needed(root / path, mine, name=path)
            patched.append(path)
    for u in copies:
        (root / u.file).unlink()
        log.info(
            "%s: removed %s (%d bytes installed), now needed as %s from %s",
            wheel.name,
            u.file,
            u.installed,
            u.replaced_by or "nothing (its library loads it)",
            u.package,
        )
    return patched


def copies_versions(copies: Sequence[Unvendored]) -> dict[str, str]:
    """package -> the release the copies were (libcudart.so.12.0.107: nvidia-cuda-runtime-cu12 12.0.107): what the
    wheel was built and tested against, the requirement's floor."""
    out: dict[str, str] = {}
    for u in copies:
        v = cudalibs.vendored(u.file)
        if v is not None and v.version and not v.companion:
            out.setdefault(u.package, v.version)
    return out
