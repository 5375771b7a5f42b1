"""Metrics: the conventions' MCP histograms, and this library's negotiation counters.

Two families, from `opentelemetry-api` only, both switched on by configuring a
`MeterProvider` (an SDK), and costing one attribute read per message without one:

- the semantic conventions' `mcp.server.operation.duration`, for every message the wrapped
  server answers (both eras, every transport, refusals included), and
  `mcp.server.session.duration`, for legacy sessions (from `initialize` until the
  connection closes; a 2026-07-28 client has no session), with the names, units, buckets
  and attributes of the pinned conventions (`semconv`);
- this library's own, in its own namespace (`mcp_negotiation.*`: the conventions own
  `mcp.*`): negotiations by era, revision and outcome, refusals by code, degraded features,
  deprecation-window hits, the answers per-client rules decided, and the time negotiating took.

Every attribute value is from a bounded set: known methods and revisions, the
specification's codes, the server's own feature names; a name a client chooses (a tool's,
a prompt's, its own) is recorded only once the server served it, or the operator opted
in, at most `MAX_NAMES` of each, and `_OTHER` past that.

Who calls what: an adapter (the shared kernel, once there is one) calls `clock()` when a
message arrives (None: nothing records, skip the rest), `operation(...)` when it was
answered, and `session_ended(...)` when a legacy session it timed from its `initialize`
closes; telemetry (`spans`) calls `negotiated` and `refused` as it records a negotiation.
Like all telemetry here, nothing raises into the server: failures are logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..core import revisions
from ..core.client_log import report
from ..core.negotiation import Negotiation, Policy, Transport
from . import seam as otel_seam
from . import semconv

__all__ = [
    "DURATION_BUCKETS",
    "INSTRUMENTS",
    "MAX_NAMES",
    "NETWORK_TRANSPORT",
    "SCOPE",
    "clock",
    "instruments",
    "negotiated",
    "operation",
    "refused",
    "revision_label",
    "session_ended",
]

SCOPE: Final = "mcp_negotiation"
"""The meter's name (the tracer's too)."""
MAX_NAMES: Final = 64
"""At most this many distinct tool, prompt, client or error names per attribute; then `_OTHER`."""
_MAX_NAME_LENGTH: Final = 128

NETWORK_TRANSPORT: Final[Mapping[Transport, str]] = {
    "stdio": "pipe",
    "http": "tcp",
    "memory": "inproc",
    "unknown": "unknown",
}
"""`network.transport` per transport: the conventions' `pipe` and `tcp`, and `inproc` for the
SDK's in-memory streams, which they do not name."""

NEGOTIATIONS: Final = "mcp_negotiation.negotiations"
REFUSALS: Final = "mcp_negotiation.refusals"
DEGRADED: Final = "mcp_negotiation.degraded"
DEPRECATION_HITS: Final = "mcp_negotiation.deprecation.hits"
DURATION: Final = "mcp_negotiation.duration"
OVERRIDES: Final = "mcp_negotiation.overrides"
INSTRUMENTS: Final = (
    semconv.OPERATION_DURATION,
    semconv.SESSION_DURATION,
    NEGOTIATIONS,
    REFUSALS,
    DEGRADED,
    DEPRECATION_HITS,
    DURATION,
    OVERRIDES,
)
"""Every instrument this library creates (docs/telemetry.md describes each)."""

