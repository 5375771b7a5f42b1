"""UCP over MCP: where a call names its platform profile, and the business's settings.

Pure rules (no I/O of their own): which source of the platform profile URL wins, how a
business advertises itself to MCP clients, and the cache of agreements per platform.
The resolver that fetches profiles is injected; the SDK adapter calls `UcpNegotiator`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ..core.bounded import BoundedCache, IdentityCache
from ..core.client_log import report
from ..core.frozen_json import is_object
from ..core.negotiation import retained_size
from .errors import INVALID_PROFILE_URL, PROFILE_MALFORMED, PROFILE_UNREACHABLE, VERSION_UNSUPPORTED, UcpError
from .header import parse_ucp_agent, validate_profile_url
from .negotiate import UcpAgreement, negotiate_capabilities
from .profile import Profile, ProfileSource

if TYPE_CHECKING:  # `negotiation` imports this module (a `Policy` checks its `ucp`): never the reverse
    from ..core.negotiation import Negotiation
    from .resolver import ProfileResolver

__all__ = [
    "UCP_EXTENSION_ID",
    "UCP_SESSION_KEY",
    "UcpNegotiator",
    "UcpPolicy",
    "advertisement",
    "named_in_arguments",
    "platform_profile_url",
    "session_profile_url",
    "with_agreement",
]

UCP_SESSION_KEY: Final = "dev.mcp-negotiation/ucp-profile"
"""This project's extension for stdio, where there are no headers: a platform profile URL
in `initialize` params (or its `_meta`), or in a request's `_meta`. Not part of UCP."""

UCP_EXTENSION_ID: Final = "dev.ucp/profile"
"""The key under which the business's UCP version and capabilities are advertised: in
`capabilities.extensions` to modern clients, in `capabilities.experimental` to legacy
ones (the 2025 wire schema strips `extensions`)."""

_AGREEMENT_CACHE: Final = 1_024


@dataclass(frozen=True)
class UcpPolicy:
    """What a business serving UCP over MCP configures once.

    `business_profile` is the business's own profile (a `Profile`, its JSON as a
    mapping, or a path to the JSON file). `resolver` fetches platform profiles; the
    default is `HttpsProfileResolver()`. `legacy_meta` also accepts the 2026-01-11
    binding's `params._meta.ucp.profile`. `stamp_results` adds the negotiated `ucp`
    block to results of `@requires_ucp` tools returning a dict. `continue_url` is the
    web fallback offered with discovery errors.

    `supported_profiles` pins the business's profiles for the older versions its
    profile lists in `supported_versions` (version → profile, in any form
    `business_profile` takes). A platform at an older version is negotiated against
    the business profile for that version: the pinned one, else the one fetched by
    `resolver` from the URL `supported_versions` gives, as the specification has it.
    """

    # Either may be a mapping, which cannot be hashed: left out of the hash (not of
    # equality), so that a `Policy` holding this one hashes as its other fields say.
    business_profile: ProfileSource = field(hash=False)
    resolver: ProfileResolver | None = None
    legacy_meta: bool = False
    stamp_results: bool = False
    continue_url: str | None = None
    supported_profiles: Mapping[str, ProfileSource] = field(default_factory=dict, hash=False)
    # Derived from the fields above, so not compared: two policies built alike are equal.
    business: Profile = field(init=False, repr=False, compare=False)
    fetcher: ProfileResolver = field(init=False, repr=False, compare=False)
    pinned: Mapping[str, Profile] = field(init=False, repr=False, compare=False)

    def offered(self, failure: UcpError) -> UcpError:
        """`failure` as the platform is told it: with the business's web fallback, if any."""
        return failure.with_continue_url(self.continue_url) if self.continue_url else failure

    def __post_init__(self) -> None:
        if self.resolver is not None and not callable(getattr(self.resolver, "resolve", None)):
            raise TypeError(f"resolver must have a resolve(url) method; got {type(self.resolver).__name__}")
        if self.continue_url is not None and not isinstance(self.continue_url, str):
            raise TypeError(f"continue_url must be a URL string; got {type(self.continue_url).__name__}")
        business = Profile.load(self.business_profile)
        pinned: dict[str, Profile] = {}
        for version, source in self.supported_profiles.items():
            if version not in business.supported_versions:
                listed = ", ".join(sorted(business.supported_versions)) or "none"
                raise ValueError(
                    f"supported_profiles pins version {version!r}, which the business profile's"
                    f" supported_versions does not list (it lists {listed})"
                )
            profile = pinned[version] = Profile.load(source)
            if profile.version != version:
                raise ValueError(
                    f"the profile pinned for version {version} declares ucp.version {profile.version}"
                )
        object.__setattr__(self, "business", business)
        if self.resolver is None:
            # Imported here: the default fetcher is the one module that loads an HTTP client.
            from .resolver import HttpsProfileResolver

            object.__setattr__(self, "fetcher", HttpsProfileResolver())
        else:
            object.__setattr__(self, "fetcher", self.resolver)
        object.__setattr__(self, "pinned", MappingProxyType(pinned))


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
        raise UcpError(
            INVALID_PROFILE_URL, 'arguments.meta["ucp-agent"] must be an object with a profile URL'
        )
    return profile


