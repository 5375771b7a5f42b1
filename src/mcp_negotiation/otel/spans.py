"""`capability_negotiated`: one span, one event and two metrics per negotiation.

Built on `opentelemetry-api` only. With no SDK configured the tracer hands out
non-recording spans, and this module then skips building attributes, so the cost is a
few attribute lookups. Telemetry observes and never changes an outcome: every entry
point swallows (and logs) its own failures instead of raising into the server.

A modern client repeats the same envelope on every request, and the negotiator answers
a repeat with the record it already made. Tracing that repeat in full would cost more
than the request itself (an SDK span, an event and two synchronous instruments are
about 100 µs), so by default a repeat is counted and its SERVER span gets a *link* to
the span that negotiated it (one `Link`, built once and appended to each repeat's span
as the SDK's `add_link` appends it: see `otel_seam`);
`Policy(trace_every_request=True)` restores a full span per request. The count is an
asynchronous counter over in-process tallies, so counting costs one C call rather than a
trip through the metrics SDK.

Attribute names follow the semantic conventions where they exist (`mcp.method.name`,
`mcp.protocol.version`, `mcp.session.id`, `network.transport`, `error.type`); the rest
live under `mcp.negotiation.*` and `ucp.*` and are documented in `docs/telemetry.md`.
Lists are sorted and bounded; client identity is recorded only when the policy opts in.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from opentelemetry import metrics, propagate, trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from ..core import revisions
from ..core.client_log import report
from ..core.errors import Refusal
from ..core.facts import Facts
from ..core.negotiation import PROTOCOL_VERSION_KEY, Negotiation, Policy, Transport
from ..core.outcome import Known, Outcome
from . import seam as otel_seam

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

NETWORK_TRANSPORT: Final[Mapping[Transport, str]] = {
    "stdio": "pipe",
    "http": "tcp",
    "memory": "inproc",
    "unknown": "unknown",
}

_FAILED: Final = "telemetry failed (ignored)"
"""Logged, with the exception, wherever telemetry fails: it never raises into the server."""
tracer = trace.get_tracer("mcp_negotiation")
"""What every span of this library is started with: OpenTelemetry's proxy, which records
once an SDK is configured, whenever that is."""
_meter = metrics.get_meter("mcp_negotiation")
LABEL_KEYS: Final = ("mcp.negotiation.era", "mcp.protocol.version", "mcp.negotiation.outcome")
Labels = tuple[str, str, str]
"""Metric label values in `LABEL_KEYS` order; every value comes from a small fixed set."""


class _Tally:
    """A counter whose increment is one C call, exact across threads with no lock.

    `add` is `next` on an `itertools.count`, atomic under the GIL. Reading a count
    advances it too, so `read` (called under `_tallies_lock`) subtracts its own reads.
    """

    __slots__ = ("_count", "_reads", "add")

    def __init__(self) -> None:
        self._count = itertools.count()
        self.add = self._count.__next__
        self._reads = 0

    def read(self) -> int:
        value = next(self._count) - self._reads
        self._reads += 1
        return value


_tallies: dict[Labels, _Tally] = {}
_tallies_lock = threading.Lock()


def tally_of(labels: Labels) -> _Tally:
    """The `mcp.negotiation.count` counter of `labels`, made when first counted."""
    tally = _tallies.get(labels)
    if tally is None:
        with _tallies_lock:
            tally = _tallies.setdefault(labels, _Tally())
    return tally


def _observe_counts(options: CallbackOptions) -> Iterable[Observation]:
    with _tallies_lock:
        counts = [(labels, tally.read()) for labels, tally in _tallies.items()]
    return [Observation(value, dict(zip(LABEL_KEYS, labels, strict=True))) for labels, value in counts]


_meter.create_observable_counter(
    "mcp.negotiation.count",
    callbacks=[_observe_counts],
    unit="{negotiation}",
    description="Negotiations by era, revision and outcome, repeats of a cached negotiation included",
)
DURATION_BUCKETS: Final = (
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
"""Advised histogram boundaries (seconds): negotiating takes microseconds, and the SDK's
default boundaries (0, 5, 10, ... 10000) would put every observation in the first bucket."""
duration_histogram = _meter.create_histogram(
    "mcp.negotiation.duration",
    unit="s",
    description="Time spent negotiating one request or handshake (repeats of a cached negotiation excluded)",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
"""`mcp.negotiation.duration`, recorded once per negotiation traced in full."""


class Traced:
    """What a repeat of a traced negotiation needs: the span to link to, and its counter.

    Kept on the negotiation's `Known` (`Known.traced`), so it goes when the `Known` goes.
    """

    __slots__ = ("count", "link")

    def __init__(self, context: SpanContext | None, labels: Labels) -> None:
        self.link = _link_to(context)
        """The link a repeat's span gets (built once: see `otel_seam`); None while the
        negotiation's span was never recorded."""
        self.count = tally_of(labels).add
        """Adds one to the tally of the negotiation's metric labels."""


