"""Installing the middleware: idempotence, instrument/uninstrument, server kinds, strict mode."""

from __future__ import annotations

import logging
import re
from typing import Any

import mcp_types as types
import pytest
import wrapt
from mcp import Client
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import (
    NegotiationUnavailable,
    NoNegotiation,
    Policy,
    client_supports,
    instrument,
    negotiate,
    negotiated,
    negotiation_of,
    requires,
    uninstrument,
)
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.core import revisions
from support.harness import structured

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]


def _ours(server: Any) -> list[Any]:
    return [m for m in server.middleware if isinstance(m, NegotiationMiddleware)]


def _with_probe_tool(server: MCPServer) -> MCPServer:
    @server.tool()
    async def seen(ctx: Context) -> dict[str, Any]:
        record = negotiation_of(ctx)
        return {"version": record.protocol_version, "min": record.withheld == frozenset()}

    return server


async def _version_seen(server: Any, mode: str = "legacy") -> str:
    async with Client(server, mode=mode) as client:
        return str(structured(await client.call_tool("seen", {}))["version"])


def test_negotiate_returns_the_same_server_and_sits_after_the_sdk_otel_middleware() -> None:
    server = MCPServer("x")
    assert negotiate(server, Policy()) is server
    from mcp.server._otel import OpenTelemetryMiddleware

    assert isinstance(server.middleware[0], OpenTelemetryMiddleware)
    assert isinstance(server.middleware[1], NegotiationMiddleware)


async def test_negotiate_twice_installs_once_and_the_last_policy_wins() -> None:
    server = _with_probe_tool(MCPServer("x"))
    negotiate(server, Policy(max_revision="2025-11-25"))
    negotiate(server, Policy())
    assert len(_ours(server)) == 1
    assert await _version_seen(server, "2026-07-28") == "2026-07-28"


async def test_negotiated_decorator_wraps_what_the_factory_builds() -> None:
    @negotiated(Policy(min_revision="2025-06-18"))
    def build(name: str, *, loud: bool = False) -> MCPServer:
        return _with_probe_tool(MCPServer(name.upper() if loud else name))

    server = build("shop", loud=True)  # the builder's own signature, keywords too
    assert server.name == "SHOP"
    assert len(_ours(server)) == 1
    assert _ours(server)[0].policy.min_revision == "2025-06-18"
    assert await _version_seen(server) == "2025-11-25"


async def test_negotiated_on_an_async_builder_negotiates_the_server() -> None:
    @negotiated(Policy(min_revision="2025-06-18"))
    async def build(name: str) -> MCPServer:
        server = MCPServer(name)

        @server.tool()
        async def seen(ctx: Context) -> str:
            return negotiation_of(ctx).protocol_version

        return server

    server = await build("async-built")
    assert len(_ours(server)) == 1
    async with Client(server, mode="legacy") as client:  # served: the record is there
        result = await client.call_tool("seen", {})
    assert result.structured_content == {"result": revisions.LEGACY[-1]}


async def test_instrument_reaches_servers_built_afterwards_and_existing_ones_passed_in() -> None:
    before = _with_probe_tool(MCPServer("before"))
    untouched = MCPServer("untouched")
    instrument(Policy(), before)
    try:
        after = _with_probe_tool(MCPServer("after"))
        lowlevel = Server("lowlevel")
        assert len(_ours(after)) == 1
        assert len(_ours(before)) == 1
        assert len(_ours(lowlevel)) == 1
        assert _ours(untouched) == []
        assert await _version_seen(after) == "2025-11-25"
    finally:
        uninstrument(before)
    assert _ours(before) == []
    assert _ours(MCPServer("later")) == []


async def _why_not_negotiated(server: MCPServer) -> str:
    @server.tool()
    async def why(ctx: Context) -> str:
        try:
            negotiation_of(ctx)
        except NoNegotiation as missing:
            return str(missing)
        return "negotiated"

    async with Client(server, mode="legacy") as client:
        return str(structured(await client.call_tool("why", {}))["result"])


