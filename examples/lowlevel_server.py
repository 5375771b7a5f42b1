"""A lowlevel `Server`: handlers written by hand, negotiated like any other server.

    python examples/lowlevel_server.py                 # stdio
    python examples/lowlevel_server.py --http 8000     # streamable HTTP on 127.0.0.1:8000

`negotiate(...)` takes the SDK's `mcp.server.lowlevel.Server` as it takes an `MCPServer`.
The handlers receive a `ServerRequestContext`, and `client_supports(ctx, ...)` answers
from it as from an `MCPServer` `Context`: in both eras, for this request's client.
"""

import argparse

import anyio
import mcp.server.stdio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of

ASK = types.Tool(
    name="what_can_i_ask",
    description="Which questions this server may put to the client: sampling, elicitation.",
    input_schema={"type": "object", "properties": {}},
)


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ASK])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != ASK.name:
        unknown = types.TextContent(type="text", text=f"Unknown tool: {params.name}")
        return types.CallToolResult(content=[unknown], is_error=True)
    record = negotiation_of(ctx)
    answer = {
        "revision": record.protocol_version,
        "transport": record.transport,
        "sampling": client_supports(ctx, "sampling"),
        "elicitation": client_supports(ctx, "elicitation"),
    }
    text = ", ".join(f"{key}: {value}" for key, value in answer.items())
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=answer
    )


server = negotiate(Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool), Policy())


async def serve_stdio() -> None:
    # Looked up at run time, not imported by name: `negotiate` wraps it so records say "stdio".
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    if args.http:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")
    else:
        anyio.run(serve_stdio)
