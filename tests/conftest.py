"""Shared fixtures: the SDK's tests use anyio's pytest plugin on asyncio, so do we."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