def named_in_arguments(params: Any) -> str | None:
    """The string `params.arguments.meta["ucp-agent"].profile` holds, unvalidated, in plain dicts.

    Off HTTP (no header) this source, when present, is the one `platform_profile_url`
    answers with, whatever else the call or its session names: a UCP call's repeat finds
    its profile URL with these few lookups, and validates it only when it was not seen before.
    """
    if type(params) is not dict:
        return None
    try:  # (subscripts: on the path of every repeated UCP call, cheaper than four `get`s)
        url = params["arguments"]["meta"]["ucp-agent"]["profile"]
    except (KeyError, TypeError):  # absent, or not an object (a list, a string)
        return None
    return url if type(url) is str else None


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
        raise UcpError(INVALID_PROFILE_URL, "the UCP-Agent header and arguments.meta name different profiles")
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


_WITH_AGREEMENT: IdentityCache[Negotiation] = IdentityCache(4 * _AGREEMENT_CACHE)


def with_agreement(record: Negotiation, agreement: UcpAgreement) -> Negotiation:
    """`record` carrying `agreement`, made once per pair and then answered from a cache.

    Copying a record costs more than the rest of a cached UCP call, and handing back the
    very same object for a repeated pair is what lets telemetry recognise the repeat.
    """
    scoped = _WITH_AGREEMENT.get(record, agreement)
    if scoped is None:
        scoped = replace(record, ucp=agreement)
        _WITH_AGREEMENT.put(scoped, record, agreement, size=retained_size(record))
    return scoped


