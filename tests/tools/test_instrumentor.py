"""The `opentelemetry-instrument` instrumentor in process: servers built while it is on are
negotiated with its policy, and none before or after (through the launcher itself:
`tests/otel/test_telemetry_subprocess.py`)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.matrix


def test_instrumentor_in_process() -> None:
    from mcp.server.mcpserver import MCPServer
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from mcp_negotiation import Policy
    from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
    from mcp_negotiation.tools.instrumentor import McpNegotiationInstrumentor

    def ours(server: MCPServer) -> list[NegotiationMiddleware]:
        return [m for m in server.middleware if isinstance(m, NegotiationMiddleware)]

    instrumentor = McpNegotiationInstrumentor()
    assert tuple(instrumentor.instrumentation_dependencies()) == ("mcp >= 1.22",)  # both majors
    assert get_dependency_conflicts(instrumentor.instrumentation_dependencies()) is None
    assert not ours(MCPServer("before"))
    policy = Policy(min_revision="2025-06-18")
    instrumentor.instrument(policy=policy)
    try:
        assert instrumentor.is_instrumented_by_opentelemetry
        (middleware,) = ours(MCPServer("during"))
        assert middleware.policy is policy
    finally:
        instrumentor.uninstrument()
    assert not instrumentor.is_instrumented_by_opentelemetry
    assert not ours(MCPServer("after"))
    instrumentor.instrument()  # no policy given: the default one
    try:
        (middleware,) = ours(MCPServer("default"))
        assert middleware.policy == Policy()
    finally:
        instrumentor.uninstrument()
