"""A real HTTPS server on 127.0.0.1 serving UCP profiles, with a CA made for the test.

Shared by the resolver tests and the end-to-end UCP tests: TLS, SNI, status handling,
streaming and timeouts are real; nothing leaves the loopback interface.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trustme

DOCUMENT: dict[str, Any] = {
    "ucp": {
        "version": "2026-04-08",
        "capabilities": {"dev.ucp.shopping.checkout": [{"version": "2026-04-08"}]},
    }
}
BODY = json.dumps(DOCUMENT).encode()


@dataclass
class Route:
    status: int = 200
    body: bytes = BODY
    headers: dict[str, str] = field(default_factory=dict)
    declare_length: bool = True
    gate: asyncio.Event | None = None
    """When set, the answer waits for this event (the server "never answers" until then)."""
    next_bodies: list[bytes] = field(default_factory=list)
    """Bodies answered one per request, before `body`: a profile that changes per fetch."""


@dataclass
class Request:
    path: str
    headers: dict[str, str]


class ProfileServer:
    """A minimal HTTPS/1.1 server that records what it was asked and answers from `routes`."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        self.server_names: list[str | None] = []
        self.arrived = asyncio.Event()
        self._context = context
        self._context.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)
        self._gates: list[asyncio.Event] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def gate(self) -> asyncio.Event:
        event = asyncio.Event()
        self._gates.append(event)
        return event

    async def __aenter__(self) -> ProfileServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        for gate in self._gates:
            gate.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.split("\r\n")
            path = request_line.split(" ")[1]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)
            }
            self.requests.append(Request(path, headers))
            self.arrived.set()
            route = self.routes.get(path, Route(404, b""))
            body = route.next_bodies.pop(0) if route.next_bodies else route.body
            if route.gate is not None:
                await route.gate.wait()
            response_headers = {"Connection": "close", **route.headers}
            if route.declare_length:
                response_headers["Content-Length"] = str(len(body))
            head_out = f"HTTP/1.1 {route.status} X\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in response_headers.items()
            )
            writer.write(head_out.encode() + b"\r\n" + body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client hung up, which several tests make it do
        finally:
            writer.close()


@dataclass
class Tls:
    server: ssl.SSLContext
    client: ssl.SSLContext


def make_tls(ca: trustme.CA) -> Tls:
    """Server and client TLS contexts for 127.0.0.1, ::1 and localhost, trusting `ca`."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1", "::1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return Tls(server, client)
