"""The adapter kernel: one message's outcome applied, the same way on both SDK majors.

Each adapter (the mcp 2.x middleware, the mcp 1.x wrapt shell) wraps one inbound message
in a `Message`: the engine's `Facts`, read lazily over its SDK's context, and the few
operations only its SDK can do (hold a value for the connection, steer the `initialize`
answer, hand the message on, answer a refusal). `apply` does the rest, for both: asks the
engine once, meets the I/O the outcome needs (a profile fetch) and asks again, then
holds, traces, publishes and answers as the outcome says. No adapter holds a rule about
what to decide, nor calls the engine anywhere else.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final, NamedTuple, Protocol

from ..core import revisions
from ..core.client_log import report
from ..core.engine import Engine
from ..core.errors import Refusal
from ..core.facts import Facts
from ..core.outcome import Known, Outcome
from ..otel import metrics as operations
from ..otel import spans
from .context import current

__all__ = ["MAX_NEEDS", "Answered", "Message", "advertised", "apply", "decided"]

MAX_NEEDS: Final = 4
"""Fetches one message may need (a platform's profile, the business's for its version)."""


class Message(Facts, Protocol):
    """One inbound message as an adapter hands it to `apply`: its facts, and its SDK's ways."""

    def hold(self, value: Known | Refusal) -> None:
        """Keep `value` for the rest of the connection (where the SDK has connections)."""
        ...

    def steer(self, revision: str) -> bool:
        """Make the SDK answer, and commit, `revision` for this `initialize`; False if it cannot."""
        ...

    def forward(self, known: Known | None, outcome: Outcome) -> Awaitable[Any]:
        """Hand the message on (with `known` published, by the kernel, when there is one), and
        answer what the SDK answers: a listing as its client reads it (`listings`), with
        `outcome.advertise` added (`advertised`).

        This and the two below tell the HTTP layer, where there is one, when the outcome is
        `judged`: the message reached negotiation, so a 400 after it is no refusal the SDK
        made before dispatch."""
        ...

    async def refuse(self, refusal: Refusal, outcome: Outcome) -> Any:
        """Answer `refusal` as the JSON-RPC error it is."""
        ...

    async def empty(self, outcome: Outcome) -> Any:
        """Answer an empty result."""
        ...

    def answered(self, result: Any) -> object:
        """The revision an `initialize` answer announces."""
        ...

    def answered_as(self, result: Any, error: BaseException | None) -> Answered | None:
        """How the SDK answered the message (what `forward` returned, or the exception it
        raised): None for one no client sent (the SDK's own, while serving another)."""
        ...

    def on_close(self, callback: Callable[[bool], object]) -> bool:
        """Have `callback(over_http)` run when the message's connection closes, where it is a
        session (False for none: in memory, stdio and stateful HTTP it is; a stateless POST not)."""
        ...


class Answered(NamedTuple):
    """How the SDK answered a message, for the operation metric: the JSON-RPC error code it
    answered with, or a failure without one (`tool_error`, an exception's type name), and the
    HTTP version over HTTP."""

    code: int | None = None
    error: str | None = None
    http_version: object = None


def apply(engine: Engine, message: Message) -> Awaitable[Any]:
    """Decide `message` and apply the outcome: what the SDK should answer, to be awaited.

    With a `MeterProvider` configured, the message is timed as the conventions'
    `mcp.server.operation.duration` too, whatever answers it (`_timed`)."""
    timed = operations.clock()
    return _applied(engine, message, None) if timed is None else _timed(engine, message, timed)


async def _timed(engine: Engine, message: Message, timed: float) -> Any:
    try:
        result = await _applied(engine, message, timed)
    except BaseException as error:
        _measured(message, timed, None, error)
        raise
    _measured(message, timed, result, None)
    return result


def _measured(message: Message, timed: float, result: Any, error: BaseException | None) -> None:
    """One answered message in `mcp.server.operation.duration`: as the SDK answered it (its
    JSON-RPC code, or a failure without one), none for a message no client sent."""
    answered = message.answered_as(result, error)
    if answered is None:
        return
    params = message.params
    revision: object = message.revision or revisions.UNANNOUNCED
    if message.method == "initialize":  # the SDK's seed until it answers: the answer, else the ask
        revision = message.answered(result) if result is not None else None
        revision = revision or (params.get("protocolVersion") if isinstance(params, Mapping) else None)
    operations.operation(
        timed,
        message.method,
        revision,
        message.origin.transport,
        target=params.get("name") if isinstance(params, Mapping) else None,
        code=answered.code,
        error=answered.error,
        http_version=answered.http_version,
    )


