"""Adapters for the MCP Python SDK: the only package here that imports `mcp`."""

from .asgi import negotiation_asgi
from .context import (
    NoNegotiation,
    client_supports,
    current_negotiation,
    negotiation_of,
    require,
    requires,
    requires_ucp,
)
from .install import NegotiationUnavailable, instrument, negotiate, negotiated, uninstrument
from .middleware import NegotiationMiddleware

__all__ = [
    "NegotiationMiddleware",
    "NegotiationUnavailable",
    "NoNegotiation",
    "client_supports",
    "current_negotiation",
    "instrument",
    "negotiate",
    "negotiated",
    "negotiation_asgi",
    "negotiation_of",
    "require",
    "requires",
    "requires_ucp",
    "uninstrument",
]
