"""Render the traces of `examples/tracing.py` as a timeline SVG: `docs/trace.svg`.

    python docs/render_trace.py                    # writes docs/trace.svg
    python docs/render_trace.py --output out.svg

The picture is drawn from real exported spans: the example's server and clients run
in memory under an OpenTelemetry SDK `TracerProvider` with an `InMemorySpanExporter`,
and every span the SDK, the client and this library produced is drawn, one row per
span, nested under its parent, on one time axis per trace. Pure Python: SVG is text.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "trace.svg"

ROW = 22
LABEL_WIDTH = 300
BAR_WIDTH = 460
NOTE_WIDTH = 420
MARGIN = 16
WIDTH = MARGIN * 2 + LABEL_WIDTH + BAR_WIDTH + NOTE_WIDTH
COLOURS = {"CLIENT": "#4c78a8", "SERVER": "#54a24b", "INTERNAL": "#9d9d9d"}
NEGOTIATED = "#f58518"
REFUSED = "#e45756"
REQUEST_KEYS = ("mcp.protocol.version", "error.type")
"""What the SDK's SERVER span says of the request (ours does not repeat it)."""
NOTE_KEYS = (
    "mcp.negotiation.era",
    "mcp.protocol.version",
    "mcp.negotiation.outcome",
    "network.transport",
    "error.type",
)


def collect() -> list[Any]:
    """Run the example's flow under an in-memory exporter; return the finished spans."""
    import anyio
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    sys.path.insert(0, str(ROOT / "examples"))
    import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    # The first run pays for imports and first-call set-up; draw the second, warm one.
    anyio.run(tracing.drive, tracing.build_server())
    exporter.clear()
    anyio.run(tracing.drive, tracing.build_server())
    return list(exporter.get_finished_spans())


def _rows(spans: Sequence[Any]) -> list[tuple[Any, int]]:
    """Spans of one trace in tree order (children by start time), with their depth."""
    ids = {span.context.span_id for span in spans}
    children: dict[int | None, list[Any]] = defaultdict(list)
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children[parent if parent in ids else None].append(span)
    rows: list[tuple[Any, int]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children[parent], key=lambda s: (s.start_time, s.name)):
            rows.append((span, depth))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return rows


def _parent(span: Any, spans: Sequence[Any]) -> Any:
    parent = span.parent.span_id if span.parent is not None else None
    return next((s for s in spans if s.context.span_id == parent), None)


def _note(span: Any, spans: Sequence[Any]) -> str:
    """Our span's story: its own attributes, with the request's (its revision, an error) from
    the SDK's SERVER span it sits under, which holds them."""
    parent = _parent(span, spans)
    request = dict(parent.attributes or {}) if parent is not None and parent.kind.name == "SERVER" else {}
    attributes = {**{key: request[key] for key in REQUEST_KEYS if key in request}, **(span.attributes or {})}
    parts = [str(attributes[key]) for key in NOTE_KEYS if key in attributes]
    caps = attributes.get("mcp.negotiation.client_capabilities")
    if caps:
        parts.append("caps: " + ",".join(caps))
    return " · ".join(parts)


def _links(span: Any, spans: Sequence[Any]) -> str:
    """A request span's links to the negotiation it repeated (by name, when in this trace)."""
    names = {s.context.span_id: s.name for s in spans}
    return " · ".join(
        f"link → {names.get(link.context.span_id, 'a span')} {link.context.span_id:016x}"[:60]
        for link in span.links
    )


def _colour(span: Any) -> str:
    if span.name == "capability_negotiated":
        return REFUSED if (span.attributes or {}).get("error.type") else NEGOTIATED
    return COLOURS.get(span.kind.name, COLOURS["INTERNAL"])