async def _applied(engine: Engine, message: Message, timed: float | None) -> Any:
    started = time.perf_counter()
    outcome = await decided(engine, message)
    steer = outcome.steer
    if steer is not None and not message.steer(steer):
        report(logging.WARNING, "cannot steer the initialize answer; the SDK chooses")
        return await message.forward(None, replace(outcome, advertise=None))
    if steer is None:  # (a handshake is kept, and traced, once the SDK has answered it)
        _kept(engine, message, outcome, started)
    known = outcome.known
    if outcome.action == "serve" and known is not None:
        token = current.set(known)  # what runs inside reads it (see `context`)
        try:
            result = await message.forward(known, outcome)
        finally:
            current.reset(token)
        if steer is not None:
            _answered(engine, message, outcome, steer, result, started, timed)
        return result
    if outcome.action == "refuse" and outcome.refusal is not None:
        return await message.refuse(outcome.refusal, outcome)
    if outcome.action == "empty":
        return await message.empty(outcome)
    return await message.forward(None, outcome)


def _answered(
    engine: Engine,
    message: Message,
    outcome: Outcome,
    steer: str,
    result: Any,
    started: float,
    timed: float | None,
) -> None:
    """A legacy `initialize` the SDK answered, having been steered to `steer`: kept, traced,
    and (`timed`, with a `MeterProvider`) a session timed from it until its connection
    closes, where the SDK has connections and this is the connection's first handshake."""
    answered = message.answered(result)
    if answered != steer:
        report(logging.WARNING, "the SDK answered initialize with %r, the policy chose %r", answered, steer)
    if timed is not None and type(message.held) is not Known:
        message.on_close(lambda over_http: operations.session_ended(timed, steer, http=over_http))
    _kept(engine, message, outcome, started)


def _kept(engine: Engine, message: Message, outcome: Outcome, started: float) -> None:
    """What the connection holds from now on, and the trace (`started`: when deciding began)."""
    if outcome.hold is not None:
        message.hold(outcome.hold)
    if outcome.trace is not None:
        spans.record_outcome(message, outcome, engine.policy, time.perf_counter() - started)


async def decided(engine: Engine, facts: Facts) -> Outcome:
    """The engine's outcome for `facts`, once the I/O it needs is done (see `_met`): the
    driver every caller of the engine shares, an SDK adapter or not."""
    outcome = engine.decide(facts)
    return outcome if outcome.need is None else await _met(engine, facts, outcome)


async def _met(engine: Engine, facts: Facts, outcome: Outcome) -> Outcome:
    """`outcome` once the I/O it needs is done: each `Need` fetched by the policy's own
    resolver, and the message decided again with what came back (a profile, or the failure,
    which the stage that asked turns into the refusal it should be)."""
    fetched: dict[str, object] = {}
    for _ in range(MAX_NEEDS):
        need = outcome.need
        if need is None:
            return outcome
        try:
            fetched[need.url] = await need.resolver.resolve(need.url)
        except Exception as failure:  # (cancellation is no failure of the resolver's: it goes on up)
            fetched[need.url] = failure
        outcome = engine.decide(facts, fetched)
    if outcome.need is None:
        return outcome
    report(logging.ERROR, "a stage kept asking for profiles; passing the request through")
    return Outcome("pass", judged=outcome.judged)


def advertised(capabilities: Any, additions: Mapping[str, Mapping[str, Any]]) -> None:
    """Add what the stages advertise to an answer's `capabilities` map (a copy each time:
    the SDK or a middleware after ours may amend what it answers)."""
    if not isinstance(capabilities, dict):
        return
    for section, entries in additions.items():
        held = capabilities.get(section)
        if not isinstance(held, dict):
            held = capabilities[section] = {}
        held.update(copy.deepcopy(dict(entries)))
