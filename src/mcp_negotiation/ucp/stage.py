"""UCP as a stage of the decision: a business's settings (`UcpPolicy`), and the stage they
make, which scopes each UCP `tools/call` to the agreement with the platform it names and
advertises the business to every client.

Pure, as every stage is: where a platform profile (or the business's own profile for an
older version) must be fetched, the stage answers a `Need` and is asked again with what was
fetched. What it derives from a negotiation it keeps on that negotiation's `Known`: the
record scoped to each platform's agreement, while the resolver still answers that platform's
URL with the very profile it was agreed with (`fresh`, no I/O), and each scoped record
narrowed to one operation for `@requires_ucp`. So a repeated UCP call costs lookups, and all
of it goes when its `Known` goes.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ..core.client_log import report
from ..core.errors import PolicyError, Refusal, UsageError
from ..core.facts import Facts
from ..core.outcome import Known, Need
from ..core.stages import Fetched
from .binding import (
    UCP_EXTENSION_ID,
    UCP_SESSION_KEY,
    advertisement,
    platform_profile_url,
    session_profile_url,
)
from .errors import PROFILE_MALFORMED, PROFILE_UNREACHABLE, VERSION_UNSUPPORTED, UcpError, invalid_profile_url
from .negotiate import UcpAgreement, negotiate_capabilities
from .profile import Profile, ProfileSource
from .requires import Requirements

if TYPE_CHECKING:
    from .resolver import ProfileResolver

__all__ = ["UcpPolicy", "UcpStage", "for_operation", "is_narrowed"]

_SCOPED: Final = "ucp.scoped"
_NARROWED: Final = "ucp.narrowed"


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

    `requires` gives the business's extensions' `requires` (a `Requirements`, or a
    mapping of extension name to its `requires` object), checked at every version.
    """

    # Either may be a mapping, which cannot be hashed: left out of the hash (not of
    # equality), so that a `Policy` holding this one hashes as its other fields say.
    business_profile: ProfileSource = field(hash=False)
    resolver: ProfileResolver | None = None
    legacy_meta: bool = False
    stamp_results: bool = False
    continue_url: str | None = None
    supported_profiles: Mapping[str, ProfileSource] = field(default_factory=dict, hash=False)
    requires: Requirements | Mapping[str, Any] = field(default_factory=dict, hash=False)
    # Derived from the fields above, so not compared: two policies built alike are equal.
    business: Profile = field(init=False, repr=False, compare=False)
    fetcher: ProfileResolver = field(init=False, repr=False, compare=False)
    pinned: Mapping[str, Profile] = field(init=False, repr=False, compare=False)
    requirements: Requirements = field(init=False, repr=False, compare=False)

    def offered(self, failure: UcpError) -> UcpError:
        """`failure` as the platform is told it: with the business's web fallback, if any."""
        return failure.with_continue_url(self.continue_url) if self.continue_url else failure

    def stage(self) -> UcpStage:
        """The stage these settings configure (what `Policy(ucp=...)` adds to the decision)."""
        return UcpStage(self)

    def __post_init__(self) -> None:
        if self.resolver is not None and not callable(getattr(self.resolver, "resolve", None)):
            raise UsageError(f"resolver must have a resolve(url) method; got {type(self.resolver).__name__}")
        if self.continue_url is not None and not isinstance(self.continue_url, str):
            raise UsageError(f"continue_url must be a URL string; got {type(self.continue_url).__name__}")
        business = Profile.load(self.business_profile)
        pinned: dict[str, Profile] = {}
        for version, source in self.supported_profiles.items():
            if version not in business.supported_versions:
                listed = ", ".join(sorted(business.supported_versions)) or "none"
                raise PolicyError(
                    f"supported_profiles pins version {version!r}, which the business profile's"
                    f" supported_versions does not list (it lists {listed})"
                )
            pinned[version] = Profile.load(source)
            problem = pinned[version].leaf_problem(version)
            if problem is not None:
                raise PolicyError(f"the profile pinned for version {version} {problem}")
        object.__setattr__(self, "business", business)
        requires = self.requires
        requirements = requires if isinstance(requires, Requirements) else Requirements(requires)
        object.__setattr__(self, "requirements", requirements)
        if self.resolver is None:
            # Imported here: the default fetcher is the one module that loads an HTTP client.
            from .resolver import HttpsProfileResolver

            object.__setattr__(self, "fetcher", HttpsProfileResolver())
        else:
            object.__setattr__(self, "fetcher", self.resolver)
        object.__setattr__(self, "pinned", MappingProxyType(pinned))


