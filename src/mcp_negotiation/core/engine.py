"""The one decision every inbound message gets, whichever SDK adapter received it.

`Engine.decide(facts)` answers an `Outcome` carrying every effect to apply: pass, serve or
refuse; the `Known` to publish; what the connection holds from now on; how to steer a
legacy `initialize`; what to advertise; what to trace. An adapter hands over its `Facts`
and applies the outcome (`adapters/kernel.py`, shared by both SDK majors), so every rule
about *what* to decide lives here, once.

Sans-I/O, as h11 is: nothing here imports the SDK, OpenTelemetry or an HTTP client, and
nothing awaits. Where a stage needs a profile fetched, the outcome carries a `Need`; the
adapter's driver fetches it and calls `decide` again with what it got.

Repeats are found here: a modern envelope (or a legacy request without a session) seen
before is answered from the memo with the very `Known` it made, which telemetry then links
to rather than traces again; a legacy session's `Known` is what its connection holds.
"""

from __future__ import annotations

import logging
import marshal
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Final

from . import revisions
from .bounded import MAX_ENTRY_BYTES, BoundedCache
from .client_log import report
from .errors import NegotiationRefused, Refusal
from .facts import BEFORE_HANDSHAKE, Facts, Origin
from .frozen_json import MARSHAL_VERSION, is_object
from .listings import LISTINGS
from .negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    Negotiation,
    Negotiator,
    Policy,
    retained_size,
)
from .outcome import EMPTY, PASS, Known, Need, Outcome, TraceKind
from .stages import Dispatch, Fetched, Stage
from .variants import ToolLookup, ToolStage

__all__ = ["EXEMPT", "MEMO_SIZE", "NOTHING_FETCHED", "Engine"]

EXEMPT: Final = frozenset({"server/discover", "ping"})
"""Methods a client may call without the policy's required capabilities, to learn them."""
MEMO_SIZE: Final = 1_024
"""Negotiations the engine keeps for repeated envelopes (and legacy requests without a
session), besides `bounded.MAX_CACHE_BYTES` of memory."""
NOTHING_FETCHED: Final[Fetched] = MappingProxyType({})
DISCOVER: Final = "server/discover"
ANSWERED_IN: Final = {"legacy": "initialize", "modern": DISCOVER}
"""Where each era's clients are told what the stages advertise."""
_SERVED: Final = "engine.served"
"""The key of the outcomes a `Known` is served with (see `Engine._staged`)."""


