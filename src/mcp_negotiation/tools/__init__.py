"""What runs beside a server: the `mcp-negotiation` command and its probe, the demo
server, the `opentelemetry-instrument` instrumentor, and the mypy plugin."""
