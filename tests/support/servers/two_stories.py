"""A lowlevel server (mcp 2.x, stdio) whose versions tell two stories, for the probe's tests.

Its `server/discover` advertises 2025-06-18 and 2026-07-28 only; its `initialize` agrees
to every legacy revision but 2024-11-05, which it refuses with a -32022 whose
`data.supported` names 2025-03-26 to 2026-07-28. So the -32022 and `initialize` say
2025-03-26 and 2025-11-25 are served, and `server/discover`, which names a legacy
revision and so speaks of them, says they are not.

--requested REVISION   the -32022 names REVISION as the one requested, not 2024-11-05
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp.server.stdio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext
from mcp.shared.exceptions import MCPError

ADVERTISED = ["2025-06-18", "2026-07-28"]
SUPPORTED = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
REFUSED = "2024-11-05"


def build(requested: str = REFUSED) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    server: Server[Any] = Server("two-stories", on_list_tools=list_tools)

    async def discover(ctx: ServerRequestContext[Any], params: types.RequestParams) -> types.DiscoverResult:
        capabilities = server.get_capabilities(protocol_version=ctx.protocol_version)
        return types.DiscoverResult(supported_versions=ADVERTISED, capabilities=capabilities)

    async def refuse_the_oldest(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
        if ctx.method == "initialize" and (ctx.params or {}).get("protocolVersion") == REFUSED:
            data = {"supported": SUPPORTED, "requested": requested}
            raise MCPError(-32022, f"Unsupported protocol version: {REFUSED}", data=data)
        return await call_next(ctx)

    server.add_request_handler("server/discover", types.RequestParams, discover)
    server.middleware.append(refuse_the_oldest)
    return server


async def serve(server: Server[Any]) -> None:
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requested", default=REFUSED)
    anyio.run(serve, build(parser.parse_args().requested))
