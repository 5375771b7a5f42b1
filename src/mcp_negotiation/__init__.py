"""Protocol and capability negotiation for MCP servers.

`negotiate(server, Policy(...))` puts a negotiation on every request of an MCP SDK
server; tool handlers ask `client_supports(ctx, "elicitation")` or read
`negotiation_of(ctx)`. The pure core (`revisions`, `negotiation`, `protocols`,
`bridge`, `ucp`) imports nothing from the SDK.
"""

from .errors import NegotiationRefused, Refusal
from .negotiation import Negotiation, Negotiator, Policy, supports
from .sdk import (
    NegotiationMiddleware,
    NegotiationUnavailable,
    NoNegotiation,
    client_supports,
    current_negotiation,
    instrument,
    negotiate,
    negotiated,
    negotiation_asgi,
    negotiation_of,
    require,
    requires,
    requires_ucp,
    uninstrument,
)

__version__ = "0.1.0"

__all__ = [
    "Negotiation",
    "NegotiationMiddleware",
    "NegotiationRefused",
    "NegotiationUnavailable",
    "Negotiator",
    "NoNegotiation",
    "Policy",
    "Refusal",
    "__version__",
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
    "supports",
    "uninstrument",
]
