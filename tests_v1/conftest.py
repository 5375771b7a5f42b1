"""The mcp 1.x suite: run in its own environment (mcp 1.x and 2.x cannot share one)."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def fresh_log_budget() -> Iterator[None]:
    """Each test starts with the whole budget of client-caused log lines (see `client_log`),
    and leaves the next one the system's clock, whatever clock it gave the budget."""
    from mcp_negotiation import client_log

    client_log.reset()
    yield
    client_log.reset()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
