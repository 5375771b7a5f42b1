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
                                             error *results*)
    stdio_server (where it is used)          records say "stdio"
"""

from __future__ import annotations

import importlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

import wrapt

from .. import revisions, telemetry
from ..errors import NegotiationRefused, NegotiationUnavailable, Refusal
from ..negotiation import Negotiation, Negotiator, Policy, Transport, policy_given
from ..ucp.binding import UcpNegotiator, session_profile_url
from ..ucp.errors import UcpError
from .compat import PENDING_REFUSALS
from .context import _current
from .origin import origin, stdio_wrapper

__all__ = ["V1Negotiation", "instrument", "negotiate", "uninstrument"]

logger = logging.getLogger("mcp_negotiation")

_S = TypeVar("_S")


@dataclass
class V1Negotiation:
    """What `negotiate` attached to one mcp 1.x lowlevel server."""

    policy: Policy
    negotiator: Negotiator
    ucp: UcpNegotiator | None

    @classmethod
    def of(cls, policy: Policy) -> V1Negotiation:
        ucp = UcpNegotiator(policy.ucp) if policy.ucp is not None else None
        return cls(policy, Negotiator(_within_sdk(policy)), ucp)


def sdk_revisions() -> tuple[str, ...]:
    """The revisions this 1.x release can serve (older 1.x releases stop before 2025-11-25)."""
    supported = importlib.import_module("mcp.shared.version").SUPPORTED_PROTOCOL_VERSIONS  # 1.x module
    return tuple(r for r in revisions.LEGACY if r in supported)


def _within_sdk(policy: Policy) -> Policy:
    """The policy, capped at the newest revision this SDK serves: never counter-offer beyond it."""
    newest = sdk_revisions()[-1]
    if policy.max_revision is not None and not revisions.is_at_least(policy.max_revision, newest):
        return policy
    if policy.min_revision is not None and not revisions.is_at_least(newest, policy.min_revision):
        raise ValueError(
            f"min_revision {policy.min_revision} is newer than every revision mcp {_sdk_version()} "
            f"serves (the newest is {newest}); no client could be served"
        )
    return replace(policy, max_revision=newest)


_servers: weakref.WeakKeyDictionary[Any, V1Negotiation] = weakref.WeakKeyDictionary()
_records: weakref.WeakKeyDictionary[Any, Negotiation | Refusal] = weakref.WeakKeyDictionary()
_session_profiles: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_serving: ContextVar[V1Negotiation | None] = ContextVar("mcp_negotiation.v1_serving", default=None)


_UNANNOUNCED_REVISION: Final = "2025-03-26"
"""What a request without `MCP-Protocol-Version` is served at, as the specification says."""


def _http_request(message: Any) -> Any:
    metadata = getattr(message, "message_metadata", None)
    return getattr(metadata, "request_context", None)


def _error_data(refusal: Refusal) -> Any:
    from mcp.types import ErrorData

    data = dict(refusal.data) if refusal.data is not None else None
    return ErrorData(code=refusal.code, message=refusal.message, data=data)


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json") if model is not None else None


# --- the interceptions ------------------------------------------------------------------


def _on_run(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)

    async def serving() -> Any:
        token = _serving.set(holder)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _serving.reset(token)

    return serving()


def _on_received_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _serving.get()
    responder = args[0] if args else kwargs.get("responder")
    request: Any = getattr(getattr(responder, "request", None), "root", None)
    if holder is None or type(request).__name__ != "InitializeRequest":
        return wrapped(*args, **kwargs)
    return _initialize(holder, instance, responder, request.params, wrapped(*args, **kwargs))


async def _initialize(
    holder: V1Negotiation, session: Any, responder: Any, params: Any, answer: Awaitable[Any]
) -> Any:
    started = time.perf_counter()
    raw = _dump(params)
    transport, headers = origin(getattr(_http_request(responder), "headers", None))
    try:
        record = holder.negotiator.initialize(raw, transport=transport, headers=headers)
    except NegotiationRefused as refused:
        answer.close()  # type: ignore[attr-defined]  # the SDK's answer is a coroutine never awaited
        if type(_records.get(session)) is not Negotiation:  # a re-initialize answers only itself
            _records[session] = refused.refusal  # what the session's later requests get (see `_handle`)
        _trace_refusal(holder, "initialize", refused.refusal, started, raw, transport)
        with responder:
            await responder.respond(_error_data(refused.refusal))
        return None
    if record.protocol_version != params.protocolVersion:
        # 1.x answers the params' version when it knows it, else its newest: steer it to ours.
        params.protocolVersion = record.protocol_version
    _records[session] = record
    if holder.ucp is not None:
        _session_profiles[session] = session_profile_url(raw)
    telemetry.record_negotiation("initialize", record, holder.policy, time.perf_counter() - started)
    return await answer


def _on_handle_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)
    message, request, session = args[0], args[1], args[2]
    return _handle(holder, message, request, session, wrapped(*args, **kwargs))


async def _handle(
    holder: V1Negotiation, message: Any, request: Any, session: Any, handled: Awaitable[Any]
) -> Any:
    started = time.perf_counter()
    http_request = _http_request(message)
    transport, headers = origin(getattr(http_request, "headers", None))
    kept = _records.get(session)
    ping = type(request).__name__ == "PingRequest"
    stored = kept if type(kept) is Negotiation else None
    version = None
    try:
        if type(kept) is Refusal and not ping:
            # The session's handshake was refused; 1.x serves a client that goes on regardless.
            raise NegotiationRefused(kept)
        if stored is None:
            # Stateless HTTP (a fresh session per POST) or a request before `initialize`: the SDK
            # serves it at its header's revision, else at the specification's default.
            version = headers.get("mcp-protocol-version") or _UNANNOUNCED_REVISION
            record = holder.negotiator.without_session(
                version, transport=transport, headers=headers, any_revision=ping
            )
        else:
            # A session the policy applied since no longer serves is refused (see `refreshed`).
            version = stored.protocol_version
            record = holder.negotiator.refreshed(stored, not ping)
    except NegotiationRefused as refused:
        handled.close()  # type: ignore[attr-defined]  # the SDK's coroutine, never awaited
        method = getattr(request, "method", "")
        _trace_refusal(holder, method, refused.refusal, started, {"protocolVersion": version}, transport)
        await message.respond(_error_data(refused.refusal))
        return None
    if stored is not None:
        if record.session_id is None and http_request is not None:
            # Stateful HTTP: the SDK routed this request to its session by this header, so it
            # is the server's id. `initialize` carried none (the id comes with its answer).
            session_id = http_request.headers.get("mcp-session-id")
            if session_id:
                record = replace(record, session_id=session_id)
        if record is not stored:
            _records[session] = record
    if holder.ucp is not None and type(request).__name__ == "CallToolRequest":
        try:
            record = await _with_ucp(
                holder, holder.ucp, record, request, session, headers, started, transport
            )
        except UcpError as failure:
            # Refused before the tool runs: it must not run at all.
            handled.close()  # type: ignore[attr-defined]  # the SDK's coroutine, never awaited
            error = failure.to_jsonrpc_error()
            await message.respond(_error_data(Refusal(error["code"], error["message"], error["data"])))
            return None
    token = _current.set((record, holder.negotiator))
    pending_token = PENDING_REFUSALS.set([])
    try:
        return await handled
    finally:
        PENDING_REFUSALS.reset(pending_token)
        _current.reset(token)


async def _with_ucp(
    holder: V1Negotiation,
    ucp: UcpNegotiator,
    record: Negotiation,
    request: Any,
    session: Any,
    headers: Mapping[str, str],
    started: float,
    transport: Transport,
) -> Negotiation:
    raw = _dump(request.params)
    try:
        scoped = await ucp.for_call(record, raw, headers, session_default=_session_profiles.get(session))
    except UcpError as failure:
        error = failure.to_jsonrpc_error()
        _trace_refusal(
            holder,
            "tools/call",
            Refusal(error["code"], error["message"], error["data"]),
            started,
            raw,
            transport,
        )
        raise
    if scoped.ucp is not None:  # (None: the call named no platform, and nothing was negotiated)
        telemetry.record_negotiation("tools/call", scoped, holder.policy, time.perf_counter() - started)
    return scoped


def _on_respond(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    pending = PENDING_REFUSALS.get()
    if pending and _failed(args[0] if args else kwargs.get("response")):
        # A refusal raised inside the handler, which failed with it: answer it as the
        # JSON-RPC error it is. A handler that caught the refusal and answered is answered.
        return wrapped(_error_data(pending[0]))
    return wrapped(*args, **kwargs)


def _failed(response: Any) -> bool:
    """Whether a handler failed: an error, or the error *result* 1.x makes of a tool's exception."""
    if type(response).__name__ == "ErrorData":
        return True
    return getattr(getattr(response, "root", response), "isError", False) is True


def _trace_refusal(
    holder: V1Negotiation, method: str, refusal: Refusal, started: float, params: Any, transport: Transport
) -> None:
    version = params.get("protocolVersion") if isinstance(params, Mapping) else None
    telemetry.record_refusal(
        method,
        refusal,
        holder.policy,
        time.perf_counter() - started,
        params=params,
        protocol_version=version if isinstance(version, str) else "",
        transport=transport,
        session_id=None,
    )


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
        _servers[lowlevel] = V1Negotiation.of(policy)
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