async def test_a_server_built_before_instrument_is_told_so_where_its_tool_asks() -> None:
    built_first = MCPServer("built-first")
    instrument(Policy())
    try:
        said = await _why_not_negotiated(built_first)
    finally:
        uninstrument()
    assert said.startswith("no negotiation for this request: its server was most likely built before")
    assert "instrument(policy, server) or negotiate(server, policy)" in said
    never = await _why_not_negotiated(MCPServer("never"))
    assert "its server is not negotiated; wrap it with negotiate(server, policy)" in never
    with pytest.raises(NoNegotiation, match="answers inside a request handler of a negotiated server"):
        negotiation_of()


async def test_lowlevel_server_handlers_see_the_negotiation() -> None:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="caps", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = f"{negotiation_of(ctx).protocol_version} sampling={client_supports(ctx, 'sampling')}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = negotiate(Server("low", on_list_tools=list_tools, on_call_tool=call_tool), Policy())

    async def sample(ctx: Any, params: Any) -> types.CreateMessageResult:
        raise AssertionError("not called")

    for mode, expected in (
        ("legacy", "2025-11-25 sampling=True"),
        ("2026-07-28", "2026-07-28 sampling=True"),
    ):
        async with Client(server, mode=mode, sampling_callback=sample) as client:
            result = await client.call_tool("caps", {})
            assert isinstance(result.content[0], types.TextContent)
            assert result.content[0].text == expected


def _seamless() -> Server[Any]:
    """An SDK server whose middleware seam is gone (as in an SDK that changed under us)."""
    server: Server[Any] = Server("seamless")
    server.middleware = "not a list"  # type: ignore[assignment]
    return server


def test_a_server_without_the_seam_is_left_untouched_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # (What is no server at all raises TypeError: tests/adapters/mcp2/test_misuse.py.)
    thing = _seamless()
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        assert negotiate(thing, Policy()) is thing
    assert "no SDK middleware list" in caplog.text
    with pytest.raises(NegotiationUnavailable):
        negotiate(thing, Policy(strict=True))


def test_instrument_in_strict_mode_raises_for_a_server_without_the_seam(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_negotiation.adapters.mcp2 import seams

    good = Server("given-first")
    with pytest.raises(NegotiationUnavailable):
        instrument(Policy(strict=True), good, _seamless())
    assert not _ours(good)  # not even the server given before the one that failed
    assert not _ours(Server("built-after-a-failed-instrument"))  # nothing was left instrumented
    monkeypatch.setattr(seams, "middleware_list", lambda server: None)  # an SDK without the seam
    instrument(Policy(strict=True))
    try:
        with pytest.raises(NegotiationUnavailable, match="no SDK middleware list"):
            Server("strict")
        instrument(Policy())
        with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
            Server("lenient")
        assert "Server has no SDK middleware list" in caplog.text
    finally:
        uninstrument()


@pytest.mark.parametrize("name", ["bogus", "tools", "structured_output", ""])
def test_requires_refuses_a_name_no_client_can_have(name: str) -> None:
    # A misspelt name would refuse every call for good; a server-side row is not a client's.
    unknown = "unknown client capability in {}: " + repr(name)
    server_side = repr(name) + " in {} is a server feature, not a client capability"
    said = server_side if name in ("tools", "structured_output") else unknown
    with pytest.raises(ValueError, match=re.escape(said.format("requires()"))):
        requires("sampling", name)
    with pytest.raises(ValueError, match=re.escape(said.format("requires()"))):
        requires(name)
    assert callable(requires("sampling", "elicitation.url", "io.x/y", "experimental.z"))


def test_http_app_is_wrapped_once_and_unwrapped_by_uninstrument() -> None:
    server = MCPServer("x")
    instrument(Policy(), server)
    negotiate(server, Policy())
    try:
        owner = server._lowlevel_server
        wrapper = vars(owner)["streamable_http_app"]
        assert isinstance(wrapper, wrapt.FunctionWrapper)
        assert not isinstance(wrapper.__wrapped__, wrapt.FunctionWrapper)
    finally:
        uninstrument(server)
    assert "streamable_http_app" not in vars(server._lowlevel_server)
