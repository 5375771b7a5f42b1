"""The mcp 2.x adapter: an SDK middleware that applies the engine's decision to every message.

It gathers the facts of a message from the SDK's request context, asks the `Engine`
(pure, in the core) what to do, and applies the answer the SDK's way: the record is
published in a ContextVar and on the request context, a refusal is raised as the SDK's
`MCPError`, and telemetry records what the decision says. It decides nothing itself.

A modern request shaped like one served before is answered from the engine's repeat
memo before any fact is gathered: one lookup, a counted repeat, a publish.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping
from functools import partial
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from pydantic import ValidationError

from ...core import revisions
from ...core.client_log import report
from ...core.engine import Decision, Engine, Inbound, Pipe, Shape, UcpRepeat
from ...core.negotiation import Negotiation, Policy, Transport
from ...otel import metrics as operations
from ...otel import spans as telemetry
from ...otel.semconv import TOOL_ERROR
from ..compat import as_exception
from ..context import Entry, Learning, current
from ..listings import LISTINGS, listing_call
from ..origin import NO_HEADERS, UCP_AGENT, http_headers, http_scope, on_stdio, origin
from . import seams
from .asgi import JUDGED_MARK

logger = logging.getLogger("mcp_negotiation")


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
        self.engine = Engine(policy)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        started = operations.clock()  # [metrics] None without a MeterProvider: nothing else is paid
        try:
            if not self._settled:
                self._settle()
            if ctx.method in LISTINGS:  # requirements declared, and scoped on request (`catalog`)
                call_next = listing_call(call_next, self._owner() if self._owner is not None else None)
            key = base = entry = agent = None  # a repeat: one lookup and a publish
            if ctx.protocol_version in revisions.LEGACY:  # a session's: the record its handshake left
                held = self.engine.held_entry(seams.held(ctx), ctx.method)
                if ctx.request is not None:  # over HTTP
                    held, agent = _held_over_http(ctx, held)
                if not isinstance(held, Negotiation):
                    entry = held
                elif (scope := self.engine.memoised_scope(held, ctx.params, agent)) is not None:  # a UCP call
                    entry = self.repeat_entry(ctx, scope, None)
                else:
                    entry = await self._scoped(ctx, held, legacy=True, agent=agent)
            elif ctx.request_id is not None:  # a modern request's: the outcome its shape had
                pipe: Pipe | None = on_stdio.get() and seams.transport_kind(ctx) != seams.DIRECT_KIND
                if ctx.request is not None:  # over HTTP
                    pipe, agent = _pipe(ctx)
                key, repeat = self.engine.memo.find(ctx.method, ctx.params, ctx.protocol_version, pipe)
                if repeat is not None:
                    if repeat.traced is not None:
                        entry = repeat.published if telemetry.repeated(repeat.traced) else None
                    elif scope := self.engine.memoised_scope(base := repeat.published[0], ctx.params, agent):
                        entry = self.repeat_entry(ctx, scope, None)  # a UCP call: its negotiation memoised
                    else:
                        entry = await self._scoped(ctx, base, legacy=False, agent=agent)
            if entry is not None:
                try:  # noqa: SIM105  (`seams.bind` inline; suppress() costs a microsecond per request)
                    setattr(ctx, seams.BOUND_ATTRIBUTE, entry)
                except (AttributeError, TypeError):
                    pass
                token = current.set(entry)
                try:
                    result = await call_next(ctx)
                finally:
                    current.reset(token)
            else:
                result = await self._decided(ctx, call_next, key, base)
        except BaseException as error:  # [metrics] a refusal, or what the chain raised
            if started is not None:
                _measure(ctx, started, None, error)
            raise
        if started is not None:
            _measure(ctx, started, result, None)
        return result

    async def _scoped(
        self, ctx: ServerRequestContext[Any, Any], record: Negotiation, *, legacy: bool, agent: bytes | None
    ) -> Entry | None:
        """A repeat of a UCP call the memo did not answer (`Engine.memoised_scope`, which answers
        without an await): its record scoped to the agreement found for this call; None when
        the agreement cannot be had (the call is decided in full). `legacy`: the record is a
        session's, whose default profile (stdio) it may use. `agent`: the raw `UCP-Agent`
        header of a call over HTTP."""
        started = time.perf_counter()
        default = seams.held(ctx, seams.UCP_STATE_KEY) if legacy else None
        repeat = await self.engine.scoped_repeat(record, ctx.params, default, agent)
        return None if repeat is None else self.repeat_entry(ctx, repeat, started)

    def repeat_entry(
        self, ctx: ServerRequestContext[Any, Any], repeat: UcpRepeat, started: float | None
    ) -> Entry:
        """What a UCP repeat publishes, counted as a repeat of its trace, or traced per call
        when it has none to link to (`started`: when its scoping began; None: just now): for a
        tool whose `@requires_ucp` narrowed it before, that narrowed entry (see `Learning`)."""
        traced = repeat.traced
        if traced is None or not telemetry.repeated(traced):
            # (`record_negotiation` counts a repeat of a record it traced before, as `repeated`.)
            took = 0.0 if started is None else time.perf_counter() - started
            repeat.traced = telemetry.record_negotiation(ctx.method, repeat.published[0], self.policy, took)
        tool = ctx.params.get("name") if type(ctx.params) is dict else None
        if type(tool) is not str:
            return repeat.published
        return repeat.by_tool.get(tool) or Learning.of(repeat, tool)

    async def _decided(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        key: Shape | None,
        base: Negotiation | None,
    ) -> HandlerResult:
        """Everything but a repeat: gather the facts, decide, and apply the decision."""
        started = time.perf_counter()
        engine = self.engine
        message = _inbound(ctx)
        decision = engine.decide(message, base)
        if decision.judged and (scope := http_scope(ctx.request)) is not None:
            scope[JUDGED_MARK] = True  # a 400 from here on is no refusal before dispatch
        if decision.ucp:
            decision = await engine.with_ucp(decision, message)
        traced = self._record(ctx, message, decision, started)
        if key is not None:
            engine.remember(key, decision, traced)
        if decision.hold is not None:
            _hold(ctx, seams.STATE_KEY, decision.hold)
        if decision.action == "serve" and decision.record is not None:
            if decision.handshake:
                return await self._handshake(ctx, call_next, decision.record, started)
            result = await _publish(ctx, call_next, (decision.record, engine.negotiator))
            engine.advertise(ctx.method, result)
            return result
        if decision.action == "refuse" and decision.refusal is not None:
            raise as_exception(decision.refusal)
        return {} if decision.action == "empty" else await call_next(ctx)

    def _record(
        self, ctx: ServerRequestContext[Any, Any], message: Inbound, decision: Decision, started: float
    ) -> telemetry.Traced | None:
        return telemetry.record_decision(
            ctx.method,
            decision,
            self.policy,
            time.perf_counter() - started,
            params=ctx.params,
            protocol_version=ctx.protocol_version,
            transport=message.transport,
            session_id=message.session_id,
        )

    async def _handshake(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, record: Negotiation, started: float
    ) -> HandlerResult:
        """A legacy `initialize`: steer the SDK's answer to the agreed revision, then keep the
        record for the session and trace it."""
        if not seams.steer_initialize(ctx, record.protocol_version):
            report(logging.WARNING, "mcp_negotiation: cannot steer the initialize answer; the SDK chooses")
            return await call_next(ctx)
        engine = self.engine
        result = await _publish(ctx, call_next, (record, engine.negotiator))
        held = engine.handshaken(record, ctx.params, _answered_version(result))
        stateless = record.transport == "http" and not seams.session_id(ctx)  # a POST of its own
        if not stateless and not isinstance(seams.held(ctx), Negotiation) and operations.clock() is not None:
            # [metrics] the session's first handshake: timed from it until the connection closes
            ended = partial(operations.session_ended, started, record.protocol_version)
            seams.on_connection_close(ctx, partial(ended, http=record.transport == "http"))
        _hold(ctx, seams.STATE_KEY, held.record)
        if engine.ucp is not None:
            _hold(ctx, seams.UCP_STATE_KEY, held.ucp_default)
        engine.advertise(ctx.method, result)
        telemetry.record_negotiation("initialize", record, self.policy, time.perf_counter() - started)
        return result

    def _settle(self) -> None:
        """Once: make sure we sit right after the server's span opener (see `__init__`)."""
        self._settled = True
        owner = self._owner() if self._owner is not None else None
        chain = seams.middleware_list(owner) if owner is not None else None
        if chain is not None and any(item is self for item in chain) and seams.place(chain, self):
            logger.info("mcp_negotiation: moved behind the server's span opener from the next request on")


