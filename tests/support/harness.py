"""Real transports for end-to-end tests: stdio subprocesses, uvicorn on loopback, memory.

The SDK's client always offers its newest handshake revision, so `legacy_session`
performs the same handshake by hand with a chosen revision and capability map; every
byte still goes through the SDK's own `ClientSession` and transports.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.runner import modern_on_request
from mcp.shared.direct_dispatcher import create_direct_dispatcher_pair

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def stdio_params(script: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(EXAMPLES / script), *args], cwd=str(ROOT))


def demo_params(*args: str) -> StdioServerParameters:
    """The bundled example server as a stdio subprocess."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_negotiation.tools.demo", *args], cwd=str(ROOT)
    )


def run_probe(*args: str) -> subprocess.CompletedProcess[str]:
    """`mcp-negotiation probe ARGS`, run as users run it: a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "mcp_negotiation.tools.cli", "probe", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@contextmanager
def serve_http(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 (ephemeral port); yields the MCP URL.

    The socket is bound and listening before uvicorn starts, so clients may connect at
    once: the kernel queues them until uvicorn accepts. No sleeping, no polling.
    """
    # IPPROTO_TCP lets asyncio switch Nagle off (TCP_NODELAY); without it requests stall.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    if thread.is_alive():  # what a caller does after the server stops may rely on it having stopped
        raise AssertionError("uvicorn did not stop within 30 s")


class RawRequest(types.Request[dict[str, Any], str]):
    """A request whose params go on the wire exactly as given (typed models drop unknown keys)."""

    method: str
    params: dict[str, Any]


def initialize_params(revision: str, capabilities: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "protocolVersion": revision,
        "capabilities": capabilities,
        "clientInfo": {"name": "harness", "version": "1.0"},
        **extra,
    }


def envelope(revision: str = "2026-07-28", caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` a modern request carries: its revision and its client's capabilities."""
    return {
        "io.modelcontextprotocol/protocolVersion": revision,
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }


@asynccontextmanager
async def legacy_session(
    streams: Any, revision: str, capabilities: dict[str, Any] | None = None, **extra: Any
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """A `ClientSession` that completed `initialize` offering `revision` (`extra`: more params)."""
    read, write = streams[0], streams[1]
    async with ClientSession(read, write) as session:
        request = RawRequest(
            method="initialize", params=initialize_params(revision, capabilities or {}, **extra)
        )
        result = await session.send_request(request, types.InitializeResult)
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())
        yield session, result


@asynccontextmanager
async def open_streams(kind: str, target: Any) -> AsyncIterator[Any]:
    """Raw client streams to `target` over `kind` ("memory", "stdio" or "http")."""
    if kind == "memory":
        from mcp.client._memory import InMemoryTransport

        async with InMemoryTransport(target) as streams:
            yield streams
    elif kind == "stdio":
        async with stdio_client(target) as streams:
            yield streams
    else:
        async with streamable_http_client(target) as streams:
            yield streams


Send = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one raw request (method, params) and answers the raw result."""


async def _no_notifications(*args: Any) -> None:
    return None


@asynccontextmanager
async def direct_connection(server: Any) -> AsyncIterator[Send]:
    """Raw modern requests to an MCPServer over the SDK's in-process direct dispatcher.

    Unlike `mcp.Client`, nothing replaces the `_meta` envelope a test sends.
    """
    lowlevel = server._lowlevel_server
    client, peer = create_direct_dispatcher_pair(raise_handler_exceptions=False)
    async with lowlevel.lifespan(lowlevel) as state, anyio.create_task_group() as tg:
        await tg.start(peer.run, modern_on_request(lowlevel, state), _no_notifications)
        await tg.start(client.run, _no_notifications, _no_notifications)

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await client.send_raw_request(method, params)

        yield send
        client.close()
        peer.close()


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@dataclass
class FakeClock:
    """A `negotiation.Clock` set by the test: give it as `Policy(clock=...)`, then move
    `day` and `seconds` on under the running negotiator."""

    day: date
    seconds: float = 1_000.0

    def today(self) -> date:
        return self.day

    def monotonic(self) -> float:
        return self.seconds
