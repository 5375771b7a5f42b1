"""`capability_negotiated` spans, events and metrics, read back from the OpenTelemetry SDK.

The SDK's global providers can be set once per process (conftest.py's fixtures install a
`TracerProvider` with this module's `InMemorySpanExporter`, and a `MeterProvider` with an
`InMemoryMetricReader`); each test clears the exporter and compares metric snapshots.
Servers run in memory (legacy JSON-RPC, modern direct and modern JSON-RPC), behind a
real uvicorn on loopback (sharing the providers), and as a stdio subprocess whose own
provider writes its spans to a file that the test reads back.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_negotiation import Policy, negotiate
from mcp_negotiation.core.negotiation import Negotiator
from mcp_negotiation.core.outcome import Known
from mcp_negotiation.otel import metrics as otel_metrics
from mcp_negotiation.otel import seam as otel_seam
from mcp_negotiation.otel import spans as telemetry
from mcp_negotiation.otel.spans import MAX_LIST, SPAN_NAME, span_attributes
from mcp_negotiation.tools.demo import build
from support.harness import (
    ROOT,
    RawRequest,
    initialize_params,
    legacy_session,
    open_streams,
    serve_http,
    structured,
)
from support.metrics_data import (
    DURATION,
    NEGOTIATIONS,
    OPERATION,
    OUTCOME_REFUSED,
    REFUSALS,
    delta,
    snapshot,
)

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

CAPS = {
    "sampling": {},
    "roots": {"listChanged": True},
    "elicitation": {},
    "x-vendor": {"deep": {"k": [1, 2]}},
}
CAPS_NAMES = ("elicitation", "roots", "roots.listChanged", "sampling", "x-vendor", "x-vendor.deep")
TRANSPORT = {"memory": "inproc", "memory-direct": "inproc", "memory-jsonrpc": "inproc", "http": "tcp"}
TRANSPORT["http-stateless"] = "tcp"


# ---------------------------------------------------------------------------------------
# Helpers


def named(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def parent_of(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    matches = [s for s in finished if s.context.span_id == span.parent.span_id]
    assert len(matches) == 1, f"the parent of {span.name} was not exported"
    return matches[0]


def events_named(span: ReadableSpan, name: str) -> list[Any]:
    return [event for event in span.events if event.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


REQUEST_KEYS = ("mcp.method.name", "mcp.protocol.version", "error.type")
"""What describes a request: the SDK's SERVER span holds it, ours only where there is none."""


def story(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> dict[str, Any]:
    """What a negotiation's trace says of it: our span's attributes, with the request's own
    from the SDK SERVER span it sits under, which never repeats one of ours."""
    own = attrs(span)
    parents = [s for s in finished if span.parent is not None and s.context.span_id == span.parent.span_id]
    if not parents or parents[0].kind is not SpanKind.SERVER or "mcp.method.name" not in attrs(parents[0]):
        return own
    server = attrs(parents[0])
    assert not set(own) & set(server), f"on both spans: {sorted(set(own) & set(server))}"
    return {**own, **{key: server[key] for key in REQUEST_KEYS if key in server}}


@contextmanager
def target(kind: str, policy: Policy | None = None, server: MCPServer | None = None) -> Iterator[Any]:
    """What a client connects to, for `kind` in memory(-direct|-jsonrpc), http(-stateless)."""
    server = server if server is not None else build(policy)
    if kind.startswith("http"):
        with serve_http(server.streamable_http_app(stateless_http=kind == "http-stateless")) as url:
            yield url
    elif kind == "memory-jsonrpc":
        from mcp.client._memory import InMemoryTransport

        yield InMemoryTransport(server)
    else:
        yield server


@asynccontextmanager
async def legacy(kind: str, where: Any, revision: str, caps: dict[str, Any]) -> AsyncIterator[Any]:
    streams_kind = "http" if kind.startswith("http") else kind
    async with open_streams(streams_kind, where) as streams, legacy_session(streams, revision, caps) as pair:
        yield pair[0]


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
    )


def _degraded(revision: str, policy: Policy | None = None) -> tuple[str, ...]:
    record = Negotiator(policy or Policy()).initialize(initialize_params(revision, {}))
    return tuple(sorted(record.degraded))


