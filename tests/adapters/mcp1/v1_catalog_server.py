"""A FastMCP (mcp 1.x) server whose tools declare requirements: the catalog suite's server.

python tests/adapters/mcp1/v1_catalog_server.py [--hide]       stdio
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

from mcp_negotiation import Policy, negotiate, requires

HERE = Path(__file__).resolve().parent


def build(*, hide: bool = False, stateless: bool = False, negotiated: bool = True) -> FastMCP:
    server = FastMCP("v1-catalog", stateless_http=stateless)
    if negotiated:
        negotiate(server, Policy(hide_unusable=hide))

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text[:20]

    @server.tool()
    async def echo(text: str) -> str:
        """Open to every client."""
        return text

    @server.prompt()
    @requires("sampling")
    def brief(topic: str) -> str:
        return f"Brief me on {topic}."

    @server.resource("notes://{topic}")
    @requires("elicitation")
    def notes(topic: str) -> str:
        return f"notes on {topic}"

    return server


if __name__ == "__main__":
    build(hide="--hide" in sys.argv[1:]).run("stdio")
