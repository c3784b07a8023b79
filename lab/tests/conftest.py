"""Fixtures of the lab's tests. The faiss recipe's configure tests need the CUDA 13.0 toolkit the product's
integration tests use: the same call, so both trees share one cached toolkit."""

from __future__ import annotations

import pytest

from slimwheel.toolkit import Toolkit, ensure_toolkit


@pytest.fixture(scope="session")
def toolkit13() -> Toolkit:
    return ensure_toolkit("13.0")
