"""The OpenTelemetry SDK's global providers, for every telemetry test module here.

`otel` is per module: each module's span exporter stops keeping spans when the module ends
(`support.metrics_data.providers`); `spans` starts each test with none, and `reader` is the
process's `InMemoryMetricReader`, compared by `snapshot` before and after a test's traffic.
"""

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.metrics_data import Otel, providers


@pytest.fixture(scope="module")
def otel() -> Iterator[Otel]:
    with providers() as found:
        yield found


@pytest.fixture
def spans(otel: Otel) -> InMemorySpanExporter:
    otel.exporter.clear()
    return otel.exporter


@pytest.fixture
def reader(otel: Otel) -> InMemoryMetricReader:
    if otel.reader is None:
        pytest.skip("another test module installed the global MeterProvider first")
    return otel.reader
