"""mcp 1.x: the same negotiation, reached through wrapt, since 1.x has no middleware seam.

mcp 1.x speaks the legacy revisions only (up to 2025-11-25). Its `ServerSession` answers
`initialize` itself and its lowlevel `Server._handle_request` dispatches every request, so
those are where each message is handed to the kernel (`adapters/kernel.py`), as the 2.x
middleware hands its own: the same engine, the same outcome, applied the 1.x way. Every
target is in one table (`seams.TARGETS`), checked at install time: a missing one is a
logged warning naming it and the server is left untouched (strict mode raises). Nothing
here changes behaviour for servers that were not passed to `negotiate` (or built while
`instrument` was active).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import wrapt

from ...core import revisions
from ...core.engine import Engine
from ...core.errors import PolicyError, Refusal
from ...core.facts import BEFORE_HANDSHAKE, Origin
from ...core.negotiation import PROTOCOL_VERSION_KEY, Negotiator, Policy, policy_given
from ...core.outcome import Known, Outcome
from ...otel.semconv import TOOL_ERROR
from .. import instrumenting, listings
from ..compat import PENDING_REFUSALS, error_data
from ..installing import negotiate_built, unavailable
from ..kernel import Answered, advertised, apply
from ..origin import http_scope, origin, stdio_wrapper
from ..variants import RegisteredTools
from . import seams

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
        tools = RegisteredTools(lambda: seams.listing_owner(owner())) if owner is not None else None
        return cls(policy, Engine(policy, Negotiator(_within_sdk(policy)), tools=tools), owner)


def _within_sdk(policy: Policy) -> Policy:
    """The policy, capped at the newest revision this SDK serves: never counter-offer beyond it."""
    newest = seams.sdk_revisions()[-1]
    if policy.max_revision is not None and not revisions.is_at_least(policy.max_revision, newest):
        return policy
    oldest = policy.accepted()[0]  # the requirements may narrow the policy past `min_revision`
    if not revisions.is_at_least(newest, oldest):
        what = (
            f"min_revision {oldest} is"
            if oldest == policy.min_revision
            else f"every revision its required_capabilities allow ({', '.join(policy.accepted())}) is"
        )
        raise PolicyError(
            f"{what} newer than every revision mcp {seams.sdk_version()} "
            f"serves (the newest is {newest}); no client could be served"
        )
    return replace(policy, max_revision=newest)


_servers: weakref.WeakKeyDictionary[Any, V1Negotiation] = weakref.WeakKeyDictionary()
_held: weakref.WeakKeyDictionary[Any, Known | Refusal] = weakref.WeakKeyDictionary()
"""What each session holds: its handshake's `Known`, or the refusal of a refused one."""
_serving: ContextVar[V1Negotiation | None] = ContextVar("mcp_negotiation.v1_serving", default=None)
_Answering = tuple["_Message", Outcome, Known | None]
_answering: ContextVar[_Answering | None] = ContextVar("mcp_negotiation.v1_answering", default=None)
"""Inside a message's handling: (the message, its outcome, the published `Known`), for its
answer to be amended as the outcome says (a listing, an advertisement), and kept
(`_Message.answered_as`)."""
_Closing = list[Callable[[], object]]
_closing: ContextVar[_Closing | None] = ContextVar("mcp_negotiation.v1_closing", default=None)
"""What runs when the session a `Server.run` serves ends (None: a stateless run, no session)."""


