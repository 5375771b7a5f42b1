"""Metrics on mcp 2.x, read back from the SDK's `InMemoryMetricReader` after real traffic.

Every transport and era is an operation of `mcp.server.operation.duration` (refusals too,
those the SDK makes before dispatch among them); a legacy session is one
`mcp.server.session.duration` once its connection closes, and a 2026-07-28 client, or a
stateless POST, none; the negotiation counters count what they name, with values from
bounded sets only. The conventions' own names and levels: `test_semconv.py`.
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from mcp_negotiation import Policy
from mcp_negotiation.otel import metrics as otel_metrics
from mcp_negotiation.tools.demo import build
from support.harness import (
    RawRequest,
    initialize_params,
    legacy_session,
    open_streams,
    serve_http,
    structured,
)
from support.metrics_data import (
    DEGRADED,
    DEPRECATION_HITS,
    NEGOTIATIONS,
    OPERATION,
    SESSION,
    delta,
    snapshot,
)

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MODERN = "2026-07-28"


def _points(moved: Counter[Any]) -> list[tuple[dict[str, Any], int]]:
    return [(dict(labels), count) for labels, count in moved.items()]


async def _one_call(kind: str, server: MCPServer, revision: str) -> None:
    """One `tools/call` over `kind`: memory (legacy streams, or the modern JSON-RPC and
    direct paths), or a uvicorn on loopback (stateful, or stateless)."""
    if kind.startswith("http"):
        app = server.streamable_http_app(stateless_http=kind == "http-stateless")
        with serve_http(app) as url:
            await _call_at(url, revision, "http")
    elif kind == "memory-direct":
        async with Client(server, mode=MODERN) as client:
            structured(await client.call_tool("negotiation", {}))
    else:
        await _call_at(InMemoryTransport(server), revision, "memory")


async def _call_at(where: Any, revision: str, streams_kind: str) -> None:
    if revision == MODERN:
        async with Client(where, mode=MODERN) as client:
            structured(await client.call_tool("negotiation", {}))
        return
    target = where if streams_kind == "http" else where._server  # (InMemoryTransport's server)
    async with open_streams(streams_kind, target) as streams, legacy_session(streams, revision) as pair:
        structured(await pair[0].call_tool("negotiation", {}))


@pytest.mark.parametrize(
    ("kind", "revision", "transport"),
    [
        ("memory", "2025-06-18", "inproc"),
        ("memory", MODERN, "inproc"),
        ("memory-direct", MODERN, "inproc"),
        ("http", "2025-06-18", "tcp"),
        ("http", MODERN, "tcp"),
        ("http-stateless", "2025-11-25", "tcp"),
    ],
)
async def test_every_transport_and_era_is_an_operation(
    reader: InMemoryMetricReader, kind: str, revision: str, transport: str
) -> None:
    before = snapshot(reader)
    await _one_call(kind, build(), revision)
    calls = [
        (labels, count)
        for labels, count in _points(delta(before, snapshot(reader), OPERATION))
        if labels["mcp.method.name"] == "tools/call"
    ]
    expected = {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": revision,
        "network.transport": transport,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "negotiation",
    }
    if transport == "tcp":
        expected.update({"network.protocol.name": "http", "network.protocol.version": "1.1"})
    assert calls == [(expected, 1)]


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_legacy_session_is_timed_until_its_connection_closes(
    reader: InMemoryMetricReader, kind: str
) -> None:
    server = build()
    before = snapshot(reader)
    if kind == "http":
        with serve_http(server.streamable_http_app()) as url:
            await _call_at(url, "2025-06-18", "http")
            await _call_at(url, MODERN, "http")  # a modern client: no session
    else:
        await _call_at(InMemoryTransport(server), "2025-06-18", "memory")
        await _call_at(InMemoryTransport(server), MODERN, "memory")
    sessions = _points(delta(before, snapshot(reader), SESSION))
    expected = {"mcp.protocol.version": "2025-06-18"}
    if kind == "http":
        expected["network.protocol.name"] = "http"
    assert sessions == [(expected, 1)]


async def test_a_stateless_post_is_no_session(reader: InMemoryMetricReader) -> None:
    before = snapshot(reader)
    await _one_call("http-stateless", build(), "2025-11-25")
    assert not delta(before, snapshot(reader), SESSION)


_RAW_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-method": "tools/list",
}


async def _post(url: str, version: str, meta: dict[str, Any]) -> Any:
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers={**_RAW_HEADERS, "mcp-protocol-version": version})


async def test_what_the_sdk_refuses_before_dispatch_is_an_operation(reader: InMemoryMetricReader) -> None:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    before = snapshot(reader)
    with serve_http(build().streamable_http_app()) as url:
        unsupported = await _post(url, "zzz", {**envelope, "io.modelcontextprotocol/protocolVersion": "zzz"})
        malformed = await _post(url, MODERN, {"io.modelcontextprotocol/protocolVersion": MODERN})
    assert unsupported.json()["error"]["code"] == -32022
    assert malformed.json()["error"]["code"] == -32602
    answered = sorted(
        (labels.get("rpc.response.status_code"), labels.get("error.type"), labels["mcp.protocol.version"])
        for labels, _ in _points(delta(before, snapshot(reader), OPERATION))
    )
    # A revision no registry knows is `_OTHER`; a malformed envelope is the caller's mistake.
    assert answered == [("-32022", "-32022", "_OTHER"), ("-32602", None, MODERN)]


async def test_names_a_client_chooses_are_bounded(reader: InMemoryMetricReader) -> None:
    before = snapshot(reader)
    async with Client(InMemoryTransport(build()), mode=MODERN) as client:
        for name in ("negotiation", "no-such-tool", "x" * 200):
            await client.call_tool(name, {})
    named: Counter[str] = Counter()
    for labels, count in _points(delta(before, snapshot(reader), OPERATION)):
        if labels["mcp.method.name"] == "tools/call":
            named[labels["gen_ai.tool.name"]] += count
    assert named == {"negotiation": 1, "_OTHER": 2}  # tools never served are no names to keep
    # However many tools a server serves, at most MAX_NAMES of them are named.
    started = otel_metrics.clock()
    assert started is not None
    for number in range(otel_metrics.MAX_NAMES + 10):
        otel_metrics.operation(started, "tools/call", MODERN, "memory", target=f"tool-{number}")
        otel_metrics.operation(started, f"x/custom-{number}", MODERN, "memory")
    after = snapshot(reader)
    tools = {dict(labels).get("gen_ai.tool.name") for labels in after[OPERATION]}
    assert len(tools - {None, "_OTHER"}) <= otel_metrics.MAX_NAMES
    assert "_OTHER" in tools
    methods = {dict(labels)["mcp.method.name"] for labels in after[OPERATION]}
    assert not any(method.startswith("x/") for method in methods)


async def test_degraded_and_deprecated_features_are_counted_per_negotiation(
    reader: InMemoryMetricReader,
) -> None:
    caps = {"sampling": {}, "roots": {"listChanged": True}}
    before = snapshot(reader)
    for policy in (Policy(), Policy(today=date(2027, 8, 1))):  # the window open, then closed
        server = build(policy)
        async with open_streams("memory", server) as streams, legacy_session(streams, "2024-11-05", caps):
            pass
    after = snapshot(reader)
    degraded = _points(delta(before, after, DEGRADED))
    assert degraded
    assert {labels["mcp.protocol.version"] for labels, _ in degraded} == {"2024-11-05"}
    assert "icons" in {labels["mcp.negotiation.feature"] for labels, _ in degraded}
    hits = sorted(
        (labels["mcp.negotiation.feature"], labels["mcp.negotiation.window"], count)
        for labels, count in _points(delta(before, after, DEPRECATION_HITS))
    )
    assert hits == [
        ("roots", "closed", 1),
        ("roots", "open", 1),
        ("sampling", "closed", 1),
        ("sampling", "open", 1),
    ]


@pytest.mark.parametrize("opted_in", [False, True])
async def test_a_client_is_named_only_where_the_policy_opted_in(
    reader: InMemoryMetricReader, opted_in: bool
) -> None:
    before = snapshot(reader)
    info = types.Implementation(name="named-client", version="1")
    async with Client(InMemoryTransport(build(Policy(record_client_identity=opted_in))), mode=MODERN,
                      client_info=info) as client:  # fmt: skip
        await client.list_tools()
    (negotiation,) = _points(delta(before, snapshot(reader), NEGOTIATIONS))
    assert negotiation[0].get("mcp.negotiation.client.name") == ("named-client" if opted_in else None)


async def test_an_initialize_is_timed_at_the_revision_answered_not_the_sdks_seed(
    reader: InMemoryMetricReader,
) -> None:
    """The SDK serves an `initialize` at its seed (2025-11-25) until it answers: the operation
    records the revision answered, or, refused, the one asked."""
    before = snapshot(reader)
    async with open_streams("memory", build()) as streams, legacy_session(streams, "2025-03-26"):
        pass
    refusing = build(Policy(required_capabilities=("sampling",)))
    async with open_streams("memory", refusing) as streams, ClientSession(streams[0], streams[1]) as session:
        handshake = RawRequest(method="initialize", params=initialize_params("2025-06-18", {}))
        with pytest.raises(MCPError):
            await session.send_request(handshake, types.InitializeResult)
    handshakes = sorted(
        (labels["mcp.protocol.version"], labels.get("error.type"), count)
        for labels, count in _points(delta(before, snapshot(reader), OPERATION))
        if labels["mcp.method.name"] == "initialize"
    )
    assert handshakes == [("2025-03-26", None, 1), ("2025-06-18", "-32021", 1)]
