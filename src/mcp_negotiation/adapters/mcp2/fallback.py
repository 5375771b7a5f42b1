"""The legacy fallback of a stream connection, for a server whose policy serves no 2026-07-28.

A client of both eras (the SDK's default `Client(...)`) opens a stdio connection with a
`server/discover` probe at 2026-07-28 and, refused, falls back to `initialize` on the same
connection, as the specification has stdio clients do. The SDK's stream driver
(`serve_dual_era_loop`) lets the first request decide the connection's era for good: the
probe, which carries the modern envelope, locks it modern, and the `initialize` that
follows is refused ("connection is serving the 2026-07-28 protocol; the initialize
handshake is not accepted"), so the client cannot connect at all.

`serve_with_fallback` runs that driver on a relay of the connection's messages instead.
When a connection that opened in the modern era sends `initialize`, that era's driver is
ended and a new one is started, which `initialize` opens in the legacy era. Every request
still goes through the SDK and the middleware: the probe is refused with -32022 naming
the revisions the policy serves, and the handshake is answered as on any connection.
Requests of the modern era still in flight at the fallback are cancelled with their
driver, as the SDK cancels them at the end of any connection; a client that falls back
has had its probe answered first.

Installed (by `install.negotiate`) only where the policy serves no modern revision: a
policy that serves one answers the probe, and the client never falls back.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest

from ...core.negotiation import PROTOCOL_VERSION_KEY

__all__ = ["serve_with_fallback"]

Loop = Callable[..., Coroutine[Any, Any, None]]
Frame = tuple[contextvars.Context | None, Any]
"""A message as the relay carries it: the sender's context (see `_Relay`), and the message."""


def _opens_modern(request: JSONRPCRequest) -> bool:
    """Whether the SDK's driver opens a connection in the modern era for this first request:
    not `initialize`, and its `params._meta` has the revision key (the SDK's own test)."""
    meta = request.params.get("_meta") if isinstance(request.params, Mapping) else None
    return request.method != "initialize" and isinstance(meta, Mapping) and PROTOCOL_VERSION_KEY in meta


async def serve_with_fallback(
    loop: Loop, server: Any, read_stream: Any, write_stream: Any, **options: Any
) -> None:
    """Serve one stream connection with the SDK's driver `loop`, as `loop(server, read_stream,
    write_stream, **options)` would, but in the legacy era afresh from an `initialize` sent on
    a connection that opened in the modern era. Owns both streams, as `loop` does."""
    era = functools.partial(loop, server, **options)
    kept = _Kept(write_stream)
    replay: list[Frame] = []
    opened_modern: bool | None = None
    try:
        while True:
            fallback = await _one_era(era, read_stream, kept, replay, opened_modern)
            if fallback is None:
                return
            replay, opened_modern = [fallback], False
    finally:
        await write_stream.aclose()
        await read_stream.aclose()


async def _one_era(
    loop: Callable[[Any, Any], Coroutine[Any, Any, None]],
    read_stream: Any,
    write_stream: _Kept,
    replay: list[Frame],
    opened_modern: bool | None,
) -> Frame | None:
    """Relay the connection to one run of `loop` until the channel closes (None) or a fallback
    `initialize` arrives (returned, for the next run, which it opens in the legacy era)."""
    send, receive = anyio.create_memory_object_stream[Frame]()  # unbuffered, as the SDK's own
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(loop, _Relay(receive), write_stream)
        async with send:
            try:
                for frame in replay:
                    await send.send(frame)
                async for item in read_stream:
                    message = item.message if isinstance(item, SessionMessage) else None
                    if isinstance(message, JSONRPCRequest):
                        if opened_modern is None:
                            opened_modern = _opens_modern(message)
                        elif opened_modern and message.method == "initialize":
                            return getattr(read_stream, "last_context", None), item
                    await send.send((getattr(read_stream, "last_context", None), item))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the channel closed under us, or the driver ended: either is the end
    return None


class _Relay:
    """The receive end of the relay, as the SDK's drivers read a stream: each message, and the
    sender's context it came with as `last_context`, which the SDK's context-aware streams
    (in-memory transports) offer and its dispatcher runs the message's handler in."""

    def __init__(self, inner: ObjectReceiveStream[Frame]) -> None:
        self._inner = inner
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> Any:
        self.last_context, item = await self._inner.receive()
        return item

    def __aiter__(self) -> _Relay:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Relay:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Kept:
    """The connection's write stream as each era's driver gets it: the driver closes it as it
    ends, and the next era writes on; `serve_with_fallback` closes the real one at the end."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any) -> None:
        await self._inner.send(item)

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> _Kept:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None
