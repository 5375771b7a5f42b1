"""Repeated modern requests: the middleware answers them from a memo of what it published.

The memo is keyed by everything an outcome depends on (method, revision, envelope,
transport). These tests check the ways a memo could go wrong: one client's record reaching
another, an exempt method opening a refused one, a closed deprecation window not reaching
envelopes seen before it closed, and growth driven by clients.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy
from mcp_negotiation.adapters.mcp2 import middleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core import engine, negotiation, revisions
from mcp_negotiation.tools.demo import build
from mcp_negotiation.ucp import Profile
from support.harness import FakeClock, direct_connection, structured
from ucp_shop import build as build_shop

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MODES = ("memory-direct", "memory-jsonrpc")
UCP_V = "2026-04-08"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def modern(target: Any, mode: str, **kwargs: Any) -> Client:
    return Client(
        InMemoryTransport(target) if mode == "memory-jsonrpc" else target, mode="2026-07-28", **kwargs
    )


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
    )


def _memo(server: Any) -> Any:
    chain = middleware_list(server)
    assert chain is not None
    (ours,) = [m for m in chain if isinstance(m, middleware.NegotiationMiddleware)]
    return ours.engine.memo


@pytest.mark.parametrize("mode", MODES)
async def test_interleaved_clients_each_see_their_own_record(mode: str) -> None:
    server = build()
    async with modern(server, mode, sampling_callback=_sample) as sampler, modern(server, mode) as plain:
        for _ in range(5):
            mine = structured(await sampler.call_tool("negotiation", {}))
            theirs = structured(await plain.call_tool("negotiation", {}))
            assert mine["supports"]["sampling"] is True
            assert "sampling" in mine["client_capabilities"]
            assert theirs["supports"]["sampling"] is False
            assert "sampling" not in theirs["client_capabilities"]
    assert len(_memo(server)) >= 2  # both envelopes were served from the memo after the first call


async def test_an_exempt_method_served_from_the_memo_does_not_open_a_refused_one() -> None:
    server = build(Policy(required_capabilities=("sampling",)))
    without = {"_meta": {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {}}}
    with_sampling = {"_meta": {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}}
    async with direct_connection(server) as send:
        for _ in range(3):
            assert "supportedVersions" in await send("server/discover", without)  # exempt: how to learn
            with pytest.raises(MCPError) as unknown:
                await send("ping", without)  # exempt too, and negotiated before the SDK answers -32601
            assert unknown.value.error.code == -32601
            with pytest.raises(MCPError) as refused:
                await send("tools/list", without)
            assert refused.value.error.code == -32021
            assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        for _ in range(3):
            assert "tools" in await send("tools/list", with_sampling)


@pytest.mark.parametrize("mode", MODES)
async def test_a_window_closing_while_serving_reaches_envelopes_seen_before(mode: str) -> None:
    removal = revisions.DEFAULT_REMOVAL_DATE
    clock = FakeClock(removal.fromordinal(removal.toordinal() - 1))
    server = build(Policy(clock=clock))
    async with modern(server, mode, sampling_callback=_sample) as client:
        for _ in range(3):
            assert structured(await client.call_tool("negotiation", {}))["supports"]["sampling"] is True
        clock.day = removal
        clock.seconds += negotiation.DATE_RECHECK_SECONDS
        for _ in range(3):
            seen = structured(await client.call_tool("negotiation", {}))
            assert seen["supports"]["sampling"] is False
            assert "sampling" in seen["withheld"]


async def test_the_memo_stays_bounded_whatever_clients_send() -> None:
    server = build()
    async with direct_connection(server) as send:
        for i in range(engine.MEMO_SIZE + 50):
            meta = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"experimental": {f"x{i}": {}}}}
            assert "tools" in await send("tools/list", {"_meta": meta})
        assert len(_memo(server)) == engine.MEMO_SIZE
        last = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"experimental": {"last": {}}}}
        seen = await send("tools/call", {"name": "negotiation", "arguments": {}, "_meta": last})
    assert seen["structuredContent"]["client_capabilities"] == {"experimental": {"last": {}}}
    assert len(_memo(server)) == engine.MEMO_SIZE


class _Rotating:
    """A resolver whose platform profile for one URL changes when told (a re-fetch)."""

    def __init__(self, profiles: dict[str, Any]) -> None:
        self.profiles = profiles

    async def resolve(self, url: str) -> Profile:
        return self.profiles[url]


def _platform(*capabilities: str) -> Profile:
    return Profile.from_json(
        {"ucp": {"version": UCP_V, "capabilities": {name: [{"version": UCP_V}] for name in capabilities}}}
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_ucp_call_finds_its_agreement_every_time(mode: str) -> None:
    """Only the call's negotiation is memoised: each call names its platform, whose profile may change."""
    checkout = "dev.ucp.shopping.checkout"
    discount = "dev.ucp.shopping.discount"
    a, b = "https://a.example/profile.json", "https://b.example/profile.json"
    resolver = _Rotating({a: _platform(checkout, discount), b: _platform(checkout)})
    server = build_shop(resolver)

    async def agreed(client: Client, url: str) -> set[str]:
        result = await client.call_tool("negotiated", {"meta": {"ucp-agent": {"profile": url}}})
        return set(structured(result)["ucp"]["capabilities"])

    async with modern(server, mode) as client:
        for _ in range(3):
            assert discount in await agreed(client, a)
            assert discount not in await agreed(client, b)
        resolver.profiles[a] = _platform(checkout)  # platform a re-published without discounts
        assert discount not in await agreed(client, a)
