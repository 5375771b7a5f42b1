"""A negotiated server whose `seams` tool reports what every SDK touch point resolved to.

Used by tests/adapters/mcp2/test_seams.py over memory, stdio and streamable HTTP: each value comes
from `mcp_negotiation.adapters.mcp2.seams` inside a real request, so an SDK release that moves a
private name shows up as a wrong value there, not as a silent pass-through.

    python tests/support/servers/seams_server.py            # stdio
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import negotiate, negotiation_of
from mcp_negotiation.adapters import origin
from mcp_negotiation.adapters.mcp2 import seams


def report(ctx: Context) -> dict[str, Any]:
    request_ctx = ctx.request_context
    scope = getattr(getattr(request_ctx, "request", None), "scope", None)
    state = seams.connection_state(request_ctx)
    record = negotiation_of(ctx)
    return {
        "connection": type(seams.connection_of(request_ctx)).__name__,
        "state": type(state).__name__ if state is not None else None,
        "record_in_state": state is not None and state.get(seams.STATE_KEY) is not None,
        "held": seams.held(request_ctx) is not None,
        "transport_kind": seams.transport_kind(request_ctx),
        "headers": isinstance(scope, MutableMapping) and bool(scope.get("headers")),
        "scope": isinstance(scope, MutableMapping),
        "session_id": seams.session_id(request_ctx) is not None,
        "on_stdio": origin.on_stdio.get(),
        "era": record.era,
        "transport": record.transport,
        "protocol_version": record.protocol_version,
    }


def build() -> MCPServer:
    server = negotiate(MCPServer("seams"))

    @server.tool()
    async def seams_seen(ctx: Context) -> dict[str, Any]:
        """What each SDK touch point resolved to inside this request."""
        return report(ctx)

    return server


if __name__ == "__main__":
    build().run("stdio")
