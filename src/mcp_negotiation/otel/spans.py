"""`capability_negotiated`: one span and one event per negotiation, and its metrics.

Built on `opentelemetry-api` only. With no SDK configured the tracer hands out
non-recording spans, and this module then skips building attributes, so the cost is a
few attribute lookups. Telemetry observes and never changes an outcome: every entry
point swallows (and logs) its own failures instead of raising into the server.

A modern client repeats the same envelope on every request, and the negotiator answers
a repeat with the record it already made. Tracing that repeat in full would put a span,
an event and two instruments' records into the operator's backend for each request that
merely repeats a negotiation, so by default a repeat's SERVER span gets a *link* to the span that
negotiated it (one `Link`, built once and appended to each repeat's span as the SDK's
`add_link` appends it: see `otel_seam`); `Policy(trace_every_request=True)` restores a
full span per request. The request itself is counted and timed by the conventions'
`mcp.server.operation.duration` (`otel.metrics`), whoever answered it.

One span story: what describes the *request* (`mcp.method.name`, `mcp.protocol.version`,
`error.type`) is the SDK's SERVER span's, which this module only corrects (the agreed
revision of an `initialize`); `capability_negotiated` keeps what the negotiation knows
(`network.transport` and `mcp.session.id` of the record, and `mcp.negotiation.*`, `ucp.*`),
and takes the request's attributes too only where no SDK SERVER span is there to hold them
(mcp 1.x, a refusal the SDK makes before dispatch). No attribute is on both; the table is
in `docs/telemetry.md`. Lists are sorted and bounded; client identity is recorded only
when the policy opts in.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from opentelemetry import propagate, trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from ..core import revisions
from ..core.client_log import report
from ..core.errors import Refusal
from ..core.facts import Facts
from ..core.frozen_json import thaw
from ..core.negotiation import PROTOCOL_VERSION_KEY, Negotiation, Policy, Transport
from ..core.outcome import Known, Outcome
from . import metrics
from . import seam as otel_seam
from .metrics import NETWORK_TRANSPORT

__all__ = [
    "MAX_LIST",
    "SPAN_NAME",
    "Traced",
    "record_negotiation",
    "record_outcome",
    "record_refusal",
    "repeated",
    "span_attributes",
]


SPAN_NAME: Final = "capability_negotiated"
MAX_LIST: Final = 32
"""At most this many entries in any list attribute (the rest are dropped, sorted order)."""
_MAX_ITEM: Final = 128
_MAX_SETTINGS: Final = 256
"""An agreed extension's entry (its identifier and its settings as compact JSON) is cut here."""

_FAILED: Final = "telemetry failed (ignored)"
"""Logged, with the exception, wherever telemetry fails: it never raises into the server."""
tracer = trace.get_tracer(metrics.SCOPE)
"""What every span of this library is started with: OpenTelemetry's proxy, which records
once an SDK is configured, whenever that is."""


class Traced:
    """What a repeat of a traced negotiation needs: the span to link to.

    Kept on the negotiation's `Known` (`Known.traced`), so it goes when the `Known` goes.
    """

    __slots__ = ("link",)

    def __init__(self, context: SpanContext | None) -> None:
        self.link = _link_to(context)
        """The link a repeat's span gets (built once: see `otel_seam`); None while the
        negotiation's span was never recorded."""


_NO_ATTRIBUTES: Final = BoundedAttributes(immutable=True)
"""A link's attributes: none, as the SDK's `add_link(context)` gives it (immutable, so shared)."""


def _link_to(context: SpanContext | None) -> Link | None:
    return None if context is None else Link(context, _NO_ATTRIBUTES)


def _bounded(names: Iterable[str]) -> list[str]:
    return sorted({name[:_MAX_ITEM] for name in names})[:MAX_LIST]


def declared_capabilities(capabilities: Mapping[str, Any]) -> list[str]:
    """Capability names a client declared: top-level keys, their sub-keys, extension ids."""
    names: list[str] = []
    for key, value in capabilities.items():
        names.append(key)
        if isinstance(value, Mapping):
            names.extend(f"{key}/{sub}" if key == "extensions" else f"{key}.{sub}" for sub in value)
    return _bounded(names)


def overridden(record: Negotiation) -> list[str]:
    """What the policy's client rules decided: `NAME revoked by RULE`, `NAME granted by RULE`."""
    return _bounded(
        f"{name} {'revoked' if name in record.revoked else 'granted'} by {rule}"
        for name, rule in record.overrides.items()
    )


def agreed_extensions(record: Negotiation) -> list[str]:
    """The extensions agreed, each as `IDENTIFIER SETTINGS` (compact JSON), sorted and bounded."""
    entries = (
        f"{agreed.identifier} {json.dumps(thaw(agreed.settings), separators=(',', ':'), sort_keys=True)}"
        for agreed in record.extensions.values()
    )
    return sorted(entry[:_MAX_SETTINGS] for entry in entries)[:MAX_LIST]


