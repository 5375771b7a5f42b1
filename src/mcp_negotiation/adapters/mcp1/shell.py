"""mcp 1.x: the same negotiation, reached through wrapt, since 1.x has no middleware seam.

mcp 1.x speaks the legacy revisions only (up to 2025-11-25). Its `ServerSession`
answers `initialize` itself and its lowlevel `Server._handle_request` dispatches every
request, so those are where the negotiation is attached. Every target is in one table,
checked at install time: a missing one is a logged warning naming it and the server is
left untouched (strict mode raises). Nothing here changes behaviour for servers that
were not passed to `negotiate` (or built while `instrument` was active).

    target                                   why
    Server.run                               which negotiated server a session serves
    ServerSession._received_request          negotiate `initialize`, steer a counter-offer
    Server._handle_request                   publish the record for every request
    RequestResponder.respond                 answer a refusal from a tool as the JSON-RPC
                                             error it is (1.x turns tool exceptions into
                                             error *results*); a listing as its client
                                             reads it (`catalog`)
    stdio_server (where it is used)          records say "stdio"
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

import wrapt

from ...core import revisions
from ...core.client_log import report
from ...core.engine import Decision, Engine, Inbound
from ...core.errors import NegotiationUnavailable, Refusal
from ...core.listings import LISTINGS
from ...core.negotiation import Negotiation, Negotiator, Policy, policy_given
from ...otel import metrics as operations
from ...otel import spans as telemetry
from ...otel.semconv import TOOL_ERROR
from .. import listings as catalog
from ..compat import PENDING_REFUSALS, error_data
from ..context import current
from ..origin import http_scope, origin, stdio_wrapper

__all__ = ["V1Negotiation", "instrument", "negotiate", "uninstrument"]

logger = logging.getLogger("mcp_negotiation")

_S = TypeVar("_S")


@dataclass
class V1Negotiation:
    """What `negotiate` attached to one mcp 1.x lowlevel server."""

    policy: Policy
    engine: Engine
    owner: Any = None
    """A weak reference to the server `negotiate` was given (whose functions listings name)."""

    @classmethod
    def of(cls, policy: Policy, server: Any = None) -> V1Negotiation:
        owner = weakref.ref(server) if server is not None else None
        return cls(policy, Engine(policy, Negotiator(_within_sdk(policy))), owner)


def sdk_revisions() -> tuple[str, ...]:
    """The revisions this 1.x release can serve (older 1.x releases stop before 2025-11-25)."""
    supported = importlib.import_module("mcp.shared.version").SUPPORTED_PROTOCOL_VERSIONS  # 1.x module
    return tuple(r for r in revisions.LEGACY if r in supported)


def _within_sdk(policy: Policy) -> Policy:
    """The policy, capped at the newest revision this SDK serves: never counter-offer beyond it."""
    newest = sdk_revisions()[-1]
    if policy.max_revision is not None and not revisions.is_at_least(policy.max_revision, newest):
        return policy
    oldest = policy.accepted()[0]  # the requirements may narrow the policy past `min_revision`
    if not revisions.is_at_least(newest, oldest):
        what = (
            f"min_revision {oldest} is"
            if oldest == policy.min_revision
            else f"every revision its required_capabilities allow ({', '.join(policy.accepted())}) is"
        )
        raise ValueError(
            f"{what} newer than every revision mcp {_sdk_version()} "
            f"serves (the newest is {newest}); no client could be served"
        )
    return replace(policy, max_revision=newest)


_servers: weakref.WeakKeyDictionary[Any, V1Negotiation] = weakref.WeakKeyDictionary()
_records: weakref.WeakKeyDictionary[Any, Negotiation | Refusal] = weakref.WeakKeyDictionary()
_session_profiles: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_serving: ContextVar[V1Negotiation | None] = ContextVar("mcp_negotiation.v1_serving", default=None)
_listing: ContextVar[tuple[str, Any, Any] | None] = ContextVar("mcp_negotiation.v1_listing", default=None)
"""Inside a listing's handling: (its method, the server's reference, the published entry)."""


_UNANNOUNCED_REVISION: Final = "2025-03-26"
"""What a request without `MCP-Protocol-Version` is served at, as the specification says."""


def _http_request(message: Any) -> Any:
    metadata = getattr(message, "message_metadata", None)
    return getattr(metadata, "request_context", None)


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json") if model is not None else None


# --- the interceptions ------------------------------------------------------------------


def _on_run(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)

    async def serving() -> Any:
        token = _serving.set(holder)
        # [metrics] a session is timed from its handshake (`_initialize`) until this run ends;
        # a stateless run (one HTTP POST) is no session.
        stateless = kwargs.get("stateless", args[4] if len(args) > 4 else False)
        clock = _SessionClock() if not stateless else None
        clock_token = _session_clock.set(clock)
        error = None
        try:
            return await wrapped(*args, **kwargs)
        except Exception as failure:
            error = type(failure).__qualname__
            raise
        finally:
            _session_clock.reset(clock_token)
            _serving.reset(token)
            if clock is not None and clock.started is not None:
                operations.session_ended(clock.started, clock.revision, http=clock.http, error=error)

    return serving()


@dataclass
class _SessionClock:
    """[metrics] When a run's session began (its handshake), at which revision, over what."""

    started: float | None = None
    revision: str = ""
    http: bool = False


