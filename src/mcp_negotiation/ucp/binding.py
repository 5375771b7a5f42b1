"""UCP over MCP: where a call names its platform profile, and what a business tells clients.

Pure rules (no I/O of their own): which source of the platform profile URL wins, and how a
business advertises itself to MCP clients. The UCP stage (`ucp/stage.py`) applies them to
every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..core.frozen_json import is_object
from .errors import invalid_profile_url
from .header import parse_ucp_agent, validate_profile_url
from .profile import Profile

__all__ = [
    "UCP_EXTENSION_ID",
    "UCP_SESSION_KEY",
    "advertisement",
    "platform_profile_url",
    "session_profile_url",
]

UCP_SESSION_KEY: Final = "dev.mcp-negotiation/ucp-profile"
"""This project's extension for stdio, where there are no headers: a platform profile URL
in `initialize` params (or its `_meta`), or in a request's `_meta`. Not part of UCP."""

UCP_EXTENSION_ID: Final = "dev.ucp/profile"
"""The key under which the business's UCP version and capabilities are advertised: in
`capabilities.extensions` to modern clients, in `capabilities.experimental` to legacy
ones (the 2025 wire schema strips `extensions`)."""


def _profile_in(value: Any) -> str | None:
    profile = value.get("profile") if is_object(value) else None
    return validate_profile_url(profile) if profile is not None else None


def _agent_in(arguments: Any) -> str | None:
    """The profile URL `arguments.meta["ucp-agent"]` names, or None when it names none.

    A tool may take an argument of its own called `meta`, so a `meta` that is not an
    object, or has no `ucp-agent` (or a null one, as the session extension reads null),
    names no platform. A `ucp-agent` value is the platform speaking, though: one without
    a profile URL is refused like a malformed header, rather than read as silence and the
    call run without the agreement the platform asked for.
    """
    meta = arguments.get("meta") if is_object(arguments) else None
    agent = meta.get("ucp-agent") if is_object(meta) else None
    if agent is None:
        return None
    profile = _profile_in(agent)
    if profile is None:
        raise invalid_profile_url('arguments.meta["ucp-agent"] must be an object with a profile URL')
    return profile


def platform_profile_url(
    params: Any,
    headers: Mapping[str, str],
    *,
    session_default: Any = None,
    legacy_meta: bool = False,
) -> str | None:
    """The platform profile URL a `tools/call` names, by the documented order of sources.

    1. `params.arguments.meta["ucp-agent"].profile` (UCP's MCP binding);
    2. the HTTP `UCP-Agent` header — when both are present they must agree;
    3. `params._meta.ucp.profile`, only with `legacy_meta` (the 2026-01-11 binding);
    4. `params._meta["dev.mcp-negotiation/ucp-profile"]`, then the session default taken
       from `initialize` (this project's extension for stdio).
    None when the call names no platform at all.
    """
    params = params if is_object(params) else {}
    from_arguments = _agent_in(params.get("arguments"))
    header = headers.get("ucp-agent")
    from_header = parse_ucp_agent(header) if header is not None else None
    if from_arguments and from_header and from_arguments != from_header:
        raise invalid_profile_url("the UCP-Agent header and arguments.meta name different profiles")
    if from_arguments or from_header:
        return from_arguments or from_header
    request_meta = params.get("_meta")
    if is_object(request_meta):
        if legacy_meta and (legacy := _profile_in(request_meta.get("ucp"))):
            return legacy
        extension = request_meta.get(UCP_SESSION_KEY)
        if extension is not None:
            return validate_profile_url(extension)
    return validate_profile_url(session_default) if session_default is not None else None


def session_profile_url(initialize_params: Any) -> Any:
    """The stdio extension's session default, raw, from `initialize` params or their `_meta`.

    Kept unvalidated: a bad value is refused on the first call that would use it, with
    the error UCP defines, rather than failing the whole handshake.
    """
    if not isinstance(initialize_params, Mapping):
        return None
    meta = initialize_params.get("_meta")
    for holder in (initialize_params, meta if isinstance(meta, Mapping) else {}):
        value = holder.get(UCP_SESSION_KEY)
        if value is not None:
            return value
    return None


def advertisement(business: Profile) -> dict[str, Any]:
    """What clients are told of the business: enough of its profile to negotiate against.

    The protocol versions it serves and, per capability, each version with its parents,
    so that a platform (or `mcp-negotiation probe --ucp-profile`) can predict the
    agreement, pruning included. Config, signing keys and services stay private.
    """
    capabilities = {
        name: [{"version": e.version, **({"extends": list(e.extends)} if e.extends else {})} for e in entries]
        for name, entries in sorted(business.capabilities.items())
    }
    return {
        "version": business.version,
        "supported_versions": dict(business.supported_versions),
        "capabilities": capabilities,
    }
