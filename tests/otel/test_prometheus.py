"""Checked in a real tool: Debian's Prometheus scrapes a negotiated server, and answers PromQL.

A subprocess serves MCP over streamable HTTP and its metrics through
`opentelemetry-exporter-prometheus`; Prometheus (on an ephemeral loopback port, its storage a
temporary directory) scrapes it every second while mixed-era traffic with refusals is sent
(`support.prometheus.drive`). The dashboard's own PromQL is then asked through Prometheus's
HTTP API: p99 of `tools/call` by protocol version, refusals by code, the share of clients
per era; the answers must be the traffic's. The dashboard is rendered from those answers.
nox's `tests` session installs `prometheus` when it is missing; without it this skips.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_negotiation.otel import semconv
from support.harness import ROOT
from support.prometheus import CALLS, DELAYS, Scraped, Traffic, drive, scraped_server
from support.services import binary

sys.path.insert(0, str(ROOT / "docs"))
import render_dashboard

DASHBOARD = render_dashboard.load()
PANEL_SOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
Run = tuple[Scraped, Traffic, float]
"""The scraped server, the traffic sent to it, and when it had all been stored."""


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    binary("prometheus")  # skips without it
    with scraped_server() as scraped:
        traffic = anyio.run(drive, scraped.mcp_url)
        scraped.relay.wait_for_scrapes()
        yield scraped, traffic, time.time()


def _panel(title: str) -> dict[str, Any]:
    (panel,) = [p for p in DASHBOARD["panels"] if p["title"] == title]
    return panel


def _ask(run: Run, title: str) -> dict[str, float]:
    """The dashboard panel's answer, by its legend, as Grafana would ask it."""
    scraped, traffic, end = run
    return dict(render_dashboard.answers(scraped, _panel(title), traffic.started, end))


def test_refusals_by_code_are_the_refusals_sent(run: Run) -> None:
    assert _ask(run, "Refusals by code") == {"-32021": 4.0, "-32022": 3.0}
    assert run[1].refusals == {"-32021": 4, "-32022": 3}


def test_the_share_of_clients_per_era_is_the_clients_sent(run: Run) -> None:
    clients = run[1].clients
    total = sum(clients.values())
    assert clients == {"legacy": 5, "modern": 3}
    shares = {era: count / total for era, count in clients.items()}
    assert _ask(run, "Share of clients per era") == pytest.approx(shares)
    assert _ask(run, "Clients per revision") == {"2025-06-18": 3.0, "2025-11-25": 2.0, "2026-07-28": 3.0}


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's `histogram_quantile` over cumulative (upper bound, count) buckets."""
    buckets = sorted(buckets)
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    raise AssertionError("no bucket holds the rank")


def test_p99_of_tools_call_by_protocol_version_is_the_latency_sent(run: Run) -> None:
    scraped, traffic, _ = run
    answered = _ask(run, "p99 tools/call duration by protocol version")
    assert set(answered) == set(DELAYS)
    # The exporter's own data, read without Prometheus: the same quantile, to the float.
    with urllib.request.urlopen(scraped.metrics_url + "/metrics", timeout=30) as page:
        families = list(text_string_to_metric_families(page.read().decode("utf-8")))
    (family,) = [f for f in families if f.name == "mcp_server_operation_duration_seconds"]
    buckets: dict[str, dict[float, float]] = {}
    served: dict[str, float] = {}
    for sample in family.samples:
        labels = sample.labels
        if labels.get("mcp_method_name") != "tools/call":
            continue
        revision = labels["mcp_protocol_version"]
        if sample.name.endswith("_bucket"):
            upper = float(labels["le"])
            held = buckets.setdefault(revision, {})
            held[upper] = held.get(upper, 0.0) + sample.value
        elif sample.name.endswith("_count") and not labels.get("error_type"):
            served[revision] = served.get(revision, 0.0) + sample.value
    assert served == {revision: float(count) for revision, count in traffic.calls.items()}
    assert traffic.calls == dict.fromkeys(DELAYS, 3 * CALLS) | {"2025-11-25": 2 * CALLS}
    for revision, delay in DELAYS.items():
        assert answered[revision] == pytest.approx(_quantile(0.99, list(buckets[revision].items())))
        # Each call waited `delay` at least: the p99 is in the bucket holding it, or above
        # (how far above is the machine's, not the traffic's: no upper bound is asserted).
        floor = max(bound for bound in (0.0, *semconv.BUCKETS) if bound < delay or bound == 0.0)
        assert answered[revision] >= floor, (revision, answered[revision])


def test_every_panel_of_the_dashboard_answers_and_is_drawn(run: Run, tmp_path: Path) -> None:
    scraped, traffic, end = run
    assert {"panels", "templating", "title", "uid", "schemaVersion"} <= set(DASHBOARD)
    for panel in DASHBOARD["panels"]:
        (target,) = panel["targets"]
        assert panel["datasource"] == target["datasource"] == PANEL_SOURCE
        assert render_dashboard.answers(scraped, panel, traffic.started, end), panel["title"]
    features = _ask(run, "Clients on deprecated features")
    assert features == {"sampling (open)": 8.0}  # every client served declared sampling
    assert _ask(run, "Features lost at the negotiated revision")
    out = tmp_path / "dashboard.png"
    render_dashboard.render(scraped, DASHBOARD, traffic.started - 2, end, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    committed = ROOT / "docs" / "dashboard.png"
    assert committed.exists(), "docs/dashboard.png is rendered by docs/render_dashboard.py and committed"


def test_the_dashboard_is_valid_json_naming_only_metrics_the_library_emits() -> None:
    from mcp_negotiation.otel import metrics as otel_metrics

    text = (ROOT / "docs" / "dashboards" / "mcp-negotiation.json").read_text(encoding="utf-8")
    names = {name.replace(".", "_") for name in otel_metrics.INSTRUMENTS}
    for panel in json.loads(text)["panels"]:
        expr = panel["targets"][0]["expr"]
        assert any(name in expr for name in names), panel["title"]
