"""An mcp 1.x FastMCP server, negotiated the same way (needs mcp 1.x installed)."""

from mcp.server.fastmcp import Context, FastMCP

from mcp_negotiation import Policy, client_supports, negotiate

server = negotiate(FastMCP("shop"), Policy(min_revision="2025-06-18"))


@server.tool()
async def greet(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Mention elicitation only to clients that declared it and speak a revision with it."""
    if client_supports(ctx, "elicitation"):
        return f"Hello {name} (I could ask you for more)"
    return f"Hello {name}"


if __name__ == "__main__":
    server.run("stdio")
