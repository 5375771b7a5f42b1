"""Semver protocols (MCP, A2A, ACP version lists) and bridge agreements between two legs."""