_session_clock: ContextVar[_SessionClock | None] = ContextVar("mcp_negotiation.v1_session", default=None)
_TIMED: Final = "_mcp_negotiation_timed"
"""[metrics] Where a request's `RequestResponder` holds, while it is answered, when it came,
its method, its tool or prompt name (an `initialize`'s revision asked), and its session: on
the responder itself, read with one attribute lookup as every response goes out."""


def _on_received_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _serving.get()
    responder = args[0] if args else kwargs.get("responder")
    request: Any = getattr(getattr(responder, "request", None), "root", None)
    if holder is not None and (started := operations.clock()) is not None:  # [metrics]
        params = getattr(request, "params", None)
        target = getattr(params, "name", None) or getattr(params, "protocolVersion", None)
        with contextlib.suppress(AttributeError, TypeError):  # a slotted responder: untimed
            setattr(responder, _TIMED, (started, getattr(request, "method", ""), target, instance))
    if holder is None or type(request).__name__ != "InitializeRequest":
        return wrapped(*args, **kwargs)
    return _initialize(holder, instance, responder, request.params, wrapped(*args, **kwargs))


async def _initialize(
    holder: V1Negotiation, session: Any, responder: Any, params: Any, answer: Awaitable[Any]
) -> Any:
    """A legacy `initialize`: steer 1.x's answer (the params' version when it knows it, else
    its newest) to the agreed revision, and keep the record for the session."""
    started = time.perf_counter()
    raw = _dump(params)
    # The revision 1.x serves a message at before any handshake (a legacy one, so that the
    # engine sees a handshake whatever the client asked for).
    message = _inbound("initialize", raw, _UNANNOUNCED_REVISION, responder, _records.get(session))
    decision = await _decided(holder, message, session, started)
    record = decision.record
    if decision.action == "refuse" and decision.refusal is not None:
        answer.close()  # type: ignore[attr-defined]  # the SDK's answer is a coroutine never awaited
        with responder:
            await responder.respond(error_data(decision.refusal))
        return None
    if decision.action != "serve" or record is None:
        return await answer
    if record.protocol_version != params.protocolVersion:
        params.protocolVersion = record.protocol_version
    result = await answer
    held = holder.engine.handshaken(record, raw, record.protocol_version)
    clock = _session_clock.get()
    if clock is not None and clock.started is None and operations.clock() is not None:  # [metrics]
        clock.started, clock.revision = started, record.protocol_version
        clock.http = record.transport == "http"
    _records[session] = held.record
    if holder.engine.ucp is not None:
        _session_profiles[session] = held.ucp_default
    telemetry.record_negotiation("initialize", record, holder.policy, time.perf_counter() - started)
    return result