def span_attributes(record: Negotiation, policy: Policy) -> dict[str, Any]:
    """What only a successful negotiation knows: its span's attributes (and its event's),
    without the request's own (`request_attributes`)."""
    attributes: dict[str, Any] = {
        "network.transport": NETWORK_TRANSPORT[record.transport],
        "mcp.negotiation.era": record.era,
        "mcp.negotiation.outcome": record.outcome,
        "mcp.negotiation.capabilities_known": record.capabilities_known,
        "mcp.negotiation.client_capabilities": declared_capabilities(record.client_capabilities),
        "mcp.negotiation.degraded": _bounded(record.degraded),
        "mcp.negotiation.withheld": _bounded(record.withheld),
    }
    if record.requested_version is not None:
        attributes["mcp.negotiation.requested_version"] = record.requested_version[:_MAX_ITEM]
    if record.session_id and record.era == "legacy":  # a 2026-07-28 request has no session
        attributes["mcp.session.id"] = record.session_id
    if policy.record_client_identity:
        if record.client_name:
            attributes["mcp.negotiation.client.name"] = record.client_name[:_MAX_ITEM]
        if record.client_version:
            attributes["mcp.negotiation.client.version"] = record.client_version[:_MAX_ITEM]
    if record.overrides:
        attributes["mcp.negotiation.overrides"] = overridden(record)
    if record.extensions:
        attributes["mcp.negotiation.extensions"] = agreed_extensions(record)
    ucp = record.ucp
    if ucp is not None:
        attributes["ucp.version"] = str(ucp.version)
        attributes["ucp.capabilities"] = _bounded(f"{n}@{v}" for n, v in ucp.capabilities.items())
        attributes["ucp.dropped"] = _bounded(f"{n}:{r}" for n, r in ucp.dropped.items())
    return attributes


def request_attributes(method: str, revision: str | None, error: str | None) -> dict[str, Any]:
    """The request's attributes, which `capability_negotiated` carries only where no SDK
    SERVER span holds them (`_is_sdk_server_span`)."""
    attributes: dict[str, Any] = {"mcp.method.name": method[:_MAX_ITEM]}
    if revision is not None:
        attributes["mcp.protocol.version"] = revision
    if error is not None:
        attributes["error.type"] = error
    return attributes


def _is_sdk_server_span(span: Any) -> bool:
    """Whether `span` is the SDK's SERVER span of the request (or FastMCP's), which holds the
    request's attributes and whose `initialize` revision is safe to correct.

    Only SERVER spans whose attributes can be read (the SDK's own spans) and that name their
    method qualify: a user's span, an ASGI server span, or the client's span of an
    in-process client (current when no server span was opened) is never written to.
    """
    attributes = getattr(span, "attributes", None)
    return (
        getattr(span, "kind", None) is SpanKind.SERVER
        and isinstance(attributes, Mapping)
        and isinstance(attributes.get("mcp.method.name"), str)
    )


def _emit(
    build: Callable[[], dict[str, Any]],
    request: dict[str, Any],
    measure: Callable[[], None],
    duration: float,
    correct_parent: bool,
    carrier: Mapping[str, str] | None = None,
) -> SpanContext | None:
    """Measure (`measure`: the metrics), then start and end the span and add the event.

    `build` (what the negotiation knows) runs only if something records; `request` (the
    request's attributes, with `error.type` for a refusal) goes on our span only where no
    SDK SERVER span holds it. Answers the span's context when it was recorded (something to
    link to), else None. The metrics go first, and each part fails on its own: a broken
    span pipeline (an exporter, a processor) must not take the metrics with it, nor make
    every repeat of this negotiation trace it again.
    """
    end = time.time_ns()
    measure()
    parent = trace.get_current_span()
    context = None
    if carrier is not None and not parent.get_span_context().is_valid:
        context = propagate.extract(carrier)  # before the SDK's span exists: the client's trace
    span = tracer.start_span(
        SPAN_NAME, context=context, kind=SpanKind.INTERNAL, start_time=end - int(duration * 1e9)
    )
    recorded = span.is_recording()  # asked now: an ended span no longer records
    try:
        parent_records = parent.is_recording()
        if recorded or parent_records:
            attributes = build()
            server = parent_records and _is_sdk_server_span(parent)
            if not server:
                attributes.update(request)
            error = request.get("error.type")
            if recorded:
                span.set_attributes(attributes)
                if error is not None:
                    span.set_status(Status(StatusCode.ERROR, f"negotiation refused ({error})"))
            if parent_records:
                parent.add_event(SPAN_NAME, attributes)
                agreed = request.get("mcp.protocol.version")
                if correct_parent and server and agreed is not None:
                    # The SDK's initialize span records its pre-negotiation seed; the agreed one is ours.
                    parent.set_attribute("mcp.protocol.version", agreed)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)
    try:
        span.end(end_time=end)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)
    return span.get_span_context() if recorded else None


