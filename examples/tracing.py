"""Print the `capability_negotiated` spans of one legacy and one modern request.

    python examples/tracing.py          # one line per span
    python examples/tracing.py --json   # the SDK's ConsoleSpanExporter JSON

The OpenTelemetry SDK is configured in code (a `TracerProvider` with a
`SimpleSpanProcessor(ConsoleSpanExporter())`); in production you would point an OTLP
exporter at your collector instead, or run `opentelemetry-instrument python server.py`.

A legacy client runs the `initialize` handshake and calls a tool; a modern (2026-07-28)
client calls the same tool. Both go through the SDK's JSON-RPC in-memory transport, so
the client injects `traceparent` into `_meta` and each server span joins the client's
trace. Each client's work runs under one root span so that its requests share a trace.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import anyio
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from mcp_negotiation import Policy, negotiate, negotiation_of

SHOWN = (
    "mcp.method.name",
    "mcp.protocol.version",
    "network.transport",
    "mcp.negotiation.era",
    "mcp.negotiation.outcome",
    "mcp.negotiation.requested_version",
    "mcp.negotiation.client_capabilities",
    "mcp.negotiation.degraded",
    "error.type",
)


def build_server() -> MCPServer:
    server = negotiate(MCPServer("tracing-example"), Policy(min_revision="2025-06-18"))

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The era and revision this library negotiated with the caller."""
        record = negotiation_of(ctx)
        return f"{record.era} {record.protocol_version}"

    return server


async def _sample(ctx: Any, params: Any) -> Any:  # declares `sampling`; never called here
    raise NotImplementedError


async def drive(server: MCPServer) -> list[str]:
    """One legacy session (initialize + a tool call) and one modern request, in memory."""
    tracer = trace.get_tracer("examples.tracing")
    answers: list[str] = []
    with tracer.start_as_current_span("legacy client"):
        async with Client(InMemoryTransport(server), mode="legacy", sampling_callback=_sample) as client:
            answers.append(_text(await client.call_tool("whoami", {})))
    with tracer.start_as_current_span("modern client"):
        async with Client(InMemoryTransport(server), mode="2026-07-28", sampling_callback=_sample) as client:
            answers.append(_text(await client.call_tool("whoami", {})))
    return answers


def _text(result: Any) -> str:
    block = result.content[0]
    return str(getattr(block, "text", block))


def _value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def one_line(span: ReadableSpan) -> str:
    """A compact rendering: name, kind, ids, the interesting attributes, events and links."""
    context = span.get_span_context()
    trace_id = f"{context.trace_id:032x}"[:8] if context else "?"
    span_id = f"{context.span_id:016x}"[:8] if context else "?"
    parent = f"{span.parent.span_id:016x}"[:8] if span.parent else "-"
    attributes = span.attributes or {}
    shown = " ".join(f"{key}={_value(attributes[key])}" for key in SHOWN if key in attributes)
    events = "".join(f" +event:{event.name}" for event in span.events)
    links = "".join(f" +link:{link.context.span_id:016x}"[:15] for link in span.links)
    return (
        f"{span.name:<34} {span.kind.name:<8} trace={trace_id} span={span_id} parent={parent} "
        f"{shown}{events}{links}\n"
    )


def configure(formatter: Any = one_line) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=formatter)))
    trace.set_tracer_provider(provider)
    return provider


def main(argv: Iterable[str] = ()) -> None:
    as_json = "--json" in argv
    provider = configure(lambda span: span.to_json() + "\n") if as_json else configure()
    answers = anyio.run(drive, build_server())
    provider.shutdown()
    for answer in answers:
        print(f"whoami -> {answer}")


if __name__ == "__main__":
    main(sys.argv[1:])