class UcpStage:
    """The stage `Policy(ucp=UcpPolicy(...))` adds (see the module's docstring)."""

    def __init__(self, policy: UcpPolicy) -> None:
        self.policy = policy
        self._fresh = getattr(policy.fetcher, "fresh", None)
        offered = advertisement(policy.business)
        # Legacy clients are told in `experimental`: the 2025 wire schema strips `extensions`.
        self._advertised = {
            "legacy": {"experimental": {UCP_EXTENSION_ID: offered}},
            "modern": {"extensions": {UCP_EXTENSION_ID: offered}},
        }

    def advertisement(self, era: str) -> Mapping[str, Mapping[str, Any]] | None:
        return self._advertised.get(era)

    def session(self, params: Any) -> tuple[str, Any] | None:
        default = session_profile_url(params)
        return None if default is None else (UCP_SESSION_KEY, default)

    def on_request(self, known: Known, facts: Facts, fetched: Fetched) -> Known | Refusal | Need | None:
        if facts.method != "tools/call":
            return None
        params, headers = facts.params, facts.origin.headers
        header = headers.get("ucp-agent")
        named = _named_in_arguments(params)
        if named is not None:
            # The URL the arguments name, with the header it came with, agreed on before: the
            # same inputs validate the same way, so what was kept for them stands while the
            # resolver holds the very profile it was agreed with.
            kept = known.derived.get((_SCOPED, named, header))
            if kept is not None and (held := self._held_profile(named)) is not None and kept[0]() is held:
                served: Known = kept[2]
                return served
        policy = self.policy
        try:
            url = platform_profile_url(
                params,
                headers,
                session_default=known.session.get(UCP_SESSION_KEY),
                legacy_meta=policy.legacy_meta,
            )
            if url is None:
                return None
            platform = self._platform(url, fetched)
            if type(platform) is Need:
                return platform
            assert isinstance(platform, Profile)
            business = self._business(platform.version, fetched)
            if type(business) is Need:
                return business
            assert isinstance(business, Profile)
        except UcpError as failure:
            return policy.offered(failure).to_refusal()
        key: Hashable = (_SCOPED, url, header)
        kept = known.derived.get(key)
        if kept is not None and kept[0]() is platform and kept[1] is business:
            scoped: Known = kept[2]
            return scoped
        try:
            agreement = negotiate_capabilities(business, platform, requires=policy.requirements)
        except UcpError as failure:
            return policy.offered(failure).to_refusal()
        scoped = known.child(replace(known.record, ucp=agreement), key)
        if business is policy.business or platform.version in policy.pinned:
            # A business profile the resolver fetched is as fresh as the resolver says, which
            # only asking it tells: such an agreement is made on every call.
            known.derive(key, (weakref.ref(platform), business, scoped))
        return scoped

    def _held_profile(self, url: str) -> Profile | None:
        """What the resolver holds for `url` without I/O (`fresh`), or None."""
        fresh = self._fresh
        if fresh is None:
            return None
        try:
            profile = fresh(url)
        except Exception:  # pluggable code: `resolve` then answers, and its failure is reported
            return None
        return profile if isinstance(profile, Profile) else None

    def _platform(self, url: str, fetched: Fetched) -> Profile | Need:
        """The platform's profile: fetched for this message, else what the resolver holds
        for `url` without I/O, else a `Need` to fetch it."""
        if url in fetched:
            return _profile_from(fetched[url])
        profile = self._held_profile(url)
        return profile if profile is not None else Need(url, self.policy.fetcher)

    def _business(self, version: str, fetched: Fetched) -> Profile | Need:
        """The business's profile for a platform at `version`: its own, a pinned one, or the one
        `supported_versions` names for that older version (fetched, never combined with
        another). A failure there is the business's, not the platform's: it is logged for the
        operator, and the platform is told only that the version cannot be served now."""
        policy = self.policy
        older = policy.business.older_profile_url(version)
        if older is None:
            return policy.business
        pinned = policy.pinned.get(version)
        if pinned is not None:
            return pinned
        if older not in fetched:
            return Need(older, policy.fetcher)
        try:
            profile = _profile_from(fetched[older])
            if (problem := profile.leaf_problem(version)) is not None:
                raise UcpError(PROFILE_MALFORMED, f"it {problem}")
        except UcpError as failure:
            report(
                logging.WARNING,
                "the business profile for UCP %s at %s is unusable (%s: %s);"
                " pin it with UcpPolicy(supported_profiles=...)",
                version,
                older,
                failure.code,
                failure.message,
            )
            raise UcpError(
                VERSION_UNSUPPORTED,
                f"protocol version {version} is listed by this business, but its profile for that"
                " version cannot be loaded now",
            ) from None
        return profile