class _Message:
    """One message of mcp 1.x as the kernel reads and answers it (`kernel.Message`): a
    request (`carrier` is the SDK's `RequestResponder`, `answer` the SDK's handling of it)
    or an `initialize` or a request before any (whose answer the session makes and sends itself)."""

    __slots__ = (
        "_answer",
        "_by_session",
        "_carrier",
        "_holder",
        "_method",
        "_params",
        "_raw",
        "_response",
        "_session",
        "_steered",
        "_unheld",
    )

    def __init__(
        self,
        holder: V1Negotiation,
        method: str,
        params: Any,
        carrier: Any,
        session: Any,
        answer: Awaitable[Any],
        by_session: bool = False,
        unheld: str | None = None,
    ) -> None:
        self._holder = holder
        self._method = method
        self._params = params
        self._raw: Any = _UNREAD
        self._carrier = carrier
        self._session = session
        self._answer = answer
        self._steered: str | None = None
        self._by_session = by_session
        """Whether the session answers it: an `initialize`, or a request before any handshake
        (`_on_received_request`), not yet the server's to handle."""
        self._unheld = unheld
        """The revision such a request's envelope names."""
        self._response: Any = None
        """What the SDK answered (`_on_respond`), or the refusal answered instead."""

    # --- the facts ------------------------------------------------------------------------

    @property
    def method(self) -> str:
        return self._method

    @property
    def params(self) -> Any:
        """The params' wire form, dumped only when a decision reads them."""
        if self._raw is _UNREAD:
            params = self._params
            self._raw = params.model_dump(by_alias=True, exclude_none=True, mode="json") if params else None
        return self._raw

    @property
    def revision(self) -> str | None:
        # 1.x serves a session's requests at its revision; any other message at its header's,
        # if it has one (stateless HTTP), else at the specification's default.
        if self._unheld is not None:
            return self._unheld
        held = self.held
        if type(held) is Known:
            return held.record.protocol_version
        if self._method == "initialize":
            return None
        return self._request_headers().get("mcp-protocol-version") or None

    @property
    def notification(self) -> bool:
        return False

    @property
    def origin(self) -> Origin:
        transport, headers, _ = origin(http_scope(seams.http_request(self._carrier)))
        return Origin(transport, headers)

    @property
    def held(self) -> object:
        held = _held.get(self._session)
        if held is None and self._by_session and self._method != "initialize":
            return BEFORE_HANDSHAKE
        return held

    @property
    def session_id(self) -> str | None:
        # Taken only for a session's request: anything else a client sends there is never taken.
        return seams.session_id_sent(seams.http_request(self._carrier)) if type(self.held) is Known else None

    @property
    def owner(self) -> Any:
        """A weak reference to the server `negotiate` was given (whose functions listings name)."""
        return self._holder.owner

    def answered_with(self, response: Any) -> None:
        """What the SDK answers the message with, as it goes out (`_on_respond`)."""
        self._response = response

    def _request_headers(self) -> Any:
        return getattr(seams.http_request(self._carrier), "headers", None) or {}

    # --- the SDK's ways -----------------------------------------------------------------------

    def hold(self, value: Known | Refusal) -> None:
        _held[self._session] = value

    def steer(self, revision: str) -> bool:
        """1.x answers `initialize` with the params' version when it knows it, else its newest."""
        if self._params.protocolVersion != revision:
            self._params.protocolVersion = revision
        self._steered = revision
        return True

    async def forward(self, known: Known | None, outcome: Outcome) -> Any:
        if outcome.dispatch is not None and self._params is not None:
            # The variant chosen for this client serves the call: the SDK's handling, not yet
            # started, reads the request's name from this very object.
            self._params.name = outcome.dispatch
        pending = PENDING_REFUSALS.set([]) if known is not None else None
        answering = _answering.set((self, outcome, known))
        try:
            return await self._answer
        finally:
            _answering.reset(answering)
            if pending is not None:
                PENDING_REFUSALS.reset(pending)

    async def refuse(self, refusal: Refusal, outcome: Outcome) -> Any:
        """(1.x records no refusals before dispatch, `asgi`: no HTTP layer to tell.)"""
        self._answer.close()  # type: ignore[attr-defined]  # the SDK's coroutine, never awaited
        self._response = error = error_data(refusal)
        if self._by_session:
            with self._carrier:
                await self._carrier.respond(error)
        else:
            await self._carrier.respond(error)
        return None

    async def empty(self, outcome: Outcome) -> Any:
        return await self._answer  # 1.x makes no requests of its own while serving another

    def answered(self, result: Any) -> object:
        return self._steered  # 1.x answers the params' version, which `steer` set

    def answered_as(self, result: Any, error: BaseException | None) -> Answered | None:
        scope = http_scope(seams.http_request(self._carrier))
        http_version = scope.get("http_version") if scope is not None else None
        response = self._response
        if error is not None:
            return Answered(None, type(error).__qualname__, http_version)
        if type(response).__name__ == "ErrorData":
            return Answered(getattr(response, "code", None), None, http_version)
        if self._method == "tools/call" and _failed(response):
            return Answered(None, TOOL_ERROR, http_version)
        return Answered(None, None, http_version)

    def on_close(self, callback: Callable[[bool], object]) -> bool:
        closing = _closing.get()
        if closing is None:
            return False
        over_http = self.origin.transport == "http"
        closing.append(lambda: callback(over_http))
        return True


_UNREAD: Any = object()


# --- the interceptions ------------------------------------------------------------------


def _on_run(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)

    # What ends with the run: its session (a stateless run, one HTTP POST, is none).
    stateless = kwargs.get("stateless", args[4] if len(args) > 4 else False)

    async def serving() -> Any:
        token = _serving.set(holder)
        closing: _Closing | None = None if stateless else []
        closing_token = _closing.set(closing)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            _closing.reset(closing_token)
            _serving.reset(token)
            for ended in closing or ():
                ended()

    return serving()


def _on_received_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _serving.get()
    responder = args[0] if args else kwargs.get("responder")
    request: Any = getattr(getattr(responder, "request", None), "root", None)
    if holder is None:
        return wrapped(*args, **kwargs)
    named = None
    if type(request).__name__ != "InitializeRequest":
        # A request before any handshake was answered (which 1.x refuses itself, "before
        # initialization", -32602) goes to the kernel as a session's message: one with an
        # envelope is decided at the revision it names (refused -32022 with the revisions this
        # SDK serves, as the specification has a server answer a revision it cannot serve),
        # one after a refused handshake is refused as that was, and any other is left to the
        # SDK, untraced, as on mcp 2.x.
        if not seams.before_handshake(instance):
            return wrapped(*args, **kwargs)
        named = _named_revision(request)
    method = getattr(request, "method", "")
    answer = wrapped(*args, **kwargs)
    message = _Message(holder, method, request.params, responder, instance, answer, True, named)
    return apply(holder.engine, message)


