"""A negotiated server whose metrics Prometheus scrapes, through `opentelemetry-exporter-prometheus`.

    python examples/prometheus_metrics.py --port 8000 --metrics-port 9464

serves MCP over streamable HTTP on 127.0.0.1:8000/mcp and its metrics on
127.0.0.1:9464/metrics (Prometheus's text format), in both eras: the conventions'
`mcp_server_operation_duration_seconds` and `mcp_server_session_duration_seconds`, and this
library's `mcp_negotiation_*`. Point a Prometheus `scrape_configs` entry at the second
address. `configure_metrics` is all it takes; the rest is an ordinary negotiated server.
Prints one line, `READY <mcp port> <metrics port>`, once both listen (ports 0: any free).
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from prometheus_client import start_http_server

from mcp_negotiation import Policy, negotiate, negotiation_of


def configure_metrics(port: int = 9464, host: str = "127.0.0.1") -> int:
    """Install a `MeterProvider` whose metrics are served for Prometheus; answers the port."""
    reader = PrometheusMetricReader()
    provider = MeterProvider(resource=Resource.create({SERVICE_NAME: "shop"}), metric_readers=[reader])
    metrics.set_meter_provider(provider)
    server, _ = start_http_server(port, addr=host)
    return int(server.server_port)


def build(policy: Policy | None = None) -> MCPServer:
    server = negotiate(MCPServer("shop"), policy or Policy())

    @server.tool()
    async def revision(ctx: Context) -> str:
        """The revision this call was negotiated at."""
        return negotiation_of(ctx).protocol_version

    return server


def serve(server: MCPServer, port: int, metrics_port: int) -> None:
    import uvicorn

    # IPPROTO_TCP lets asyncio switch Nagle off (TCP_NODELAY) on each connection; without it
    # a keep-alive request waits for the client's delayed ACK, 40 ms, before its answer is sent.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    exposed = configure_metrics(metrics_port)
    print(f"READY {sock.getsockname()[1]} {exposed}", flush=True)
    app: Any = server.streamable_http_app()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--metrics-port", type=int, default=9464)
    arguments = parser.parse_args()
    serve(build(), arguments.port, arguments.metrics_port)
