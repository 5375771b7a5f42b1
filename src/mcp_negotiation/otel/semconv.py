"""The OpenTelemetry semantic conventions for MCP this library follows, pinned to one version.

The MCP conventions are in Development: names, attributes and bucket boundaries may still
change. They live in the GenAI conventions repository, which has no release yet, so the
version followed is a commit of its model (`SEMCONV_VERSION`). Everything this library emits
under a convention's name is taken from the tables below, and
`tests/otel/test_semconv.py` holds them against the conventions as read at that commit:
moving the pin means reading the conventions again and changing the test with it.

What is deliberately not recorded, though the conventions allow it: the opt-in attributes
(`mcp.resource.uri`, `gen_ai.prompt.variable`: client data of unbounded cardinality) and
`jsonrpc.protocol.version` (set only when it is not `2.0`, which it always is here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "BUCKETS",
    "METHODS",
    "NOT_ERRORS",
    "OPERATION_ATTRIBUTES",
    "OPERATION_DURATION",
    "OTHER",
    "SEMCONV_REPOSITORY",
    "SEMCONV_VERSION",
    "SESSION_ATTRIBUTES",
    "SESSION_DURATION",
    "TOOL_ERROR",
    "UNIT",
    "Attribute",
]

SEMCONV_REPOSITORY: Final = "open-telemetry/semantic-conventions-genai"
SEMCONV_VERSION: Final = "14567fad6858f82588325657c4bb262fafc885bd"
"""The commit of `model/mcp/metrics.yaml` in `SEMCONV_REPOSITORY` whose metrics this library
emits (the newest model read: it removed transport attributes from the session metric).
The bucket boundaries are the prose of `docs/gen-ai/mcp.md`, which the model does not carry."""

OPERATION_DURATION: Final = "mcp.server.operation.duration"
SESSION_DURATION: Final = "mcp.server.session.duration"
UNIT: Final = "s"
BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The explicit bucket boundaries (seconds) the conventions advise for both histograms."""

OTHER: Final = "_OTHER"
"""The conventions' value for "none of the values this instrumentation names": what a
bounded attribute records in place of a value outside its set (a method no revision has,
a tool name never served, a revision no registry knows)."""
TOOL_ERROR: Final = "tool_error"
"""`error.type` of a `tools/call` answered with `isError: true`."""

NOT_ERRORS: Final = frozenset({-32700, -32600, -32601, -32602, -32002})
"""JSON-RPC codes a server answers a caller's mistake with: recorded as
`rpc.response.status_code`, but "SHOULD NOT be considered errors", so no `error.type`."""

METHODS: Final = frozenset(
    {
        # The registry's `mcp.method.name` members a server receives ...
        "completion/complete",
        "initialize",
        "logging/setLevel",
        "notifications/cancelled",
        "notifications/initialized",
        "notifications/progress",
        "notifications/roots/list_changed",
        "ping",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/subscribe",
        "resources/templates/list",
        "resources/unsubscribe",
        "server/discover",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
        # ... and the 2025-11-25 task methods, which it does not list yet.
        "tasks/cancel",
        "tasks/get",
        "tasks/list",
        "tasks/result",
    }
)
"""The `mcp.method.name` values a metric records; any other method a client sends is `OTHER`."""

Level = Literal["required", "conditionally_required", "recommended", "opt_in"]


@dataclass(frozen=True)
class Attribute:
    """One attribute of a metric and its requirement level (`when`: the level's condition)."""

    name: str
    level: Level
    when: str = ""


OPERATION_ATTRIBUTES: Final = (
    Attribute("mcp.method.name", "required"),
    Attribute("error.type", "conditionally_required", "If and only if the operation fails."),
    Attribute("gen_ai.tool.name", "conditionally_required", "When operation is related to a specific tool."),
    Attribute(
        "gen_ai.prompt.name", "conditionally_required", "When operation is related to a specific prompt."
    ),
    Attribute("rpc.response.status_code", "conditionally_required", "If response contains an error code."),
    Attribute("gen_ai.operation.name", "recommended", "`execute_tool` for a tool call, else not set."),
    Attribute("mcp.protocol.version", "recommended"),
    Attribute("network.transport", "recommended"),
    Attribute("network.protocol.name", "recommended", "When applicable."),
    Attribute("network.protocol.version", "recommended", "When applicable."),
    Attribute("jsonrpc.protocol.version", "recommended", "When it's not `2.0`."),
    Attribute("gen_ai.prompt.variable", "opt_in"),
    Attribute("mcp.resource.uri", "opt_in"),
)
"""`mcp.server.operation.duration`'s attributes (`mcp.session.id` is a span attribute only)."""

SESSION_ATTRIBUTES: Final = (
    Attribute("mcp.protocol.version", "recommended"),
    Attribute("network.protocol.name", "recommended", "When applicable."),
    Attribute("jsonrpc.protocol.version", "recommended", "When it's not `2.0`."),
    Attribute("error.type", "conditionally_required", "If and only if session ends with an error."),
)
"""`mcp.server.session.duration`'s attributes."""
