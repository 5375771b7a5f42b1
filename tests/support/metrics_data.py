"""The OpenTelemetry SDK's global providers for the telemetry tests, and metric snapshots.

The SDK's global providers can be set once per process, so the first test module that
asks installs a `TracerProvider` and a `MeterProvider` with an `InMemoryMetricReader`
(marked on the provider, for the next module to find); each module adds its own span
exporter. A test compares two `snapshot`s of the reader (`delta`), since other tests in
the same process recorded before it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_negotiation.otel import metrics as otel_metrics
from mcp_negotiation.otel import semconv

OPERATION = semconv.OPERATION_DURATION
SESSION = semconv.SESSION_DURATION
NEGOTIATIONS = otel_metrics.NEGOTIATIONS
REFUSALS = otel_metrics.REFUSALS
DEGRADED = otel_metrics.DEGRADED
DEPRECATION_HITS = otel_metrics.DEPRECATION_HITS
DURATION = otel_metrics.DURATION
OUTCOME_REFUSED = ("mcp.negotiation.outcome", "refused")

Labels = frozenset[tuple[str, Any]]
Snapshot = dict[str, dict[Labels, Any]]


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader | None


@contextmanager
def providers() -> Iterator[Otel]:
    """The global providers (installed once per process), with an exporter of the caller's,
    which stops keeping spans when the caller is done: the tests after it in the process
    (the byte bounds' among them) must not find every span they make still held in memory.
    `reader` is None where another module installed a `MeterProvider` of its own first."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another global TracerProvider is installed"
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader: InMemoryMetricReader | None = getattr(
        metrics.get_meter_provider(), "_mcp_negotiation_reader", None
    )
    if reader is None and not isinstance(metrics.get_meter_provider(), MeterProvider):
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        meter_provider._mcp_negotiation_reader = reader  # type: ignore[attr-defined]
        metrics.set_meter_provider(meter_provider)
    try:
        yield Otel(exporter, reader)
    finally:
        exporter.shutdown()


def snapshot(reader: InMemoryMetricReader) -> Snapshot:
    """Every data point of this library's meter, by instrument and attribute set."""
    data = reader.get_metrics_data()
    found: Snapshot = {name: {} for name in otel_metrics.INSTRUMENTS}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            if scope.scope.name != otel_metrics.SCOPE:
                continue
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, {})[frozenset((point.attributes or {}).items())] = point
    return found


def delta(before: Snapshot, after: Snapshot, name: str, field: str | None = None) -> Counter[Labels]:
    """How far each of `name`'s points moved between two snapshots (`field`: a counter's
    `value` or a histogram's `count`, by default whichever the instrument has)."""
    moved: Counter[Labels] = Counter()
    for labels, point in after.get(name, {}).items():
        which = field or ("count" if hasattr(point, "bucket_counts") else "value")
        old = before.get(name, {}).get(labels)
        change = getattr(point, which) - (getattr(old, which) if old is not None else 0)
        if change:
            moved[labels] = change
    return moved