DURATION_BUCKETS: Final = (
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
"""`mcp_negotiation.duration`'s boundaries (seconds): negotiating takes microseconds, and the
SDK's default boundaries (0, 5, 10, ... 10000) would put every observation in the first."""

_FAILED: Final = "telemetry failed (ignored)"
_CLIENT_FEATURES: Final = frozenset(revisions.feature_names("client"))
_SERVER_FEATURES: Final = frozenset(revisions.feature_names("server"))
_REFUSAL_CODES: Final = frozenset({-32001, -32020, -32021, -32022, -32602})
"""The codes this library and the SDK refuse a negotiation with (docs/telemetry.md)."""
_HTTP_VERSIONS: Final = frozenset({"1.0", "1.1", "2", "3"})


class _Names:
    """The values admitted to one metric attribute: at most `MAX_NAMES`, each at most 128
    characters, kept for the process's life; anything else is `_OTHER`."""

    __slots__ = ("_known", "_lock")

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def label(self, value: object, admit: bool = True) -> str:
        """`value` if admitted (now, when `admit` and there is room), else `_OTHER`."""
        if type(value) is not str:
            return semconv.OTHER
        if value in self._known:
            return value
        if admit and len(value) <= _MAX_NAME_LENGTH:
            with self._lock:
                if len(self._known) < MAX_NAMES:
                    self._known.add(value)
                    return value
        return semconv.OTHER


def revision_label(value: object) -> str:
    """A revision as a metric records it: a known one, else `_OTHER` (what no registry knows
    cannot inflate a metric's cardinality)."""
    return value if isinstance(value, str) and revisions.era(value) != "unknown" else semconv.OTHER


def method_label(value: object) -> str:
    return value if isinstance(value, str) and value in semconv.METHODS else semconv.OTHER


class _Instruments:
    """Every instrument, made from one `MeterProvider` (see `instruments`)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        meter = provider.get_meter(SCOPE)
        self.operation = meter.create_histogram(
            semconv.OPERATION_DURATION,
            unit=semconv.UNIT,
            description=(
                "MCP request or notification duration as observed on the receiver "
                "from the time it was received until the result or ack is sent."
            ),
            explicit_bucket_boundaries_advisory=semconv.BUCKETS,
        )
        self.session = meter.create_histogram(
            semconv.SESSION_DURATION,
            unit=semconv.UNIT,
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=semconv.BUCKETS,
        )
        self.negotiations = meter.create_counter(
            NEGOTIATIONS,
            unit="{negotiation}",
            description="Negotiations made (a legacy handshake, a modern envelope first seen)",
        )
        self.refusals = meter.create_counter(
            REFUSALS, unit="{request}", description="Requests refused by negotiation, by JSON-RPC code"
        )
        self.degraded = meter.create_counter(
            DEGRADED,
            unit="{feature}",
            description="Server features a negotiation lost at its revision, one per feature",
        )
        self.deprecation_hits = meter.create_counter(
            DEPRECATION_HITS,
            unit="{feature}",
            description="Deprecated features a negotiating client declared, one per feature",
        )
        self.overrides = meter.create_counter(
            OVERRIDES,
            unit="{override}",
            description="Answers a per-client rule decided, one per capability and negotiation",
        )
        self.duration = meter.create_histogram(
            DURATION,
            unit="s",
            description="Time spent negotiating one request or handshake (repeats excluded)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )


_provider_now: Callable[[], Any] = otel_seam.meter_provider_reader()
_bound: _Instruments | None = None
_bind_lock = threading.Lock()
_tools = _Names()
_prompts = _Names()
_errors = _Names()
_clients = _Names()
_rules = _Names()
_overridden = _Names()


def instruments() -> _Instruments | None:
    """The instruments of the configured `MeterProvider` (None while there is none), made on
    first use, and again if another is configured: the API lets a process set one once, a
    test may not. The tests replace it with a failing one, to show that a broken backend
    never reaches the server."""
    global _bound
    provider = _provider_now()
    if provider is None:
        return None
    bound = _bound
    if bound is None or bound.provider is not provider:
        with _bind_lock:
            bound = _bound
            if bound is None or bound.provider is not provider:
                bound = _bound = _Instruments(provider)
    return bound


clock: Final[Callable[[], float | None]] = otel_seam.metrics_clock()
"""When a message arrived, for `operation` (and a session, for `session_ended`); None while
no `MeterProvider` is configured, when the caller skips measuring altogether."""


def operation(
    started: float,
    method: str,
    revision: object,
    transport: Transport,
    *,
    target: object = None,
    code: int | None = None,
    error: str | None = None,
    http_version: object = None,
) -> None:
    """Record one answered message in `mcp.server.operation.duration`. Never raises.

    `revision`: what the message was served at (a legacy session's, a modern request's own);
    `target`: a `tools/call`'s tool or a `prompts/get`'s prompt name; `code`: the JSON-RPC
    error code it was answered with; `error`: a failure without one (`tool_error`, or the
    exception's type name). `http_version`: the ASGI scope's, over HTTP.
    """
    try:
        bound = instruments()
        if bound is None:
            return
        attributes: dict[str, str] = {
            "mcp.method.name": method_label(method),
            "mcp.protocol.version": revision_label(revision),
            "network.transport": NETWORK_TRANSPORT[transport],
        }
        if transport == "http":
            attributes["network.protocol.name"] = "http"
            if http_version in _HTTP_VERSIONS:
                attributes["network.protocol.version"] = str(http_version)
        failed = code is not None or error is not None
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            if target is not None:
                attributes["gen_ai.tool.name"] = _tools.label(target, admit=not failed)
        elif method == "prompts/get" and target is not None:
            attributes["gen_ai.prompt.name"] = _prompts.label(target, admit=not failed)
        if code is not None:
            attributes["rpc.response.status_code"] = str(code)
            if code not in semconv.NOT_ERRORS:
                attributes["error.type"] = _errors.label(str(code))
        elif error is not None:
            attributes["error.type"] = _errors.label(error)
        bound.operation.record(time.perf_counter() - started, attributes)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def session_ended(started: float, revision: object, *, http: bool, error: str | None = None) -> None:
    """Record one legacy session, from its `initialize` (`started`, a `clock()` reading) until
    its connection closed, in `mcp.server.session.duration`. Never raises."""
    try:
        bound = instruments()
        if bound is None:
            return
        attributes = {"mcp.protocol.version": revision_label(revision)}
        if http:
            attributes["network.protocol.name"] = "http"
        if error is not None:
            attributes["error.type"] = _errors.label(error)
        bound.session.record(time.perf_counter() - started, attributes)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def negotiated(record: Negotiation, policy: Policy, duration: float, *, first: bool) -> None:
    """Record a negotiation traced in full: its duration, and, the first time this record is
    seen (`first`; not a repeat of a cached negotiation traced again per request), the
    negotiation itself, the features it lost and the deprecated ones its client declared.
    Never raises."""
    try:
        bound = instruments()
        if bound is None:
            return
        revision = revision_label(record.protocol_version)
        labels = {
            "mcp.negotiation.era": record.era,
            "mcp.protocol.version": revision,
            "mcp.negotiation.outcome": record.outcome,
        }
        bound.duration.record(duration, labels)
        if not first:
            return
        client = (
            {"mcp.negotiation.client.name": _clients.label(record.client_name)}
            if policy.record_client_identity
            else {}
        )
        bound.negotiations.add(1, {**labels, **client})
        for feature in record.degraded:
            lost = _feature(feature, _SERVER_FEATURES)
            bound.degraded.add(1, {"mcp.negotiation.feature": lost, "mcp.protocol.version": revision})
        for feature, rule in record.overrides.items():
            bound.overrides.add(
                1,
                {
                    "mcp.negotiation.rule": _rules.label(rule),
                    "mcp.negotiation.feature": _overridden.label(feature),
                    "mcp.negotiation.effect": "revoked" if feature in record.revoked else "granted",
                    "mcp.protocol.version": revision,
                },
            )
        for feature in sorted(revisions.DEPRECATED_FEATURES.intersection(record.client_capabilities)):
            window = "closed" if feature in record.withheld else "open"
            bound.deprecation_hits.add(
                1,
                {
                    "mcp.negotiation.feature": _feature(feature, _CLIENT_FEATURES),
                    "mcp.protocol.version": revision,
                    "mcp.negotiation.window": window,
                    **client,
                },
            )
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def refused(method: str, era: str, requested: object, code: int, duration: float) -> None:
    """Record one refused request: the refusal, and the time its negotiation took. Never raises."""
    try:
        bound = instruments()
        if bound is None:
            return
        # No `mcp.protocol.version`: nothing was agreed.
        labels = {"mcp.negotiation.era": era, "mcp.negotiation.outcome": "refused"}
        bound.duration.record(duration, labels)
        attributes = {
            "error.type": str(code) if code in _REFUSAL_CODES else semconv.OTHER,
            "mcp.method.name": method_label(method),
            "mcp.negotiation.era": era,
        }
        if requested is not None:
            attributes["mcp.negotiation.requested_version"] = revision_label(requested)
        bound.refusals.add(1, attributes)
    except Exception as problem:
        report(logging.ERROR, _FAILED, exc=problem)


def _feature(name: str, known: frozenset[str]) -> str:
    return name if name in known else semconv.OTHER