def _pipe(ctx: ServerRequestContext[Any, Any]) -> tuple[Pipe | None, bytes | None]:
    """What a modern request over HTTP adds to its shape (`RepeatMemo`): the negotiation
    headers its record would keep (`origin`); and the raw `UCP-Agent` header among them, for
    its UCP call. None, for a decision in full, for a request the SDK makes while serving
    another (`seams.served_for_another`), and for `initialize`. A request whose shape is
    memoised is marked judged here, as `_decided` marks it: a 400 from here on is no refusal
    before dispatch."""
    scope = http_scope(ctx.request)
    if scope is None or ctx.method == "initialize":
        return None, None
    kept, sent = http_headers(scope)
    if seams.served_for_another(ctx.method, sent):
        return None, None
    scope[JUDGED_MARK] = True
    return tuple(kept.items()), kept.get(UCP_AGENT)


def _held_over_http(
    ctx: ServerRequestContext[Any, Any], held: Entry | Negotiation | None
) -> tuple[Entry | Negotiation | None, bytes | None]:
    """What a legacy session's message over HTTP is served from without a decision, as off
    HTTP: the entry its held record decides (`Engine.held_entry`), once that record knows its
    session (otherwise None: `decide` adds it, once); and for a UCP call (the record alone),
    the raw `UCP-Agent` header it came with, which may name its profile too. A request is
    marked judged, as `_decided` marks it: a 400 from here on is no refusal before dispatch."""
    record = held[0] if type(held) is tuple else held
    if type(record) is not Negotiation or record.session_id is None:
        return None, None
    scope = http_scope(ctx.request)
    if scope is None:
        return held, None
    if ctx.request_id is not None:
        scope[JUDGED_MARK] = True
    return held, (http_headers(scope)[0].get(UCP_AGENT) if held is record else None)


