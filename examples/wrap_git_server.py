"""The reference git server, negotiated, with one tool of ours that asks `client_supports`.

    python examples/wrap_git_server.py [REPOSITORY]            # stdio
    python examples/wrap_git_server.py [REPOSITORY] --http 8000  # streamable HTTP on 127.0.0.1

`mcp_server_git.server.create_server` builds the server its own `main()` serves;
`negotiate` puts a negotiation on every request of it, and `client_can` tells the
caller what it can be asked for (what the server's tools would check before asking).
"""

import argparse
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_server_git.server import create_server

from mcp_negotiation import Policy, client_supports, negotiate


def build(repository: Path | None = None) -> MCPServer:
    server = negotiate(create_server(repository), Policy())

    @server.tool()
    async def client_can(feature: str, ctx: Context) -> bool:
        """Whether this client can be asked for `feature` now: "elicitation", "sampling", ..."""
        return client_supports(ctx, feature)

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("repository", type=Path, nargs="?")
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    if args.http:
        build(args.repository).run("streamable-http", port=args.http)
    else:
        build(args.repository).run()
