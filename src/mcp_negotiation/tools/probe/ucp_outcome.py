"""`--ucp-profile`: what a platform would agree with this server, from the business profile it
advertises, by the same negotiation the server runs for each call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...ucp import Profile, UcpError, negotiate_capabilities
from .render import wrapped
from .rows import Row


def ucp_outcome(rows: Iterable[Row], platform: Profile) -> dict[str, Any]:
    """What a platform with the profile `platform` would agree with this server.

    Computed from the business profile the server advertises at its best served
    revision, with the same negotiation the server runs for each call. A platform at an
    older version the business lists is negotiated against the business's profile for
    that version, which the server does not advertise: the outcome names it instead.
    """
    advertised = next((r.ucp_advertised for r in reversed(list(rows)) if r.served and r.ucp_advertised), None)
    if advertised is None:
        return {"error": "the server advertises no UCP profile"}
    try:
        business = Profile.from_json({"ucp": advertised})
        older = business.older_profile_url(platform.version)
        if older is not None:
            return {"version": platform.version, "business_profile": older}
        agreement = negotiate_capabilities(business, platform)
    except UcpError as failure:
        return {"error": failure.code, "message": failure.message}
    return agreement.as_dict()


def render_ucp(outcome: dict[str, Any]) -> str:
    """The human line(s) for a `ucp_outcome`: the agreement, the older version's profile, or why none."""
    if "error" in outcome:
        return f"UCP: {outcome['error']}" + (f" ({outcome['message']})" if "message" in outcome else "")
    if "business_profile" in outcome:
        text = (
            f"UCP {outcome['version']}: an older version this business lists; it is negotiated against"
            f" the business's profile for it ({outcome['business_profile']}), which this probe does not read"
        )
        return "\n".join(wrapped("", text, 0))
    lines = [f"UCP {outcome['version']}:"]
    lines += [f"  agreed   {name} {version}" for name, version in sorted(outcome["capabilities"].items())]
    lines += [f"  dropped  {name} ({reason})" for name, reason in sorted(outcome["dropped"].items())]
    return "\n".join(lines)
