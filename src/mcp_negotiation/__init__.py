"""Protocol and capability negotiation for MCP servers.

`negotiate(server, Policy(...))` puts a negotiation on every request of an MCP SDK
server; tool handlers ask `client_supports(ctx, "elicitation")` or read
`negotiation_of(ctx)`. The pure core (`revisions`, `negotiation`, `protocols`,
`bridge`, `ucp`) imports nothing from the SDK.

The names that need the SDK (and `UcpPolicy`, which needs the profile resolver) are
resolved on first use (PEP 562), so that importing the core, `mcp_negotiation.core.revisions`
say, runs this module without loading `mcp`, wrapt or OpenTelemetry.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from .core.errors import (
    NegotiationError,
    NegotiationRefused,
    NegotiationUnavailable,
    NoNegotiation,
    PolicyError,
    Refusal,
    UsageError,
)
from .core.extensions import Extension
from .core.negotiation import Negotiation, Policy
from .core.overrides import ClientOverride

if TYPE_CHECKING:  # what `__getattr__` answers, seen by type checkers and IDEs
    from .adapters import (
        client_supports,
        instrument,
        negotiate,
        negotiated,
        negotiation_of,
        record_refusals_asgi,
        requires,
        requires_extension,
        requires_ucp,
        uninstrument,
        variant_of,
    )
    from .ucp import UcpPolicy

__version__ = "0.1.0"

__all__ = [
    "ClientOverride",
    "Extension",
    "Negotiation",
    "NegotiationError",
    "NegotiationRefused",
    "NegotiationUnavailable",
    "NoNegotiation",
    "Policy",
    "PolicyError",
    "Refusal",
    "UcpPolicy",
    "UsageError",
    "__version__",
    "client_supports",
    "instrument",
    "negotiate",
    "negotiated",
    "negotiation_of",
    "record_refusals_asgi",
    "requires",
    "requires_extension",
    "requires_ucp",
    "uninstrument",
    "variant_of",
]


def __getattr__(name: str) -> Any:
    """Import the adapter a public name lives in (UCP for `UcpPolicy`), once, when first asked.

    Only names not imported above reach here: those of `__all__` are the SDK adapter's.
    """
    home: ModuleType
    if name == "UcpPolicy":
        from . import ucp

        home = ucp
    elif name in __all__:
        from . import adapters

        home = adapters
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
