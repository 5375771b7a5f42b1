"""The mcp 1.x suite: run in its own environment (mcp 1.x and 2.x cannot share one)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def fresh_log_budget() -> None:
    """Each test starts with the whole budget of client-caused log lines (see `client_log`)."""
    from mcp_negotiation import client_log

    client_log._windows.clear()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
