"""Every place the mcp 1.x adapter touches the SDK beyond its public surface, in one file.

mcp 1.x has no middleware seam: its `ServerSession` answers `initialize` itself and its
lowlevel `Server._handle_request` dispatches every request, so those are wrapped (see
`TARGETS`). Each name is looked up by feature and answers None (or a safe default) when a
1.x release lacks it; `tests/adapters/mcp1` fails loudly when one goes missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any, Final

from ...core import revisions

__all__ = [
    "TARGETS",
    "before_handshake",
    "http_request",
    "listing_owner",
    "lowlevel",
    "resolve",
    "sdk_revisions",
    "sdk_version",
    "session_id_sent",
    "with_experimental",
]

TARGETS: Final[Mapping[str, tuple[str, str, bool]]] = {
    "run": ("mcp.server.lowlevel.server", "Server.run", True),
    "initialize": ("mcp.server.session", "ServerSession._received_request", True),
    "request": ("mcp.server.lowlevel.server", "Server._handle_request", True),
    "respond": ("mcp.shared.session", "RequestResponder.respond", True),
    "stdio": ("mcp.server.stdio", "stdio_server", False),
    "fastmcp stdio": ("mcp.server.fastmcp.server", "stdio_server", False),
}
"""What the adapter wraps, by its job: (module, attribute, required).

    run            which negotiated server a session serves
    initialize     negotiate `initialize`, steer a counter-offer, advertise; refuse a
                   modern request before it (-32022), as 2.x would
    request        publish the record for every request
    respond        answer a refusal from a tool as the JSON-RPC error it is (1.x turns
                   tool exceptions into error *results*); a listing as its client reads it
    stdio          records say "stdio" (patched where it is used, not only defined)
"""


def resolve(module_name: str, path: str) -> tuple[Any, str] | None:
    """(the object holding `path`'s last part, that name), or None when this SDK lacks it."""
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent, None)
        if owner is None:
            return None
    return (owner, name) if hasattr(owner, name) else None


def sdk_version() -> str:
    return version("mcp")


def sdk_revisions() -> tuple[str, ...]:
    """The revisions this 1.x release serves (older 1.x releases stop before 2025-11-25)."""
    supported = importlib.import_module("mcp.shared.version").SUPPORTED_PROTOCOL_VERSIONS  # 1.x module
    return tuple(r for r in revisions.LEGACY if r in supported)


def lowlevel(server: Any) -> Any | None:
    """The 1.x lowlevel `Server` of a FastMCP or lowlevel server (private: `_mcp_server`)."""
    from mcp.server.lowlevel.server import Server

    if isinstance(server, Server):
        return server
    inner = getattr(server, "_mcp_server", None)
    return inner if isinstance(inner, Server) else None


def before_handshake(session: Any) -> bool:
    """Whether a `ServerSession` has seen no `initialize` yet (private: `_initialization_state`;
    False where a release lacks it, leaving such requests to the SDK, as before)."""
    return getattr(getattr(session, "_initialization_state", None), "name", None) == "NotInitialized"


def http_request(message: Any) -> Any:
    """The Starlette request 1.x attaches to a message that came over HTTP, else None."""
    metadata = getattr(message, "message_metadata", None)
    return getattr(metadata, "request_context", None)


def session_id_sent(request: Any) -> str | None:
    """The session id a request over stateful HTTP carries: the SDK routed it by this
    header, so it is the server's (None off HTTP, and over SSE, which names it in its URL)."""
    return getattr(request, "headers", {}).get("mcp-session-id") or None


def listing_owner(server: Any) -> Any:
    """The server whose functions a listing names: the one `negotiate` was given, or, for the
    lowlevel server `instrument()` reached inside a FastMCP one, that FastMCP server, found
    as the owner of the bound method its `tools/list` handler calls (private: the closures
    1.x's `Server.list_tools` decorator and `create_call_wrapper` make, and `_tool_manager`)."""
    handlers = getattr(server, "request_handlers", None)
    if hasattr(server, "_tool_manager") or not isinstance(handlers, dict):
        return server
    handler = next((h for kind, h in handlers.items() if kind.__name__ == "ListToolsRequest"), None)
    try:
        for cell in getattr(handler, "__closure__", None) or ():
            for inner in getattr(cell.cell_contents, "__closure__", None) or ():
                owner = getattr(inner.cell_contents, "__self__", None)
                if hasattr(owner, "_tool_manager"):
                    return owner
    except ValueError:  # an empty cell: a closure shaped otherwise
        pass
    return server


def with_experimental(response: Any, add: Any) -> Any:
    """An `initialize` answer (`ServerResult(InitializeResult)`) whose capabilities went through
    `add` (a function amending their wire form in place), or `response` itself for any other."""
    result: Any = getattr(response, "root", None)
    if type(result).__name__ != "InitializeResult":
        return response
    capabilities = result.capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")
    add(capabilities)
    amended = type(result.capabilities).model_validate(capabilities)
    return type(response)(result.model_copy(update={"capabilities": amended}))
