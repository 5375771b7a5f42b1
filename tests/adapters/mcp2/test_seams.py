"""Every SDK touch point of `mcp_negotiation.adapters.mcp2.seams` resolves on the installed SDK.

The seams answer None (and the library passes requests through) when the SDK moved a
private name, so that users' servers keep running. This file is what turns such a move
into a failing test instead: it runs in every environment of the SDK matrix
(tests/support/matrix.toml), statically and inside real requests over every transport.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
from typing import Any

import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.stdio import StdioServerParameters
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

from mcp_negotiation import NoNegotiation, negotiate, negotiation_of
from mcp_negotiation.adapters.mcp2 import install, seams
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.core import revisions
from support.harness import ROOT, legacy_session, open_streams, serve_http, structured
from support.servers import seams_server

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]


def _otel() -> type:
    from mcp.server._otel import OpenTelemetryMiddleware

    return OpenTelemetryMiddleware


def test_the_sdk_knows_the_revisions_we_know() -> None:
    from mcp_types import version

    assert tuple(version.HANDSHAKE_PROTOCOL_VERSIONS) == revisions.LEGACY
    assert tuple(version.MODERN_PROTOCOL_VERSIONS) == revisions.MODERN
    assert revisions.LEGACY[-1] == version.LATEST_HANDSHAKE_VERSION
    assert seams.sdk_answer_for("zzz") == version.LATEST_HANDSHAKE_VERSION
    assert seams.sdk_answer_for("2025-03-26") == "2025-03-26"


def test_mcpserver_middleware_list_starts_with_opentelemetry() -> None:
    server = MCPServer("s")
    chain = seams.middleware_list(server)
    assert isinstance(chain, list)
    assert chain is server.middleware is server._lowlevel_server.middleware
    assert isinstance(chain[0], _otel())
    assert seams.span_opener_position(chain) == 1
    assert isinstance(seams.lowlevel_server(server), Server)


def test_lowlevel_server_middleware_list_and_wrap_targets() -> None:
    server = Server("s")
    chain = seams.middleware_list(server)
    assert isinstance(chain, list)
    assert isinstance(chain[0], _otel())
    assert callable(getattr(server, "streamable_http_app", None))
    assert "__init__" in Server.__dict__, "instrument() patches Server.__init__ in place"


def test_negotiate_inserts_right_after_opentelemetry() -> None:
    server = negotiate(MCPServer("s"))
    chain = server.middleware
    assert isinstance(chain[0], _otel())
    assert isinstance(chain[1], NegotiationMiddleware)


def test_fastmcp_server_exposes_the_sdk_chain() -> None:
    from fastmcp import FastMCP

    server = FastMCP("f")
    inner = seams.lowlevel_server(server)
    assert isinstance(inner, Server)
    chain = seams.middleware_list(server)
    assert chain is inner.middleware
    assert callable(getattr(inner, "streamable_http_app", None))
    # FastMCP replaces the SDK's OpenTelemetry middleware with its own span opener: ours
    # goes right behind it, once, and FastMCP's chain keeps its order.
    before = list(chain)
    (opener,) = [m for m in chain if type(m).__name__ == "FastMCPServerMiddleware"]
    negotiate(server)
    negotiate(server)
    assert [type(m) for m in chain if isinstance(m, NegotiationMiddleware)] == [NegotiationMiddleware]
    assert isinstance(chain[chain.index(opener) + 1], NegotiationMiddleware)
    assert [m for m in chain if not isinstance(m, NegotiationMiddleware)] == before


def test_registered_functions_are_an_mcpservers_tools_and_prompts() -> None:
    """`@requires` above `@server.tool()` is found through these (private: the managers)."""
    server = MCPServer("registered")

    @server.tool()
    async def tool() -> str:
        return ""

    @server.prompt()
    def prompt() -> str:
        return ""

    assert seams.registered_functions(server) == [tool, prompt]
    assert seams.registered_functions(Server("lowlevel")) == []
    assert seams.is_sdk_server(server)
    assert seams.is_sdk_server(Server("lowlevel"))
    assert not seams.is_sdk_server(MCPServer)


def test_place_moves_an_item_behind_the_span_opener_and_reports_it() -> None:
    otel = _otel()()
    ours, other = object(), object()
    chain: list[object] = [ours, otel, other]
    assert seams.place(chain, ours)
    assert chain == [otel, ours, other]
    assert not seams.place(chain, ours)  # already there: nothing moves
    empty: list[object] = []
    assert seams.place(empty, ours)
    assert empty == [ours]


def test_place_keeps_a_middleware_the_user_put_between_the_opener_and_ours() -> None:
    otel = _otel()()
    ours, gatekeeper = object(), object()
    chain: list[object] = [otel, gatekeeper, ours]
    assert not seams.place(chain, ours)
    assert chain == [otel, gatekeeper, ours]


async def test_a_gatekeeper_inserted_before_negotiation_still_runs_first() -> None:
    """Auth or rate limiting put ahead of negotiation must not be moved behind it."""
    server = negotiate(MCPServer("gated"))
    chain = seams.middleware_list(server)
    assert chain is not None
    seen: list[bool] = []

    async def gatekeeper(ctx: Any, call_next: Any) -> Any:
        try:
            negotiation_of()
        except NoNegotiation:
            seen.append(False)
        else:
            seen.append(True)
        return await call_next(ctx)

    chain.insert(seams.span_opener_position(chain), gatekeeper)
    order = list(chain)

    @server.tool()
    def echo(x: int) -> int:
        return x

    async with Client(server, mode="legacy") as client:
        await client.call_tool("echo", {"x": 1})
        await client.call_tool("echo", {"x": 2})
    assert chain == order
    assert seen  # it ran, and never after negotiation had published a record
    assert not any(seen)


@pytest.mark.parametrize(("module_name", "imported_by_us"), install.STDIO_SITES)
def test_every_stdio_server_site_exists(module_name: str, imported_by_us: bool) -> None:
    if not imported_by_us:
        importlib.import_module("fastmcp")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, "stdio_server", None)), f"{module_name}.stdio_server is gone"


def test_request_context_has_the_fields_the_middleware_reads() -> None:
    from mcp.server.context import ServerRequestContext

    names = {f.name for f in dataclasses.fields(ServerRequestContext)}
    assert {"method", "params", "meta", "protocol_version", "request_id", "request", "session"} <= names


def test_refusals_carry_code_message_and_data() -> None:
    from mcp.shared.exceptions import MCPError

    error = MCPError(-32021, "m", {"requiredCapabilities": {"sampling": {}}})
    assert (error.error.code, error.error.message, error.error.data) == (
        -32021,
        "m",
        {"requiredCapabilities": {"sampling": {}}},
    )


def test_seams_answer_none_on_a_foreign_context() -> None:
    """The fallback the tests below rule out in real requests."""
    assert seams.connection_state(object()) is None
    assert seams.transport_kind(object()) is None
    assert seams.middleware_list(object()) is None
    assert seams.on_connection_close(object(), lambda: None) is False


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_what_is_pushed_on_a_connections_exit_stack_runs_once_it_closes(kind: str) -> None:
    """`on_connection_close` reaches the SDK's `Connection.exit_stack`, which it unwinds as
    the connection ends: where a legacy session's duration is recorded."""
    closed: list[str] = []
    pushed: list[bool] = []
    server = MCPServer("closing")

    async def pushing(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            pushed.append(seams.on_connection_close(ctx, lambda: closed.append(ctx.method)))
        return await call_next(ctx)

    chain = seams.middleware_list(server)
    assert chain is not None
    chain.append(pushing)
    if kind == "http":
        with serve_http(server.streamable_http_app()) as url:
            async with open_streams("http", url) as streams, legacy_session(streams, "2025-11-25") as pair:
                await pair[0].list_tools()
                assert closed == []  # the session is open
    else:
        async with open_streams("memory", server) as streams, legacy_session(streams, "2025-11-25") as pair:
            await pair[0].list_tools()
            assert closed == []
    assert pushed == [True]
    assert closed == ["initialize"]


COMMON = {"connection": "Connection", "state": "dict"}
EXPECTED: dict[str, dict[str, Any]] = {
    "memory-legacy": {
        "held": True,
        "transport_kind": "jsonrpc",
        "headers": False,
        "on_stdio": False,
        "transport": "memory",
        "record_in_state": True,
        "session_id": False,
    },
    "memory-modern": {
        "held": False,
        "transport_kind": "jsonrpc",
        "headers": False,
        "on_stdio": False,
        "transport": "memory",
    },
    "direct-modern": {
        "held": False,
        "transport_kind": "direct",
        "headers": False,
        "on_stdio": False,
        "transport": "memory",
    },
    "stdio-legacy": {
        "held": True,
        "transport_kind": "jsonrpc",
        "headers": False,
        "on_stdio": True,
        "transport": "stdio",
        "record_in_state": True,
    },
    "stdio-modern": {
        "held": False,
        "transport_kind": "jsonrpc",
        "headers": False,
        "on_stdio": True,
        "transport": "stdio",
    },
    "http-legacy": {
        "held": True,
        "transport_kind": "jsonrpc",
        "headers": True,
        "scope": True,
        "transport": "http",
        "record_in_state": True,
        "session_id": True,
    },
    "http-stateless-legacy": {
        "held": False,
        "transport_kind": "streamable-http",
        "headers": True,
        "scope": True,
        "transport": "http",
        "record_in_state": False,
        "session_id": False,
    },
    "http-modern": {
        "held": False,
        "transport_kind": "streamable-http",
        "headers": True,
        "scope": True,
        "transport": "http",
    },
    "http-stateless-modern": {
        "held": False,
        "transport_kind": "streamable-http",
        "headers": True,
        "scope": True,
        "transport": "http",
    },
}


def _stdio() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "tests/support/servers/seams_server.py")], cwd=str(ROOT)
    )


