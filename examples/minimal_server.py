"""A server wrapped in one line: `negotiate(...)`. Run: python examples/minimal_server.py"""

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, client_supports, negotiate

server = negotiate(MCPServer("minimal"), Policy(min_revision="2025-06-18"))


@server.tool()
async def greet(name: str, ctx: Context) -> str:
    """Ask for a nicer name when the client can elicit; otherwise use the one given."""
    if client_supports(ctx, "elicitation.form"):
        return f"Hello {name} (I could have asked you for more)"
    return f"Hello {name}"


if __name__ == "__main__":
    server.run("stdio")