def _assert_is_child_of_server_span(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.kind is SpanKind.INTERNAL
    server_span = parent_of(span, finished)
    assert server_span.kind is SpanKind.SERVER
    assert server_span.context.trace_id == span.context.trace_id
    assert server_span.attributes is not None
    assert not set(REQUEST_KEYS) & set(attrs(span))  # the server span's to hold
    (event,) = events_named(server_span, SPAN_NAME)
    assert dict(event.attributes or {}) == attrs(span)
    return server_span


def _assert_joined_client_trace(server_span: ReadableSpan, finished: Sequence[ReadableSpan]) -> None:
    client_span = parent_of(server_span, finished)
    assert client_span.kind is SpanKind.CLIENT
    assert client_span.name == f"MCP send {server_span.name}"
    assert client_span.context.trace_id == server_span.context.trace_id


# ---------------------------------------------------------------------------------------
# Legacy: one span per initialize


@pytest.mark.parametrize("kind", ["memory", "http", "http-stateless"])
async def test_legacy_records_one_span_per_initialize(spans: InMemorySpanExporter, kind: str) -> None:
    with target(kind) as where:
        async with legacy(kind, where, "2025-06-18", CAPS) as session:
            seen = structured(await session.call_tool("negotiation", {}))
            await session.call_tool("negotiation", {})
            await session.list_tools()
    finished = spans.get_finished_spans()
    ours = named(finished, SPAN_NAME)
    (span,) = [s for s in ours if story(s, finished)["mcp.method.name"] == "initialize"]
    # A session's later requests are not negotiated again. Without one (stateless), each POST
    # is: once, with its repeats linked (see test_legacy_stateless_requests_are_counted_each).
    later = [story(s, finished)["mcp.method.name"] for s in ours if s is not span]
    assert later == (["tools/call"] if kind == "http-stateless" else [])
    server_span = _assert_is_child_of_server_span(span, finished)
    assert server_span.name == "initialize"
    _assert_joined_client_trace(server_span, finished)
    expected: dict[str, Any] = {
        "mcp.method.name": "initialize",
        "mcp.protocol.version": "2025-06-18",
        "network.transport": TRANSPORT[kind],
        "mcp.negotiation.era": "legacy",
        "mcp.negotiation.outcome": "accepted",
        "mcp.negotiation.requested_version": "2025-06-18",
        "mcp.negotiation.capabilities_known": True,
        "mcp.negotiation.client_capabilities": CAPS_NAMES,
        "mcp.negotiation.degraded": _degraded("2025-06-18"),
        "mcp.negotiation.withheld": (),
    }
    if kind == "http":
        # Only a stateful HTTP session has an id; the tool saw the same one.
        assert isinstance(seen["session_id"], str)
        assert seen["session_id"]
        expected["mcp.session.id"] = seen["session_id"]
    assert story(span, finished) == expected
    # The SDK's own initialize span is corrected from its seed (2025-11-25) to the agreed one.
    assert attrs(server_span)["mcp.protocol.version"] == "2025-06-18"
    assert span.status.status_code is StatusCode.UNSET


async def test_the_sdk_alone_records_its_seed_on_initialize(spans: InMemorySpanExporter) -> None:
    """Why the correction exists: without this library the initialize span says 2025-11-25."""
    async with legacy("memory", MCPServer("plain"), "2025-06-18", {}) as session:
        await session.list_tools()
    finished = spans.get_finished_spans()
    (server_span,) = named(finished, "initialize")
    assert attrs(server_span)["mcp.protocol.version"] == "2025-11-25"
    assert not named(finished, SPAN_NAME)
    assert not events_named(server_span, SPAN_NAME)


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_counter_offer_records_the_agreed_revision(spans: InMemorySpanExporter, kind: str) -> None:
    policy = Policy(min_revision="2025-06-18")
    with target(kind, policy) as where:
        async with legacy(kind, where, "2025-03-26", CAPS) as session:
            assert structured(await session.call_tool("negotiation", {}))["protocol_version"] == "2025-11-25"
    finished = spans.get_finished_spans()
    (span,) = named(finished, SPAN_NAME)
    server_span = _assert_is_child_of_server_span(span, finished)
    assert story(span, finished)["mcp.protocol.version"] == "2025-11-25"
    assert attrs(span)["mcp.negotiation.requested_version"] == "2025-03-26"
    assert attrs(span)["mcp.negotiation.outcome"] == "counter_offered"
    assert attrs(server_span)["mcp.protocol.version"] == "2025-11-25"


# ---------------------------------------------------------------------------------------
# Modern: one span per envelope negotiated; its repeats link to it


def _modern_span_attributes(kind: str, method: str) -> dict[str, Any]:
    return {
        "mcp.method.name": method,
        "mcp.protocol.version": "2026-07-28",
        "network.transport": TRANSPORT[kind],
        "mcp.negotiation.era": "modern",
        "mcp.negotiation.outcome": "accepted",
        "mcp.negotiation.requested_version": "2026-07-28",
        "mcp.negotiation.capabilities_known": True,
        "mcp.negotiation.client_capabilities": ("sampling",),
        "mcp.negotiation.degraded": (),
        "mcp.negotiation.withheld": (),
    }


async def _three_modern_requests(kind: str, policy: Policy | None = None) -> None:
    with target(kind, policy) as where:
        async with Client(where, mode="2026-07-28", sampling_callback=_sample) as client:
            structured(await client.call_tool("negotiation", {}))
            await client.call_tool("negotiation", {})
            await client.list_tools()


def _check_trace_context(kind: str, span: ReadableSpan, finished: Sequence[ReadableSpan]) -> ReadableSpan:
    server_span = _assert_is_child_of_server_span(span, finished)
    if kind == "memory-direct":
        # The SDK's direct in-process dispatcher carries no traceparent: a new trace.
        assert server_span.parent is None
    else:
        _assert_joined_client_trace(server_span, finished)
    return server_span


@pytest.mark.parametrize("kind", ["memory-direct", "memory-jsonrpc", "http"])
async def test_modern_traces_an_envelope_once_and_links_its_repeats(
    spans: InMemorySpanExporter, kind: str
) -> None:
    await _three_modern_requests(kind)
    finished = spans.get_finished_spans()
    (ours,) = named(finished, SPAN_NAME)  # every request carried the same envelope
    negotiating = _check_trace_context(kind, ours, finished)
    assert story(ours, finished) == _modern_span_attributes(kind, attrs(negotiating)["mcp.method.name"])
    assert len(events_named(negotiating, SPAN_NAME)) == 1
    repeats = [s for s in finished if s.kind is SpanKind.SERVER and s is not negotiating]
    assert {attrs(s)["mcp.method.name"] for s in repeats} >= {"tools/call", "tools/list"}
    for server_span in repeats:
        # Each repeat's own request span points at the span that negotiated its envelope.
        assert [link.context.span_id for link in server_span.links] == [ours.context.span_id]
        assert [link.context.trace_id for link in server_span.links] == [ours.context.trace_id]
        assert not events_named(server_span, SPAN_NAME)


@pytest.mark.parametrize("kind", ["memory-direct", "memory-jsonrpc", "http"])
async def test_trace_every_request_gives_each_request_its_span(
    spans: InMemorySpanExporter, kind: str
) -> None:
    await _three_modern_requests(kind, Policy(trace_every_request=True))
    finished = spans.get_finished_spans()
    ours = named(finished, SPAN_NAME)
    server_spans = [span for span in finished if span.kind is SpanKind.SERVER]
    assert len(server_spans) >= 3
    # Exactly one negotiation span under every server span, none elsewhere, and no links.
    assert Counter(span.parent.span_id for span in ours if span.parent) == Counter(
        span.context.span_id for span in server_spans
    )
    assert len(ours) == len(server_spans)
    assert not any(span.links for span in server_spans)
    for span in ours:
        server_span = _check_trace_context(kind, span, finished)
        assert story(span, finished) == _modern_span_attributes(kind, attrs(server_span)["mcp.method.name"])
    assert {story(span, finished)["mcp.method.name"] for span in ours} >= {"tools/call", "tools/list"}


async def test_a_new_envelope_is_a_new_negotiation(spans: InMemorySpanExporter) -> None:
    server = build()
    async with Client(server, mode="2026-07-28") as plain:
        await plain.call_tool("negotiation", {})
    async with Client(server, mode="2026-07-28", sampling_callback=_sample) as sampling:
        await sampling.call_tool("negotiation", {})
        await sampling.call_tool("negotiation", {})
    ours = named(spans.get_finished_spans(), SPAN_NAME)
    assert sorted(attrs(s)["mcp.negotiation.client_capabilities"] for s in ours) == [(), ("sampling",)]


def test_the_current_span_is_read_where_opentelemetry_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct read is OTel's own ContextVar and key; any other runtime context gets the public API."""
    from opentelemetry import context as otel_context
    from opentelemetry.trace import propagation

    found = otel_seam.current_span_source()
    variable, key = found or pytest.fail("the default runtime context was not recognised")
    assert key == propagation._SPAN_KEY
    with trace.get_tracer("tests").start_as_current_span("outer") as outer:
        assert variable.get().get(key) is outer is trace.get_current_span()

    class OtherRuntime(type(otel_context._RUNTIME_CONTEXT)):  # a subclass may keep its context elsewhere
        pass

    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", OtherRuntime())
    assert otel_seam.current_span_source() is None


def test_a_repeat_appends_the_very_link_the_sdks_add_link_builds(spans: InMemorySpanExporter) -> None:
    """The SDK's spans take the link built once through its private `_add_link`: the same
    link as `add_link(context)` gives, and none once the span has ended."""
    from opentelemetry.util.types import Attributes

    tracer = trace.get_tracer("tests")
    negotiated = tracer.start_span("negotiated")
    negotiated.end()
    built = telemetry.Traced(negotiated.get_span_context()).link
    assert built is not None
    with tracer.start_as_current_span("by add_link") as public:
        public.add_link(negotiated.get_span_context())
    with tracer.start_as_current_span("appended") as span:
        append = otel_seam.link_appender(type(span))
        assert append is type(span)._add_link  # type: ignore[attr-defined]  # the SDK's own append, found by the seam
        append(span, built)
    append(span, built)  # ended: the SDK's append refuses it, as its `add_link` does
    finished = spans.get_finished_spans()
    by_add_link, appended = (named(finished, name)[0] for name in ("by add_link", "appended"))

    def shape(attributes: Attributes) -> tuple[type, dict[str, Any], int]:
        # What exporters read (not `maxlen`, the SpanLimits' cap that an empty set never reaches).
        return type(attributes), dict(attributes or {}), getattr(attributes, "dropped", -1)

    ((theirs,), (ours,)) = by_add_link.links, appended.links
    assert ours.context == theirs.context == negotiated.get_span_context()
    assert shape(ours.attributes) == shape(theirs.attributes)
    assert ours.dropped_attributes == theirs.dropped_attributes == 0
    with pytest.raises(TypeError):  # immutable, as the SDK makes a link's attributes: safe to share
        ours.attributes["x"] = 1  # type: ignore[index]


def test_a_span_that_adds_links_its_own_way_gets_the_public_call() -> None:
    from opentelemetry.sdk.trace import _Span

    added: list[trace.SpanContext] = []

    class OwnLinks(_Span):
        def add_link(self, context: trace.SpanContext, attributes: Any = None) -> None:
            added.append(context)

    class NotTheSdks(trace.NonRecordingSpan):
        def add_link(self, context: trace.SpanContext, attributes: Any = None) -> None:
            added.append(context)

    context = trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=False)
    link = trace.Link(context)
    for kind, span in ((OwnLinks, OwnLinks("own", context=context)), (NotTheSdks, NotTheSdks(context))):
        otel_seam.link_appender(kind)(span, link)
    assert added == [context, context]


