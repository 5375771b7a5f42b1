"""Shared fixtures: the SDK's tests use anyio's pytest plugin on asyncio, so do we.

Each layer is a directory (core, ucp, sdk, e2e, quality, peers, project, v1); helpers live in
the `support` package. mcp 1.x and 2.x cannot share an environment, so `v1/` is collected
only under mcp 1.x and every other directory only under mcp 2.x. This file must import on
both.

The layer directories have no __init__.py: pytest puts each on sys.path (its default
`prepend` import mode), so a test module's name must be unique across them.
"""

import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import trustme

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from support.profile_server import Tls, make_tls

HERE = Path(__file__).resolve().parent
MCP_MAJOR = int(metadata.version("mcp").split(".")[0])
LAYERS_OF_MCP_2 = [p.name for p in HERE.iterdir() if p.is_dir() and p.name not in ("v1", "support")]
collect_ignore = ["v1"] if MCP_MAJOR >= 2 else LAYERS_OF_MCP_2


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
