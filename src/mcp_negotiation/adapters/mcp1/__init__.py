"""The mcp 1.x adapter: the wrapt shell (1.x has no middleware seam) and its seams."""