class Engine:
    """Applies one `Policy` to every inbound message of one server."""

    def __init__(
        self, policy: Policy, negotiator: Negotiator | None = None, *, tools: ToolLookup | None = None
    ) -> None:
        self.policy = policy
        self.negotiator = negotiator or Negotiator(policy)
        # Whatever makes a stage (`stages.StageSource`): the declared extensions, UCP; then,
        # given `tools` (what serves the tool a `tools/call` names, the adapter's view of the
        # server's tools), the stage that refuses a withheld tool or dispatches to a variant:
        # the last, once the call's negotiation (and its scopes) stands.
        sources = (policy.declared_extensions() or None, policy.ucp)
        stages: list[Stage] = [source.stage() for source in sources if source is not None]
        if tools is not None:
            stages.append(ToolStage(tools))
        self.stages: tuple[Stage, ...] = tuple(stages)
        self.memo: BoundedCache[tuple[Any, ...], Known] = BoundedCache(MEMO_SIZE)
        """The `Known`s of repeated requests, by what they were made from. Read it, never fill it."""
        self._advertised = {
            era: _merged(stage.advertisement(era) for stage in self.stages) for era in ANSWERED_IN
        }

    def decide(self, facts: Facts, fetched: Fetched = NOTHING_FETCHED) -> Outcome:
        """The outcome for the message `facts` describes; `fetched`: what was fetched for the
        `Need`s of earlier outcomes for this very message.

        Never raises: a refusal is an outcome, and a bug of ours is logged and the message
        passes through, because negotiation must never take down the user's server.
        """
        try:
            if facts.notification:
                # Never refused; a legacy notification still sees its session's record.
                known, hold = self._held(facts, check=False)
                return PASS if known is None else Outcome("serve", known, hold=hold)
            if facts.revision in revisions.MODERN:
                return self._modern(facts, fetched)
            return self._legacy(facts, fetched)
        except NegotiationRefused as refused:
            return self._refused(facts, refused.refusal)
        except Exception as error:
            report(
                logging.ERROR,
                "negotiation failed unexpectedly; passing the request through",
                exc=error,
            )
            return Outcome("pass", judged=self._judged_after_failure(facts))

    def _modern(self, facts: Facts, fetched: Fetched) -> Outcome:
        """A request carrying its own envelope, traced per request (its repeats as links)."""
        method = facts.method
        if method == "initialize":
            # A removed method, needing no envelope: the SDK's own -32601, as an unwrapped
            # server answers it, not a verdict on what it never had to carry.
            return PASS
        origin = facts.origin
        known = self._enveloped(facts, origin, check=method not in EXEMPT)
        if origin.on_behalf:
            # Negotiated, so that a server listing its tools per client lists this client's,
            # but neither traced nor refused: the client's own request is, next.
            return Outcome("serve", known, listing=method in LISTINGS)
        return self._staged(facts, known, fetched, traced=True, hold=None)

    def _legacy(self, facts: Facts, fetched: Fetched) -> Outcome:
        """A request of a legacy session (its record traced once, at its handshake), or one
        with no session: stateless HTTP, before a handshake, the SDK's in-process dispatcher."""
        if facts.method == "initialize":
            return self._handshake(facts)
        check = facts.method not in EXEMPT
        known, hold = self._held(facts, check=check)
        if known is not None:
            return self._staged(facts, known, fetched, traced=False, hold=hold)
        before = facts.held is BEFORE_HANDSHAKE
        if (before or facts.origin.direct) and _has_envelope(facts.params):
            # Before any handshake, or on the SDK's in-process dispatcher (which adopts
            # whatever revision an envelope names), an envelope is the client's word: it is
            # negotiated as one ("zzz", or a handshake revision in it, is -32022, as the
            # SDK itself answers on every other path).
            known = self._enveloped(facts, facts.origin, check=check)
        elif before:
            return PASS  # the SDK refuses it (answers a `ping`) itself: nothing was served
        else:
            known = self._sessionless(facts, facts.revision or revisions.UNANNOUNCED)
        return self._staged(facts, known, fetched, traced=True, hold=None)

    def _staged(
        self, facts: Facts, known: Known, fetched: Fetched, *, traced: bool, hold: Known | None
    ) -> Outcome:
        """The outcome of a request negotiated as `known`, once every stage had its say."""
        dispatch = None
        for stage in self.stages:
            step = stage.on_request(known, facts, fetched)
            if step is None:
                continue
            if isinstance(step, Known):
                known, traced = step, True  # a record scoped per call is traced per call
            elif type(step) is Dispatch and step.refusal is None:
                dispatch = step.name
            else:
                return _stopped(step, known, hold, traced)
        method = facts.method
        trace: TraceKind | None = "negotiated" if traced else None
        listing = method in LISTINGS
        if hold is not None or method == DISCOVER:
            return Outcome(
                "serve",
                known,
                hold=hold,
                advertise=self._advertised["modern"] if method == DISCOVER else None,
                trace=trace,
                listing=listing,
                judged=True,
                dispatch=dispatch,
            )
        # What a repeat is served with is the same every time: made once, kept on its `Known`.
        key = (_SERVED, traced, listing)
        served: Outcome | None = known.derived.get(key)
        if served is None:
            made = Outcome("serve", known, trace=trace, listing=listing, judged=True)
            served = known.derive(key, made)
        return served if dispatch is None else replace(served, dispatch=dispatch)

    @staticmethod
    def _judged_after_failure(facts: Facts) -> bool:
        """Whether a message our bug let through reached negotiation as it would have: not a
        notification, a modern `initialize`, nor a request the SDK sends itself while serving
        another; False when even that cannot be read."""
        try:
            modern = facts.revision in revisions.MODERN
            return not facts.notification and not (
                modern and (facts.method == "initialize" or facts.origin.on_behalf)
            )
        except Exception:
            return False

    def _refused(self, facts: Facts, refusal: Refusal) -> Outcome:
        if facts.revision in revisions.MODERN and facts.origin.on_behalf:
            return EMPTY  # an empty result, from which the SDK checks nothing and logs no error
        hold = None
        if facts.method == "initialize" and type(facts.held) is not Known:
            # A client that goes on regardless (`notifications/initialized`, then its
            # requests) is refused the same way on each, rather than served as one with
            # no handshake at all. A refused *re*-initialize leaves the accepted one in force.
            hold = refusal
        return Outcome("refuse", refusal=refusal, hold=hold, trace="refused", judged=True)

    def _held(self, facts: Facts, *, check: bool) -> tuple[Known | None, Known | None]:
        """The connection's `Known` (made anew when the date or the policy changed since), and
        it again when the connection should hold the new one. With `check`, a refused
        handshake, or a session the policy applied since no longer serves, is refused."""
        held = facts.held
        if type(held) is not Known:
            if check and type(held) is Refusal:
                raise NegotiationRefused(held)
            return None, None
        negotiator = self.negotiator
        record = held.record
        if not negotiator.withdrawals.stands_for(record):
            # The day or the policy changed since the record was made (or last refreshed),
            # or the day is to be read again.
            record = negotiator.refreshed(record, check)
        if record.session_id is None and record.transport == "http" and (session_id := facts.session_id):
            # Stateful HTTP on mcp 1.x: the SDK routed the request by this id, so it is the
            # server's; `initialize` carried none (the id comes with its answer).
            record = replace(record, session_id=session_id)
        if record is held.record and held.negotiator is negotiator:
            return held, None
        known = Known(record, negotiator, session=held.session)
        return known, known

    def _enveloped(self, facts: Facts, origin: Origin, *, check: bool) -> Known:
        """The `Known` of a request carrying its own envelope (memoised by its content: equal
        bytes of its three values mean equal envelopes, `true` is not `1`, and equal ones in
        another key order merely miss); with `check`, refused when it lacks a capability the
        policy requires."""
        negotiator = self.negotiator
        params = facts.params
        try:
            get = params["_meta"].get
            text = marshal.dumps(
                (get(PROTOCOL_VERSION_KEY), get(CLIENT_CAPABILITIES_KEY), get(CLIENT_INFO_KEY)),
                MARSHAL_VERSION,
            )
        except (LookupError, TypeError, AttributeError, ValueError):
            # No envelope (no object), or values that are not plain JSON (nested past marshal's
            # depth, say): negotiated, and refused if it must be, every time.
            key = known = None
        else:
            key = (origin.transport, negotiator.withdrawals.now(), text, *origin.headers.items())
            known = self.memo.get(key)
        if known is None:
            meta = params.get("_meta") if is_object(params) else None
            record = negotiator.request(
                meta, transport=origin.transport, headers=origin.headers, check_required=False
            )
            known = Known(record, negotiator)
            if key is not None:
                self._keep(key, known, len(key[2]))
        if check:
            negotiator.check_required(known.record)
        return known

    def _sessionless(self, facts: Facts, revision: str) -> Known:
        """A legacy request with no handshake on its connection: stateless HTTP, where every
        POST gets a fresh connection, or a request before `initialize`. What the client
        declared is unknown (see `Negotiator.without_session`)."""
        negotiator = self.negotiator
        transport, headers = facts.origin[:2]
        any_revision = facts.method == "ping"
        negotiator.check_sessionless(revision, transport, any_revision=any_revision)
        key = (transport, negotiator.withdrawals.now(), revision, *headers.items())  # (a str: no envelope's)
        known = self.memo.get(key)
        if known is None:
            record = negotiator.without_session(
                revision, transport=transport, headers=headers, any_revision=any_revision
            )
            known = Known(record, negotiator)
            self._keep(key, known, len(revision))
        return known

    def _keep(self, key: tuple[Any, ...], known: Known, size: int) -> None:
        """Memoise `known` under `key` (whose own text is `size` bytes), unless the two are too
        big to keep (see `bounded`): then it is negotiated again on each request."""
        if size <= MAX_ENTRY_BYTES:
            self.memo.put(key, known, size + retained_size(known.record))

    def _handshake(self, facts: Facts) -> Outcome:
        """A legacy `initialize`: the record, whose revision the SDK must answer, kept by the
        connection once the SDK answered."""
        params = facts.params
        origin = facts.origin
        record = self.negotiator.initialize(
            params, transport=origin.transport, headers=origin.headers, session_id=facts.session_id
        )
        # Logs are exported too: the client's name only where the policy opted in.
        named = f" ({record.client_name!r})" if self.policy.record_client_identity else ""
        if record.degraded:
            report(
                logging.INFO,
                "a client at %s loses %s%s",
                record.protocol_version,
                ", ".join(sorted(record.degraded)),
                named,
            )
        if record.overrides:
            report(
                logging.INFO,
                "a client at %s%s is answered by client_overrides: %s",
                record.protocol_version,
                named,
                _overridden(record),
            )
        kept = [stage.session(params) for stage in self.stages]
        known = Known(record, self.negotiator, session=dict(item for item in kept if item is not None))
        return Outcome(
            "serve",
            known,
            hold=known,
            steer=record.protocol_version,
            advertise=self._advertised["legacy"],
            trace="negotiated",
            judged=True,
        )