def _named_revision(request: Any) -> str | None:
    """The revision a request's `params._meta` envelope names, if it names one."""
    meta = getattr(getattr(request, "params", None), "meta", None)
    named = (getattr(meta, "model_extra", None) or {}).get(PROTOCOL_VERSION_KEY)
    return named if isinstance(named, str) else None


def _on_handle_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    holder = _servers.get(instance)
    if holder is None:
        return wrapped(*args, **kwargs)
    carrier, request, session = args[0], args[1], args[2]
    method = getattr(request, "method", "")
    message = _Message(holder, method, request.params, carrier, session, wrapped(*args, **kwargs))
    return apply(holder.engine, message)


def _on_respond(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    pending = PENDING_REFUSALS.get()
    response = args[0] if args else kwargs.get("response")
    answering = _answering.get()
    if pending and _failed(response):
        # A refusal raised inside the handler, which failed with it: answer it as the
        # JSON-RPC error it is. A handler that caught the refusal and answered is answered.
        response = error_data(pending[0])
        if answering is not None:
            answering[0].answered_with(response)
        return wrapped(response)
    if answering is None:
        return wrapped(*args, **kwargs)
    answering[0].answered_with(response)
    if type(response).__name__ == "ServerResult" and (answering[1].listing or answering[1].advertise):
        return _answered(wrapped, answering, response)
    return wrapped(*args, **kwargs)


async def _answered(wrapped: Any, answering: _Answering, response: Any) -> Any:
    """Answer as the outcome says: a listing as its client reads it (`listings`), a handshake
    with what the stages advertise."""
    message, outcome, known = answering
    if outcome.advertise is not None:
        additions = outcome.advertise
        response = seams.with_experimental(response, lambda capabilities: advertised(capabilities, additions))
    if outcome.listing:
        owner = message.owner
        server = seams.listing_owner(owner() if owner is not None else None)
        answered = await listings.listed(message.method, response.root, server, known)
        if answered is not response.root:
            response = type(response)(answered)
    return await wrapped(response)


def _failed(response: Any) -> bool:
    """Whether a handler failed: an error, or the error *result* 1.x makes of a tool's exception."""
    if type(response).__name__ == "ErrorData":
        return True
    return getattr(getattr(response, "root", response), "isError", False) is True


# --- installing ---------------------------------------------------------------------------


_WRAPPERS: dict[str, Callable[..., Any]] = {
    "run": _on_run,
    "initialize": _on_received_request,
    "request": _on_handle_request,
    "respond": _on_respond,
    "stdio": stdio_wrapper,
    "fastmcp stdio": stdio_wrapper,
}

_patched: list[tuple[Any, str, Any]] = []


def missing_targets() -> list[str]:
    """The required targets this SDK lacks (empty when the adapter can work)."""
    targets = seams.TARGETS.values()
    return [f"{m}.{p}" for m, p, required in targets if required and seams.resolve(m, p) is None]


def _install_targets(policy: Policy) -> bool:
    if _patched:
        return True
    missing = missing_targets()
    if missing:
        lacks = ", ".join(missing)
        unavailable(policy, f"mcp {seams.sdk_version()} lacks {lacks}; not negotiating")
        return False
    for job, (module_name, path, _) in seams.TARGETS.items():
        found = seams.resolve(module_name, path)
        if found is None:
            continue
        owner, name = found
        original = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name)
        if isinstance(original, wrapt.FunctionWrapper):
            continue
        _patched.append((owner, name, original))
        wrapt.wrap_function_wrapper(owner, name, _WRAPPERS[job])
    return True


def negotiate(server: _S, policy: Policy | None = None) -> _S:
    """Negotiate every request of an mcp 1.x `FastMCP` or lowlevel `Server`; returns it."""
    policy = policy_given(policy, "negotiate(server, policy)")
    lowlevel = seams.lowlevel(server)
    if lowlevel is None:
        kind = type(server).__name__
        unavailable(policy, f"{kind} is not an mcp 1.x server; left untouched")
        return server
    if _install_targets(policy):
        _servers[lowlevel] = V1Negotiation.of(policy, server)
    return server


_default_policy = instrumenting.ACTIVE
_original_init: list[Any] = []
"""`Server.__init__` as it was while `instrument()` is active (kept apart from `_patched`,
whose being non-empty means the targets are installed)."""


def _after_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    negotiate_built(negotiate, instance, _default_policy)
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
        lowlevel = seams.lowlevel(server)
        if lowlevel is not None:
            _servers.pop(lowlevel, None)


def is_negotiated(server: Any) -> bool:
    """Whether `negotiate` is attached to this 1.x server."""
    lowlevel = seams.lowlevel(server)
    return lowlevel is not None and lowlevel in _servers
