"""Attaching the middleware: `negotiate`, `@negotiated`, `instrument` / `uninstrument`.

The SDK offers a public seam (`middleware`, a list); installing means putting one
`NegotiationMiddleware` into it, right after the SDK's OpenTelemetry middleware. wrapt
is used only to reach servers the user did not hand us: every server constructed while
`instrument()` is active, and the SDK's `stdio_server`, so that records can say
"stdio" (the SDK hands middleware nothing that tells stdio from in-memory streams).

Installation never raises into the user's program: a missing seam is a logged warning
and the server runs unwrapped, unless the policy asked for `strict` mode.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import weakref
from typing import Any, TypeVar

import wrapt
from starlette.applications import Starlette

from ...core import revisions
from ...core.errors import UsageError
from ...core.negotiation import Policy, policy_given
from .. import instrumenting
from ..context import check_requires_order
from ..installing import negotiate_built, unavailable
from ..origin import stdio_wrapper
from . import seams
from .asgi import RefusalRecorder, record_refusals_asgi
from .fallback import serve_with_fallback
from .middleware import NegotiationMiddleware

__all__ = ["instrument", "negotiate", "uninstrument"]

logger = logging.getLogger("mcp_negotiation")

_S = TypeVar("_S")
_INSTRUMENTED: list[tuple[Any, str, Any]] = []
"""(owner, attribute, original) for everything `instrument()` patched, to undo it."""
_DEFAULT_POLICY = instrumenting.ACTIVE


def _installed(chain: list[Any]) -> NegotiationMiddleware | None:
    return next((m for m in chain if isinstance(m, NegotiationMiddleware)), None)


def negotiate(server: _S, policy: Policy | None = None) -> _S:
    """Negotiate every request of `server` under `policy`; returns the same server.

    Accepts an `MCPServer`, a lowlevel `Server`, or a `fastmcp.FastMCP`. Applying it
    again replaces the policy and installs nothing twice. Under a policy that serves no
    2026-07-28 revision, a stdio client that probes at 2026-07-28 first (the SDK's default
    `Client`) falls back to `initialize` and is served (see `fallback`); an SDK that leaves
    no way to do so gets a warning here, with the fix.
    """
    policy = policy_given(policy, "negotiate(server, policy)")
    _require_server(server)
    chain = seams.middleware_list(server)
    if chain is not None:
        check_requires_order(server)
    if chain is None:
        unavailable(
            policy,
            f"{type(server).__name__} has no SDK middleware list; the server runs without negotiation",
        )
        return server
    existing = _installed(chain)
    if existing is not None:
        existing.configure(policy)
    else:
        existing = NegotiationMiddleware(policy, owner=server)
    built = seams.http_session_manager(server)
    if built is not None and built not in _RECORDING:
        logger.warning(
            "negotiate() came after streamable_http_app() built this server's app:"
            " its requests are negotiated, but the refusals the SDK makes there before dispatch"
            " (-32022 for a revision it does not know, -32020) are not traced; call negotiate()"
            " first, or wrap that app with record_refusals_asgi()"
        )
    seams.place(chain, existing)
    _wrap_http_app(server)
    _watch_stdio()
    if not _serves_modern(policy) and not _let_streams_fall_back():
        logger.warning(
            "this Policy serves no 2026-07-28 revision, and this SDK offers no way to serve a stdio"
            " client that falls back from its 2026-07-28 probe: the SDK's default Client(...) fails"
            " to connect over stdio; have clients connect with Client(..., mode='legacy'), or let the"
            " policy serve 2026-07-28 (docs/faq.md)"
        )
    return server


def _serves_modern(policy: Policy) -> bool:
    return any(revisions.era(revision) == "modern" for revision in policy.accepted())


def _let_streams_fall_back() -> bool:
    """Make the SDK's stream driver serve a legacy-only server's clients that fall back from the
    modern probe (see `fallback`); False where the SDK offers no such driver to wrap."""
    site = seams.era_loop_site()
    if site is None:
        return False
    if not isinstance(getattr(site, seams.ERA_LOOP), wrapt.FunctionWrapper):
        wrapt.wrap_function_wrapper(site, seams.ERA_LOOP, _era_loop)
    return True


def _era_loop(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """The SDK's stream driver for one connection, with the legacy fallback when the server's
    policy of the moment serves no modern revision (any other server: the SDK's, untouched)."""
    server = args[0] if args else kwargs.get("server")
    chain = seams.middleware_list(server)
    installed = _installed(chain) if chain is not None else None
    if installed is None or _serves_modern(installed.policy) or len(args) < 3:
        return wrapped(*args, **kwargs)
    return serve_with_fallback(wrapped, *args, **kwargs)


_ACCEPTED = "an MCPServer, a lowlevel mcp.server.lowlevel.Server or a fastmcp.FastMCP"


def _require_server(server: object) -> None:
    """Raise, with the fix, for what is no server at all: left untouched with a warning, it
    would run unnegotiated and fail much later, far from this line. (A server of the SDK's
    whose seam is missing only warns: the SDK changed, not the caller's code.)"""
    if seams.is_sdk_server(server):
        return
    if server is None:
        problem = "not None: does the function that builds the server return it?"
    elif isinstance(server, type):
        problem = f"not the class {server.__name__}: write negotiate({server.__name__}('name'), policy)"
    elif isinstance(server, str):
        problem = f"not the string {server!r:.60}: write negotiate(MCPServer({server!r:.60}), policy)"
    elif isinstance(server, Starlette) or inspect.iscoroutinefunction(type(server).__call__):
        problem = (
            f"not an ASGI app ({type(server).__name__}): call negotiate() on the server before its"
            " streamable_http_app(), or wrap an app you mount with record_refusals_asgi(app, policy)"
        )
    elif inspect.isawaitable(server):
        problem = f"not {type(server).__name__}: await the server first"
    elif inspect.isfunction(server):
        problem = (
            f"not the function {server.__name__}: pass the server it returns, or decorate it"
            " with @negotiated()"
        )
    else:
        problem = f"not {type(server).__name__}"
    raise UsageError(f"negotiate() takes {_ACCEPTED}, {problem}")


_HTTP_APP = "streamable_http_app"


_RECORDING: weakref.WeakSet[Any] = weakref.WeakSet()
"""The session managers of the apps built with a recorder (see `_wrap_http_app`)."""


def _wrap_http_app(server: Any) -> None:
    """Make the server's `streamable_http_app()` record the refusals the SDK makes itself.

    The SDK's app is a Starlette app, and users go on calling `add_middleware` or reading
    `routes` on it: the recorder is added as its middleware, so it stays one. Anything else
    is wrapped in `record_refusals_asgi`. Either records under the server's policy of the
    moment: `negotiate()` applied again changes it, `uninstrument()` ends it.
    """
    owner = seams.http_app_owner(server)
    current = getattr(owner, _HTTP_APP, None)
    if current is None or isinstance(current, wrapt.FunctionWrapper):
        return

    def policy_now() -> Policy | None:
        chain = seams.middleware_list(server)
        installed = _installed(chain) if chain is not None else None
        return installed.policy if installed is not None else None

    def build_app(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        app = wrapped(*args, **kwargs)
        if not isinstance(app, Starlette):
            app = record_refusals_asgi(app, policy_now)
        else:
            try:
                app.add_middleware(RefusalRecorder, policy=policy_now)
            except Exception:  # telemetry only: the app serves without it
                message = "cannot record the SDK's own refusals on this app"
                logger.warning(message, exc_info=True)
                return app
        manager = seams.http_session_manager(server)
        if manager is not None:
            with contextlib.suppress(TypeError):  # one that takes no weak reference: no warning then
                _RECORDING.add(manager)
        return app

    setattr(owner, _HTTP_APP, wrapt.FunctionWrapper(current, build_app))


def _after_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    negotiate_built(negotiate, instance, _DEFAULT_POLICY)
    return result


def _server_classes() -> list[type]:
    classes: list[type] = []
    with contextlib.suppress(ImportError):
        from mcp.server.lowlevel.server import Server

        classes.append(Server)
    return classes


def instrument(policy: Policy | None = None, *servers: Any) -> None:
    """Negotiate every SDK server built from now on (and `servers`, already built).

    High-level servers (MCPServer, FastMCP) build a lowlevel `Server` inside, so
    patching its constructor reaches them all. It cannot reach a server built before
    this call unless that server is passed here (or to `negotiate`): nothing of the SDK's
    lists the servers that exist. A request of such a server has no negotiation, and
    `negotiation_of` raises `NoNegotiation` saying that the server was most likely built
    first. To wrap a program you do not own, call this before the code that builds its
    server runs: `instrument(Policy())`, then the program's own `main()`.
    """
    policy = policy_given(policy, "instrument(policy, *servers)")
    for server in servers:  # a mistake among them leaves nothing instrumented
        _require_server(server)
    if policy.strict:  # one that cannot be negotiated leaves nothing instrumented, none of them
        for server in servers:
            if seams.middleware_list(server) is None:
                negotiate(server, policy)  # raises NegotiationUnavailable, naming it
    for server in servers:
        negotiate(server, policy)
    _DEFAULT_POLICY[:] = [policy]
    if not _INSTRUMENTED:
        for cls in _server_classes():
            original = cls.__dict__["__init__"]
            _INSTRUMENTED.append((cls, "__init__", original))
            wrapt.wrap_function_wrapper(cls, "__init__", _after_init)
        if not _INSTRUMENTED:
            unavailable(policy, "no SDK server class found to instrument")


def uninstrument(*servers: Any) -> None:
    """Stop negotiating new servers, and remove negotiation from `servers`."""
    _DEFAULT_POLICY.clear()
    while _INSTRUMENTED:
        owner, name, original = _INSTRUMENTED.pop()
        setattr(owner, name, original)
    for server in servers:
        chain = seams.middleware_list(server)
        if chain is not None:
            chain[:] = [m for m in chain if not isinstance(m, NegotiationMiddleware)]
        owner = seams.http_app_owner(server)
        if isinstance(vars(owner).get(_HTTP_APP), wrapt.FunctionWrapper):
            delattr(owner, _HTTP_APP)


STDIO_SITES = (
    ("mcp.server.stdio", True),
    ("mcp.server.mcpserver.server", True),
    ("fastmcp.server.low_level", False),
    ("fastmcp.server.mixins.transport", False),
)
"""Modules that hold the SDK's `stdio_server`, patched where used, not only where defined.
FastMCP's are patched only when FastMCP is already imported (never imported for it)."""


def _watch_stdio() -> None:
    import importlib
    import sys

    for module_name, import_it in STDIO_SITES:
        module = sys.modules.get(module_name)
        if module is None and import_it:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
        current = getattr(module, "stdio_server", None)
        if current is None or isinstance(current, wrapt.FunctionWrapper):
            continue
        wrapt.wrap_function_wrapper(module, "stdio_server", stdio_wrapper)
