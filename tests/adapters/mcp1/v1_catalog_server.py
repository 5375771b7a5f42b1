"""A FastMCP (mcp 1.x) server whose tools declare requirements: the catalog suite's server.

python tests/adapters/mcp1/v1_catalog_server.py [--hide] [--variants]       stdio

With `variants`, `summarize` has a fallback for sessions that cannot sample,
`summarize_locally` (`@variant_of`), with an input schema of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

from mcp_negotiation import Policy, negotiate, requires, variant_of

HERE = Path(__file__).resolve().parent


def build(
    *, hide: bool = False, stateless: bool = False, negotiated: bool = True, variants: bool = False
) -> FastMCP:
    server = FastMCP("v1-catalog", stateless_http=stateless)
    if negotiated:
        negotiate(server, Policy(hide_unusable=hide))

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text[:20]

    if variants:

        @server.tool()
        @variant_of("summarize")
        async def summarize_locally(text: str, words: int = 3) -> str:
            return " ".join(text.split()[:words])

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
    build(hide="--hide" in sys.argv[1:], variants="--variants" in sys.argv[1:]).run("stdio")
