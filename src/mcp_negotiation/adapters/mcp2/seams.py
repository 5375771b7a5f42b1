"""Every place this library touches the SDK beyond its public surface, in one table.

The SDK's middleware API is provisional and its internals move between releases. Each
touch point below is looked up once, feature-checked, and answers `None` (or a safe
default) when the SDK changed under us, so the caller can warn and pass through.
`tests/adapters/mcp2/test_seams.py` fails loudly when any of them goes missing.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Collection, Mapping, MutableMapping
from contextlib import AsyncExitStack
from typing import Any, Final

from ...core.facts import BEFORE_HANDSHAKE

logger = logging.getLogger("mcp_negotiation")

STATE_KEY: Final = "mcp_negotiation.record"
"""Our key in the SDK's per-connection `Connection.state` scratch dict: what the connection
holds (its handshake's `Known`, or the refusal of a refused one)."""
BOUND_ATTRIBUTE: Final = "_mcp_negotiation_entry"
"""Where a request's entry is also left: on the SDK's request context."""

DIRECT_KIND: Final = "direct"
HTTP_KIND: Final = "streamable-http"


def connection_of(ctx: Any) -> Any | None:
    """The SDK `Connection` behind a request context (private: `ServerSession._connection`)."""
    return getattr(getattr(ctx, "session", None), "_connection", None)


def connection_state(ctx: Any) -> MutableMapping[str, Any] | None:
    """The per-connection scratch dict, or None when the SDK no longer offers one."""
    state = getattr(connection_of(ctx), "state", None)
    return state if isinstance(state, MutableMapping) else None


def on_connection_close(ctx: Any, callback: Callable[[], object]) -> bool:
    """Have `callback` run when the request's connection closes; False where the SDK offers
    no way to (then nothing runs).

    The SDK's `Connection.exit_stack` is its public teardown hook ("push cleanup from
    handlers or middleware"), unwound as the connection ends, whatever ends it; only the
    way from a middleware's request context to the `Connection` is private (`connection_of`).
    """
    stack = getattr(connection_of(ctx), "exit_stack", None)
    if not isinstance(stack, AsyncExitStack):
        return False
    stack.callback(callback)
    return True


def held(ctx: Any) -> object:
    """What the connection holds (its handshake's record, under `STATE_KEY`): None
    where nothing is held or the SDK no longer offers per-connection state, and
    `BEFORE_HANDSHAKE` where the SDK has yet to accept one (its public
    `Connection.initialize_accepted`; a release without it: accepted, as before)."""
    connection = connection_of(ctx)
    state = getattr(connection, "state", None)
    value = state.get(STATE_KEY) if type(state) is dict else None
    if value is None and getattr(connection, "initialize_accepted", True) is False:
        return BEFORE_HANDSHAKE
    return value


def session_id(ctx: Any) -> str | None:
    value = getattr(connection_of(ctx), "session_id", None)
    return value if isinstance(value, str) else None


def transport_kind(ctx: Any) -> str | None:
    """The dispatcher's transport label (private: `ServerSession._request_outbound.transport`)."""
    try:
        outbound = ctx.session._request_outbound
        # On the modern path the SDK wraps the dispatch context, and its `transport` property
        # copies the transport (`dataclasses.replace`) on every read; the label is the inner one's.
        kind = getattr(outbound, "_inner", outbound).transport.kind
    except AttributeError:
        return None
    return kind if type(kind) is str else None


def served_for_another(method: str, sent: str | None) -> bool:
    """Whether the SDK runs this modern HTTP request (`method`, under an HTTP request whose
    `Mcp-Method` header is `sent`: `origin.http_headers`) itself, while serving the client's own.

    Before it dispatches a `tools/call` whose arguments `Mcp-Param-*` headers may restate,
    the SDK lists the server's tools through the whole middleware chain, to check them
    (when the server sets no `get_tool_input_schema`, as a lowlevel `Server` does not).
    That listing carries the call's HTTP request, whose `Mcp-Method` header the SDK has
    already checked against the body: a method that differs from it is the SDK's own.
    """
    return sent is not None and sent != method


def sdk_answer_for(requested: Any) -> str:
    """The revision the SDK itself answers to an `initialize` asking for `requested`."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


def steer_initialize(ctx: Any, agreed: str) -> bool:
    """Make the SDK answer, and commit, the revision the policy chose for an `initialize`.

    The SDK builds its `initialize` answer from the params and, after the chain, commits
    the connection's revision by re-reading the *same* params object; its middleware
    documentation says `initialize` is observed but not rewritable, so the adjusted
    context it recommends elsewhere (`replace(ctx, params=...)`) would answer one revision
    and commit another. Rewriting that object in place is the one way to keep them equal
    when the policy counter-offers. False when the params cannot be rewritten.
    """
    params = ctx.params
    requested = params.get("protocolVersion") if isinstance(params, Mapping) else None
    if sdk_answer_for(requested) == agreed:
        return True
    if not isinstance(params, MutableMapping):
        return False
    params["protocolVersion"] = agreed
    return True


def entry_bound_to(ctx: object) -> Any:
    """The entry the middleware left on the request context behind a handler's `ctx` (under
    `BOUND_ATTRIBUTE`; a slotted or frozen context refuses it), or None.

    MCPServer's (and FastMCP's) `Context` is a pydantic model holding the request context
    as a private attribute; its `request_context` property costs microseconds through
    pydantic's `__getattr__`, the private dict (`__pydantic_private__`) a lookup. A
    lowlevel handler's `ctx` is the request context itself.
    """
    private = getattr(ctx, "__pydantic_private__", None)
    if type(private) is dict:
        ctx = private.get("_request_context", ctx)
    return getattr(ctx, BOUND_ATTRIBUTE, None)


def middleware_list(server: Any) -> list[Any] | None:
    """The middleware list of an MCPServer, a lowlevel Server, or a FastMCP server."""
    for candidate in (server, lowlevel_server(server)):
        chain = getattr(candidate, "middleware", None) if candidate is not None else None
        if isinstance(chain, list) and _is_sdk_chain(candidate):
            return chain
    return None


_SERVER_CLASSES: Final = frozenset({("mcp", "Server"), ("mcp", "MCPServer"), ("fastmcp", "FastMCP")})


def is_sdk_server(value: object) -> bool:
    """Whether `value` is a server of the SDK (or FastMCP), whatever it has become inside:
    matched by class name and package, so that FastMCP is never imported for this."""
    return any(
        (cls.__module__.partition(".")[0], cls.__name__) in _SERVER_CLASSES
        for cls in getattr(value.__class__, "__mro__", ())
    )


def _is_sdk_chain(candidate: Any) -> bool:
    try:
        from mcp.server.lowlevel.server import Server
    except ImportError:  # pragma: no cover
        return False
    if isinstance(candidate, Server):
        return True
    return type(candidate).__name__ == "MCPServer" and isinstance(
        getattr(candidate, "_lowlevel_server", None), Server
    )


def lowlevel_server(server: Any) -> Any | None:
    """The SDK lowlevel `Server` behind a high-level server (private attribute names)."""
    for name in ("_lowlevel_server", "_mcp_server"):
        inner = getattr(server, name, None)
        if inner is not None:
            return inner
    return None


def registered_functions(server: Any) -> list[Any]:
    """The functions an MCPServer registered as tools and prompts (private: its managers);
    none for a server without them (a lowlevel `Server` registers handlers, not functions).
    A prompt's is held behind pydantic's `validate_call`, one `__wrapped__` away."""
    found: list[Any] = []
    for manager, lister, layers in (
        ("_tool_manager", "list_tools", 0),
        ("_prompt_manager", "list_prompts", 1),
    ):
        listing = getattr(getattr(server, manager, None), lister, None)
        items = listing() if callable(listing) and not inspect.iscoroutinefunction(listing) else None
        for item in items if isinstance(items, list) else ():
            fn = getattr(item, "fn", None)
            found.append(getattr(fn, "__wrapped__", fn) if layers else fn)
    return found


ERA_LOOP: Final = "serve_dual_era_loop"
"""The SDK's driver of a stream connection (stdio, in-memory streams, SSE), which `Server.run`
calls by this name: the connection's first request decides its era, for good."""
_ERA_LOOP_PARAMETERS: Final = ("server", "read_stream", "write_stream")


