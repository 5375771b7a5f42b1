"""A UCP call's repeat published already narrowed: what the middleware learns per tool.

The first call of a `@requires_ucp` tool under a memoised UCP outcome narrows the agreement
in the decorator; the middleware learns that entry for the tool's name and publishes it on
every repeat, so the decorator has nothing left to do. These tests pin that each tool still
sees its own operation (and an undecorated tool the whole agreement), in any order, that a
name re-registered for another operation is narrowed for the new one, and that what is
learned is bounded. Real SDK clients in memory, both eras.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, negotiate, negotiation_of, requires_ucp
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core import engine
from mcp_negotiation.core.negotiation import NO_HEADERS
from mcp_negotiation.ucp import StaticResolver, UcpPolicy
from support.harness import envelope, structured
from ucp_shop import BUSINESS_PROFILE, CHECKOUT

pytestmark = pytest.mark.anyio

V = "2026-04-08"
CART = "dev.ucp.shopping.cart"
DISCOUNT = "dev.ucp.shopping.discount"
FULFILLMENT = "dev.ucp.shopping.fulfillment"
URL = "https://platform.example/profile.json"
ARGS = {"meta": {"ucp-agent": {"profile": URL}}}
MODES = ("legacy", "2026-07-28")


def _document(*capabilities: str) -> dict[str, Any]:
    return {"ucp": {"version": V, "capabilities": {name: [{"version": V}] for name in capabilities}}}


def _sees(ctx: Context) -> list[str]:
    agreement = negotiation_of(ctx).ucp
    assert agreement is not None
    return sorted(agreement.capabilities)


def _shop() -> MCPServer:
    resolver = StaticResolver({URL: _document(CHECKOUT, CART, DISCOUNT, FULFILLMENT)})
    server = negotiate(
        MCPServer("shop"), Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver))
    )

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def checkout(ctx: Context) -> dict[str, Any]:
        return {"sees": _sees(ctx)}

    @server.tool()
    @requires_ucp(CART)
    async def cart(ctx: Context) -> dict[str, Any]:
        return {"sees": _sees(ctx)}

    @server.tool()
    async def whole(ctx: Context) -> dict[str, Any]:
        return {"sees": _sees(ctx)}

    return server


def _middleware(server: MCPServer) -> NegotiationMiddleware:
    return next(m for m in middleware_list(server) or [] if isinstance(m, NegotiationMiddleware))


async def _sees_via(client: Client, tool: str) -> list[str]:
    return list(structured(await client.call_tool(tool, ARGS))["sees"])


ALL = sorted({CHECKOUT, CART, DISCOUNT, FULFILLMENT})
FOR_CHECKOUT = sorted({CHECKOUT, DISCOUNT, FULFILLMENT})
FOR_CART = sorted({CART, DISCOUNT})


@pytest.mark.parametrize("mode", MODES)
async def test_each_tool_sees_its_own_operation_on_every_repeat(mode: str) -> None:
    server = _shop()
    async with Client(server, mode=mode) as client:
        orders = (("checkout", "cart", "whole"), ("whole", "cart", "checkout"), ("cart", "checkout", "whole"))
        for order in orders:
            for tool in order:
                expected = {"checkout": FOR_CHECKOUT, "cart": FOR_CART, "whole": ALL}[tool]
                assert await _sees_via(client, tool) == expected, (order, tool)
    learned = [repeat.by_tool for repeat in _middleware(server).engine.ucp_memo.values()]
    # The decorated tools were learned (one memoised outcome per client); the undecorated one never is.
    assert learned
    assert all(set(by_tool) == {"checkout", "cart"} for by_tool in learned)


@pytest.mark.parametrize("mode", MODES)
async def test_a_name_registered_again_for_another_operation_is_narrowed_for_it(mode: str) -> None:
    server = _shop()
    async with Client(server, mode=mode) as client:
        for _ in range(3):
            assert await _sees_via(client, "checkout") == FOR_CHECKOUT
        server.remove_tool("checkout")

        @server.tool(name="checkout")
        @requires_ucp(CART)
        async def now_cart(ctx: Context) -> dict[str, Any]:
            return {"sees": _sees(ctx)}

        for _ in range(3):
            assert await _sees_via(client, "checkout") == FOR_CART
        assert await _sees_via(client, "whole") == ALL


async def test_what_a_memoised_outcome_learns_is_bounded_in_names_and_length() -> None:
    resolver = StaticResolver({URL: _document(CHECKOUT)})
    eng = engine.Engine(Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver)))
    meta = {**envelope(), "io.modelcontextprotocol/clientInfo": {"name": "learned", "version": "1"}}
    record = eng.negotiator.request(meta, transport="memory", headers=NO_HEADERS, check_required=True)
    repeat = await eng.scoped_repeat(record, {"arguments": ARGS})
    assert repeat is not None
    # Kept weighing what it may learn, as well as its URL and record.
    assert eng.ucp_memo.bytes >= engine.LEARNED_BYTES
    repeat.learn("x" * (engine.MAX_TOOL_NAME + 1), repeat.published)
    assert repeat.by_tool == {}
    for index in range(engine.LEARNED_TOOLS + 5):
        repeat.learn(f"tool{index}", repeat.published)
    assert len(repeat.by_tool) == engine.LEARNED_TOOLS