def _on_handle_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)
    message, request, session = args[0], args[1], args[2]
    return _handle(holder, message, request, session, wrapped(*args, **kwargs))


async def _handle(
    holder: V1Negotiation, message: Any, request: Any, session: Any, handled: Awaitable[Any]
) -> Any:
    method = getattr(request, "method", "")
    kept = _records.get(session)
    entry = _held(holder.engine, kept, method, message)
    if entry is None:  # decided in full
        started = time.perf_counter()
        # Stateless HTTP (a fresh session per POST) or a request before `initialize`: 1.x serves
        # it at its header's revision, else at the specification's default.
        headers = getattr(_http_request(message), "headers", None) or {}
        revision = kept.protocol_version if type(kept) is Negotiation else None
        revision = revision or headers.get("mcp-protocol-version") or _UNANNOUNCED_REVISION
        # Params are read (a model dump) only where a decision can need them: a UCP call's profile.
        params = _dump(request.params) if holder.engine.ucp is not None else None
        decision = await _decided(holder, _inbound(method, params, revision, message, kept), session, started)
        if decision.action == "refuse" and decision.refusal is not None:
            handled.close()  # type: ignore[attr-defined]  # the SDK's coroutine, never awaited
            await message.respond(error_data(decision.refusal))
            return None
        if decision.action != "serve" or decision.record is None:
            return await handled
        entry = (decision.record, holder.engine.negotiator)
    token = current.set(entry)
    pending_token = PENDING_REFUSALS.set([])
    listing = _listing.set((method, holder.owner, entry)) if method in LISTINGS else None
    try:
        return await handled
    finally:
        if listing is not None:
            _listing.reset(listing)
        PENDING_REFUSALS.reset(pending_token)
        current.reset(token)


def _held(engine: Engine, kept: object, method: str, carrier: Any) -> tuple[Negotiation, Negotiator] | None:
    """What a session's request publishes without a decision, as the 2.x middleware does: the
    entry its held record decides (`Engine.held_entry`), once over stateful HTTP that record
    knows its session id (the first request's decision adds the one `_inbound` reads). None,
    for a decision in full, for anything else, a UCP call included (its agreement is found
    per call)."""
    held = engine.held_entry(kept, method)
    if type(held) is not tuple:
        return None
    if held[0].session_id is None and _session_id_sent(_http_request(carrier)):
        return None
    return held


def _session_id_sent(http_request: Any) -> str | None:
    """The session id a request over stateful HTTP carries: the SDK routed it by this
    header, so it is the server's (None off HTTP, and over SSE, which names it in its URL)."""
    return getattr(http_request, "headers", {}).get("mcp-session-id") or None


def _inbound(method: str, params: Any, revision: str, carrier: Any, held: object) -> Inbound:
    """The facts of one message; `carrier` is what 1.x attaches the HTTP request to."""
    http_request = _http_request(carrier)
    transport, headers, _ = origin(http_scope(http_request))
    # Taken only for a session's request: anything else a client sends there is never taken.
    session_id = _session_id_sent(http_request) if isinstance(held, Negotiation) else None
    return Inbound(
        method=method,
        params=params,
        revision=revision,
        transport=transport,
        headers=headers,
        held=held,
        session_id=session_id,
    )


async def _decided(holder: V1Negotiation, message: Inbound, session: Any, started: float) -> Decision:
    """The engine's decision for `message`, with the session's hold kept and telemetry told."""
    engine = holder.engine
    decision = engine.decide(message)
    if decision.ucp:
        decision = await engine.with_ucp(decision, message)
    if decision.hold is not None:
        _records[session] = decision.hold
    telemetry.record_decision(
        message.method,
        decision,
        holder.policy,
        time.perf_counter() - started,
        params=message.params if message.params is not None else {"protocolVersion": message.revision},
        protocol_version=message.revision,
        transport=message.transport,
        session_id=message.session_id,
    )
    return decision


