"""Shared fixtures: the SDK's tests use anyio's pytest plugin on asyncio, so do we.

The directories mirror the package (core, ucp, semver, otel, adapters/mcp2, adapters/mcp1,
tools), with `project` for the repository itself (docs, examples, commands, benchmarks);
helpers live in the `support` package. Kinds of test are markers, not directories (see
pyproject.toml): `matrix` files run in every mcp 2.x row of the SDK matrix, `peers` files
need the npm peers, `fuzz` and `security` name what they hunt for. mcp 1.x and 2.x cannot
share an environment, so `adapters/mcp1/` is collected only under mcp 1.x and everything
else only under mcp 2.x. This file must import on both.

The test directories have no __init__.py: pytest puts each on sys.path (its default
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
MCP1 = Path("adapters", "mcp1")
OF_MCP_2 = [
    str(path.relative_to(HERE))
    for path in (*HERE.iterdir(), *(HERE / "adapters").iterdir())
    if path.name not in ("support", "adapters", "__pycache__", "conftest.py") and path != HERE / MCP1
]
collect_ignore = [str(MCP1)] if MCP_MAJOR >= 2 else OF_MCP_2


def pytest_configure(config: pytest.Config) -> None:
    """The suite's expectations are written for one day (`support/startup/as_of_day.py`), which
    its environment's interpreters load at start-up; without it they would hold only until the
    deprecation window closes."""
    if "as_of_day" not in sys.modules:
        raise pytest.UsageError(
            "this environment does not read the calendar as of the suite's day"
            " (tests/support/startup/as_of_day.py): run the tests with `python3 dev.py nox -s tests`"
        )


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
    from mcp_negotiation.core import client_log

    client_log.reset()
    yield
    client_log.reset()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
