"""`mcp_negotiation.otel.stderr`: spans as one line of JSON each, on standard error.

The subprocess tests (tests/otel/test_zero_code.py, tests/project/test_wrapping.py) show it
keeps a stdio server's standard output clean; here, what it writes and how it is found.
"""

from __future__ import annotations

import io
import json
from importlib.metadata import entry_points

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter

from mcp_negotiation.otel.stderr import ENTRY_POINT, StderrSpanExporter


def _spans_written(exporter: SpanExporter, names: tuple[str, ...]) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for name in names:
        with tracer.start_as_current_span(name) as span:
            span.set_attribute("line", "one\nand the next")  # a newline inside stays escaped
    provider.shutdown()


def test_each_span_is_one_line_of_the_json_the_sdks_console_exporter_writes() -> None:
    ours, theirs = io.StringIO(), io.StringIO()
    _spans_written(StderrSpanExporter(out=ours), ("first", "second"))
    _spans_written(ConsoleSpanExporter(out=theirs), ("first", "second"))
    lines = ours.getvalue().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["first", "second"]
    decoder, text, index, theirs_parsed = json.JSONDecoder(), theirs.getvalue(), 0, []
    while (start := text.find("{", index)) != -1:
        value, index = decoder.raw_decode(text, start)
        theirs_parsed.append(value)
    drop = ("context", "start_time", "end_time", "resource")  # ids and times differ between the runs
    assert [{k: v for k, v in json.loads(line).items() if k not in drop} for line in lines] == [
        {k: v for k, v in span.items() if k not in drop} for span in theirs_parsed
    ]


def test_without_out_it_writes_to_the_stderr_of_the_moment(capsys: pytest.CaptureFixture[str]) -> None:
    _spans_written(StderrSpanExporter(), ("late",))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err)["name"] == "late"


def test_opentelemetry_instrument_finds_it_by_its_entry_point() -> None:
    (found,) = entry_points(group="opentelemetry_traces_exporter", name=ENTRY_POINT)
    assert found.load() is StderrSpanExporter
    assert issubclass(StderrSpanExporter, SpanExporter)  # what the SDK's configurator checks
    assert isinstance(StderrSpanExporter(), SpanExporter)  # built with no arguments