def _on_respond(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    pending = PENDING_REFUSALS.get()
    response = args[0] if args else kwargs.get("response")
    if pending and _failed(response):
        # A refusal raised inside the handler, which failed with it: answer it as the
        # JSON-RPC error it is. A handler that caught the refusal and answered is answered.
        response = error_data(pending[0])
        _measure(instance, response)
        return wrapped(response)
    _measure(instance, response)
    listing = _listing.get()
    if listing is not None and type(response).__name__ == "ServerResult":
        return _listed(wrapped, listing, response)
    return wrapped(*args, **kwargs)


async def _listed(wrapped: Any, listing: tuple[str, Any, Any], response: Any) -> Any:
    """Answer a listing as its client reads it (`catalog`)."""
    method, owner, entry = listing
    server = _listing_owner(owner() if owner is not None else None)
    answered = await catalog.listed(method, response.root, server, entry)
    return await wrapped(response if answered is response.root else type(response)(answered))


def _listing_owner(server: Any) -> Any:
    """The server whose functions a listing names: the one `negotiate` was given, or, for the
    lowlevel server `instrument()` reached inside a FastMCP one, that FastMCP server, found
    as the owner of the bound method its `tools/list` handler calls (private: the closures
    1.x's `Server.list_tools` decorator and `create_call_wrapper` make)."""
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


def _measure(responder: Any, response: Any) -> None:
    """[metrics] A request timed as it came (`_on_received_request`), answered with `response`,
    in `mcp.server.operation.duration`, at the revision its session agreed (an `initialize`'s
    answer names it; else the one it was served at, as `_handle` finds it). Never raises."""
    timed = getattr(responder, _TIMED, None)
    if timed is None:
        return
    delattr(responder, _TIMED)  # (a responder answers once; this keeps a second answer untimed)
    started, method, target, session = timed
    try:
        _answered(started, method, target, session, responder, response)
    except Exception as problem:
        report(logging.ERROR, "mcp_negotiation: telemetry failed (ignored)", exc=problem)


def _answered(started: float, method: str, target: Any, session: Any, responder: Any, response: Any) -> None:
    http_request = _http_request(responder)
    kept = _records.get(session)
    revision = kept.protocol_version if type(kept) is Negotiation else None
    if method == "initialize":  # answered before its record is kept: the answer, else the ask
        revision = getattr(getattr(response, "root", None), "protocolVersion", None) or target
        target = None
    headers = getattr(http_request, "headers", None) or {}
    revision = revision or headers.get("mcp-protocol-version") or _UNANNOUNCED_REVISION
    code = error = None
    if type(response).__name__ == "ErrorData":
        code = getattr(response, "code", None)
    elif method == "tools/call" and _failed(response):
        error = TOOL_ERROR
    scope = http_scope(http_request)
    operations.operation(
        started,
        method,
        revision,
        origin(scope)[0],
        target=target,
        code=code,
        error=error,
        http_version=scope.get("http_version") if scope is not None else None,
    )


def _failed(response: Any) -> bool:
    """Whether a handler failed: an error, or the error *result* 1.x makes of a tool's exception."""
    if type(response).__name__ == "ErrorData":
        return True
    return getattr(getattr(response, "root", response), "isError", False) is True


_TARGETS: Final[tuple[tuple[str, str, Callable[..., Any], bool], ...]] = (
    ("mcp.server.lowlevel.server", "Server.run", _on_run, True),
    ("mcp.server.session", "ServerSession._received_request", _on_received_request, True),
    ("mcp.server.lowlevel.server", "Server._handle_request", _on_handle_request, True),
    ("mcp.shared.session", "RequestResponder.respond", _on_respond, True),
    ("mcp.server.stdio", "stdio_server", stdio_wrapper, False),
    ("mcp.server.fastmcp.server", "stdio_server", stdio_wrapper, False),
)
"""(module, attribute, wrapper, required): everything this adapter wraps."""

_patched: list[tuple[Any, str, Any]] = []


def _resolve(module_name: str, path: str) -> tuple[Any, str] | None:
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


def missing_targets() -> list[str]:
    """The required targets this SDK lacks (empty when the adapter can work)."""
    return [f"{m}.{p}" for m, p, _, required in _TARGETS if required and _resolve(m, p) is None]


def _install_targets(policy: Policy) -> bool:
    if _patched:
        return True
    missing = missing_targets()
    if missing:
        message = f"mcp_negotiation: mcp {_sdk_version()} lacks {', '.join(missing)}; not negotiating"
        if policy.strict:
            raise NegotiationUnavailable(message)
        logger.warning(message)
        return False
    for module_name, path, wrapper, _ in _TARGETS:
        found = _resolve(module_name, path)
        if found is None:
            continue
        owner, name = found
        original = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name)
        if isinstance(original, wrapt.FunctionWrapper):
            continue
        _patched.append((owner, name, original))
        wrapt.wrap_function_wrapper(owner, name, wrapper)
    return True


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("mcp")