def render(spans: Sequence[Any]) -> str:
    """An SVG document: one panel per trace, one row per span, bars on the trace's time axis."""
    traces: dict[int, list[Any]] = defaultdict(list)
    for span in spans:
        traces[span.context.trace_id].append(span)
    ordered = sorted(traces.values(), key=lambda group: min(s.start_time for s in group))
    body: list[str] = []
    y = MARGIN + 24
    body.append(
        f'<text x="{MARGIN}" y="{MARGIN + 8}" class="title">capability_negotiated in context: '
        f"{len(spans)} spans, {len(ordered)} traces (rendered from exported spans)</text>"
    )
    for group in ordered:
        start = min(s.start_time for s in group)
        end = max(s.end_time for s in group)
        span_ns = max(end - start, 1)
        rows = _rows(group)
        top = y
        body.append(
            f'<text x="{MARGIN}" y="{y + 14}" class="trace">trace {group[0].context.trace_id:032x} '
            f"({span_ns / 1e6:.2f} ms)</text>"
        )
        y += ROW + 12
        x0 = MARGIN + LABEL_WIDTH
        for tick in range(5):
            x = x0 + BAR_WIDTH * tick / 4
            body.append(
                f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + ROW * len(rows)}" class="grid"/>'
                f'<text x="{x:.1f}" y="{y - 4}" class="tick">{span_ns / 1e6 * tick / 4:.2f} ms</text>'
            )
        for span, depth in rows:
            left = x0 + BAR_WIDTH * (span.start_time - start) / span_ns
            width = max(BAR_WIDTH * (span.end_time - span.start_time) / span_ns, 2.0)
            label = escape(f"{span.name} [{span.kind.name.lower()}]")
            body.append(
                f'<g class="span"><title>{escape(span.name)}</title>'
                f'<text x="{MARGIN + 12 * depth}" y="{y + 15}" class="name">{label}</text>'
                f'<rect x="{left:.1f}" y="{y + 4}" width="{width:.1f}" height="{ROW - 8}" rx="2" '
                f'fill="{_colour(span)}"/>'
            )
            for event in span.events:
                ex = x0 + BAR_WIDTH * (event.timestamp - start) / span_ns
                body.append(
                    f'<path d="M{ex:.1f} {y + 2} l5 9 l-5 9 l-5 -9 z" class="event">'
                    f"<title>event {escape(event.name)}</title></path>"
                )
            note = _note(span, group) if span.name == "capability_negotiated" else _links(span, group)
            if note:
                body.append(
                    f'<text x="{x0 + BAR_WIDTH + 10}" y="{y + 15}" class="note">{escape(note)}</text>'
                )
            body.append("</g>")
            y += ROW
        body.append(
            f'<rect x="{MARGIN - 6}" y="{top - 2}" width="{WIDTH - 2 * MARGIN + 12}" '
            f'height="{y - top + 6}" class="panel"/>'
        )
        y += ROW
    legend = [
        ("CLIENT span (MCP send …)", COLOURS["CLIENT"]),
        ("SERVER span (the SDK's)", COLOURS["SERVER"]),
        ("capability_negotiated", NEGOTIATED),
        ("other INTERNAL", COLOURS["INTERNAL"]),
    ]
    x = MARGIN
    for text, colour in legend:
        body.append(
            f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colour}"/>'
            f'<text x="{x + 16}" y="{y + 11}" class="tick">{escape(text)}</text>'
        )
        x += 200
    body.append(
        f'<path d="M{x + 6} {y - 1} l5 7 l-5 7 l-5 -7 z" class="event"/>'
        f'<text x="{x + 16}" y="{y + 11}" class="tick">event capability_negotiated</text>'
    )
    height = y + ROW + MARGIN
    style = (
        "text{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;fill:#222}"
        ".title{font-size:14px;font-weight:bold}.trace{font-weight:bold}.tick{font-size:10px;fill:#555}"
        ".note{font-size:11px;fill:#8a4b00}.grid{stroke:#ddd}"
        ".panel{fill:none;stroke:#bbb}.event{fill:#ffd400;stroke:#333;stroke-width:0.8}"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">\n<style>{style}</style>\n'
        f'<rect width="100%" height="100%" fill="#fff"/>\n' + "\n".join(body) + "\n</svg>\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    spans = collect()
    args.output.write_text(render(spans), encoding="utf-8")
    print(f"wrote {args.output} ({len(spans)} spans)")


if __name__ == "__main__":
    main()
