"""A FastMCP (mcp 1.x) server, negotiated, reporting what it saw. Used over every transport.

python tests/adapters/mcp1/v1_server.py [--min-revision R] [--require CAP]       stdio
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.fastmcp import Context, FastMCP

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of, requires

FEATURES = ("roots", "roots.listChanged", "sampling", "elicitation", "elicitation.form", "structured_output")


def build(policy: Policy | None = None, *, stateless: bool = False) -> FastMCP:
    server = negotiate(FastMCP("v1", stateless_http=stateless), policy or Policy())

    @server.tool()
    async def negotiation(ctx: Context) -> dict[str, Any]:  # type: ignore[type-arg]
        record = negotiation_of(ctx)
        return {**record.as_dict(), "supports": {name: client_supports(ctx, name) for name in FEATURES}}

    @server.tool()
    @requires("sampling")
    async def summarize(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
        return text[:20]

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-revision")
    parser.add_argument("--require", action="append", default=[])
    args = parser.parse_args()
    build(Policy(min_revision=args.min_revision, required_capabilities=tuple(args.require))).run("stdio")