class UcpNegotiator:
    """Resolves platform profiles and keeps one agreement per platform profile object.

    Resolvers hand back the same `Profile` object while it is cached, so the agreement
    is recomputed only when the platform's profile was fetched again; and a record
    scoped to an agreement is made once per (record, agreement), so repeated calls get
    the very same record (which telemetry recognises as a repeat).
    """

    def __init__(self, policy: UcpPolicy) -> None:
        self.policy = policy
        self._agreements: BoundedCache[str, tuple[weakref.ref[Profile], Profile, UcpAgreement]] = (
            BoundedCache(_AGREEMENT_CACHE)
        )
        self.resolver_fresh: Callable[[str], Profile | None] | None = getattr(policy.fetcher, "fresh", None)
        """The resolver's `fresh`, when it has one (see `ProfileResolver`): pluggable code, which
        may raise. Called directly on every repeated UCP call (`Engine.memoised_scope`)."""

    async def for_call(
        self, record: Negotiation, params: Any, headers: Mapping[str, str], *, session_default: Any = None
    ) -> Negotiation:
        """`record` with the agreement for the platform a `tools/call` names, if it names one.

        Every failure, from reading the URL to agreeing, raises `UcpError` with the
        business's `continue_url` when one is configured.
        """
        try:
            url = platform_profile_url(
                params, headers, session_default=session_default, legacy_meta=self.policy.legacy_meta
            )
            return record if url is None else await self.scope(record, url)
        except UcpError as failure:
            raise self.policy.offered(failure) from None

    async def scope(self, record: Negotiation, url: str, platform: Profile | None = None) -> Negotiation:
        """`record` with the agreement with the platform at `url` (whose profile, when given,
        the resolver has just answered); raises `UcpError` on failure."""
        return with_agreement(record, await self.agree(url, platform))

    async def resolved(self, url: str) -> Profile:
        """The resolver's profile for the valid profile URL `url`, as it answers now; raises `UcpError`."""
        return await _resolve(self.policy.fetcher, url)

    def held_business(self, platform: Profile) -> bool:
        """Whether the agreement with `platform` is made against a business profile this
        server holds (its own, or one pinned for the platform's version), rather than one
        the resolver fetched, whose freshness only the resolver knows."""
        version = platform.version
        return self.policy.business.older_profile_url(version) is None or version in self.policy.pinned

    async def agree(self, url: str, platform: Profile | None = None) -> UcpAgreement:
        """The agreement with the platform at `url`; raises `UcpError` on any failure."""
        try:
            if platform is None:
                platform = await _resolve(self.policy.fetcher, url)
            business = self.policy.business
            older = business.older_profile_url(platform.version)
            if older is not None:
                business = await self._business_at(platform.version, older)
            known = self._agreements.get(url)
            if known is not None and known[0]() is platform and known[1] is business:
                return known[2]
            agreement = negotiate_capabilities(business, platform)
        except UcpError as failure:
            raise self.policy.offered(failure) from None
        # The platform's profile by weak reference: the resolver decides how long a profile
        # (up to its body cap) is kept, not this map. The agreement is the business's size.
        self._agreements.put(url, (weakref.ref(platform), business, agreement), len(url))
        return agreement

    async def _business_at(self, version: str, url: str) -> Profile:
        """The business's profile for an older version it lists: pinned, else fetched from `url`.

        A failure here is the business's, not the platform's, so it is logged for the
        operator, and the platform is told only that the version cannot be served now.
        """
        pinned = self.policy.pinned.get(version)
        if pinned is not None:
            return pinned
        try:
            profile = await _resolve(self.policy.fetcher, url)
            if profile.version != version:
                raise UcpError(PROFILE_MALFORMED, f"it declares ucp.version {profile.version}")
        except UcpError as failure:
            report(
                logging.WARNING,
                "the business profile for UCP %s at %s is unusable (%s: %s);"
                " pin it with UcpPolicy(supported_profiles=...)",
                version,
                url,
                failure.code,
                failure.message,
            )
            raise UcpError(
                VERSION_UNSUPPORTED,
                f"protocol version {version} is listed by this business, but its profile for that"
                " version cannot be loaded now",
            ) from None
        return profile


async def _resolve(resolver: ProfileResolver, url: str) -> Profile:
    """`resolver`'s profile for `url`; any failure of the resolver's own is a `UcpError`."""
    try:
        profile = await resolver.resolve(url)
        if not isinstance(profile, Profile):
            raise TypeError(f"the resolver returned a {type(profile).__name__}, not a Profile")
    except UcpError:
        raise
    except Exception as error:
        # A resolver is pluggable code: its bug or an unmapped I/O error must not reach the
        # client as an internal error (nor leak its message); to the platform the profile
        # could not be fetched.
        report(logging.WARNING, "the profile resolver failed unexpectedly", exc=error)
        raise UcpError(PROFILE_UNREACHABLE, "the platform profile could not be resolved") from None
    return profile