def _named_in_arguments(params: Any) -> str | None:
    """The string `params.arguments.meta["ucp-agent"].profile` holds, unvalidated (a URL with
    a fragment: None, since validation drops the fragment and the raw string must key
    nothing the URL without it keys)."""
    if type(params) is not dict:
        return None
    try:
        url = params["arguments"]["meta"]["ucp-agent"]["profile"]
    except (KeyError, TypeError):  # absent, or not an object (a list, a string)
        return None
    return url if type(url) is str and "#" not in url else None


def _profile_from(answer: object) -> Profile:
    """What a resolver answered, as a profile; any failure of the resolver's own is a `UcpError`.

    A resolver is pluggable code: its bug or an unmapped I/O error must not reach the client
    as an internal error (nor leak its message); to the platform the profile could not be
    fetched.
    """
    if isinstance(answer, Profile):
        return answer
    if isinstance(answer, UcpError):
        raise answer
    problem = answer if isinstance(answer, BaseException) else TypeError(type(answer).__name__)
    report(logging.WARNING, "the profile resolver failed unexpectedly", exc=problem)
    raise UcpError(PROFILE_UNREACHABLE, "the platform profile could not be resolved")


def for_operation(known: Known | None, root: str) -> Known:
    """`known` narrowed to the UCP operation whose capability is `root` (what `@requires_ucp`
    publishes), made once per `known` and operation; raises `UcpError` when the call named no
    platform (or has no negotiation: None) or `root` did not survive the negotiation. A
    `known` narrowed for another operation is narrowed again from what it was narrowed from."""
    key: Hashable = (_NARROWED, root)
    if known is not None:
        if known.tag == key:
            return known
        if is_narrowed(known) and known.source is not None:
            known = known.source
    agreement: UcpAgreement | None = known.record.ucp if known is not None else None
    if known is None or agreement is None:
        raise invalid_profile_url(f"{root} needs the platform's UCP profile; none was given")
    narrowed: Known | None = known.derived.get(key)
    if narrowed is None:
        record = replace(known.record, ucp=agreement.for_operation(root))
        narrowed = known.derive(key, known.child(record, key))
    return narrowed


def is_narrowed(known: Known) -> bool:
    """Whether `known` is a record `for_operation` narrowed to one operation."""
    tag = known.tag
    return type(tag) is tuple and len(tag) == 2 and tag[0] == _NARROWED
