"""The SDK middleware that negotiates every inbound message and publishes the result.

Legacy: the record is made at `initialize` from the raw params (unknown keys kept),
kept in the connection's state, and published for every later request of that
connection. Modern: every request is negotiated from its own `_meta` envelope. Clients
repeat the same envelope on every request, so a request shaped like one served before
(same method, revision, envelope and transport) is answered from a memo of what was
published for it, with nothing negotiated, looked up or traced again. Refusals become
the SDK's `MCPError` with the specification's codes; a bug of ours is logged and the
request passes through untouched, because negotiation must never take down the user's
server.
"""

from __future__ import annotations

import logging
import marshal
import time
import weakref
from collections.abc import Callable, Mapping, MutableMapping
from time import monotonic
from typing import Any, Final, NoReturn

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from .. import revisions, telemetry
from ..bounded import MAX_ENTRY_BYTES, BoundedCache
from ..client_log import report
from ..errors import NegotiationRefused, Refusal
from ..frozen_json import MARSHAL_VERSION, is_object
from ..negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    Negotiation,
    Negotiator,
    Policy,
    Transport,
    retained_size,
)
from ..ucp.binding import (
    UCP_EXTENSION_ID,
    UcpNegotiator,
    advertisement,
    session_profile_url,
)
from ..ucp.errors import UcpError
from . import seams
from .asgi import JUDGED_MARK
from .context import BOUND_ATTRIBUTE, _current
from .origin import NO_HEADERS, on_stdio, origin

logger = logging.getLogger("mcp_negotiation")

UCP_STATE_KEY: Final = "mcp_negotiation.ucp_profile"
"""Our key in `Connection.state` for the stdio extension's session default profile URL."""

_EXEMPT: Final = frozenset({"server/discover", "ping"})
"""Methods a client may call without the policy's required capabilities, to learn them."""

_MEMO_SIZE: Final = 1_024


class _Repeat:
    """A memoised outcome: what to publish, and what telemetry needs to count the repeat.

    `traced` is None for a UCP `tools/call`: only its negotiation is memoised, because its
    agreement depends on the resolver's current profile and is found on every call.
    It is trusted as long as the negotiator trusts its reading of the date (`until`); the
    next request is negotiated again, which withdraws features whose deprecation closed.
    """

    __slots__ = ("published", "traced", "until")

    def __init__(self, published: tuple[Negotiation, Negotiator], traced: telemetry.Traced | None) -> None:
        self.published = published
        self.traced = traced
        self.until = published[1].fresh_until


def _origin(ctx: Any) -> tuple[Transport, Mapping[str, str]]:
    """The transport a message came over, and the negotiation headers it carried."""
    kind = seams.transport_kind(ctx)
    if kind == seams.DIRECT_KIND:  # the SDK's in-process dispatcher, even when a stdio server's tool runs it
        return "memory", NO_HEADERS
    return origin(seams.request_headers(ctx), http=kind == seams.HTTP_KIND)


def _raw_meta(params: Mapping[str, Any] | None) -> Any:
    return params.get("_meta") if is_object(params) else None


