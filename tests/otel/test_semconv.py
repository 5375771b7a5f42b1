"""The conventions' MCP metrics, as read at the pinned version, against what is emitted.

`CONVENTIONS` below was transcribed from open-telemetry/semantic-conventions-genai at the
commit `semconv.SEMCONV_VERSION` names (`model/mcp/metrics.yaml` and `common.yaml`; the
buckets from `docs/gen-ai/mcp.md`). Moving the pin fails the first test: read the
conventions again, then move both. The rest holds real metrics, read back from the SDK
after real traffic, to that table: names, units, buckets, which attributes may appear,
which must, and which never do.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from mcp_negotiation import Policy
from mcp_negotiation.otel import semconv
from mcp_negotiation.tools.demo import build
from support.harness import RawRequest, legacy_session, open_streams

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

PINNED = "14567fad6858f82588325657c4bb262fafc885bd"
CONVENTIONS: dict[str, Any] = {
    "mcp.server.operation.duration": {
        "instrument": "histogram",
        "unit": "s",
        "buckets": (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        "required": {"mcp.method.name"},
        "conditionally_required": {
            "error.type",
            "gen_ai.tool.name",
            "gen_ai.prompt.name",
            "rpc.response.status_code",
        },
        "recommended": {
            "gen_ai.operation.name",
            "mcp.protocol.version",
            "network.transport",
            "network.protocol.name",
            "network.protocol.version",
            "jsonrpc.protocol.version",
        },
        "opt_in": {"gen_ai.prompt.variable", "mcp.resource.uri"},
    },
    "mcp.server.session.duration": {
        "instrument": "histogram",
        "unit": "s",
        "buckets": (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        "required": set(),
        "conditionally_required": {"error.type"},
        "recommended": {"mcp.protocol.version", "network.protocol.name", "jsonrpc.protocol.version"},
        "opt_in": set(),
    },
}
NEVER = {"mcp.session.id", "jsonrpc.request.id", "jsonrpc.protocol.version"}
"""Span attributes only, or (JSON-RPC 2.0 always) nothing to say."""


def test_the_pin_is_the_version_this_table_was_read_at() -> None:
    assert semconv.SEMCONV_VERSION == PINNED
    assert semconv.SEMCONV_REPOSITORY == "open-telemetry/semantic-conventions-genai"


@pytest.mark.parametrize(
    ("name", "table"),
    [
        (semconv.OPERATION_DURATION, semconv.OPERATION_ATTRIBUTES),
        (semconv.SESSION_DURATION, semconv.SESSION_ATTRIBUTES),
    ],
)
def test_the_module_states_the_conventions(name: str, table: tuple[semconv.Attribute, ...]) -> None:
    wanted = CONVENTIONS[name]
    assert wanted["unit"] == semconv.UNIT
    assert wanted["buckets"] == semconv.BUCKETS
    for level in ("required", "conditionally_required", "recommended", "opt_in"):
        assert {a.name for a in table if a.level == level} == wanted[level], level


async def _traffic() -> None:
    """Both eras, a session, a tool error, a refusal and a caller's mistake (-32601)."""
    server = build()
    async with open_streams("memory", server) as streams, legacy_session(streams, "2025-06-18", {}) as pair:
        await pair[0].call_tool("negotiation", {})
        await pair[0].call_tool("no-such-tool", {})
        with pytest.raises(MCPError):
            await pair[0].send_request(RawRequest(method="x/nothing", params={}), types.EmptyResult)
    async with Client(InMemoryTransport(server), mode="2026-07-28") as client:
        await client.call_tool("negotiation", {})
    async with Client(build(Policy(max_revision="2025-11-25")), mode="2026-07-28") as client:
        with pytest.raises(MCPError):
            await client.call_tool("negotiation", {})


async def test_what_is_emitted_is_what_the_conventions_say(reader: InMemoryMetricReader) -> None:
    await _traffic()
    data = reader.get_metrics_data()
    metrics = {
        metric.name: metric
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name in CONVENTIONS
    }
    assert set(metrics) == {semconv.OPERATION_DURATION, semconv.SESSION_DURATION}
    seen_errors: set[tuple[str | None, str | None]] = set()
    for name, metric in metrics.items():
        wanted = CONVENTIONS[name]
        assert metric.unit == wanted["unit"]
        allowed = wanted["required"] | wanted["conditionally_required"] | wanted["recommended"]
        for point in metric.data.data_points:
            attributes = dict(point.attributes or {})
            assert tuple(point.explicit_bounds) == wanted["buckets"]
            assert wanted["required"] <= set(attributes), attributes
            assert set(attributes) <= allowed - NEVER, attributes
            if name == semconv.OPERATION_DURATION:
                status = attributes.get("rpc.response.status_code")
                seen_errors.add((status, attributes.get("error.type")))
                if status is not None and int(status) in semconv.NOT_ERRORS:
                    assert "error.type" not in attributes  # a caller's mistake is no failure
                tool_call = attributes["mcp.method.name"] == "tools/call"
                assert ("gen_ai.operation.name" in attributes) is tool_call
                assert ("gen_ai.tool.name" in attributes) is tool_call
    assert ("-32022", "-32022") in seen_errors  # the refusal
    assert ("-32601", None) in seen_errors  # a method no revision has
    assert (None, "tool_error") in seen_errors
    assert (None, None) in seen_errors
