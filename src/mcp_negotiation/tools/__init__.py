"""What runs beside a server: the `mcp-negotiation` command and its probe, the demo
server, and the mypy plugin."""