async def _legacy(streams_kind: str, target: Any) -> dict[str, Any]:
    async with (
        open_streams(streams_kind, target) as streams,
        legacy_session(streams, "2025-11-25", {"sampling": {}}) as (session, _),
    ):
        return structured(await session.call_tool("seams_seen", {}))


async def _modern(target: Any) -> dict[str, Any]:
    async with Client(target, mode="2026-07-28") as client:
        return structured(await client.call_tool("seams_seen", {}))


async def _seen(case: str) -> dict[str, Any]:
    if case == "memory-legacy":
        return await _legacy("memory", seams_server.build())
    if case == "memory-modern":
        return await _modern(InMemoryTransport(seams_server.build()))
    if case == "direct-modern":
        return await _modern(seams_server.build())
    if case == "stdio-legacy":
        return await _legacy("stdio", _stdio())
    if case == "stdio-modern":
        return await _modern(_stdio())
    stateless = case.startswith("http-stateless")
    with serve_http(seams_server.build().streamable_http_app(stateless_http=stateless)) as url:
        return await (_legacy("http", url) if case.endswith("legacy") else _modern(url))


@pytest.mark.parametrize("case", list(EXPECTED))
async def test_seams_resolve_inside_real_requests(case: str) -> None:
    seen = await _seen(case)
    expected = {**COMMON, **EXPECTED[case], "era": case.rsplit("-", 1)[1]}
    assert {key: seen[key] for key in expected} == expected


