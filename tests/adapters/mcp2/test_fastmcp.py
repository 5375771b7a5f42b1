"""FastMCP 4.x servers (the `fastmcp` package, built on the SDK's lowlevel server)."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Client as FastMCPClient
from fastmcp import Context, FastMCP
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_negotiation import (
    Policy,
    client_supports,
    negotiate,
    negotiation_of,
    requires,
)
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from support.harness import legacy_session, open_streams, serve_http, structured

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.peers]


def _build(policy: Policy | None = None) -> FastMCP:
    server = negotiate(FastMCP("fm"), policy or Policy())

    @server.tool()
    async def seen(ctx: Context) -> dict[str, Any]:
        record = negotiation_of(ctx)
        return {
            "version": record.protocol_version,
            "capabilities": record.as_dict()["client_capabilities"],
            "sampling": client_supports(ctx, "sampling"),
            "roots.listChanged": client_supports(ctx, "roots.listChanged"),
        }

    @server.tool()
    @requires("sampling")
    async def needs_sampling(ctx: Context) -> str:
        return "sampled"

    return server


def test_negotiate_installs_once_in_the_lowlevel_chain() -> None:
    server = _build()
    negotiate(server, Policy())
    chain = server._mcp_server.middleware
    assert sum(isinstance(m, NegotiationMiddleware) for m in chain) == 1


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-06-18", "2025-11-25"])
async def test_legacy_clients_over_http(revision: str) -> None:
    caps = {"roots": {"listChanged": True}, "sampling": {}}
    with serve_http(_build().http_app(path="/mcp")) as url:
        async with (
            open_streams("http", url) as streams,
            legacy_session(streams, revision, caps) as (session, init),
        ):
            assert init.protocol_version == revision
            seen = structured(await session.call_tool("seen", {}))
    assert seen == {"version": revision, "capabilities": caps, "sampling": True, "roots.listChanged": True}


async def test_counter_offer_through_fastmcp() -> None:
    server = _build(Policy(min_revision="2025-06-18"))
    async with (
        open_streams("memory", server._mcp_server) as streams,
        legacy_session(streams, "2024-11-05", {}) as (
            session,
            init,
        ),
    ):
        assert init.protocol_version == "2025-11-25"
        assert structured(await session.call_tool("seen", {}))["version"] == "2025-11-25"


async def test_modern_client_and_refusal_then_served() -> None:
    server = _build()
    async with Client(server._mcp_server, mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("needs_sampling", {})
        assert refused.value.error.code == -32021
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        seen = structured(await client.call_tool("seen", {}))
    assert seen["version"] == "2026-07-28"
    assert seen["sampling"] is False


async def test_fastmcp_own_client_sees_what_it_declared() -> None:
    async def sample(*args: Any, **kwargs: Any) -> str:
        return "ok"

    server = _build()
    async with FastMCPClient(server, sampling_handler=sample) as client:
        seen = (await client.call_tool("seen", {})).structured_content
        assert seen is not None
        assert seen["sampling"] is True
        assert "sampling" in seen["capabilities"]
        assert (await client.call_tool("needs_sampling", {})).data == "sampled"
    async with FastMCPClient(server) as client:
        seen = (await client.call_tool("seen", {})).structured_content
        assert seen is not None
        assert seen["sampling"] is False


async def test_fastmcp_over_stdio_in_both_eras() -> None:
    import sys

    from mcp.client.stdio import StdioServerParameters

    from support.harness import ROOT

    params = StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "tests/support/servers/fastmcp_stdio.py")]
    )
    async with (
        open_streams("stdio", params) as streams,
        legacy_session(streams, "2025-03-26", {"sampling": {}}) as (
            session,
            _,
        ),
    ):
        seen = structured(await session.call_tool("seen", {}))
    assert (seen["protocol_version"], seen["transport"], seen["client_capabilities"]) == (
        "2025-03-26",
        "stdio",
        {"sampling": {}},
    )
    async with Client(params, mode="2026-07-28") as client:
        seen = structured(await client.call_tool("seen", {}))
    assert (seen["protocol_version"], seen["transport"], seen["era"]) == ("2026-07-28", "stdio", "modern")
