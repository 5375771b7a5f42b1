"""The mcp 2.x adapter: an SDK middleware, its installers, the ASGI layer, and the seams."""