def _inbound(ctx: ServerRequestContext[Any, Any]) -> Inbound:
    """The facts of one message, from the SDK's request context and its connection."""
    kind = seams.transport_kind(ctx)
    transport: Transport
    if kind == seams.DIRECT_KIND:  # the SDK's in-process dispatcher, even when a stdio server's tool runs it
        transport, headers, sent = "memory", NO_HEADERS, None
    else:
        transport, headers, sent = origin(http_scope(ctx.request), http=kind == seams.HTTP_KIND)
    state = seams.connection_state(ctx)
    return Inbound(
        method=ctx.method,
        params=ctx.params,
        revision=ctx.protocol_version,
        transport=transport,
        headers=headers,
        notification=ctx.request_id is None,
        held=state.get(seams.STATE_KEY) if state is not None else None,
        session_id=seams.session_id(ctx),
        ucp_default=state.get(seams.UCP_STATE_KEY) if state is not None else None,
        direct=kind == seams.DIRECT_KIND,
        on_behalf=seams.served_for_another(ctx.method, sent),
    )


async def _publish(ctx: ServerRequestContext[Any, Any], call_next: CallNext, entry: Entry) -> HandlerResult:
    """Run the rest of the chain with `entry` published for the handler (see `context`)."""
    seams.bind(ctx, entry)
    token = current.set(entry)
    try:
        return await call_next(ctx)
    finally:
        current.reset(token)


def _hold(ctx: ServerRequestContext[Any, Any], key: str, value: object) -> None:
    """Keep `value` for the rest of the connection, where the SDK offers per-connection state."""
    state = seams.connection_state(ctx)
    if state is not None:
        state[key] = value


def _answered_version(result: HandlerResult) -> object:
    """The revision an `initialize` result announces, whether a dict or a model (FastMCP)."""
    if isinstance(result, Mapping):
        return result.get("protocolVersion")
    return getattr(result, "protocol_version", None)


def _measure(
    ctx: ServerRequestContext[Any, Any], started: float, result: HandlerResult, error: BaseException | None
) -> None:
    """[metrics] One answered message in `mcp.server.operation.duration` (`otel.metrics`): its
    JSON-RPC error code as the SDK answers it, or a failure without one; none for a request the
    SDK made itself (`seams.served_for_another`), which no client sent. Never raises."""
    try:
        scope = http_scope(ctx.request)
        if scope is not None and seams.served_for_another(ctx.method, http_headers(scope)[1]):
            return
        code = failure = None
        if isinstance(error, MCPError):
            code = error.error.code
        elif isinstance(error, ValidationError):  # the SDK answers it as invalid params
            code = INVALID_PARAMS
        elif error is not None:
            failure = type(error).__qualname__
        elif ctx.method == "tools/call" and _is_tool_error(result):
            failure = TOOL_ERROR
        params = ctx.params
        revision: object = ctx.protocol_version
        if ctx.method == "initialize":  # the SDK's seed until it answers: the answer, else the ask
            revision = _answered_version(result) if result is not None else None
            revision = revision or (params.get("protocolVersion") if isinstance(params, Mapping) else None)
        operations.operation(
            started,
            ctx.method,
            revision,
            _transport(ctx, scope),
            target=params.get("name") if isinstance(params, Mapping) else None,
            code=code,
            error=failure,
            http_version=scope.get("http_version") if scope is not None else None,
        )
    except Exception as problem:
        report(logging.ERROR, "mcp_negotiation: telemetry failed (ignored)", exc=problem)


def _transport(ctx: ServerRequestContext[Any, Any], scope: Mapping[str, Any] | None) -> Transport:
    """A message's transport, as `_inbound` finds it (without reading its headers)."""
    kind = seams.transport_kind(ctx)
    if kind == seams.DIRECT_KIND:
        return "memory"
    if scope is not None or kind == seams.HTTP_KIND:
        return "http"
    return "stdio" if on_stdio.get() else "memory"


def _is_tool_error(result: object) -> bool:
    """Whether a `tools/call` result reaches the wire as an error result, as the SDK's own
    span tells it: the model, or its camelCase dict."""
    if isinstance(result, CallToolResult):
        return result.is_error is True
    return isinstance(result, Mapping) and result.get("isError") is True
