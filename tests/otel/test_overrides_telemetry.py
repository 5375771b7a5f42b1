"""Where each answer came from, on the `capability_negotiated` span and in the library's
overrides counter: the rules that decided, and the extensions agreed with their settings."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.client import advertise
from mcp_types import Implementation
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from client_overrides import APP_MIME, APPS, build
from mcp_negotiation.otel.metrics import OVERRIDES
from mcp_negotiation.otel.spans import SPAN_NAME
from support.metrics_data import delta, snapshot

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_span_names_each_rule_and_each_agreed_extension(
    spans: InMemorySpanExporter, mode: str
) -> None:
    info = Implementation(name="acme-desk", version="1.4.0")
    apps = [advertise(APPS, {"mimeTypes": [APP_MIME]})]
    async with Client(build(), mode=mode, client_info=info, extensions=apps) as client:  # type: ignore[arg-type]
        await client.call_tool("report", {})
    negotiated = [span for span in spans.get_finished_spans() if span.name == SPAN_NAME]
    assert negotiated
    attributes = negotiated[-1].attributes or {}
    assert list(attributes["mcp.negotiation.overrides"]) == [  # type: ignore[arg-type]
        "client.renders_resource_links granted by links-everywhere",
        "elicitation.form revoked by acme-desk-no-forms",
    ]
    assert list(attributes["mcp.negotiation.extensions"]) == [  # type: ignore[arg-type]
        'io.modelcontextprotocol/ui {"mimeTypes":["text/html;profile=mcp-app"]}'
    ]


async def test_a_span_holds_a_bounded_entry_for_a_megabyte_of_settings(spans: InMemorySpanExporter) -> None:
    apps = [advertise(APPS, {"mimeTypes": ["x" * 1000] * 1000})]
    async with Client(build(), mode="2026-07-28", extensions=apps) as client:
        await client.call_tool("report", {})
    negotiated = [span for span in spans.get_finished_spans() if span.name == SPAN_NAME]
    (entry,) = (negotiated[-1].attributes or {})["mcp.negotiation.extensions"]  # type: ignore[misc]
    assert entry.startswith(APPS)
    assert len(entry) == 256


async def test_the_counter_counts_each_decided_answer_by_rule_and_effect(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    before = snapshot(reader)
    info = Implementation(name="acme-cli", version="1.0.0")
    async with Client(build(), mode="legacy", client_info=info) as client:
        await client.call_tool("report", {})
    moved = delta(before, snapshot(reader), OVERRIDES)
    assert moved == {
        frozenset(
            {
                ("mcp.negotiation.rule", "acme-cli-no-links"),
                ("mcp.negotiation.feature", "client.renders_resource_links"),
                ("mcp.negotiation.effect", "revoked"),
                ("mcp.protocol.version", "2025-11-25"),
            }
        ): 1
    }
