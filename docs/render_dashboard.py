"""Render `docs/dashboards/mcp-negotiation.json` from a real Prometheus: `docs/dashboard.png`.

    python docs/render_dashboard.py                      # writes docs/dashboard.png
    python docs/render_dashboard.py --output out.png

No Grafana is needed: every panel of the dashboard's JSON is drawn with matplotlib from what
its own PromQL answers. The data is the Prometheus test's (`tests/otel/test_prometheus.py`):
Debian's `prometheus` scrapes a negotiated server exposed through
`opentelemetry-exporter-prometheus` while mixed-era traffic with refusals is sent to it
(`tests/support/prometheus.py`). The test renders the same picture into its own directory.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = Path(__file__).resolve().parent / "dashboards" / "mcp-negotiation.json"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "dashboard.png"
RATE_INTERVAL = "4s"
"""What `$__rate_interval` stands for here: Grafana's is four scrape intervals at least."""
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


class Source(Protocol):
    """Prometheus's HTTP API: an instant query's vector, a range query's matrix."""

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]: ...
    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]: ...


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return dashboard


def expression(expr: str, start: float, end: float) -> str:
    """A panel's PromQL as Grafana would send it for this time range, every job selected."""
    seconds = max(math.ceil(end - start), 1)
    return (
        expr.replace("$__rate_interval", RATE_INTERVAL)
        .replace("$__range", f"{seconds}s")
        .replace('"$job"', '".*"')
    )


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's `legendFormat`: `{{label}}` replaced by the series' label."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda found: labels.get(found.group(1), ""), template) or "value"


def answers(source: Source, panel: dict[str, Any], start: float, end: float) -> list[tuple[str, Any]]:
    """What a panel shows: (legend, [(t, v), ...]) per series for a time series, (legend, v)
    for the others (evaluated at `end`), sorted by legend."""
    target = panel["targets"][0]
    expr = expression(target["expr"], start, end)
    found: list[tuple[str, Any]] = []
    if panel["type"] == "timeseries":
        for series in source.query_range(expr, start, end, 1.0):
            points = [(float(t), float(v)) for t, v in series["values"] if not math.isnan(float(v))]
            found.append((legend(target["legendFormat"], series["metric"]), points))
    else:
        for sample in source.query(expr, end):
            found.append((legend(target["legendFormat"], sample["metric"]), float(sample["value"][1])))
    return sorted(found, key=lambda item: item[0])


def render(source: Source, dashboard: dict[str, Any], start: float, end: float, output: Path) -> None:
    """Draw every panel where the dashboard places it (a 24-column grid) into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    figure = plt.figure(figsize=(16, rows * 0.36), dpi=100)
    grid = figure.add_gridspec(rows, 24, hspace=1.6, wspace=1.6, left=0.07, right=0.98, top=0.93, bottom=0.04)
    figure.suptitle(f"{dashboard['title']}  (rendered from Prometheus, {end - start:.0f} s of test traffic)")
    for panel in panels:
        where = panel["gridPos"]
        axes = figure.add_subplot(
            grid[where["y"] + 1 : where["y"] + where["h"], where["x"] : where["x"] + where["w"]]
        )
        _draw(axes, panel, answers(source, panel, start, end), start)
    figure.savefig(output, format="png")
    plt.close(figure)


def _draw(axes: Any, panel: dict[str, Any], shown: Sequence[tuple[str, Any]], start: float) -> None:
    axes.set_title(panel["title"], fontsize=10, loc="left")
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    if not shown:
        axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
        return
    if panel["type"] == "timeseries":
        for index, (name, points) in enumerate(shown):
            axes.plot([t - start for t, _ in points], [v for _, v in points], label=name,
                      color=COLOURS[index % len(COLOURS)])  # fmt: skip
        axes.set_xlabel("seconds into the run", fontsize=8)
        axes.set_ylabel(unit, fontsize=8)
        axes.legend(fontsize=7, loc="upper left")
    elif panel["type"] == "piechart":
        values = [value for _, value in shown]
        axes.pie(values, labels=[name for name, _ in shown], autopct="%1.0f%%",
                 colors=COLOURS[: len(values)], wedgeprops={"width": 0.45})  # fmt: skip
    else:
        names = [name for name, _ in shown]
        axes.barh(names, [value for _, value in shown], color=COLOURS[0])
        axes.invert_yaxis()
        for index, (_, value) in enumerate(shown):
            axes.text(value, index, f" {_value(value, unit)}", va="center", fontsize=8)
    axes.tick_params(labelsize=7)


def _value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:.0f}"


def main(argv: Sequence[str] | None = None) -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    import anyio

    sys.path.insert(0, str(ROOT / "tests"))
    from support.prometheus import drive, scraped_server

    with scraped_server() as scraped:
        traffic = anyio.run(drive, scraped.mcp_url)
        scraped.relay.wait_for_scrapes()
        render(scraped, load(), traffic.started - 2, time.time(), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
