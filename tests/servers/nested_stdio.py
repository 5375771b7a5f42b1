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
async def transports(mode: str, ctx: Context) -> list[str]:
    """This server's transport, then the in-process server's, reached in `mode`."""
    async with Client(inner, mode=mode) as client:
        answer = await client.call_tool("transport", {})
    return [negotiation_of(ctx).transport, str(answer.structured_content["result"])]  # type: ignore[index]


if __name__ == "__main__":
    outer.run("stdio")
