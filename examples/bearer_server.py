"""A negotiated server behind a bearer token, as a deployed one often is; probe it with `--header`.

    MCP_TOKEN=s3cret python examples/bearer_server.py --http 8000
    mcp-negotiation probe --header "Authorization: Bearer s3cret" http://127.0.0.1:8000/mcp

A Starlette middleware answers every request without `Authorization: Bearer <MCP_TOKEN>`
with HTTP 401 (and `WWW-Authenticate: Bearer`) before the MCP app sees it, as an API
gateway would. Without `--header` the probe cannot read it and says so (exit status 2).
"""

import argparse
import hmac
import os

from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_negotiation import Policy, client_supports, negotiate


class RequireBearer:
    """Lets through only requests that carry `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                refused = PlainTextResponse("log in first", 401, {"WWW-Authenticate": "Bearer"})
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build(token: str) -> Starlette:
    server = negotiate(MCPServer("behind-a-token"), Policy())

    @server.tool()
    async def can_elicit(ctx: Context) -> bool:
        """Whether this client could be asked a question."""
        return client_supports(ctx, "elicitation")

    app = server.streamable_http_app()
    app.add_middleware(RequireBearer, token=token)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT", required=True)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(build(os.environ["MCP_TOKEN"]), host="127.0.0.1", port=args.http, log_level="warning")
