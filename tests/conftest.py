"""Shared fixtures: the SDK's tests use anyio's pytest plugin on asyncio, so do we."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from profile_server import Tls, make_tls


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    """One test CA per run, for the local HTTPS profile servers."""
    return trustme.CA()


@pytest.fixture
def tls(ca: trustme.CA) -> Tls:
    return make_tls(ca)


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