SPAN_SOURCE: Final = otel_seam.current_span_source()
"""Where the current span is read directly, per repeat (see `otel_seam`); None: the public API."""

_APPENDERS_LIMIT: Final = 16
_link_appenders: dict[type, otel_seam.LinkAppender] = {}
"""How a repeat links a span of each type seen (`otel_seam.link_appender`)."""


def _link_appender(kind: type) -> otel_seam.LinkAppender:
    append = otel_seam.link_appender(kind)
    if len(_link_appenders) < _APPENDERS_LIMIT:  # span types are the SDK's, not a client's: a few
        _link_appenders[kind] = append
    return append


def repeated(traced: Traced) -> bool:
    """Link a repeat's request span to the span of the negotiation it repeats.

    False when the request's span records but the negotiation was first seen while nothing
    recorded: there is no span to link to, so the caller traces it in full
    (`record_negotiation`). Never raises.
    """
    try:
        if SPAN_SOURCE is not None:
            parent = SPAN_SOURCE[0].get().get(SPAN_SOURCE[1])
        else:
            parent = trace.get_current_span()
        if parent is not None and type(parent) is not NonRecordingSpan and parent.is_recording():
            if traced.link is None:
                return False
            kind = type(parent)
            append = _link_appenders.get(kind) or _link_appender(kind)
            append(parent, traced.link)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)
    return True


def record_negotiation(method: str, known: Known, policy: Policy, duration: float) -> None:
    """Trace a negotiation the first time its `Known` is traced; link its repeats.

    A repeat is the very same `Known` again (a memoised envelope, a scoped UCP call): the
    request's span links to the span that negotiated it, unless the policy wants a span per
    request or that span was never recorded; the metrics count it as one negotiation,
    however often it is traced. Never raises.
    """
    try:
        traced = known.traced
        if traced is not None and not policy.trace_every_request and repeated(traced):
            return
        record = known.record
        first = traced is None
        context = _emit(
            lambda: span_attributes(record, policy),
            request_attributes(method, record.protocol_version, None),
            lambda: metrics.negotiated(record, policy, duration, first=first),
            duration,
            method == "initialize",
        )
        if traced is None:
            known.traced = Traced(context)
        elif traced.link is None:
            traced.link = _link_to(context)  # first seen while nothing recorded: repeats link here now
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def _requested_in(params: Any) -> Any:
    """The revision a refused request asked for: a handshake's, else its modern envelope's."""
    if not isinstance(params, Mapping):
        return None
    meta = params.get("_meta")
    if "protocolVersion" not in params and isinstance(meta, Mapping):
        return meta.get(PROTOCOL_VERSION_KEY)
    return params.get("protocolVersion")


def record_refusal(
    method: str,
    refusal: Refusal,
    policy: Policy,
    duration: float,
    *,
    params: Any,
    protocol_version: str,
    transport: Transport,
    session_id: str | None,
    carrier: Mapping[str, str] | None = None,
) -> None:
    """Trace a refused negotiation, with `error.type` set to the JSON-RPC code. Never raises.

    `carrier`: the HTTP headers of a request refused before the SDK opened its span, whose
    trace context (`traceparent`) the refusal then joins.
    """
    try:
        era = "legacy" if method == "initialize" else revisions.era(protocol_version)
        requested = refusal.data.get("requested") if isinstance(refusal.data, Mapping) else None
        if requested is None:
            requested = _requested_in(params)

        def build() -> dict[str, Any]:
            attributes: dict[str, Any] = {
                "network.transport": NETWORK_TRANSPORT[transport],
                "mcp.negotiation.era": era,
                "mcp.negotiation.outcome": "refused",
            }
            if isinstance(requested, str):
                attributes["mcp.negotiation.requested_version"] = requested[:_MAX_ITEM]
            if session_id and era == "legacy":
                attributes["mcp.session.id"] = session_id
            return attributes

        _emit(
            build,
            request_attributes(method, None, str(refusal.code)),
            lambda: metrics.refused(method, era, requested, refusal.code, duration),
            duration,
            False,
            carrier,
        )
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def record_outcome(facts: Facts, outcome: Outcome, policy: Policy, duration: float) -> None:
    """Record what an engine `Outcome` says is traced for the message `facts` describes: its
    refusal, or its negotiation (whose repeats link to its span). Never raises."""
    known = outcome.known
    if outcome.trace == "negotiated" and known is not None:
        record_negotiation(facts.method, known, policy, duration)
    elif outcome.trace == "refused" and outcome.refusal is not None:
        record_refusal(
            facts.method,
            outcome.refusal,
            policy,
            duration,
            params=facts.params,
            protocol_version=facts.revision or revisions.UNANNOUNCED,
            transport=facts.origin.transport,
            session_id=facts.session_id,
        )
