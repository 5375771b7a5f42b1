"""Where a message came from: its transport and the negotiation headers it carried.

Shared by the mcp 2.x middleware and the mcp 1.x adapter, so it imports neither SDK.
The SDK hands handlers nothing that tells stdio from in-memory streams, so the
installers wrap the SDK's `stdio_server` with `stdio_wrapper`, which marks the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final

from ..negotiation import NO_HEADERS, Transport

__all__ = ["NO_HEADERS", "RELEVANT_HEADERS", "on_stdio", "origin", "stdio_wrapper"]

RELEVANT_HEADERS: Final = ("mcp-protocol-version", "ucp-agent")
"""The only request headers copied onto records: never authorization or cookies."""


on_stdio: ContextVar[bool] = ContextVar("mcp_negotiation.on_stdio", default=False)
"""Set while a server runs inside the SDK's `stdio_server`."""


def origin(headers: Any, *, http: bool = False) -> tuple[Transport, Mapping[str, str]]:
    """The transport of a message with these HTTP `headers` (None off HTTP), and the kept ones."""
    if headers is not None and isinstance(headers, Mapping):  # None (off HTTP) skips the ABC check
        kept = {name: _field(headers, name) for name in RELEVANT_HEADERS if name in headers}
        return "http", MappingProxyType(kept) if kept else NO_HEADERS
    if http:
        return "http", NO_HEADERS
    return ("stdio" if on_stdio.get() else "memory"), NO_HEADERS


def _field(headers: Mapping[str, str], name: str) -> str:
    """A header's value, its repeated lines joined with ", " as RFC 9110 combines them.

    Starlette's `headers[name]` is the first line only: a second `UCP-Agent` line would be
    dropped, and a proxy that reads the last line would then disagree with the server. Joined,
    two `profile` members are refused like two in one line.
    """
    getlist = getattr(headers, "getlist", None)
    return ", ".join(getlist(name)) if callable(getlist) else headers[name]


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
