"""A stdio server whose tool runs another negotiated server in process (for the tests)."""

from __future__ import annotations

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import negotiate, negotiation_of

outer = negotiate(MCPServer("outer"))
inner = negotiate(MCPServer("inner"))


@inner.tool()
async def transport(ctx: Context) -> str:
    return negotiation_of(ctx).transport


@outer.tool()
async def transport_here(ctx: Context) -> str:
    return negotiation_of(ctx).transport


@outer.tool()
async def own_transports(ctx: Context) -> list[str]:
    """This server's transport, then its own again, reached in process (2026-07-28): a
    client of both with the SDK's default envelope sends the same one twice."""
    async with Client(outer, mode="2026-07-28") as client:
        answer = await client.call_tool("transport_here", {})
    return [negotiation_of(ctx).transport, str(answer.structured_content["result"])]  # type: ignore[index]


@outer.tool()
async def transports(mode: str, ctx: Context) -> list[str]:
    """This server's transport, then the in-process server's, reached in `mode`."""
    async with Client(inner, mode=mode) as client:
        answer = await client.call_tool("transport", {})
    return [negotiation_of(ctx).transport, str(answer.structured_content["result"])]  # type: ignore[index]


if __name__ == "__main__":
    outer.run("stdio")
