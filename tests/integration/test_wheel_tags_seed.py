"""size-report's tags do not depend on the interpreter's string hashing (tests/unit/test_wheel_tags.py has why)."""

from __future__ import annotations

import os
import subprocess
import sys

NAME = "nvidia_cufft-12.5.0.14-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


def test_the_same_order_under_every_hash_seed() -> None:
    code = f"from slimwheel.inspect.wheel import file_tags; print(file_tags({NAME!r}))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert seen == {"('py3-none-manylinux2014_x86_64', 'py3-none-manylinux_2_17_x86_64')\n"}, seen
