"""A UCP call narrowed to its tool's operation: each copy made once, kept on the scoped call.

The first call of a `@requires_ucp` tool narrows the call's agreement to the tool's
operation; the copy is kept on the scoped call's negotiation, so a repeat finds it with one
lookup. These tests pin that each tool still sees its own operation (and an undecorated
tool the whole agreement), in any order, that a name re-registered for another operation
is narrowed for the new one, and that narrowing again starts from what was narrowed. Real
SDK clients in memory, both eras.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, negotiate, negotiation_of, requires_ucp
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.ucp import StaticResolver, UcpPolicy
from mcp_negotiation.ucp.stage import for_operation
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
    if mode != "legacy":  # the client's envelope is memoised: its scoped call keeps one copy per operation
        (known,) = _middleware(server).engine.memo.values()
        (scope,) = [kept[2] for key, kept in known.derived.items() if key[0] == "ucp.scoped"]
        narrowed = [kept.tag[1] for key, kept in scope.derived.items() if key[0] == "ucp.narrowed"]
        assert sorted(narrowed) == [CART, CHECKOUT]


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


async def test_a_narrowed_copy_is_made_once_per_operation_and_narrowed_from_its_source() -> None:
    resolver = StaticResolver({URL: _document(CHECKOUT, CART, DISCOUNT, FULFILLMENT)})
    eng = Engine(Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver)))
    meta = {**envelope(), "io.modelcontextprotocol/clientInfo": {"name": "learned", "version": "1"}}
    params = {"name": "checkout", "arguments": ARGS, "_meta": meta}
    scoped = eng.decide(PlainFacts("tools/call", params, "2026-07-28")).known
    assert scoped is not None
    checkout = for_operation(scoped, CHECKOUT)
    assert for_operation(scoped, CHECKOUT) is checkout
    assert for_operation(checkout, CHECKOUT) is checkout  # already narrowed for it
    cart = for_operation(checkout, CART)  # for another operation: narrowed from what it came from
    assert cart.source is scoped
    assert sorted(cart.record.ucp.capabilities) == FOR_CART
    assert sorted(checkout.record.ucp.capabilities) == FOR_CHECKOUT