def era_loop_site() -> Any | None:
    """The module whose `serve_dual_era_loop` `Server.run` calls, to be patched there (gotcha 6:
    the lowlevel server's module imports it by name), or None when `Server.run` no longer
    calls it by that name or it no longer takes (server, read_stream, write_stream) first."""
    try:
        from mcp.server.lowlevel import server as lowlevel
    except ImportError:  # pragma: no cover - an SDK without the lowlevel server
        return None
    run = getattr(getattr(lowlevel, "Server", None), "run", None)
    loop = getattr(lowlevel, ERA_LOOP, None)
    if not callable(run) or not callable(loop):
        return None
    names = getattr(getattr(inspect.unwrap(run), "__code__", None), "co_names", ())
    loop = inspect.unwrap(loop)
    if ERA_LOOP not in names or not inspect.iscoroutinefunction(loop):
        return None
    parameters = tuple(inspect.signature(loop).parameters)[: len(_ERA_LOOP_PARAMETERS)]
    return lowlevel if parameters == _ERA_LOOP_PARAMETERS else None


def http_app_owner(server: Any) -> Any:
    """The server whose `streamable_http_app()` builds the app: the lowlevel one behind a
    high-level server, else the server itself."""
    return lowlevel_server(server) or server


def http_session_manager(server: Any) -> Any | None:
    """What the server's last `streamable_http_app()` built its app around, None before any
    (private: the lowlevel `Server._session_manager`)."""
    return getattr(http_app_owner(server), "_session_manager", None)


