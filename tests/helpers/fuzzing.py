"""Settings of the fuzz tests: a few hundred examples in the suite's default run (seconds), as many as
SLIMWHEEL_FUZZ_EXAMPLES says for a long run by hand (`SLIMWHEEL_FUZZ_EXAMPLES=200000 pytest -k fuzz ...`)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz(default: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("SLIMWHEEL_FUZZ_EXAMPLES", default)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
