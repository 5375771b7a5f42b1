"""A span exporter safe on a stdio server: one line of JSON per span, on standard error.

A stdio server's standard output carries its JSON-RPC messages, one per line, and the
OpenTelemetry SDK's `ConsoleSpanExporter` writes there by default, several lines per span
(`opentelemetry-instrument --traces_exporter console` has no way to say otherwise). A span
among the messages is a line the client cannot parse. This exporter writes each span as
one line of JSON to `sys.stderr` (as it is when the span is exported), which clients
show or keep as the server's log, and which a script can read back line by line.

In code, with the OpenTelemetry SDK installed:

    provider.add_span_processor(BatchSpanProcessor(StderrSpanExporter()))

With no code, through the `opentelemetry_traces_exporter` entry point this package
declares (`console_stderr`):

    opentelemetry-instrument --traces_exporter console_stderr --metrics_exporter none \\
        --logs_exporter none python server.py

Nothing else in the package imports this module: it needs `opentelemetry-sdk`, which
`mcp_negotiation` does not install.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["ENTRY_POINT", "StderrSpanExporter", "one_line"]

ENTRY_POINT = "console_stderr"
"""The name `OTEL_TRACES_EXPORTER` / `--traces_exporter` picks this exporter by."""


def one_line(span: ReadableSpan) -> str:
    """A span as the SDK's console exporter renders it, as JSON, but on one line."""
    text: str = span.to_json(indent=None)  # (the SDK leaves it unannotated)
    return text + "\n"


class StderrSpanExporter(SpanExporter):
    """Writes each span as one line of JSON to standard error (or to `out`).

    Built with no arguments by `opentelemetry-instrument`; `out` is for code that wants
    the lines elsewhere. Without `out`, `sys.stderr` is looked up at each export, so a
    stream swapped in after start-up (a test's capture, a log redirect) is honoured.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        out = self._out if self._out is not None else sys.stderr
        out.write("".join(one_line(span) for span in spans))
        out.flush()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
