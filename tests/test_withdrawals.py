"""What the policy withdraws reaches legacy sessions that were already open.

A legacy record is made at `initialize`, but a session can outlive the day its
handshake was made on (the removal date passes), and `negotiate()` can be applied again
with more withheld. Neither may leave earlier clients with what later ones are denied.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from harness import fake_clock
from mcp_negotiation import Policy, client_supports, negotiate, negotiation, requires

pytestmark = pytest.mark.anyio

SAMPLING = {"sampling": {}}


def _server(policy: Policy) -> MCPServer:
    server = negotiate(MCPServer("s"), policy)

    @server.tool()
    async def can_sample(ctx: Context) -> bool:
        return client_supports(ctx, "sampling")

    @server.tool()
    @requires("sampling")
    async def sample(ctx: Context) -> str:
        return "sampled"

    return server


async def _sampling_callback(*args: Any) -> Any:
    raise AssertionError("never asked")


async def test_a_removal_date_passing_during_a_legacy_session_withdraws_the_feature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = fake_clock(monkeypatch, date(2027, 7, 27))
    server = _server(Policy())
    async with Client(server, mode="legacy", sampling_callback=_sampling_callback) as client:
        before = await client.call_tool("can_sample", {})
        assert before.structured_content == {"result": True}
        clock.today = date(2027, 7, 28)
        clock.seconds += negotiation._DATE_RECHECK_SECONDS
        after = await client.call_tool("can_sample", {})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("sample", {})
    assert after.structured_content == {"result": False}
    assert refused.value.error.code == -32021


async def test_negotiating_again_with_more_withheld_reaches_open_sessions() -> None:
    server = _server(Policy())
    async with Client(server, mode="legacy", sampling_callback=_sampling_callback) as client:
        assert (await client.call_tool("can_sample", {})).structured_content == {"result": True}
        negotiate(server, Policy(withhold="sampling"))
        assert (await client.call_tool("can_sample", {})).structured_content == {"result": False}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("sample", {})
    assert refused.value.error.code == -32021
    assert "withheld" in refused.value.error.message
