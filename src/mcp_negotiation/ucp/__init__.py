"""UCP (Universal Commerce Protocol) capability negotiation.

The pure core (`header`, `profile`, `negotiate`, `errors`) does no I/O and imports
nothing from `mcp`, `wrapt` or OpenTelemetry; `resolver` is the one module that touches
the network, through the HTTP client `mcp` already installs. The names of `binding` and
`stage` (UCP over MCP, whose default resolver is that one) and of `resolver` are resolved on first use
(PEP 562), so that `from mcp_negotiation.ucp import negotiate_capabilities` loads no HTTP
client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from .authority import authority_binds
from .errors import (
    CAPABILITIES_INCOMPATIBLE,
    INVALID_PROFILE_URL,
    PROFILE_MALFORMED,
    PROFILE_UNREACHABLE,
    UCP_JSONRPC_ERROR,
    VERSION_UNSUPPORTED,
    UcpError,
    UcpErrorCode,
)
from .header import MAX_HEADER_LENGTH, MAX_URL_LENGTH, parse_ucp_agent, validate_profile_url
from .negotiate import (
    AUTHORITY_MISMATCH,
    NO_COMMON_VERSION,
    NOT_OFFERED,
    ORPHANED_EXTENSION,
    RELEASE_VERSION_MISMATCH,
    REQUIREMENT_UNMET,
    DropReason,
    UcpAgreement,
    negotiate_capabilities,
)
from .profile import RELEASE_RULES_FROM, CapabilityEntry, JsonValue, Profile, ProfileSource, is_version
from .requires import Requirements, Requires, SchemaSource, VersionRange

if TYPE_CHECKING:  # what `__getattr__` answers, seen by type checkers and IDEs
    from .binding import (
        UCP_EXTENSION_ID,
        UCP_SESSION_KEY,
        advertisement,
        platform_profile_url,
        session_profile_url,
    )
    from .resolver import ALL_PORTS, HttpsProfileResolver, ProfileResolver, StaticResolver, is_special_address
    from .stage import UcpPolicy

__all__ = [
    "ALL_PORTS",
    "AUTHORITY_MISMATCH",
    "CAPABILITIES_INCOMPATIBLE",
    "INVALID_PROFILE_URL",
    "MAX_HEADER_LENGTH",
    "MAX_URL_LENGTH",
    "NOT_OFFERED",
    "NO_COMMON_VERSION",
    "ORPHANED_EXTENSION",
    "PROFILE_MALFORMED",
    "PROFILE_UNREACHABLE",
    "RELEASE_RULES_FROM",
    "RELEASE_VERSION_MISMATCH",
    "REQUIREMENT_UNMET",
    "UCP_EXTENSION_ID",
    "UCP_JSONRPC_ERROR",
    "UCP_SESSION_KEY",
    "VERSION_UNSUPPORTED",
    "CapabilityEntry",
    "DropReason",
    "HttpsProfileResolver",
    "JsonValue",
    "Profile",
    "ProfileResolver",
    "ProfileSource",
    "Requirements",
    "Requires",
    "SchemaSource",
    "StaticResolver",
    "UcpAgreement",
    "UcpError",
    "UcpErrorCode",
    "UcpPolicy",
    "VersionRange",
    "advertisement",
    "authority_binds",
    "is_special_address",
    "is_version",
    "negotiate_capabilities",
    "parse_ucp_agent",
    "platform_profile_url",
    "session_profile_url",
    "validate_profile_url",
]

_IN_RESOLVER: Final = frozenset(
    {"ALL_PORTS", "HttpsProfileResolver", "ProfileResolver", "StaticResolver", "is_special_address"}
)
"""The names of the one module that loads an HTTP client; the others but `UcpPolicy` are
`binding`'s."""


def __getattr__(name: str) -> Any:
    """Import `binding` or `resolver` when one of their names is first asked.

    Only names not imported above reach here: those of `__all__` are theirs.
    """
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = ".resolver" if name in _IN_RESOLVER else ".stage" if name == "UcpPolicy" else ".binding"
    home = importlib.import_module(module, __name__)
    value = getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
