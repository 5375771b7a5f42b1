"""UCP on mcp 1.x: a call naming a platform gets its agreement; a failure refuses it before the tool runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from harness_v1 import HERE, session
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError

from mcp_negotiation import Policy, negotiate, negotiation_of
from mcp_negotiation.adapters.mcp1.seams import sdk_revisions
from mcp_negotiation.ucp import StaticResolver, UcpPolicy

pytestmark = pytest.mark.anyio

EXAMPLES = HERE.parents[2] / "examples"
KNOWN = "https://platform.example/profile.json"
WEB = "https://shop.example/checkout"


def _shop(ran: list[str]) -> FastMCP:
    platform = json.loads((EXAMPLES / "ucp/platform_profile.json").read_text())
    ucp = UcpPolicy(
        business_profile=Path(EXAMPLES / "ucp/business_profile.json"),
        resolver=StaticResolver({KNOWN: platform}),
        continue_url=WEB,
    )
    server = negotiate(FastMCP("shop"), Policy(ucp=ucp))

    @server.tool()
    async def place_order(meta: dict[str, Any], ctx: Context) -> str:  # type: ignore[type-arg]
        ran.append("place_order")  # a side effect that must not happen for a refused call
        agreement = negotiation_of(ctx).ucp
        return "no platform" if agreement is None else agreement.version

    return server


async def test_the_agreement_reaches_the_tool_and_a_failure_stops_it() -> None:
    ran: list[str] = []
    async with session("memory", _shop(ran), sdk_revisions()[-1]) as (client, _):
        served = await client.call_tool("place_order", {"meta": {"ucp-agent": {"profile": KNOWN}}})
        with pytest.raises(McpError) as refused:
            await client.call_tool("place_order", {"meta": {"ucp-agent": {"profile": "http://x.example/p"}}})
        again = await client.call_tool("place_order", {"meta": {}})
    block = served.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text == json.loads((EXAMPLES / "ucp/platform_profile.json").read_text())["ucp"]["version"]
    assert refused.value.error.code == -32001
    assert refused.value.error.data == {
        "code": "invalid_profile_url",
        "content": "the profile URL must use https",
        "continue_url": WEB,
    }
    assert ran == ["place_order", "place_order"]  # served, then the call naming no platform
    assert isinstance(again.content[0], types.TextContent)
    assert again.content[0].text == "no platform"