def test_steering_an_initialize_rewrites_the_params_the_sdk_commits_from() -> None:
    """The SDK answers and commits `initialize` from one params object (see `steer_initialize`);
    `test_e2e_sdk.py::test_counter_offer_is_what_the_sdk_answers_and_records` proves the
    commit, on every SDK of the matrix. Here: what is rewritten, and when nothing is."""

    @dataclasses.dataclass
    class Ctx:
        params: Any

    unknown = Ctx({"protocolVersion": "zzz"})
    assert seams.steer_initialize(unknown, "2025-06-18")
    assert unknown.params["protocolVersion"] == "2025-06-18"
    known = Ctx({"protocolVersion": "2025-06-18"})
    assert seams.steer_initialize(known, "2025-06-18")
    assert known.params == {"protocolVersion": "2025-06-18"}
    frozen = Ctx(types.MappingProxyType({"protocolVersion": "zzz"}))
    assert not seams.steer_initialize(frozen, "2025-06-18")


def test_repeated_header_lines_are_one_list() -> None:
    """`origin` joins a kept header's lines as RFC 9110 does (Starlette's `headers[name]` keeps
    the first), and reads `Mcp-Method` as the SDK does: its first line."""
    from starlette.requests import Request

    from mcp_negotiation.adapters.origin import http_scope, origin

    lines = [
        (b"ucp-agent", b'profile="a"'),
        (b"mcp-method", b"tools/call"),
        (b"ucp-agent", b'profile="b"'),
        (b"mcp-method", b"tools/list"),
        (b"cookie", b"x"),
    ]
    scope = http_scope(Request({"type": "http", "headers": lines}))
    assert scope is not None
    assert origin(scope) == ("http", {"ucp-agent": 'profile="a", profile="b"'}, "tools/call")
    one_line = {"headers": [(b"ucp-agent", b'profile="a"')]}
    assert origin(one_line) == ("http", {"ucp-agent": 'profile="a"'}, None)
    # Another header on several lines changes nothing; any iterable of lines is read.
    twice = [(b"cookie", b"x"), (b"mcp-protocol-version", b"2026-07-28"), (b"cookie", b"y")]
    assert origin({"headers": iter(twice)}) == ("http", {"mcp-protocol-version": "2026-07-28"}, None)
    assert origin(None, http=True) == ("http", {}, None)
    assert http_scope(None) is None


def test_the_sdk_request_context_takes_the_entry_bound_to_it() -> None:
    """`client_supports(ctx)` inside another server's request finds its own entry there."""
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import Context

    from mcp_negotiation.adapters.mcp2.seams import BOUND_ATTRIBUTE, entry_bound_to
    from mcp_negotiation.core.negotiation import Negotiator, Policy

    request = ServerRequestContext(
        session=None, lifespan_context=None, protocol_version="2025-11-25", method="m"
    )  # type: ignore[arg-type]
    negotiator = Negotiator(Policy())
    entry = (negotiator.without_session("2025-11-25", transport="memory"), negotiator)
    setattr(request, BOUND_ATTRIBUTE, entry)  # as the middleware does, per request
    assert entry_bound_to(request) is entry
    assert entry_bound_to(Context(request_context=request)) is entry  # how `ctx` reaches it