def _known(meta: Any) -> Known:
    """A modern envelope's negotiation, as the engine would make it (not memoised)."""
    negotiator = Negotiator(Policy())
    return Known(negotiator.request(meta), negotiator)


@pytest.mark.parametrize("read", ["direct", "public API"])
def test_a_repeat_first_seen_untraced_is_traced_once_something_records(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    if read == "public API":
        monkeypatch.setattr(telemetry, "SPAN_SOURCE", None)
    record = _known(
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    )
    # Under a parent that was sampled out, the negotiation span is not recorded either.
    unsampled = trace.NonRecordingSpan(
        trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    with trace.use_span(unsampled):
        telemetry.record_negotiation("tools/list", record, Policy(), 0.0)
    assert not named(spans.get_finished_spans(), SPAN_NAME)
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("tools/call", kind=SpanKind.SERVER):
        telemetry.record_negotiation("tools/call", record, Policy(), 0.0)  # nothing to link to: a span
    with tracer.start_as_current_span("tools/call again", kind=SpanKind.SERVER):
        telemetry.record_negotiation("tools/call", record, Policy(), 0.0)  # linked to that span
    finished = spans.get_finished_spans()
    (first,) = named(finished, SPAN_NAME)
    assert first.parent is not None
    assert first.parent.span_id == named(finished, "tools/call")[0].context.span_id
    (again,) = named(finished, "tools/call again")
    assert [link.context.span_id for link in again.links] == [first.context.span_id]


async def test_an_envelope_first_served_unsampled_is_traced_once_a_request_records(
    spans: InMemorySpanExporter,
) -> None:
    """Through the middleware's memo: repeats of an envelope nothing traced are not just counted."""
    unsampled = trace.NonRecordingSpan(
        trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    with target("memory-jsonrpc") as where:
        async with Client(where, mode="2026-07-28") as client:
            with trace.use_span(unsampled):  # the client's context, and so the server's, is sampled out
                await client.call_tool("negotiation", {})
                await client.call_tool("negotiation", {})
            assert not named(spans.get_finished_spans(), SPAN_NAME)
            for _ in range(3):
                await client.call_tool("negotiation", {})
    finished = spans.get_finished_spans()
    (ours,) = named(finished, SPAN_NAME)
    calls = [s for s in finished if s.kind is SpanKind.SERVER and attrs(s)["mcp.method.name"] == "tools/call"]
    assert len(calls) == 3
    negotiating = _assert_is_child_of_server_span(ours, finished)
    assert negotiating is calls[0]
    for later in calls[1:]:
        assert [link.context.span_id for link in later.links] == [ours.context.span_id]


# ---------------------------------------------------------------------------------------
# stdio: the server's spans are made in the child, which writes them to a file

CHILD = r"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class JsonLines(SpanExporter):
    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def export(self, spans):
        for s in spans:
            record = {
                "name": s.name,
                "kind": s.kind.name,
                "trace_id": s.context.trace_id,
                "span_id": s.context.span_id,
                "parent_id": s.parent.span_id if s.parent else None,
                "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in s.attributes.items()},
                "events": [[e.name, dict(e.attributes)] for e in s.events],
                "links": [l.context.span_id for l in s.links],
                "status": s.status.status_code.name,
            }
            self.file.write(json.dumps(record, default=list) + "\n")
        self.file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.file.close()


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLines(sys.argv[1])))
trace.set_tracer_provider(provider)
sys.argv = [sys.argv[0], *sys.argv[2:]]
from mcp_negotiation.tools import demo

demo.main()
"""


@pytest.fixture
def child(tmp_path: Path) -> tuple[StdioServerParameters, Path]:
    script = tmp_path / "traced_demo.py"
    script.write_text(CHILD, encoding="utf-8")
    out = tmp_path / "spans.jsonl"
    params = StdioServerParameters(command=sys.executable, args=[str(script), str(out)], cwd=str(ROOT))
    return params, out


def _read_child(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


async def test_stdio_legacy_span_joins_the_client_trace(
    spans: InMemorySpanExporter, child: tuple[StdioServerParameters, Path]
) -> None:
    params, out = child
    async with legacy("stdio", params, "2025-06-18", CAPS) as session:
        assert structured(await session.call_tool("negotiation", {}))["transport"] == "stdio"
    server_side = _read_child(out)
    ours = [s for s in server_side if s["name"] == SPAN_NAME]
    assert len(ours) == 1
    (span,) = ours
    (initialize,) = [s for s in server_side if s["span_id"] == span["parent_id"]]
    assert initialize["name"] == "initialize"
    assert initialize["kind"] == "SERVER"
    assert span["kind"] == "INTERNAL"
    assert span["attributes"]["network.transport"] == "pipe"
    assert span["attributes"]["mcp.negotiation.client_capabilities"] == list(CAPS_NAMES)
    assert "mcp.session.id" not in span["attributes"]
    assert not set(REQUEST_KEYS) & set(span["attributes"])  # the SDK's server span holds them
    assert initialize["attributes"]["mcp.protocol.version"] == "2025-06-18"
    assert [name for name, _ in initialize["events"]] == [SPAN_NAME]
    # Across the pipe: the child's server span is a child of this process's client span.
    (client_span,) = named(spans.get_finished_spans(), "MCP send initialize")
    assert initialize["parent_id"] == client_span.context.span_id
    assert span["trace_id"] == initialize["trace_id"] == client_span.context.trace_id


async def test_stdio_modern_span_per_request_and_refusal(
    spans: InMemorySpanExporter, child: tuple[StdioServerParameters, Path]
) -> None:
    params, out = child
    async with Client(params, mode="2026-07-28") as client:
        assert structured(await client.call_tool("negotiation", {}))["transport"] == "stdio"
    refused_params = params.model_copy(update={"args": [*params.args, "--max-revision", "2025-11-25"]})
    async with Client(refused_params, mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32022
    server_side = _read_child(out)
    ours = [s for s in server_side if s["name"] == SPAN_NAME]
    servers = {s["span_id"]: s for s in server_side if s["kind"] == "SERVER"}
    assert ours
    # Every request span has its negotiation: a child span, or a link to an earlier one.
    parents = [s["parent_id"] for s in ours]
    linked = {server_id for server_id, server in servers.items() if server["links"]}
    assert sorted([*parents, *linked]) == sorted(servers)
    assert {link for server in servers.values() for link in server["links"]} <= {s["span_id"] for s in ours}
    client_spans = {s.context.span_id: s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT}
    for span in ours:
        server_span = servers[span["parent_id"]]
        assert server_span["parent_id"] in client_spans
        assert client_spans[server_span["parent_id"]].context.trace_id == span["trace_id"]
        assert span["attributes"]["network.transport"] == "pipe"
    accepted = [s for s in ours if s["attributes"]["mcp.negotiation.outcome"] == "accepted"]
    (refusal,) = [s for s in ours if s["attributes"]["mcp.negotiation.outcome"] == "refused"]
    assert accepted
    assert {servers[s["parent_id"]]["attributes"]["mcp.protocol.version"] for s in accepted} == {"2026-07-28"}
    assert servers[refusal["parent_id"]]["attributes"]["error.type"] == "-32022"
    assert not any(set(REQUEST_KEYS) & set(s["attributes"]) for s in ours)
    assert refusal["status"] == "ERROR"


# ---------------------------------------------------------------------------------------
# Client identity: opt-in only


async def test_client_identity_only_when_opted_in(spans: InMemorySpanExporter) -> None:
    for record_identity in (False, True):
        spans.clear()
        server = build(Policy(record_client_identity=record_identity))
        async with legacy("memory", server, "2025-11-25", {}) as session:
            await session.list_tools()
        info = types.Implementation(name="modern-client", version="9.9")
        async with Client(server, mode="2026-07-28", client_info=info) as client:
            await client.list_tools()
        ours = named(spans.get_finished_spans(), SPAN_NAME)
        identities = {
            (attrs(s).get("mcp.negotiation.client.name"), attrs(s).get("mcp.negotiation.client.version"))
            for s in ours
        }
        if record_identity:
            assert identities == {("harness", "1.0"), ("modern-client", "9.9")}
        else:
            assert identities == {(None, None)}


@pytest.mark.parametrize("opted_in", [False, True])
async def test_the_log_names_a_client_only_where_the_policy_opted_in(
    caplog: pytest.LogCaptureFixture, opted_in: bool
) -> None:
    """Log records are exported too (an OpenTelemetry LoggingHandler): identity is opt-in there."""
    caplog.set_level(logging.INFO, logger="mcp_negotiation")
    server = build(Policy(record_client_identity=opted_in))
    async with legacy("memory", server, "2024-11-05", {}):
        pass
    (line,) = [r.getMessage() for r in caplog.records if "loses" in r.getMessage()]
    assert "at 2024-11-05 loses" in line
    assert ("harness" in line) is opted_in  # the name `legacy()` handshakes with


# ---------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize("kind", ["memory-direct", "memory-jsonrpc", "http"])
async def test_unsupported_revision_refusal_is_recorded(spans: InMemorySpanExporter, kind: str) -> None:
    with target(kind, Policy(max_revision="2025-11-25")) as where:
        async with Client(where, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32022
    finished = spans.get_finished_spans()
    (span,) = named(finished, SPAN_NAME)
    server_span = _assert_is_child_of_server_span(span, finished)
    assert story(span, finished) == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2026-07-28",  # the request's, as the SDK's span holds it
        "network.transport": TRANSPORT[kind],
        "mcp.negotiation.era": "modern",
        "mcp.negotiation.outcome": "refused",
        "mcp.negotiation.requested_version": "2026-07-28",
        "error.type": "-32022",
    }
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(server_span)["error.type"] == "-32022"
    if kind != "memory-direct":
        _assert_joined_client_trace(server_span, finished)


async def test_missing_required_capability_refusal_is_recorded(spans: InMemorySpanExporter) -> None:
    server = build(Policy(required_capabilities=("sampling",)))
    async with open_streams("memory", server) as streams, ClientSession(streams[0], streams[1]) as session:
        with pytest.raises(MCPError) as refused:
            await session.send_request(
                RawRequest(method="initialize", params=initialize_params("2025-11-25", {})),
                types.InitializeResult,
            )
    assert refused.value.error.code == -32021
    async with Client(server, mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32021
    async with Client(server, mode="2026-07-28", sampling_callback=_sample) as client:
        structured(await client.call_tool("negotiation", {}))
    finished = spans.get_finished_spans()
    ours = named(finished, SPAN_NAME)
    by_outcome = Counter(attrs(s)["mcp.negotiation.outcome"] for s in ours)
    assert by_outcome["refused"] == 2
    assert by_outcome["accepted"] >= 1
    refused_spans = {
        attrs(s)["mcp.negotiation.era"]: s for s in ours if s.status.status_code is StatusCode.ERROR
    }
    assert story(refused_spans["legacy"], finished) == {
        "mcp.method.name": "initialize",
        "mcp.protocol.version": "2025-11-25",  # the SDK's seed: nothing was agreed
        "network.transport": "inproc",
        "mcp.negotiation.era": "legacy",
        "mcp.negotiation.outcome": "refused",
        "mcp.negotiation.requested_version": "2025-11-25",
        "error.type": "-32021",
    }
    assert story(refused_spans["modern"], finished) == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2026-07-28",
        "network.transport": "inproc",
        "mcp.negotiation.era": "modern",
        "mcp.negotiation.outcome": "refused",
        "mcp.negotiation.requested_version": "2026-07-28",  # from the request's envelope
        "error.type": "-32021",
    }
    for span in ours:
        _assert_is_child_of_server_span(span, finished)
        refused_here = attrs(span)["mcp.negotiation.outcome"] == "refused"
        assert ("error.type" in story(span, finished)) is refused_here


async def test_a_tool_level_refusal_is_not_a_negotiation_refusal(spans: InMemorySpanExporter) -> None:
    """`@requires` refuses inside the tool: the negotiation itself succeeded."""
    async with Client(build(), mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("summarize", {"text": "hello"})
    assert refused.value.error.code == -32021
    finished = spans.get_finished_spans()
    (server_span,) = named(finished, "tools/call summarize")
    assert attrs(server_span)["error.type"] == "-32021"
    ours = [s for s in named(finished, SPAN_NAME) if parent_of(s, finished) is server_span]
    assert len(ours) == 1
    assert attrs(ours[0])["mcp.negotiation.outcome"] == "accepted"
    assert "error.type" not in attrs(ours[0])
    assert ours[0].status.status_code is StatusCode.UNSET


# ---------------------------------------------------------------------------------------
# Bounded, sorted lists; UCP


def _huge_capabilities() -> dict[str, Any]:
    caps: dict[str, Any] = {f"cap{i:03d}": {"a": True, "b": {}} for i in range(300, 0, -1)}
    caps["z" * 1000] = {}
    caps["extensions"] = {f"io.example/ext{i}": {} for i in range(50)}
    return caps


def test_lists_are_sorted_bounded_and_truncated() -> None:
    caps = _huge_capabilities()
    record = Negotiator(Policy()).initialize(initialize_params("2025-11-25", caps))
    attributes = span_attributes(record, Policy())
    names = attributes["mcp.negotiation.client_capabilities"]
    assert len(names) == MAX_LIST
    assert names == sorted(names)
    assert names[:3] == ["cap001", "cap001.a", "cap001.b"]
    assert all(len(name) <= 128 for name in names)
    withheld = frozenset(f"feature{i:03d}" for i in range(100))
    many = span_attributes(replace(record, withheld=withheld, degraded=withheld), Policy())
    for key in ("mcp.negotiation.withheld", "mcp.negotiation.degraded"):
        assert many[key] == sorted(withheld)[:MAX_LIST]
    # A modern request names its own method, which the SDK answers -32601 only after us.
    assert telemetry.request_attributes("x" * 9_000, None, None) == {"mcp.method.name": "x" * 128}
    extensions = telemetry.declared_capabilities({"extensions": {"io.example/b": {}, "io.example/a": {}}})
    assert extensions == ["extensions", "extensions/io.example/a", "extensions/io.example/b"]


async def test_huge_capability_map_end_to_end(spans: InMemorySpanExporter) -> None:
    async with legacy("memory", build(), "2025-11-25", _huge_capabilities()) as session:
        assert structured(await session.call_tool("negotiation", {}))["supports"]["sampling"] is False
    (span,) = named(spans.get_finished_spans(), SPAN_NAME)
    names = attrs(span)["mcp.negotiation.client_capabilities"]
    assert len(names) == MAX_LIST
    assert list(names) == sorted(names)


def vars_of_agreement() -> dict[str, Any]:
    return {
        "version": "2026-01-11",
        "capabilities": {
            "dev.ucp.shopping.fulfillment": "2026-01-11",
            "dev.ucp.shopping.checkout": "2026-01-11",
        },
        "dropped": {
            "dev.ucp.shopping.discount": "no_common_version",
            "dev.ucp.shopping.buyer": "not_offered",
        },
    }


def _real_ucp_agreement() -> Any:
    from mcp_negotiation.ucp import UcpAgreement

    return UcpAgreement(**vars_of_agreement())


@pytest.mark.parametrize("make", [_real_ucp_agreement, lambda: SimpleNamespace(**vars_of_agreement())])
def test_ucp_attributes(make: Any) -> None:
    base = Negotiator(Policy()).initialize(initialize_params("2025-11-25", {}))
    assert "ucp.version" not in span_attributes(base, Policy())
    attributes = span_attributes(replace(base, ucp=make()), Policy())
    assert attributes["ucp.version"] == "2026-01-11"
    assert attributes["ucp.capabilities"] == [
        "dev.ucp.shopping.checkout@2026-01-11",
        "dev.ucp.shopping.fulfillment@2026-01-11",
    ]
    assert attributes["ucp.dropped"] == [
        "dev.ucp.shopping.buyer:not_offered",
        "dev.ucp.shopping.discount:no_common_version",
    ]


def test_ucp_lists_are_bounded() -> None:
    base = Negotiator(Policy()).initialize(initialize_params("2025-11-25", {}))
    ucp = SimpleNamespace(
        version="2026-01-11",
        capabilities={f"dev.example.cap{i:03d}": "2026-01-11" for i in range(100)},
        dropped={f"dev.example.gone{i:03d}": "not_offered" for i in range(100)},
    )
    attributes = span_attributes(replace(base, ucp=ucp), Policy())
    assert len(attributes["ucp.capabilities"]) == len(attributes["ucp.dropped"]) == MAX_LIST
    assert attributes["ucp.capabilities"][0] == "dev.example.cap000@2026-01-11"


def test_ucp_attributes_reach_span_and_event(spans: InMemorySpanExporter) -> None:
    negotiator = Negotiator(Policy())
    made = negotiator.request(
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        transport="http",
    )
    record = Known(replace(made, ucp=_real_ucp_agreement()), negotiator)
    tracer = trace.get_tracer("tests")
    server_attributes = {"mcp.method.name": "tools/call"}
    with tracer.start_as_current_span(
        "tools/call checkout", kind=SpanKind.SERVER, attributes=server_attributes
    ):
        telemetry.record_negotiation("tools/call", record, Policy(), 0.0001)
    finished = spans.get_finished_spans()
    (span,) = named(finished, SPAN_NAME)
    server_span = _assert_is_child_of_server_span(span, finished)
    assert attrs(span)["ucp.version"] == "2026-01-11"
    assert "dev.ucp.shopping.buyer:not_offered" in attrs(span)["ucp.dropped"]
    assert attrs(server_span) == server_attributes  # not an initialize: nothing corrected


async def test_legacy_stateless_ucp_calls_are_traced_once_and_linked(spans: InMemorySpanExporter) -> None:
    """Every POST is a fresh connection there, yet a repeated call is still a repeat."""
    from mcp_negotiation.ucp import StaticResolver
    from support.harness import EXAMPLES
    from ucp_shop import build as shop

    url = "https://platform.example/profile.json"
    platform = json.loads((EXAMPLES / "ucp/platform_profile.json").read_text())
    server = shop(StaticResolver({url: platform}))
    arguments = {"items": ["tea"], "meta": {"ucp-agent": {"profile": url}}}
    with target("http-stateless", server=server) as where:
        async with legacy("http-stateless", where, "2025-11-25", {}) as session:
            for _ in range(3):
                assert structured(await session.call_tool("create_checkout", arguments))["status"]
    finished = spans.get_finished_spans()
    (ours,) = [s for s in named(finished, SPAN_NAME) if story(s, finished)["mcp.method.name"] == "tools/call"]
    assert attrs(ours)["ucp.version"] == platform["ucp"]["version"]
    calls = [s for s in finished if s.kind is SpanKind.SERVER and attrs(s)["mcp.method.name"] == "tools/call"]
    assert len(calls) == 3
    assert _assert_is_child_of_server_span(ours, finished) is calls[0]
    for later in calls[1:]:
        assert [link.context.span_id for link in later.links] == [ours.context.span_id]


def test_only_the_sdk_initialize_span_is_corrected(spans: InMemorySpanExporter) -> None:
    negotiator = Negotiator(Policy())
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("user work", attributes={"mcp.protocol.version": "mine"}):
        record = Known(negotiator.initialize(initialize_params("2025-06-18", {})), negotiator)
        telemetry.record_negotiation("initialize", record, Policy(), 0.0)
    client_attributes = {"mcp.method.name": "initialize", "mcp.protocol.version": "2025-11-25"}
    with tracer.start_as_current_span(
        "MCP send initialize", kind=SpanKind.CLIENT, attributes=client_attributes
    ):
        record = Known(negotiator.initialize(initialize_params("2025-06-18", {})), negotiator)
        telemetry.record_negotiation("initialize", record, Policy(), 0.0)
    with tracer.start_as_current_span(
        "initialize", kind=SpanKind.SERVER, attributes={"mcp.method.name": "initialize"}
    ):
        record = Known(negotiator.initialize(initialize_params("2025-06-18", {})), negotiator)
        telemetry.record_negotiation("initialize", record, Policy(), 0.0)
    finished = spans.get_finished_spans()
    (user,) = named(finished, "user work")
    (client,) = named(finished, "MCP send initialize")
    (sdk_like,) = named(finished, "initialize")
    assert attrs(client)["mcp.protocol.version"] == "2025-11-25"  # an in-process client's own span
    assert attrs(user)["mcp.protocol.version"] == "mine"
    assert len(events_named(user, SPAN_NAME)) == 1  # the event is still added
    assert attrs(sdk_like)["mcp.protocol.version"] == "2025-06-18"


# ---------------------------------------------------------------------------------------
# Metrics


def _labels(era: str, revision: str, outcome: str) -> frozenset[tuple[str, str]]:
    return frozenset(
        {
            "mcp.negotiation.era": era,
            "mcp.protocol.version": revision,
            "mcp.negotiation.outcome": outcome,
        }.items()
    )


async def test_legacy_stateless_requests_are_each_an_operation_and_one_negotiation(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    """Each POST is a connection of its own: each is an operation (served or refused, or an
    operator's refusal ratio is wrong), and the negotiation they repeat is one."""
    import httpx2

    async def post(revision: str, number: int) -> Any:
        body = {"jsonrpc": "2.0", "id": number, "method": "tools/list", "params": {}}
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": revision}
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(url, json=body, headers=headers)

    server = build(Policy(min_revision="2025-06-18"))
    with serve_http(server.streamable_http_app(stateless_http=True)) as url:
        before = snapshot(reader)
        served = [await post("2025-11-25", number) for number in range(5)]
        refused = [await post("2025-03-26", number) for number in range(2)]
        after = snapshot(reader)
    assert all("result" in r.text for r in served)
    assert all("-32022" in r.text for r in refused)
    assert delta(before, after, NEGOTIATIONS) == {_labels("legacy", "2025-11-25", "accepted"): 1}
    refusals = delta(before, after, REFUSALS)
    assert {dict(labels)["error.type"]: count for labels, count in refusals.items()} == {"-32022": 2}
    operations = delta(before, after, OPERATION)
    by_revision = Counter()
    for labels, count in operations.items():
        by_revision[dict(labels)["mcp.protocol.version"], dict(labels).get("error.type")] += count
    assert by_revision == {("2025-11-25", None): 5, ("2025-03-26", "-32022"): 2}
    accepted = [
        s
        for s in named(spans.get_finished_spans(), SPAN_NAME)
        if attrs(s)["mcp.negotiation.outcome"] == "accepted"
    ]
    (span,) = accepted  # the four repeats link to it
    assert attrs(span)["mcp.negotiation.capabilities_known"] is False


async def test_metrics_count_each_negotiation_once_and_time_each_traced(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    before = snapshot(reader)
    server = build()
    async with legacy("memory", server, "2025-06-18", {}) as session:
        await session.call_tool("negotiation", {})
    async with legacy("memory", server, "zzz", {}) as session:  # counter-offered 2025-11-25
        await session.call_tool("negotiation", {})
    async with Client(server, mode="2026-07-28") as client:
        await client.call_tool("negotiation", {})
        await client.call_tool("negotiation", {})
    async with Client(build(Policy(max_revision="2025-11-25")), mode="2026-07-28") as client:
        with pytest.raises(MCPError):
            await client.call_tool("negotiation", {})
    after = snapshot(reader)
    negotiations = delta(before, after, NEGOTIATIONS)
    durations = delta(before, after, DURATION, "count")

    # One duration per recorded span, labelled by what was agreed; one negotiation per span
    # that agreed (the modern client's repeats link to its span: no negotiation of their own).
    finished = spans.get_finished_spans()
    ours = named(finished, SPAN_NAME)

    def labels_of(span: ReadableSpan) -> frozenset[tuple[str, str]]:
        seen = story(span, finished)
        if seen["mcp.negotiation.outcome"] == "refused":
            return frozenset({("mcp.negotiation.era", seen["mcp.negotiation.era"]), OUTCOME_REFUSED})
        era, revision = seen["mcp.negotiation.era"], seen["mcp.protocol.version"]
        return _labels(era, revision, seen["mcp.negotiation.outcome"])

    assert any(s.links for s in finished)  # the modern client repeated
    assert durations == Counter(labels_of(s) for s in ours)
    assert negotiations == {
        _labels("legacy", "2025-06-18", "accepted"): 1,
        _labels("legacy", "2025-11-25", "counter_offered"): 1,
        _labels("modern", "2026-07-28", "accepted"): 1,
    }
    assert delta(before, after, REFUSALS) == {
        frozenset(
            {
                "error.type": "-32022",
                "mcp.method.name": "tools/call",
                "mcp.negotiation.era": "modern",
                "mcp.negotiation.requested_version": "2026-07-28",
            }.items()
        ): 1
    }
    for labels in (*after[NEGOTIATIONS], *after[DURATION]):
        assert "zzz" not in {value for _, value in labels}
    for point in after[DURATION].values():
        assert tuple(point.explicit_bounds) == otel_metrics.DURATION_BUCKETS
        assert point.min >= 0


def test_metric_revision_labels_are_bounded() -> None:
    assert otel_metrics.revision_label("2025-06-18") == "2025-06-18"
    assert otel_metrics.revision_label("zzz") == "_OTHER"
    assert otel_metrics.revision_label(None) == "_OTHER"
    assert otel_metrics.revision_label("2025-06-18" * 100) == "_OTHER"


# ---------------------------------------------------------------------------------------
# Telemetry never raises into the server


class _Broken:
    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"broken telemetry backend ({name})")

        return fail


async def _serve_everything() -> None:
    """A legacy session, a modern request and a refusal: all must be answered normally."""
    server = build()
    async with legacy("memory", server, "2025-06-18", {"sampling": {}}) as session:
        assert structured(await session.call_tool("negotiation", {}))["protocol_version"] == "2025-06-18"
    async with Client(server, mode="2026-07-28") as client:
        assert structured(await client.call_tool("negotiation", {}))["era"] == "modern"
    async with Client(build(Policy(max_revision="2025-11-25")), mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32022


@pytest.mark.parametrize("broken", ["tracer", "trace", "instruments", "span_attributes"])
async def test_a_failing_telemetry_backend_never_reaches_the_server(
    spans: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    broken: str,
) -> None:
    replacement: Any = _Broken() if broken in {"tracer", "trace"} else getattr(_Broken(), broken)
    monkeypatch.setattr(otel_metrics if broken == "instruments" else telemetry, broken, replacement)
    with caplog.at_level(logging.ERROR, logger="mcp_negotiation"):
        await _serve_everything()
    failures = [r for r in caplog.records if "telemetry failed" in r.getMessage()]
    # Legacy, modern and the refusal fail each; a refusal is not built from span_attributes.
    assert len(failures) >= (2 if broken == "span_attributes" else 3)
    # The exception's text, not its traceback: a client's request caused the line.
    assert all("broken telemetry backend" in r.getMessage() and not r.exc_info for r in failures)
    if broken == "span_attributes":
        # The span was started before the failure and is still ended (no leak), bare.
        ours = named(spans.get_finished_spans(), SPAN_NAME)
        assert ours
        assert any(not attrs(s) for s in ours)


class _Failing(SpanProcessor):
    """A span processor whose `on_end` raises for our spans (a buggy exporter, say)."""

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == SPAN_NAME:
            raise RuntimeError("exporter down")


async def test_a_failing_span_pipeline_leaves_the_metrics_and_the_repeats_whole(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader, caplog: pytest.LogCaptureFixture
) -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    failing = _Failing()
    provider.add_span_processor(failing)
    try:
        before = snapshot(reader)
        async with Client(build(), mode="2026-07-28") as client:
            for _ in range(4):
                structured(await client.call_tool("negotiation", {}))
        after = snapshot(reader)
    finally:
        processors = provider._active_span_processor._span_processors  # no public removal
        provider._active_span_processor._span_processors = tuple(p for p in processors if p is not failing)
    requests = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert len(requests) >= 4  # (the client may list the tools first)
    assert sum(delta(before, after, OPERATION).values()) == len(requests)
    assert sum(delta(before, after, NEGOTIATIONS).values()) == 1
    failures = [r for r in caplog.records if "telemetry failed" in r.getMessage()]
    assert len(failures) == 1  # the repeats link to the span; they do not trace it again
    assert sum(len(s.links) for s in requests) == len(requests) - 1


# --- The ASGI layer: refusals the SDK makes before dispatch ---------------------------

_RAW_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-method": "tools/list",
}


def _raw_modern(version: str) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}


async def _post_raw(url: str, version: str) -> Any:
    import httpx2

    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            url, json=_raw_modern(version), headers={**_RAW_HEADERS, "mcp-protocol-version": version}
        )
    return response