def span_opener_position(chain: list[Any]) -> int:
    """Where our middleware goes: right after the one that opens the request's SERVER span.

    That is the SDK's OpenTelemetry middleware, or FastMCP's `FastMCPServerMiddleware`,
    which removes the SDK's and opens its own. Inside it, our span is the request span's
    child and repeats link from the right span; before it, they would land on whatever
    span the caller had open (with the in-memory transport, the client's own span).
    """
    position = 0
    for index, item in enumerate(chain):
        if _opens_server_span(item):
            position = index + 1
    return position


def _opens_server_span(item: Any) -> bool:
    """Matched by class name: FastMCP is never imported for this, and the SDK's module is
    private (`tests/adapters/mcp2/test_seams.py` fails if either name moves)."""
    kind = type(item)
    return any(
        (cls.__name__, cls.__module__) == ("OpenTelemetryMiddleware", "mcp.server._otel")
        for cls in kind.__mro__
    ) or (kind.__name__ == "FastMCPServerMiddleware" and kind.__module__.startswith("fastmcp."))


def place(chain: list[Any], item: Any) -> bool:
    """Put `item` right after the span opener in `chain`; True when it moved (or arrived).

    An item already inside the span, anywhere after the opener, stays where it is: a
    middleware the user put between the two (auth, rate limits) meant to run first.
    """
    present = [index for index, candidate in enumerate(chain) if candidate is item]
    rest = [candidate for candidate in chain if candidate is not item]
    wanted = span_opener_position(rest)
    if len(present) == 1 and present[0] >= wanted:
        return False
    chain[:] = rest
    chain.insert(wanted, item)
    return True


