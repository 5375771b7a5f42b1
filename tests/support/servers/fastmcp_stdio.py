"""A FastMCP 4.x server over stdio, negotiated, reporting what it saw (for tests)."""

from typing import Any

from fastmcp import Context, FastMCP

from mcp_negotiation import Policy, negotiate, negotiation_of

server = negotiate(FastMCP("fm-stdio"), Policy())


@server.tool()
async def seen(ctx: Context) -> dict[str, Any]:
    return negotiation_of(ctx).as_dict()


if __name__ == "__main__":
    server.run("stdio", show_banner=False)
