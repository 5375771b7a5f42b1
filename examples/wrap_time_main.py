from mcp_negotiation import Policy, instrument

instrument(Policy())  # first: every MCP server built from here on is negotiated

from mcp_server_time import main  # noqa: E402  (the server's own entry point, untouched)

main()