_LISTERS: Final = {
    "tools/list": ("_tool_manager", "list_tools", "list_tools", "name"),
    "prompts/list": ("_prompt_manager", "list_prompts", "list_prompts", "name"),
    "resources/templates/list": (
        "_resource_manager",
        "list_templates",
        "list_resource_templates",
        "uri_template",
    ),
}
"""Per listing: the MCPServer (and mcp 1.x FastMCP) manager and its lister, the FastMCP 4
server's own lister, and the attribute an item's listed key is read from."""


def catalog_server(server: Any) -> Any | None:
    """The server holding the functions behind its listed entries: `server` itself when it is
    an MCPServer or a FastMCP one, else the high-level server whose bound method a lowlevel
    server (one `instrument()` reached from inside its constructor) lists tools with."""
    if hasattr(server, "_tool_manager") or hasattr(server, "_local_provider"):
        return server
    lookup = getattr(server, "get_request_handler", None)
    entry = lookup("tools/list") if callable(lookup) else None
    owner = getattr(getattr(entry, "handler", None), "__self__", None)
    return owner if owner is not None and owner is not server and is_sdk_server(owner) else None


async def listed_functions(server: Any, method: str) -> dict[str, Any]:
    """The function behind each entry `server` lists for `method`, by the entry's listed key
    (private: the MCPServer managers; FastMCP 4's public async listers)."""
    manager_name, manager_lister, server_lister, key = _LISTERS[method]
    manager = getattr(server, manager_name, None)
    items: Any = ()
    if manager is not None:
        items = getattr(manager, manager_lister)()
    else:
        lister = getattr(server, server_lister, None)
        if inspect.iscoroutinefunction(lister):
            items = await lister()
    return {str(getattr(item, key, "")): getattr(item, "fn", None) for item in items}


def registered_tool(server: Any, name: str) -> Any | None:
    """The function `server` registered as the tool `name`, read without awaiting: from an
    MCPServer's (and mcp 1.x FastMCP's) tool manager (`_tool_manager.get_tool`), or a FastMCP 4
    server's own provider (private: `_local_provider._components`, keyed `tool:NAME@` for an
    unversioned tool). None for any other name, and for tools FastMCP 4 serves from elsewhere
    (mounted servers, proxies, versions, transforms), whose gating is left to the call itself."""
    manager = getattr(server, "_tool_manager", None)
    if manager is not None:
        return getattr(manager.get_tool(name), "fn", None)
    components = getattr(getattr(server, "_local_provider", None), "_components", None)
    if type(components) is dict:
        return getattr(components.get(f"tool:{name}@"), "fn", None)
    return None


def registered_tools(server: Any) -> list[tuple[str, Any]]:
    """Every (name, function) `server` registered as a tool, as `registered_tool` reads them."""
    manager = getattr(server, "_tool_manager", None)
    if manager is not None:
        return [(str(getattr(tool, "name", "")), getattr(tool, "fn", None)) for tool in manager.list_tools()]
    components = getattr(getattr(server, "_local_provider", None), "_components", None)
    if type(components) is not dict:
        return []
    return [
        (str(getattr(component, "name", "")), getattr(component, "fn", None))
        for key, component in components.items()
        if isinstance(key, str) and key.startswith("tool:") and key.endswith("@")
    ]


async def tool_entries(server: Any, keys: Collection[str]) -> dict[str, Any]:
    """The wire form of the tools `keys` names, as a paging FastMCP 4 server
    (`list_page_size`) lists them on other pages than the one being answered (public:
    FastMCP 4's `get_tool` and `Tool.to_mcp_tool`). Empty for any other server: one that
    does not page has every entry on the page."""
    found: dict[str, Any] = {}
    getter = getattr(server, "get_tool", None)
    if not hasattr(server, "_local_provider") or not inspect.iscoroutinefunction(getter):
        return found
    for key in keys:
        tool = await getter(key)
        if tool is not None:
            found[key] = tool.to_mcp_tool().model_dump(by_alias=True, mode="json", exclude_none=True)
    return found
