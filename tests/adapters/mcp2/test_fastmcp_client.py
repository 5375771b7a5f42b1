"""FastMCP's own client (the `fastmcp` package) drives the bundled MCPServer demo.

tests/adapters/mcp2/test_fastmcp.py covers FastMCP *servers*; here FastMCP is the other side: its
`Client` over stdio (`python -m mcp_negotiation.tools.demo`) and streamable HTTP (the demo's
app on uvicorn), in its legacy mode and in `auto` (which reaches 2026-07-28). What the
server saw must be what the client declared: FastMCP declares `sampling`,
`elicitation` and `roots` exactly when it is given handlers for them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp.shared.exceptions import MCPError

from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import ROOT, serve_http

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.peers]


async def _sample(*args: Any, **kwargs: Any) -> str:
    return "sampled"


async def _elicit(*args: Any, **kwargs: Any) -> Any:
    return None


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    if request.param == "stdio":
        yield (
            "stdio",
            lambda: StdioTransport(
                command=sys.executable, args=["-m", "mcp_negotiation.tools.demo"], cwd=str(ROOT)
            ),
        )
        return
    with serve_http(build().streamable_http_app()) as url:
        yield "http", lambda: url


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("handlers", [True, False], ids=["with-handlers", "no-handlers"])
async def test_fastmcp_client_sees_what_it_declared(
    target: tuple[str, Any], mode: str, handlers: bool
) -> None:
    kind, make = target
    extra: dict[str, Any] = (
        {"sampling_handler": _sample, "elicitation_handler": _elicit, "roots": ["file:///tmp"]}
        if handlers
        else {}
    )
    async with Client(make(), mode=mode, **extra) as client:
        seen = (await client.call_tool("negotiation", {})).structured_content
        assert seen is not None
        if handlers:
            served = await client.call_tool("summarize", {"text": "a text from FastMCP, at length"})
            assert served.content[0].text == "a text from FastMCP,"  # type: ignore[union-attr]
        else:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("summarize", {"text": "a text from FastMCP, at length"})
            assert refused.value.error.code == -32021
            assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}

    revision = seen["protocol_version"]
    assert revision == ("2026-07-28" if mode == "auto" else revisions.LEGACY[-1])
    assert seen["era"] == revisions.era(revision)
    assert seen["requested_version"] == revision
    assert seen["transport"] == kind
    assert seen["capabilities_known"] is True
    declared = seen["client_capabilities"]
    for name in ("sampling", "elicitation", "roots"):
        assert (name in declared) is handlers, declared
        assert seen["supports"][name] is (handlers and revisions.feature(name, revision))
