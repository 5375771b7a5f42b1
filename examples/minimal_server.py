"""The smallest negotiated server: one line wraps an existing MCPServer.

Run it over stdio (`python examples/minimal_server.py`) or streamable HTTP
(`python examples/minimal_server.py --http 8000`). The `negotiation` tool reports what
this library decided for the calling client, which is what the probe and the tests read.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of, requires

FEATURES = ("roots", "roots.listChanged", "sampling", "sampling.tools", "elicitation", "elicitation.form",
            "elicitation.url", "tasks", "structured_output")

server = negotiate(MCPServer("minimal"), Policy())


@server.tool()
async def negotiation(ctx: Context) -> dict[str, Any]:
    """What was negotiated with the caller: revision, era, and what the client supports."""
    record = negotiation_of(ctx)
    return {**record.as_dict(), "supports": {name: client_supports(ctx, name) for name in FEATURES}}


@server.tool()
@requires("sampling")
async def summarize(text: str, ctx: Context) -> str:
    """Only for clients that can sample: refused with -32021 otherwise."""
    return text[:20]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("stdio")