class NegotiationMiddleware:
    """`ServerMiddleware` placing a `Negotiation` on every request of a wrapped server."""

    def __init__(self, policy: Policy, *, owner: Any = None) -> None:
        self.configure(policy)
        # The server whose chain holds us. A FastMCP server built under `instrument()` gets
        # us from the SDK's constructor, before FastMCP swaps in its own span opener; the
        # first request then moves us behind it (`_settle`).
        self._owner = weakref.ref(owner) if owner is not None else None
        self._settled = owner is None

    def configure(self, policy: Policy) -> None:
        """Switch to another policy (used when `negotiate` is applied again)."""
        self.policy = policy
        self.negotiator = Negotiator(policy)
        self.ucp = UcpNegotiator(policy.ucp) if policy.ucp is not None else None
        self._repeats: BoundedCache[bytes, _Repeat] = BoundedCache(_MEMO_SIZE)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # This runs on every message a server receives. The common modern case, a request
        # shaped like one served before, is written inline: C-level calls and one Python
        # call (telemetry), because in a real request each Python call costs several times
        # its isolated timing.
        if not self._settled:
            self._settle()
        params = ctx.params
        meta = params.get("_meta") if type(params) is dict else None
        shape = base = None
        if (
            type(meta) is dict
            and (version := meta.get(PROTOCOL_VERSION_KEY)) is not None
            and ctx.request is None
            and ctx.request_id is not None
        ):
            # A modern envelope (a legacy request's `_meta`, a traceparent say, is never
            # memoised), off HTTP (where headers would count too): everything the outcome
            # depends on.
            try:
                shape = marshal.dumps(
                    (
                        ctx.method,
                        ctx.protocol_version,
                        version,
                        meta.get(CLIENT_CAPABILITIES_KEY),
                        meta.get(CLIENT_INFO_KEY),
                        # Stdio, unless the SDK's in-process dispatcher, which a stdio server's
                        # tool may run (the server itself, say, with this very envelope).
                        on_stdio.get() and seams.transport_kind(ctx) != seams.DIRECT_KIND,
                    ),
                    MARSHAL_VERSION,
                )
            except ValueError:  # not plain JSON values: negotiated every time
                shape = None
            repeat = self._repeats.get(shape) if shape is not None else None
            if repeat is not None and monotonic() < repeat.until:
                if repeat.traced is None:
                    base = repeat.published[0]  # a UCP call: the agreement is found below
                elif telemetry.repeated(repeat.traced):
                    try:  # noqa: SIM105  (suppress() costs a microsecond per request)
                        setattr(ctx, BOUND_ATTRIBUTE, repeat.published)  # see context._entry_of
                    except (AttributeError, TypeError):  # a slotted context: the ContextVar only
                        pass
                    token = _current.set(repeat.published)
                    try:
                        return await call_next(ctx)
                    finally:
                        _current.reset(token)
        started = time.perf_counter()
        handshake = False
        traced = None
        if ctx.request_id is None:
            # Notifications are never refused; legacy ones still see their session's record.
            record = self._stored(ctx, started, False)
        else:
            era = revisions.era(ctx.protocol_version)
            handshake = ctx.method == "initialize"
            if handshake and era == "modern":
                # A removed method in this era, which needs no envelope: the SDK's own -32601,
                # as an unwrapped server answers it, not a verdict on what it never had to carry.
                return await call_next(ctx)
            behalf = era == "modern" and ctx.request is not None and seams.served_for_another(ctx)
            if ctx.request is not None and not behalf:
                seams.mark_scope(ctx, JUDGED_MARK)  # a 400 from here on is no refusal before dispatch
            if handshake:
                record = self._negotiated(ctx, started, self._handshake, ctx)
            elif behalf:
                # Negotiated, so that a server listing its tools per client lists this client's,
                # but neither traced nor refused: the client's own request is, next. Refused,
                # it gets an empty result, from which the SDK checks nothing and logs no error.
                try:
                    record = self._negotiated(ctx, started, self._negotiate_request, ctx, era, answer=False)
                except NegotiationRefused:
                    return {}
            else:
                stored = self._stored(ctx, started, ctx.method not in _EXEMPT) if era == "legacy" else None
                record = base or stored or self._negotiated(ctx, started, self._negotiate_request, ctx, era)
                if record is not None and self.ucp is not None and ctx.method == "tools/call":
                    if shape is not None and base is None:
                        self._remember(shape, record, None)
                    # A record made for this request carries its headers; a session's, the handshake's.
                    headers = record.headers if stored is None else _origin(ctx)[1]
                    record = await self._with_ucp(ctx, record, self.ucp, headers, started)
                    shape = None
                # Traced per request: what each request carries (modern), a UCP agreement per call,
                # and legacy requests without a session, each a connection of its own (stateless).
                if record is not None and (
                    record.era == "modern" or record.ucp is not None or not record.capabilities_known
                ):
                    traced = telemetry.record_negotiation(
                        ctx.method, record, self.policy, time.perf_counter() - started
                    )
        if record is None:
            return await call_next(ctx)
        if shape is not None and traced is not None and ctx.method != "server/discover":
            self._remember(shape, record, traced)  # (discover's answer is amended below, every time)
        entry = (record, self.negotiator)
        try:  # noqa: SIM105
            setattr(ctx, BOUND_ATTRIBUTE, entry)
        except (AttributeError, TypeError):
            pass
        token = _current.set(entry)
        try:
            result = await call_next(ctx)
        finally:
            _current.reset(token)
        if handshake:
            self._handshaken(ctx, record, result, started)
        elif ctx.method == "server/discover":
            self._advertise(result, "extensions")
        return result

    def _remember(self, shape: bytes, record: Negotiation, traced: telemetry.Traced | None) -> None:
        """Memoise a modern request's outcome under its shape (see `_Repeat`)."""
        if record.era == "modern" and len(shape) <= MAX_ENTRY_BYTES:
            self._repeats.put(
                shape, _Repeat((record, self.negotiator), traced), len(shape) + retained_size(record)
            )

    def _settle(self) -> None:
        """Once: make sure we sit right after the server's span opener (see `__init__`)."""
        self._settled = True
        owner = self._owner() if self._owner is not None else None
        chain = seams.middleware_list(owner) if owner is not None else None
        if chain is not None and any(item is self for item in chain) and seams.place(chain, self):
            logger.info("mcp_negotiation: moved behind the server's span opener from the next request on")

    async def _with_ucp(
        self,
        ctx: ServerRequestContext[Any, Any],
        record: Negotiation,
        ucp: UcpNegotiator,
        headers: Mapping[str, str],
        started: float,
    ) -> Negotiation:
        """The record with this call's UCP agreement, when the call names a platform profile."""
        state = seams.connection_state(ctx)
        try:
            default = state.get(UCP_STATE_KEY) if state is not None else None
            return await ucp.for_call(record, ctx.params, headers, session_default=default)
        except UcpError as failure:
            error = failure.to_jsonrpc_error()
            self._refuse(ctx, Refusal(error["code"], error["message"], error["data"]), started)

    def _advertise(self, result: HandlerResult, where: str) -> None:
        """Tell clients the business's UCP capabilities (legacy: `experimental`)."""
        if self.ucp is None or not isinstance(result, dict):
            return
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            capabilities.setdefault(where, {})[UCP_EXTENSION_ID] = advertisement(self.ucp.policy.business)

    def _negotiated(
        self,
        ctx: ServerRequestContext[Any, Any],
        started: float,
        negotiate: Callable[..., Negotiation | None],
        *args: Any,
        answer: bool = True,
    ) -> Negotiation | None:
        """Run one negotiation: a refusal becomes the client's error (unless the caller
        will `answer` it itself); a bug of ours, a pass-through."""
        try:
            return negotiate(*args)
        except NegotiationRefused as refused:
            if not answer:
                raise
            self._refuse(ctx, refused.refusal, started)
        except Exception as error:
            report(
                logging.ERROR,
                "mcp_negotiation: negotiation failed unexpectedly; passing the request through",
                exc=error,
            )
            return None

    def _stored(self, ctx: ServerRequestContext[Any, Any], started: float, check: bool) -> Negotiation | None:
        """The connection's record from its handshake; with `check`, the request is refused when
        the policy applied since no longer serves the session (see `Negotiator.refreshed`)."""
        state = seams.connection_state(ctx)
        record = state.get(seams.STATE_KEY) if state is not None else None
        if type(record) is not Negotiation:
            if check and type(record) is Refusal:  # the connection's handshake was refused
                self._refuse(ctx, record, started)
            return None
        negotiator = self.negotiator
        # Per legacy request: one C call and two identity tests; a refresh only when the day
        # or the policy changed since the record was made (or last refreshed).
        if record.withheld is not negotiator.last_withdrawn or monotonic() >= negotiator.fresh_until:
            record = self._negotiated(ctx, started, negotiator.refreshed, record, check)
            if record is not None and state is not None:
                state[seams.STATE_KEY] = record
        return record

    def _negotiate_request(self, ctx: ServerRequestContext[Any, Any], era: str) -> Negotiation:
        transport, headers = _origin(ctx)
        meta = _raw_meta(ctx.params)
        # Not a handshake revision: the request must carry its own envelope. The SDK's
        # in-process dispatcher adopts whatever revision an envelope names, "zzz" or a
        # handshake one, so there an envelope is negotiated as one (a handshake revision
        # in it is -32022, as the SDK itself answers on every other path).
        if era != "legacy" or (
            is_object(meta)
            and PROTOCOL_VERSION_KEY in meta
            and seams.transport_kind(ctx) == seams.DIRECT_KIND
        ):
            return self.negotiator.request(
                meta,
                transport=transport,
                headers=headers,
                check_required=ctx.method not in _EXEMPT,
            )
        # A legacy request with no handshake on this connection: stateless HTTP, where
        # every POST gets a fresh connection. What the client declared is unknown.
        return self.negotiator.without_session(
            ctx.protocol_version, transport=transport, headers=headers, any_revision=ctx.method == "ping"
        )

    def _handshake(self, ctx: ServerRequestContext[Any, Any]) -> Negotiation | None:
        """Negotiate a legacy `initialize`, and steer the SDK's answer to the agreed revision.

        A refused handshake is kept for the connection: a client that goes on regardless
        (`notifications/initialized`, then its requests) is refused the same way on each,
        instead of being served as one with no handshake at all (see `_stored`). A refused
        *re*-`initialize` answers only itself: the handshake agreed before stays in force,
        as the SDK keeps serving the connection.
        """
        transport, headers = _origin(ctx)
        try:
            record = self.negotiator.initialize(
                ctx.params, transport=transport, headers=headers, session_id=seams.session_id(ctx)
            )
        except NegotiationRefused as refused:
            state = seams.connection_state(ctx)
            if state is not None and type(state.get(seams.STATE_KEY)) is not Negotiation:
                state[seams.STATE_KEY] = refused.refusal
            raise
        return record if self._steer_sdk_answer(ctx, record) else None

    def _handshaken(
        self, ctx: ServerRequestContext[Any, Any], record: Negotiation, result: HandlerResult, started: float
    ) -> None:
        """After the SDK answered `initialize`: keep the record for the session, and trace it."""
        answered = _answered_version(result)
        if answered != record.protocol_version:
            report(
                logging.WARNING,
                "mcp_negotiation: the SDK answered initialize with %r, the policy chose %r",
                answered,
                record.protocol_version,
            )
        state = seams.connection_state(ctx)
        if state is not None:
            state[seams.STATE_KEY] = record
            if self.ucp is not None:
                state[UCP_STATE_KEY] = session_profile_url(ctx.params)
        self._advertise(result, "experimental")
        if record.degraded:
            report(
                logging.INFO,
                "mcp_negotiation: a client at %s loses %s%s",
                record.protocol_version,
                ", ".join(sorted(record.degraded)),
                # Logs are exported too: the client's name only where the policy opted in.
                f" ({record.client_name!r})" if self.policy.record_client_identity else "",
            )
        telemetry.record_negotiation("initialize", record, self.policy, time.perf_counter() - started)

    def _steer_sdk_answer(self, ctx: ServerRequestContext[Any, Any], record: Negotiation) -> bool:
        """Make the SDK answer, and commit, the revision the policy chose.

        The SDK builds its `initialize` answer from the params and, after the chain,
        commits the connection's revision by re-reading the *same* params object.
        Rewriting that object in place is the only way to keep the answer and the
        committed revision equal when the policy counter-offers.
        """
        if seams.sdk_answer_for(record.requested_version) == record.protocol_version:
            return True
        params = ctx.params
        if not isinstance(params, MutableMapping):
            report(
                logging.WARNING, "mcp_negotiation: cannot steer the initialize answer; the SDK will choose"
            )
            return False
        params["protocolVersion"] = record.protocol_version
        return True

    def _refuse(self, ctx: ServerRequestContext[Any, Any], refusal: Refusal, started: float) -> NoReturn:
        """Trace the refusal and answer the client with it."""
        telemetry.record_refusal(
            ctx.method,
            refusal,
            self.policy,
            time.perf_counter() - started,
            params=ctx.params,
            protocol_version=ctx.protocol_version,
            transport=_origin(ctx)[0],
            session_id=seams.session_id(ctx),
        )
        raise _as_mcp_error(refusal)


def _answered_version(result: HandlerResult) -> object:
    """The revision an `initialize` result announces, whether a dict or a model (FastMCP)."""
    if isinstance(result, Mapping):
        return result.get("protocolVersion")
    return getattr(result, "protocol_version", None)


def _as_mcp_error(refusal: Refusal) -> MCPError:
    return MCPError(refusal.code, refusal.message, dict(refusal.data) if refusal.data is not None else None)
