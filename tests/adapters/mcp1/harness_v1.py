"""Real transports for the mcp 1.x suite: stdio subprocess, uvicorn HTTP and SSE, memory."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp.client.streamable_http as streamable_http
import mcp.types as types
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.memory import create_client_server_memory_streams

HERE = Path(__file__).resolve().parent


def server_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(HERE / "v1_server.py"), *args])


@contextmanager
def serve_http(app: Any, path: str = "/mcp") -> Iterator[str]:
    """uvicorn on 127.0.0.1 with a pre-bound listening socket (no waiting for startup)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@asynccontextmanager
async def streams(kind: str, target: Any) -> AsyncIterator[tuple[Any, Any]]:
    if kind == "stdio":
        async with stdio_client(target) as (read, write):
            yield read, write
    elif kind == "sse":
        async with sse_client(target) as (read, write):
            yield read, write
    elif kind.startswith("http"):
        # Renamed in late 1.x; older releases only have the first spelling.
        connect = (
            getattr(streamable_http, "streamable_http_client", None) or streamable_http.streamablehttp_client
        )
        async with connect(target) as (read, write, _):
            yield read, write
    else:
        async with create_client_server_memory_streams() as (client, server_side):
            import anyio

            async with anyio.create_task_group() as tg:
                lowlevel = target._mcp_server
                tg.start_soon(
                    lambda: lowlevel.run(
                        server_side[0], server_side[1], lowlevel.create_initialization_options()
                    )
                )
                yield client
                tg.cancel_scope.cancel()


@asynccontextmanager
async def session(
    kind: str, target: Any, revision: str, capabilities: dict[str, Any] | None = None
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """A 1.x `ClientSession` that completed `initialize` offering `revision`."""
    async with streams(kind, target) as (read, write), ClientSession(read, write) as client:
        params = types.InitializeRequestParams.model_validate(
            {
                "protocolVersion": revision,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "v1-harness", "version": "1.0"},
            }
        )
        result = await client.send_request(
            types.ClientRequest(types.InitializeRequest(method="initialize", params=params)),
            types.InitializeResult,
        )
        await client.send_notification(
            types.ClientNotification(types.InitializedNotification(method="notifications/initialized"))
        )
        yield client, result


def seen(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    if result.structuredContent is not None:
        return dict(result.structuredContent)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


async def stateless_call(server: Any, protocol_version: str | None) -> dict[str, Any]:
    """The JSON-RPC answer to one raw `tools/call negotiation` POST to `server`'s streamable
    HTTP app, with `protocol_version` as its `MCP-Protocol-Version` header (None: no header)."""
    import httpx

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if protocol_version is not None:
        headers["mcp-protocol-version"] = protocol_version
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}},
    }
    with serve_http(server.streamable_http_app()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(url, json=body, headers=headers)
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    answer: dict[str, Any] = json.loads(data[0] if data else response.text)
    return answer
