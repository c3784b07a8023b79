"""A wheel with a planted size regression, for `slimwheel diff` (tests/unit/test_diff.py) and the pull-request step
that runs it in CI (the action, tests/integration/test_action_script.py)."""

from __future__ import annotations

import random
from pathlib import Path

from testkit.binsynth import elf, fatbin, fatbin_entry, pad8
from testkit.wheelmaker import make_wheel

TAG = "cp312-abi3-manylinux_2_28_x86_64"


def _random(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


def grown_wheel(out: Path, version: str, grow: int = 0) -> Path:
    """Three modules with SASS 80 and 90; module #1's sm_90 cubin is `grow` bytes larger (random: it does not
    deflate away)."""
    mods = []
    for i in range(3):
        extra = grow if i == 1 else 0
        mods.append(
            pad8(
                fatbin(
                    [
                        fatbin_entry(sm=80, payload=_random(i, 4096)),
                        fatbin_entry(sm=90, payload=_random(100 + i, 4096 + extra)),
                    ]
                )
            )
        )
    lib = elf(sections={".text": _random(7, 2048), ".nv_fatbin": b"".join(mods)}, needed=("libcudart.so.13",))
    return make_wheel(
        out, name="pkg", version=version, tag=TAG, files={"pkg/_ext.abi3.so": lib, "pkg/__init__.py": b"x = 1\n"}
    )
