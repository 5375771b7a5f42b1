"""A FastMCP (mcp 1.x) server with per-client rules and the MCP Apps extension declared:
the mcp 1.x overrides suite's server.

python tests/adapters/mcp1/v1_overrides_server.py       stdio
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import Context, FastMCP

from mcp_negotiation import (
    ClientOverride,
    Policy,
    client_supports,
    negotiate,
    negotiation_of,
    requires,
    requires_extension,
)

APPS = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
POLICY = Policy(
    client_overrides=[
        ClientOverride("v1-harness", versions="<2", revoke=["sampling"], id="harness-no-sampling"),
        ClientOverride("v1-*", grant=["client.renders_resource_links"], id="v1-links"),
    ],
    extensions={APPS: {}},
)


def build(*, stateless: bool = False) -> FastMCP:
    server = FastMCP("v1-overrides", stateless_http=stateless)
    negotiate(server, POLICY)

    @server.tool()
    async def answers(ctx: Context) -> dict[str, Any]:  # type: ignore[type-arg]
        record = negotiation_of(ctx)
        return {
            "sampling": client_supports(ctx, "sampling"),
            "links": client_supports(ctx, "client.renders_resource_links"),
            "apps": client_supports(ctx, APPS, mimeTypes=[APP_MIME]),
            "overrides": dict(record.overrides),
            "extensions": {name: agreed.identifier for name, agreed in record.extensions.items()},
        }

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text

    @server.tool()
    @requires_extension(APPS, mimeTypes=[APP_MIME])
    async def dashboard() -> str:
        return "dashboard"

    return server


if __name__ == "__main__":
    build().run("stdio")
