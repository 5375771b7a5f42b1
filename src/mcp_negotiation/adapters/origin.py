"""Where a message came from: its transport and the negotiation headers it carried.

Shared by the mcp 2.x middleware and the mcp 1.x adapter, so it imports neither SDK.
Both attach a message's HTTP request as a Starlette `Request`; its headers are read from
the request's ASGI scope (`http_scope`), as the raw lines Starlette itself reads.
The SDK hands handlers nothing that tells stdio from in-memory streams, so the
installers wrap the SDK's `stdio_server` with `stdio_wrapper`, which marks the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, MutableMapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final

from ..core.negotiation import NO_HEADERS, Transport

__all__ = [
    "NO_HEADERS",
    "RELEVANT_HEADERS",
    "http_headers",
    "http_scope",
    "on_stdio",
    "origin",
    "stdio_wrapper",
]

RELEVANT_HEADERS: Final = ("mcp-protocol-version", "ucp-agent")
"""The only request headers copied onto records: never authorization or cookies."""
_KEPT: Final = frozenset(name.encode("latin-1") for name in RELEVANT_HEADERS)
_METHOD: Final = b"mcp-method"


on_stdio: ContextVar[bool] = ContextVar("mcp_negotiation.on_stdio", default=False)
"""Set while a server runs inside the SDK's `stdio_server`."""


def http_scope(request: Any) -> MutableMapping[str, Any] | None:
    """The ASGI scope of a message's HTTP request (Starlette's `Request.scope`), None off HTTP.

    The ASGI layer reads the marks the adapters leave there (`asgi.JUDGED_MARK`).
    """
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, MutableMapping) else None


def http_headers(scope: Mapping[str, Any]) -> tuple[Mapping[str, str], str | None]:
    """From an HTTP request's ASGI `scope`: the negotiation headers a record keeps (text,
    read-only), and the `Mcp-Method` header, which the SDK checked against the body.

    One pass over the scope's raw lines, whose names are lowercase as Starlette (and so the
    SDK) reads them. A kept header's lines are joined with ", " as RFC 9110 combines them:
    Starlette's `headers[name]` is the first line only, so a second `UCP-Agent` line would be
    dropped, and a proxy reading the last one would disagree with the server; joined, two
    `profile` members are refused like two in one line. `Mcp-Method` is its first line, as
    the SDK reads it.
    """
    kept: dict[str, str] = {}
    sent = None
    for name, value in scope.get("headers") or ():
        if name in _KEPT:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            kept[key] = f"{kept[key]}, {text}" if key in kept else text
        elif name == _METHOD and sent is None:
            sent = value.decode("latin-1")
    return (MappingProxyType(kept) if kept else NO_HEADERS), sent


def origin(
    scope: Mapping[str, Any] | None, *, http: bool = False
) -> tuple[Transport, Mapping[str, str], str | None]:
    """The transport of a message whose HTTP request has this ASGI `scope` (`http_scope`; None
    off HTTP, where `http` says the SDK's transport is HTTP all the same), and its headers as
    `http_headers` reads them."""
    if scope is not None:
        return "http", *http_headers(scope)
    if http:
        return "http", NO_HEADERS, None
    return ("stdio" if on_stdio.get() else "memory"), NO_HEADERS, None


@contextlib.asynccontextmanager
async def _marking_stdio(cm: Any) -> AsyncIterator[Any]:
    token = on_stdio.set(True)
    try:
        async with cm as streams:
            yield streams
    finally:
        on_stdio.reset(token)


def stdio_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """A wrapt wrapper for the SDK's `stdio_server`: the same streams, marked as stdio."""
    return _marking_stdio(wrapped(*args, **kwargs))
