"""What the policy withdraws or refuses reaches legacy sessions that were already open.

A legacy record is made at `initialize`, but a session can outlive the day its
handshake was made on (the removal date passes), and `negotiate()` can be applied again
with more withheld, a narrower range of revisions, or more required. None may leave
earlier clients with what later ones are denied.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy, client_supports, negotiate, requires
from mcp_negotiation.core import negotiation
from support.harness import FakeClock

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


async def test_a_removal_date_passing_during_a_legacy_session_withdraws_the_feature() -> None:
    clock = FakeClock(date(2027, 7, 27))
    server = _server(Policy(clock=clock))
    async with Client(server, mode="legacy", sampling_callback=_sampling_callback) as client:
        before = await client.call_tool("can_sample", {})
        assert before.structured_content == {"result": True}
        clock.day = date(2027, 7, 28)
        clock.seconds += negotiation.DATE_RECHECK_SECONDS
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


@pytest.mark.filterwarnings("ignore:ping is removed as of 2026-07-28")  # the SDK's, for any mode
@pytest.mark.parametrize(
    ("policy", "code", "says"),
    [
        (Policy(min_revision="2026-07-28"), -32022, "Unsupported protocol version: 2025-11-25"),
        (Policy(required_capabilities=("elicitation",)), -32021, "elicitation"),
    ],
    ids=["revision-no-longer-accepted", "capability-now-required"],
)
async def test_negotiating_again_refuses_open_sessions_the_new_policy_would_not_serve(
    policy: Policy, code: int, says: str
) -> None:
    """What a new client is refused, an open session is refused too, from its next request;
    a ping still answers (it is how a client learns that the session still stands)."""
    server = _server(Policy())
    async with Client(server, mode="legacy", sampling_callback=_sampling_callback) as client:
        assert (await client.call_tool("can_sample", {})).structured_content == {"result": True}
        negotiate(server, policy)
        for _ in range(2):  # refused again: the session's record is judged until it passes
            with pytest.raises(MCPError) as refused:
                await client.call_tool("can_sample", {})
            assert refused.value.error.code == code
            assert says in refused.value.error.message
        await client.send_ping()
        negotiate(server, Policy())
        assert (await client.call_tool("can_sample", {})).structured_content == {"result": True}


async def test_negotiating_again_recomputes_what_an_open_session_loses() -> None:
    """`degraded` is measured against the newest revision the policy accepts: a lower
    ceiling applied while a 2025-06-18 session is open leaves it losing nothing."""
    from support.harness import legacy_session, open_streams

    server = negotiate(MCPServer("s"), Policy())

    @server.tool()
    async def degraded(ctx: Context) -> list[str]:
        from mcp_negotiation import negotiation_of

        return sorted(negotiation_of(ctx).degraded)

    async with (
        open_streams("memory", server) as streams,
        legacy_session(streams, "2025-06-18") as (session, _),
    ):
        before = await session.call_tool("degraded", {})
        negotiate(server, Policy(max_revision="2025-06-18"))
        after = await session.call_tool("degraded", {})
    assert before.structured_content is not None
    assert before.structured_content["result"]  # what 2025-11-25 has and 2025-06-18 lacks
    assert after.structured_content == {"result": []}
