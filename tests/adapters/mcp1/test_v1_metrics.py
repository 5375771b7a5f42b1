"""mcp 1.x: the conventions' operation and session histograms, and the negotiation counters.

1.x has no middleware and no OpenTelemetry of its own: a request is timed from where the
session receives it until its responder answers, a session from its `initialize` until
the server's run for that connection ends.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import mcp.types as types
import pytest
from harness_v1 import seen, serve_http, session, stateless_call, streams
from mcp.client.session import ClientSession
from mcp.shared.exceptions import McpError
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from v1_server import build

from mcp_negotiation import Policy
from support.metrics_data import NEGOTIATIONS, OPERATION, REFUSALS, SESSION, delta, snapshot

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def reader() -> InMemoryMetricReader:
    """The process's `MeterProvider` (set once; the 1.x suite sets no other)."""
    provider: Any = metrics.get_meter_provider()
    found: InMemoryMetricReader | None = getattr(provider, "_mcp_negotiation_reader", None)
    if found is None:
        if isinstance(provider, MeterProvider):
            pytest.skip("another MeterProvider is installed")
        found = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[found])
        provider._mcp_negotiation_reader = found  # type: ignore[attr-defined]
        metrics.set_meter_provider(provider)
    return found


def _operations(moved: Any) -> dict[tuple[str, str | None], int]:
    """Operations by (method, error.type)."""
    found: dict[tuple[str, str | None], int] = {}
    for labels, count in moved.items():
        key = (dict(labels)["mcp.method.name"], dict(labels).get("error.type"))
        found[key] = found.get(key, 0) + count
    return found


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_session_and_its_requests_are_timed(reader: InMemoryMetricReader, kind: str) -> None:
    server = build(Policy(min_revision="2025-06-18"))
    before = snapshot(reader)
    with serve_http(server.streamable_http_app()) if kind == "http" else nullcontext() as url:
        async with session(kind, url or server, "2025-06-18", {"sampling": {}}) as (client, _):
            assert seen(await client.call_tool("negotiation", {}))["protocol_version"] == "2025-06-18"
            unknown = await client.call_tool("no-such-tool", {})
            assert unknown.isError
    after = snapshot(reader)
    operations = delta(before, after, OPERATION)
    assert _operations(operations) == {
        ("initialize", None): 1,
        ("tools/call", None): 1,
        ("tools/call", "tool_error"): 1,  # 1.x answers an unknown tool with an error result
        ("tools/list", None): 1,  # the 1.x client's, for the tools' output schemas
    }
    for labels in operations:
        attributes = dict(labels)
        assert attributes["mcp.protocol.version"] == "2025-06-18"
        assert attributes["network.transport"] == ("tcp" if kind == "http" else "inproc")
        assert ("network.protocol.name" in attributes) is (kind == "http")
        if attributes["mcp.method.name"] == "tools/call":
            assert attributes["gen_ai.operation.name"] == "execute_tool"
            # A tool never served is no name a metric keeps: a client chose it.
            named = "_OTHER" if "error.type" in attributes else "negotiation"
            assert attributes["gen_ai.tool.name"] == named
    (session_labels,) = delta(before, after, SESSION)
    expected = {"mcp.protocol.version": "2025-06-18"}
    if kind == "http":
        expected["network.protocol.name"] = "http"
    assert dict(session_labels) == expected
    assert sum(delta(before, after, NEGOTIATIONS).values()) == 1


async def test_a_refused_handshake_is_an_operation_with_its_code(reader: InMemoryMetricReader) -> None:
    before = snapshot(reader)
    server = build(Policy(required_capabilities=("sampling",)))
    async with streams("memory", server) as (read, write), ClientSession(read, write) as client:
        info = {"name": "c", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        request = types.InitializeRequest(
            method="initialize", params=types.InitializeRequestParams.model_validate(params)
        )
        with pytest.raises(McpError) as refused:
            await client.send_request(types.ClientRequest(request), types.InitializeResult)
    assert refused.value.error.code == -32021
    after = snapshot(reader)
    operations = delta(before, after, OPERATION)
    assert _operations(operations) == {("initialize", "-32021"): 1}
    # Nothing was agreed: the revision asked for, not the SDK's default.
    assert {dict(labels)["mcp.protocol.version"] for labels in operations} == {"2025-06-18"}
    (refusal,) = delta(before, after, REFUSALS)
    assert dict(refusal)["error.type"] == "-32021"
    assert not delta(before, after, SESSION)  # no session was agreed


async def test_a_stateless_request_is_an_operation_and_no_session(reader: InMemoryMetricReader) -> None:
    before = snapshot(reader)
    answer = await stateless_call(build(stateless=True), "2025-06-18")
    assert "result" in answer
    after = snapshot(reader)
    assert _operations(delta(before, after, OPERATION)) == {("tools/call", None): 1}
    assert not delta(before, after, SESSION)
