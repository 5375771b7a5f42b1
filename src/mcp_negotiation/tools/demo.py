"""The bundled example server: what `mcp-negotiation probe` probes when given no target.

Run it over stdio:          python -m mcp_negotiation.tools.demo
or streamable HTTP:         python -m mcp_negotiation.tools.demo --http 8000
with a stricter policy:     python -m mcp_negotiation.tools.demo --min-revision 2025-06-18

The `negotiation` tool reports what this library decided for the calling client; the
probe and the tests read it. `summarize` needs a client that can sample.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of, requires

FEATURES = (
    "roots",
    "roots.listChanged",
    "sampling",
    "sampling.tools",
    "elicitation",
    "elicitation.form",
    "elicitation.url",
    "tasks",
    "structured_output",
)


def build(policy: Policy | None = None) -> MCPServer:
    server = negotiate(MCPServer("minimal"), policy or Policy())

    @server.tool()
    async def negotiation(ctx: Context) -> dict[str, Any]:
        """What was negotiated with the caller: revision, era, and what the client supports."""
        record = negotiation_of(ctx)
        return {
            **record.as_dict(),
            "supports": {name: client_supports(ctx, name) for name in FEATURES},
            "sdk_protocol_version": ctx.protocol_version,
        }

    @server.tool()
    @requires("sampling")
    async def summarize(text: str, ctx: Context) -> str:
        """Only for clients that can sample: refused with -32021 otherwise."""
        return text[:20]

    return server


server = build()


def main() -> None:
    global server
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--stateless", action="store_true", help="stateless streamable HTTP")
    parser.add_argument("--min-revision")
    parser.add_argument("--max-revision")
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="CAPABILITY",
        help="a capability every client must declare",
    )
    args = parser.parse_args()
    if args.min_revision or args.max_revision or args.require:
        server = build(
            Policy(
                min_revision=args.min_revision,
                max_revision=args.max_revision,
                required_capabilities=tuple(args.require),
            )
        )
    if args.http:
        import uvicorn

        app = server.streamable_http_app(stateless_http=args.stateless)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
