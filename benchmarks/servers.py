"""The servers the benchmarks compare, each with the library and without it, where the unwrapped
twin has an SDK middleware that only calls the next one (the floor of any middleware library).

    python benchmarks/servers.py stdio|http|stateless echo|ucp library|empty

serves over stdio, or prints `port N` and serves streamable HTTP on 127.0.0.1:N (stateful or
stateless) until it is terminated.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, negotiate
from mcp_negotiation.ucp import StaticResolver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from ucp_shop import CHECKOUT, listening_socket
from ucp_shop import build as build_shop

MODERN = "2026-07-28"
VERSION = "2026-04-08"
PLATFORM_URL = "https://platform.example/profile.json"
PLATFORM = {"ucp": {"version": VERSION, "capabilities": {
    CHECKOUT: [{"version": VERSION}],
    "dev.ucp.shopping.fulfillment": [{"version": VERSION, "extends": CHECKOUT}],
    "dev.ucp.shopping.discount": [{"version": VERSION, "extends": [CHECKOUT, "dev.ucp.shopping.cart"]}],
}}}  # fmt: skip
"""The platform's profile, served from memory by a `StaticResolver`: the UCP rows are cached calls."""
AGREED = ("dev.ucp.shopping.checkout", "dev.ucp.shopping.discount", "dev.ucp.shopping.fulfillment")
"""What the example shop and this platform agree on: what the unwrapped twin answers with."""
UCP_HEADER = {"UCP-Agent": f'profile="{PLATFORM_URL}"'}
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "echo": ("echo", {"x": 1}),
    "ucp": ("create_checkout", {"items": ["tea"], "meta": {"ucp-agent": {"profile": PLATFORM_URL}}}),
}
"""What each kind of server is called with: (tool, arguments)."""


async def passthrough(ctx: Any, call_next: Any) -> Any:
    """The empty SDK middleware, in the library's place on the unwrapped twin."""
    return await call_next(ctx)


def build(kind: str, variant: str) -> MCPServer:
    """The `kind` server (`echo`, `ucp`) with the library (`library`) or the empty middleware (`empty`)."""
    library = variant == "library"
    if kind == "ucp" and library:
        server = build_shop(StaticResolver({PLATFORM_URL: PLATFORM}))
    else:
        server = MCPServer(f"bench-{kind}", middleware=[] if library else [passthrough])
        if library:
            server = negotiate(server, Policy())
        if kind == "echo":

            @server.tool()
            async def echo(x: int) -> int:
                """Return x."""
                return x

        else:  # the shop's tool as the example has it, answering the same shape as the library's
            block = {"version": VERSION, "capabilities": {name: [{"version": VERSION}] for name in AGREED}}

            @server.tool()
            async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
                """Open a checkout (with the context the shop's tool takes)."""
                return {"items": items, "status": "incomplete", "extensions": sorted(AGREED), "ucp": block}

    @server.tool()
    async def pid() -> int:
        """The server's process id: where its CPU time is read from outside (`/proc/PID/stat`)."""
        return os.getpid()

    return server


def main(transport: str, kind: str, variant: str) -> None:
    server = build(kind, variant)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(stateless_http=transport == "stateless")
    sock = listening_socket("127.0.0.1", 0)
    print(f"port {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(*sys.argv[1:])