def _stopped(step: Dispatch | Need | Refusal, known: Known, hold: Known | None, traced: bool) -> Outcome:
    """The outcome of a stage that stops the request: fetch first, refuse it, or refuse the
    tool it calls (the tool's answer: the negotiation stands, and is traced as it is)."""
    if isinstance(step, Need):
        return Outcome("pass", need=step, judged=True)
    if isinstance(step, Refusal):
        return Outcome("refuse", refusal=step, hold=hold, trace="refused", judged=True)
    trace: TraceKind | None = "negotiated" if traced else None
    return Outcome("refuse", known, refusal=step.refusal, hold=hold, trace=trace, judged=True)


def _overridden(record: Negotiation) -> str:
    """What the policy's client rules decided for `record`, for the operator's line."""
    return ", ".join(
        f"{name} {'revoked' if name in record.revoked else 'granted'} by {rule!r}"
        for name, rule in sorted(record.overrides.items())
    )


def _has_envelope(params: Any) -> bool:
    meta = params.get("_meta") if is_object(params) else None
    return is_object(meta) and PROTOCOL_VERSION_KEY in meta


def _merged(
    advertisements: Iterable[Mapping[str, Mapping[str, Any]] | None],
) -> Mapping[str, Mapping[str, Any]] | None:
    """The stages' advertisements for one era, section by section; None when there are none."""
    merged: dict[str, dict[str, Any]] = {}
    for advertisement in advertisements:
        for section, entries in (advertisement or {}).items():
            merged.setdefault(section, {}).update(entries)
    if not merged:
        return None
    return MappingProxyType({section: MappingProxyType(entries) for section, entries in merged.items()})
