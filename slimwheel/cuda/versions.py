"""Facts per CUDA release: which compute capabilities nvcc can target, and which driver a binary needs.

`nvcc --list-gpu-arch` is the truth for an installed toolkit (slimwheel.toolkit asks it); this table answers when only
a wheel is at hand (size-report, check) and for plans made before a toolkit exists.
Sources: the CUDA toolkit release notes' driver table ("CUDA Toolkit and Corresponding Driver Versions"); the PTX ISA
release history; `nvcc --list-gpu-arch` of each CUDA 13 release measured from its nvidia-cuda-nvcc wheel
(lab/bench/cuda13-archs.py, tests/data/cuda13-archs.json; 13.0 also in shared/cuda-facts.md, section 3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slimwheel.cuda.arch import CC
from slimwheel.errors import BadInputError


@dataclass(frozen=True, order=True)
class CudaVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        """ "13", "12.4", "12.4.131" (a patch level is ignored). ASCII digits only: int() alone also took "١٢.٤"
        (Arabic-Indic digits), "+12" and "1_2"."""
        m = _VERSION.fullmatch(str(text).strip())
        if not m:
            raise BadInputError(f"{text!r} is not a CUDA version", hint="write e.g. 13.0 or 12.4")
        return cls(int(m.group(1)), int(m.group(2) or 0))


_VERSION = re.compile(r"([0-9]{1,3})(?:\.([0-9]{1,3})(?:\.[0-9]{1,6})?)?", re.ASCII)


# The release a run assembles when `cuda = "auto"` finds no toolkit. CUDA 13.0: the newest CUDA on PyPI is 13.5, but
# code built by 13.N needs the 13.N driver for PTX, and 580 (13.0) is the driver of the GPU machines this project
# targets: 13.0 runs everywhere CUDA 13 runs.
DEFAULT_CUDA = CudaVersion(13, 0)
# A static link needs static cuBLAS and nvprune, which no PyPI wheel ships; of the toolkits slimwheel sets up, only
# Debian's CUDA 11.8 has them.
STATIC_CUDA = CudaVersion(11, 8)


def parse_request(cuda: str | CudaVersion | None) -> CudaVersion | None:
    """A request -> a release: "13.0" and "13" -> 13.0; "auto", "" or None -> None (any release found). The one
    rule for which releases slimwheel can serve (config validates with it, toolkit finds and assembles by it)."""
    if cuda is None or isinstance(cuda, CudaVersion):
        return cuda
    text = str(cuda).strip().lower()
    if text in ("", "auto"):
        return None
    v = CudaVersion.parse(text)
    if v.major not in (11, 12, 13):
        raise BadInputError(f"CUDA {text!r}: slimwheel builds with CUDA 11.8, 12.x or 13.x")
    if v.major == 11 and v.minor != 8:
        raise BadInputError(f"CUDA {text!r}: of CUDA 11, slimwheel supports 11.8 only (Debian's nvidia-cuda-toolkit)")
    return v


def _ccs(*nums: int) -> tuple[CC, ...]:
    return tuple(CC.parse(str(n)) for n in nums)


# nvcc --list-gpu-arch per release (the compute_XY it accepts, without a/f variants).
SUPPORTED_ARCHS: dict[tuple[int, int], tuple[CC, ...]] = {
    (11, 8): _ccs(35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90),
    (12, 0): _ccs(50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90),
    (12, 4): _ccs(50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90),
    (12, 8): _ccs(50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120),
    (12, 9): _ccs(50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121),
    (13, 0): _ccs(75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
    # 13.1-13.3 list exactly 13.0's; 13.4 and 13.5 add compute_107 (tests/data/cuda13-archs.json).
    (13, 4): _ccs(75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121),
}

# The CUDA 13 releases PyPI has a complete toolkit for (nvidia-cuda-nvcc 13.0.48 ... 13.5.37, `pip index versions`,
# 2026-12-01): what `slimwheel toolkit` and `slimwheel container` can assemble.
CUDA13_RELEASES: tuple[CudaVersion, ...] = tuple(CudaVersion(13, n) for n in range(6))

# Minimum Linux driver that runs code built by this release with no compatibility package. Within a major, minor
# version compatibility lets SASS run on the major's first driver, but PTX JIT needs the release's own driver.
RELEASE_DRIVER: dict[tuple[int, int], str] = {
    # CUDA 11.0-11.7 are not releases slimwheel builds with, but wheels on PyPI carry their PTX (dgl-cu111: ISA 7.1):
    # the release notes' GA rows (11.0.2 GA >= 450.51.05 ... 11.7 GA >= 515.43.04), so JIT floors are not 11.0's.
    (11, 0): "450.51.05",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    # 13.1-13.3: the release notes' table, GA rows (13.1 GA >= 590.44.01, 13.2 GA >= 595.45.04, 13.3 GA >= 610.43.02).
    # 13.4 and 13.5 are left out until their rows are read (13.4 ships with the R615 branch): an unknown floor is
    # reported as unknown, never as an older release's.
    (13, 1): "590.44.01",
    (13, 2): "595.45.04",
    (13, 3): "610.43.02",
}
MAJOR_DRIVER: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# Fatbins compressed in `size`/`balance` mode (CUDA 12.8+) need this driver on CUDA 12 (rapids-cmake's docstring).
SIZE_COMPRESSION_DRIVER_CUDA12 = "550.54.14"

# PTX ISA version -> the CUDA release that introduced it (PTX ISA release notes).
PTX_ISA_RELEASE: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (11, 0),
    (7, 1): (11, 1),
    (7, 2): (11, 2),
    (7, 3): (11, 3),
    (7, 4): (11, 4),
    (7, 5): (11, 5),
    (7, 6): (11, 6),
    (7, 7): (11, 7),
    (7, 8): (11, 8),
    (8, 0): (12, 0),
    (8, 1): (12, 1),
    (8, 2): (12, 2),
    (8, 3): (12, 3),
    (8, 4): (12, 4),
    (8, 5): (12, 5),
    (8, 6): (12, 7),
    (8, 7): (12, 8),
    (8, 8): (12, 9),
    (9, 0): (13, 0),
    (9, 1): (13, 1),
    (9, 2): (13, 2),
    (9, 3): (13, 3),
    (9, 4): (13, 4),
    (9, 5): (13, 5),
}


def supported_archs(version: CudaVersion) -> tuple[CC, ...]:
    """The table entry for this release, or for the closest earlier one of the same major."""
    keys = sorted(k for k in SUPPORTED_ARCHS if k[0] == version.major and k <= (version.major, version.minor))
    if not keys:
        keys = sorted(k for k in SUPPORTED_ARCHS if k[0] == version.major)
    if not keys:
        from slimwheel.errors import BadInputError

        raise BadInputError(f"CUDA {version} is not a release slimwheel knows", hint="supported majors: 11, 12, 13")
    return SUPPORTED_ARCHS[keys[-1]]


def driver_key(version: str) -> tuple[int, ...]:
    """A Linux driver version ("580.65.06") as a key to compare and sort by: the one comparison of driver floors
    (plan, wheel report, the loader's check). Text that is not dotted numbers is refused."""
    parts = version.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise BadInputError(f"{version!r} is not a driver version (dotted numbers, e.g. 580.65.06)")
    return tuple(int(p) for p in parts)


def driver_for_release(version: CudaVersion) -> str | None:
    """The driver that runs everything this release builds (PTX JIT included); None when the release is newer than
    the table (a newer release needs a newer driver: 13.1 needs r590, so answering 13.0's 580 would be wrong)."""
    same_major = [k for k in RELEASE_DRIVER if k[0] == version.major]
    if same_major and (version.major, version.minor) > max(same_major):
        return None
    keys = sorted(k for k in same_major if k <= (version.major, version.minor))
    return RELEASE_DRIVER[keys[-1]] if keys else MAJOR_DRIVER.get(version.major)