def _lowlevel(server: Any) -> Any | None:
    """The 1.x lowlevel `Server` of a FastMCP or lowlevel server."""
    from mcp.server.lowlevel.server import Server

    if isinstance(server, Server):
        return server
    inner = getattr(server, "_mcp_server", None)
    return inner if isinstance(inner, Server) else None


def negotiate(server: _S, policy: Policy | None = None) -> _S:
    """Negotiate every request of an mcp 1.x `FastMCP` or lowlevel `Server`; returns it."""
    policy = policy_given(policy, "negotiate(server, policy)")
    lowlevel = _lowlevel(server)
    if lowlevel is None:
        message = f"mcp_negotiation: {type(server).__name__} is not an mcp 1.x server; left untouched"
        if policy.strict:
            raise NegotiationUnavailable(message)
        logger.warning(message)
        return server
    if _install_targets(policy):
        _servers[lowlevel] = V1Negotiation.of(policy, server)
    return server


_default_policy: list[Policy] = []
_original_init: list[Any] = []
"""`Server.__init__` as it was while `instrument()` is active (kept apart from `_patched`,
whose being non-empty means the targets are installed)."""


def _after_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    if _default_policy:
        negotiate(instance, _default_policy[-1])
    return result


def instrument(policy: Policy | None = None, *servers: Any) -> None:
    """Negotiate every mcp 1.x lowlevel server built from now on (and `servers`)."""
    policy = policy_given(policy, "instrument(policy, *servers)")
    from mcp.server.lowlevel.server import Server

    _within_sdk(policy)  # a policy no server could serve fails here, not in every constructor
    if not _install_targets(policy):
        return
    for server in servers:
        negotiate(server, policy)
    _default_policy[:] = [policy]
    if not _original_init:
        _original_init.append(vars(Server)["__init__"])
        wrapt.wrap_function_wrapper(Server, "__init__", _after_init)


def uninstrument(*servers: Any) -> None:
    """Stop negotiating new servers, and remove negotiation from `servers`."""
    from mcp.server.lowlevel.server import Server

    _default_policy.clear()
    if _original_init:
        setattr(Server, "__init__", _original_init.pop())  # noqa: B010 - mypy refuses assigning a method
    for server in servers:
        lowlevel = _lowlevel(server)
        if lowlevel is not None:
            _servers.pop(lowlevel, None)


def is_negotiated(server: Any) -> bool:
    """Whether `negotiate` is attached to this 1.x server."""
    lowlevel = _lowlevel(server)
    return lowlevel is not None and lowlevel in _servers
