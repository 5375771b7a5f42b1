"""The mcp 1.x suite: run in its own environment (mcp 1.x and 2.x cannot share one)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