_NO_ATTRIBUTES: Final = BoundedAttributes(immutable=True)
"""A link's attributes: none, as the SDK's `add_link(context)` gives it (immutable, so shared)."""


def _link_to(context: SpanContext | None) -> Link | None:
    return None if context is None else Link(context, _NO_ATTRIBUTES)


def _bounded(names: Iterable[str]) -> list[str]:
    return sorted({name[:_MAX_ITEM] for name in names})[:MAX_LIST]


def revision_label(value: Any) -> str:
    """Metric-safe revision: known revisions only, so clients cannot inflate cardinality."""
    return value if isinstance(value, str) and revisions.era(value) != "unknown" else "unknown"


def declared_capabilities(capabilities: Mapping[str, Any]) -> list[str]:
    """Capability names a client declared: top-level keys, their sub-keys, extension ids."""
    names: list[str] = []
    for key, value in capabilities.items():
        names.append(key)
        if isinstance(value, Mapping):
            names.extend(f"{key}/{sub}" if key == "extensions" else f"{key}.{sub}" for sub in value)
    return _bounded(names)


def span_attributes(
    method: str, record: Negotiation, policy: Policy, session_id: str | None
) -> dict[str, Any]:
    """The attributes of a successful negotiation's span (also used for the event)."""
    attributes: dict[str, Any] = {
        "mcp.method.name": method[:_MAX_ITEM],
        "mcp.protocol.version": record.protocol_version,
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
    if session_id:
        attributes["mcp.session.id"] = session_id
    if policy.record_client_identity:
        if record.client_name:
            attributes["mcp.negotiation.client.name"] = record.client_name[:_MAX_ITEM]
        if record.client_version:
            attributes["mcp.negotiation.client.version"] = record.client_version[:_MAX_ITEM]
    ucp = record.ucp
    if ucp is not None:
        attributes["ucp.version"] = str(ucp.version)
        attributes["ucp.capabilities"] = _bounded(f"{n}@{v}" for n, v in ucp.capabilities.items())
        attributes["ucp.dropped"] = _bounded(f"{n}:{r}" for n, r in ucp.dropped.items())
    return attributes


def _is_sdk_initialize_span(span: Any) -> bool:
    """Whether `span` is the SDK's SERVER span of an `initialize` (safe to correct).

    Only SERVER spans whose attributes can be read (the SDK's own spans) and that say
    they are an `initialize` qualify: a user's span, an ASGI server span, or the client's
    span of an in-process client (current when no server span was opened) is never rewritten.
    """
    attributes = getattr(span, "attributes", None)
    return (
        getattr(span, "kind", None) is SpanKind.SERVER
        and isinstance(attributes, Mapping)
        and attributes.get("mcp.method.name") == "initialize"
    )


def _metric_labels(era: str, protocol_version: Any, outcome: str) -> Labels:
    return era, revision_label(protocol_version), outcome


def _emit(
    build: Callable[[], dict[str, Any]],
    labels: Labels,
    duration: float,
    error: str | None,
    correct_parent: bool,
    carrier: Mapping[str, str] | None = None,
) -> SpanContext | None:
    """Count and time, then start and end the span and add the event.

    `build` runs only if something records. Answers the span's context when it was
    recorded (something to link to), else None. The metrics go first, and each part
    fails on its own: a broken span pipeline (an exporter, a processor) must not take the
    metrics with it, nor make every repeat of this negotiation trace it again.
    """
    end = time.time_ns()
    try:
        tally_of(labels).add()
        duration_histogram.record(duration, dict(zip(LABEL_KEYS, labels, strict=True)))
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)
    parent = trace.get_current_span()
    context = None
    if carrier is not None and not parent.get_span_context().is_valid:
        context = propagate.extract(carrier)  # before the SDK's span exists: the client's trace
    span = tracer.start_span(
        SPAN_NAME, context=context, kind=SpanKind.INTERNAL, start_time=end - int(duration * 1e9)
    )
    recorded = span.is_recording()  # asked now: an ended span no longer records
    try:
        if recorded or parent.is_recording():
            attributes = build()
            if error is not None:
                attributes["error.type"] = error
            if recorded:
                span.set_attributes(attributes)
                if error is not None:
                    span.set_status(Status(StatusCode.ERROR, f"negotiation refused ({error})"))
            if parent.is_recording():
                parent.add_event(SPAN_NAME, attributes)
                if correct_parent and _is_sdk_initialize_span(parent):
                    # The SDK's initialize span records its pre-negotiation seed; the agreed one is ours.
                    parent.set_attribute("mcp.protocol.version", attributes["mcp.protocol.version"])
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
    """Count one repeat and link the request's span to the negotiation's span.

    False, with nothing counted, when the request's span records but the negotiation was
    first seen while nothing recorded: there is no span to link to, so the caller traces
    it in full (`record_negotiation`). Never raises.
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
        traced.count()
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)
    return True


def record_negotiation(method: str, known: Known, policy: Policy, duration: float) -> None:
    """Trace a negotiation the first time its `Known` is traced; count and link its repeats.

    A repeat is the very same `Known` again (a memoised envelope, a scoped UCP call): it is
    counted, and the request's span links to the span that negotiated it, unless the
    policy wants a span per request or that span was never recorded. Never raises.
    """
    try:
        traced = None if policy.trace_every_request else known.traced
        if traced is not None and repeated(traced):
            return
        record = known.record
        labels = _metric_labels(record.era, record.protocol_version, record.outcome)
        context = _emit(
            lambda: span_attributes(method, record, policy, record.session_id),
            labels,
            duration,
            None,
            method == "initialize",
        )
        if policy.trace_every_request:
            return
        if traced is None:
            known.traced = Traced(context, labels)
        else:
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

        def build() -> dict[str, Any]:
            requested = refusal.data.get("requested") if isinstance(refusal.data, Mapping) else None
            if requested is None:
                requested = _requested_in(params)
            attributes: dict[str, Any] = {
                "mcp.method.name": method[:_MAX_ITEM],
                "network.transport": NETWORK_TRANSPORT[transport],
                "mcp.negotiation.era": era,
                "mcp.negotiation.outcome": "refused",
            }
            if isinstance(requested, str):
                attributes["mcp.negotiation.requested_version"] = requested[:_MAX_ITEM]
            if session_id:
                attributes["mcp.session.id"] = session_id
            return attributes

        _emit(build, _metric_labels(era, None, "refused"), duration, str(refusal.code), False, carrier)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def record_outcome(facts: Facts, outcome: Outcome, policy: Policy, duration: float) -> None:
    """Record what an engine `Outcome` says is traced for the message `facts` describes: its
    refusal, or its negotiation (whose repeats link to its span). Never raises."""
    if outcome.trace == "refused" and outcome.refusal is not None:
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
    elif outcome.trace == "negotiated" and (known := outcome.known) is not None:
        traced = known.traced
        if traced is None or policy.trace_every_request or not repeated(traced):
            record_negotiation(facts.method, known, policy, duration)