def _refused(finished: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [
        s
        for s in named(finished, "capability_negotiated")
        if attrs(s)["mcp.negotiation.outcome"] == "refused"
    ]


async def test_sdk_refusal_before_dispatch_is_traced_by_the_asgi_layer(spans: InMemorySpanExporter) -> None:
    from mcp_negotiation.tools.demo import build
    from support.harness import serve_http

    with serve_http(build().streamable_http_app()) as url:
        response = await _post_raw(url, "zzz")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32022
    (span,) = _refused(spans.get_finished_spans())
    assert attrs(span)["error.type"] == "-32022"
    assert attrs(span)["mcp.negotiation.requested_version"] == "zzz"
    assert attrs(span)["network.transport"] == "tcp"


@pytest.mark.parametrize(
    ("version", "method", "code"),
    [
        ("zzz", "M" * 8_000, -32020),  # a method header contradicting the body
        ("9" * 70_000, "tools/list", -32022),  # repeated in a 400 body longer than is read
    ],
    ids=["long-method-header", "body-over-64KiB"],
)
async def test_a_refusal_before_dispatch_records_only_bounded_server_known_values(
    spans: InMemorySpanExporter, version: str, method: str, code: int
) -> None:
    import httpx2

    from mcp_negotiation.tools.demo import build
    from support.harness import serve_http

    headers = {
        **_RAW_HEADERS,
        "mcp-method": method,
        "mcp-protocol-version": version,
        "mcp-session-id": "another-clients-session",
    }
    with serve_http(build().streamable_http_app()) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(url, json=_raw_modern(version), headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    (span,) = _refused(spans.get_finished_spans())
    assert attrs(span) == {
        "mcp.method.name": method[:128],
        "network.transport": "tcp",
        "mcp.negotiation.era": "unknown",
        "mcp.negotiation.outcome": "refused",
        "mcp.negotiation.requested_version": version[:128],
        "error.type": str(code),
    }


@pytest.mark.parametrize("kind", ["MCPServer", "lowlevel Server"])
async def test_the_http_app_stays_the_sdks_starlette_app(spans: InMemorySpanExporter, kind: str) -> None:
    """Users add middleware and routes to what `streamable_http_app()` returns: it must stay a Starlette."""
    import httpx2
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette
    from starlette.middleware.cors import CORSMiddleware

    from mcp_negotiation import negotiate
    from support.harness import serve_http

    server = negotiate(MCPServer("x") if kind == "MCPServer" else Server("x"))
    app = server.streamable_http_app()
    assert isinstance(app, Starlette)
    app.add_middleware(CORSMiddleware, allow_origins=["*"])
    with serve_http(app) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(
                url,
                json=_raw_modern("zzz"),
                headers={**_RAW_HEADERS, "mcp-protocol-version": "zzz", "origin": url.rsplit("/", 1)[0]},
            )
    assert response.json()["error"]["code"] == -32022
    assert response.headers["access-control-allow-origin"] == "*"
    (span,) = _refused(spans.get_finished_spans())
    assert attrs(span)["error.type"] == "-32022"


async def test_an_app_records_under_its_servers_negotiation_of_the_moment(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """The app outlives a policy: `uninstrument` ends its recording, `negotiate` again resumes it."""
    from mcp_negotiation import negotiate, uninstrument
    from support.harness import serve_http

    server = negotiate(MCPServer("x"))
    with serve_http(server.streamable_http_app()) as url:
        for negotiated in (True, False, True):
            spans.clear()
            assert (await _post_raw(url, "zzz")).json()["error"]["code"] == -32022
            assert len(_refused(spans.get_finished_spans())) == negotiated
            if negotiated:
                uninstrument(server)
            else:
                negotiate(server, Policy(min_revision="2025-06-18"))
    assert "came after streamable_http_app()" not in caplog.text  # that app has its recorder


@pytest.mark.parametrize("kind", ["MCPServer", "lowlevel Server"])
def test_negotiating_a_server_whose_app_is_already_built_says_what_goes_untraced(
    caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    from mcp.server.lowlevel.server import Server

    from mcp_negotiation import negotiate

    built = MCPServer("x") if kind == "MCPServer" else Server("x")
    built.streamable_http_app()
    negotiate(built)
    assert "negotiate() came after streamable_http_app() built this server's app" in caplog.text
    caplog.clear()
    ordered = negotiate(MCPServer("x") if kind == "MCPServer" else Server("x"))
    ordered.streamable_http_app()
    negotiate(ordered, Policy(min_revision="2025-06-18"))
    assert "came after" not in caplog.text


def test_an_app_that_refuses_the_recorder_is_served_without_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette

    from mcp_negotiation import negotiate

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Cannot add middleware after an application has started")

    monkeypatch.setattr(Starlette, "add_middleware", refuse)
    app = negotiate(MCPServer("x")).streamable_http_app()
    assert isinstance(app, Starlette)
    assert "cannot record the SDK's own refusals" in caplog.text


async def test_a_refusal_by_the_middleware_is_traced_once(spans: InMemorySpanExporter) -> None:
    from mcp_negotiation.tools.demo import build
    from support.harness import serve_http

    with serve_http(build(Policy(max_revision="2025-11-25")).streamable_http_app()) as url:
        response = await _post_raw(url, "2026-07-28")
    assert response.json()["error"]["code"] == -32022
    assert len(_refused(spans.get_finished_spans())) == 1


async def test_an_app_mounted_in_the_users_starlette_app_is_traced_once(spans: InMemorySpanExporter) -> None:
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from mcp_negotiation import record_refusals_asgi
    from mcp_negotiation.tools.demo import build
    from support.harness import serve_http

    server = build()
    inner = server.streamable_http_app(streamable_http_path="/")

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with server.session_manager.run():
            yield

    outer = Starlette(routes=[Mount("/mcp", app=record_refusals_asgi(inner))], lifespan=lifespan)
    with serve_http(outer) as url:
        response = await _post_raw(url + "/", "zzz")
    assert response.json()["error"]["code"] == -32022
    assert len(_refused(spans.get_finished_spans())) == 1


async def test_an_app_wrapped_and_served_outermost_is_an_asgi_3_app_that_records(
    spans: InMemorySpanExporter,
) -> None:
    """uvicorn tells an ASGI 3 app from an ASGI 2 one by whether it is a coroutine function:
    `record_refusals_asgi(app)` served as the app itself must read as ASGI 3."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    from mcp_negotiation import record_refusals_asgi
    from support.harness import serve_http

    app = record_refusals_asgi(MCPServer("plain").streamable_http_app())
    config = uvicorn.Config(app)
    config.load()
    assert config.asgi_version == "3.0"
    with serve_http(app) as url:
        response = await _post_raw(url, "zzz")
    assert response.json()["error"]["code"] == -32022
    assert len(_refused(spans.get_finished_spans())) == 1


async def test_a_malformed_envelope_the_sdk_refuses_over_http_is_recorded(
    spans: InMemorySpanExporter,
) -> None:
    """As the same envelope refused in process is (-32602, "malformed envelope")."""
    import httpx2

    body = _raw_modern("2026-07-28")
    del body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    with serve_http(build().streamable_http_app()) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = {**_RAW_HEADERS, "mcp-protocol-version": "2026-07-28"}
            response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
    (span,) = _refused(spans.get_finished_spans())
    assert attrs(span)["error.type"] == "-32602"
    assert attrs(span)["mcp.negotiation.era"] == "modern"


async def test_a_tools_own_error_with_a_negotiation_code_is_not_a_refusal(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    """A gateway relaying an upstream -32022: modern HTTP answers it with a 400, as the SDK's
    own refusals; the request was negotiated and accepted, and is recorded so, once."""
    server = negotiate(MCPServer("gateway"), Policy())

    @server.tool()
    async def relay() -> str:
        raise MCPError(-32022, "upstream: Unsupported protocol version")

    with serve_http(server.streamable_http_app()) as url:
        before = snapshot(reader)
        async with Client(url, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as relayed:
                await client.call_tool("relay", {})
        after = snapshot(reader)
    assert relayed.value.error.code == -32022
    outcomes = [attrs(s)["mcp.negotiation.outcome"] for s in named(spans.get_finished_spans(), SPAN_NAME)]
    assert "refused" not in outcomes
    assert delta(before, after, NEGOTIATIONS).keys() == {_labels("modern", "2026-07-28", "accepted")}
    assert not delta(before, after, REFUSALS)
    # The tool's own error is the operation's: an error with its code (the conventions' rule).
    (failed,) = [dict(k) for k in delta(before, after, OPERATION) if ("mcp.method.name", "tools/call") in k]
    assert (failed["error.type"], failed["rpc.response.status_code"]) == ("-32022", "-32022")


async def test_a_refusal_before_dispatch_joins_the_clients_trace(spans: InMemorySpanExporter) -> None:
    """No SDK span exists yet: the refusal is a child of the client's span in its `traceparent`."""
    import httpx2

    tracer = trace.get_tracer("client")
    with tracer.start_as_current_span("client call") as client_span:
        carrier: dict[str, str] = {}
        from opentelemetry import propagate

        propagate.inject(carrier)
    with serve_http(build().streamable_http_app()) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = {**_RAW_HEADERS, "mcp-protocol-version": "2027-01-01", **carrier}
            response = await http.post(url, json=_raw_modern("2027-01-01"), headers=headers)
    assert response.json()["error"]["code"] == -32022
    (span,) = _refused(spans.get_finished_spans())
    assert span.parent is not None
    assert span.parent.span_id == client_span.get_span_context().span_id
    assert span.context.trace_id == client_span.get_span_context().trace_id


# --- FastMCP: it replaces the SDK's span opener with its own ------------------------------


def _fastmcp_server(install: str) -> Any:
    from fastmcp import FastMCP

    from mcp_negotiation import instrument, negotiate, uninstrument

    if install == "negotiate":
        server = negotiate(FastMCP("traced"))
    else:
        instrument(Policy())
        try:
            server = FastMCP("traced")
        finally:
            uninstrument()

    @server.tool()
    def echo(x: int) -> int:
        return x

    return server


@pytest.mark.parametrize("install", ["negotiate", "instrument"])
async def test_fastmcp_spans_sit_under_fastmcps_server_spans(
    spans: InMemorySpanExporter, install: str
) -> None:
    from fastmcp import Client as FastMCPClient

    server = _fastmcp_server(install)
    async with FastMCPClient(server) as client:
        for _ in range(3):
            await client.call_tool("echo", {"x": 1})
    finished = spans.get_finished_spans()
    server_spans = {s.context.span_id: s for s in finished if s.kind is SpanKind.SERVER}
    ours = named(finished, SPAN_NAME)
    assert ours
    if install == "negotiate":
        (span,) = ours
        _assert_is_child_of_server_span(span, finished)
    # Every repeat's link sits on a SERVER span (never on the client's span) and points at ours.
    links = [(s, link) for s in finished for link in s.links]
    assert len(links) >= 3
    assert all(holder.context.span_id in server_spans for holder, _ in links)
    assert {link.context.span_id for _, link in links} <= {s.context.span_id for s in ours}


# ---------------------------------------------------------------------------------------
# The SDK's own requests: over modern HTTP it lists a lowlevel server's tools through the
# chain before a `tools/call` with arguments (to check `Mcp-Param-*` headers against them)


def _lowlevel_http_server(policy: Policy, listed_for: list[str | None]) -> Any:
    from mcp.server.lowlevel.server import Server

    from mcp_negotiation import negotiate, negotiation_of

    echo = types.Tool(name="echo", input_schema={"type": "object", "properties": {"x": {"type": "integer"}}})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        listed_for.append(negotiation_of(ctx).client_name)  # a per-client catalog would ask
        return types.ListToolsResult(tools=[echo])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    return negotiate(Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool), policy)


async def _post_modern(
    url: str, method: str, params: dict[str, Any], client: str, caps: dict[str, Any]
) -> Any:
    import httpx2

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
    }
    headers = {**_RAW_HEADERS, "mcp-method": method, "mcp-protocol-version": "2026-07-28"}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers={**headers, "accept": "application/json"})


def _negotiated_methods(finished: Sequence[ReadableSpan]) -> list[tuple[str, str]]:
    return [
        (story(s, finished)["mcp.method.name"], attrs(s)["mcp.negotiation.outcome"])
        for s in named(finished, SPAN_NAME)
    ]


async def test_the_sdks_own_listing_is_negotiated_for_its_client_but_not_traced(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    listed_for: list[str | None] = []
    server = _lowlevel_http_server(Policy(), listed_for)
    with serve_http(server.streamable_http_app(json_response=True)) as url:
        before = snapshot(reader)
        called = await _post_modern(url, "tools/call", {"name": "echo", "arguments": {"x": 1}}, "alice", {})
        after = snapshot(reader)
        assert called.status_code == 200, called.text
        # The SDK did list the tools for the call (what this test is about), as alice's.
        assert listed_for == ["alice"]
        assert _negotiated_methods(spans.get_finished_spans()) == [("tools/call", "accepted")]
        assert sum(delta(before, after, NEGOTIATIONS).values()) == 1
        # The SDK's listing is part of the call's answer, not an operation of its own.
        methods = {dict(labels)["mcp.method.name"] for labels in delta(before, after, OPERATION)}
        assert methods == {"tools/call"}
        # A client's own tools/list is still its own negotiation.
        spans.clear()
        listed = await _post_modern(url, "tools/list", {}, "bob", {})
    assert listed.status_code == 200, listed.text
    assert listed_for == ["alice", "bob"]
    assert _negotiated_methods(spans.get_finished_spans()) == [("tools/list", "accepted")]


@pytest.mark.parametrize(
    ("policy", "code"),
    [(Policy(required_capabilities=("sampling",)), -32021), (Policy(max_revision="2025-11-25"), -32022)],
    ids=["missing-capability", "unsupported-revision"],
)
async def test_a_call_the_sdk_lists_tools_for_is_refused_once_and_nothing_is_logged(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture, policy: Policy, code: int
) -> None:
    listed_for: list[str | None] = []
    server = _lowlevel_http_server(policy, listed_for)
    caplog.set_level(logging.DEBUG, logger="mcp.server")
    with serve_http(server.streamable_http_app(json_response=True)) as url:
        refused = await _post_modern(url, "tools/call", {"name": "echo", "arguments": {"x": 1}}, "carol", {})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == code
    assert listed_for == []  # the listing was answered empty, not by the server's handler
    assert _negotiated_methods(spans.get_finished_spans()) == [("tools/call", "refused")]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
