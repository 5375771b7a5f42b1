"""UCP capability negotiation: the business decides, from two profiles, what is active.

The rules are the specification's intersection algorithm, then (when the business gives
its extensions' `requires`) the version-compatibility check of its resolution flow, with
these choices made explicit:

- Versions match by exact string only. A later date is never assumed to be compatible
  with an earlier one; the latest date *both* sides list wins.
- Pruning keeps an extension when at least one of its parents survives, repeated until
  nothing changes. It is computed from the roots up (a capability without `extends`
  anchors its extensions), which gives the same answer as repeated removal for every
  chain the specification describes, and also drops extensions that only extend each
  other in a cycle, which repeated removal would keep with no root beneath them.
- From 2026-08-25, an entry either profile may not declare is treated as absent before
  versions are compared: a `dev.ucp.*` entry whose version is not the profile's
  `ucp.version`, and an entry whose `schema` URL is not served by the owner of its name
  (`authority_binds`). The latest shared version both sides declare validly wins.
- `requires` is checked once against the versions selected (intersection and pruning
  done), every active extension against the same selection, and the refused ones are
  removed before pruning runs again. A constraint on a capability that is not active
  holds vacuously, so removing capabilities can only satisfy a constraint, never break
  one: the result is a fixed point of checking and pruning together, with no second
  round needed (a property test checks it against the rounds run literally).

Negotiation never fails because capabilities were lost: losing them is the expected
outcome of two independently evolving profiles, and each loss is kept with its reason.
Only the protocol gate fails outright, and only an operation whose own capability is
gone is refused (`for_operation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from ..core.errors import PolicyError
from .authority import authority_binds
from .errors import CAPABILITIES_INCOMPATIBLE, VERSION_UNSUPPORTED, UcpError
from .profile import RELEASE_RULES_FROM, CapabilityEntry, Profile
from .requires import Requirements

__all__ = [
    "AUTHORITY_MISMATCH",
    "NOT_OFFERED",
    "NO_COMMON_VERSION",
    "ORPHANED_EXTENSION",
    "RELEASE_VERSION_MISMATCH",
    "REQUIREMENT_UNMET",
    "DropReason",
    "UcpAgreement",
    "negotiate_capabilities",
]

DropReason = Literal[
    "not_offered",
    "no_common_version",
    "orphaned_extension",
    "release_version_mismatch",
    "authority_mismatch",
    "requirement_unmet",
]

NOT_OFFERED: Final = "not_offered"
"""The platform's profile does not declare the capability."""
NO_COMMON_VERSION: Final = "no_common_version"
"""Both declare it, but no version string appears on both sides."""
ORPHANED_EXTENSION: Final = "orphaned_extension"
"""An extension none of whose parents survived (directly or down a chain)."""
RELEASE_VERSION_MISMATCH: Final = "release_version_mismatch"
"""From 2026-08-25: the only shared versions are on `dev.ucp.*` entries of another version
than their profile's `ucp.version`, which either side's profile may not declare."""
AUTHORITY_MISMATCH: Final = "authority_mismatch"
"""From 2026-08-25: the only shared versions are on entries whose `schema` URL is not
served by the owner of the capability's name, in either side's profile."""
REQUIREMENT_UNMET: Final = "requirement_unmet"
"""The negotiated protocol version or a selected capability version is outside the
extension's `requires` ranges."""


@dataclass(frozen=True, slots=True)
class UcpAgreement:
    """What a business and a platform agreed to speak.

    `capabilities` maps each active capability to its chosen version and `entries` to
    the business's entry for that version (its `extends` and `config` are the ones in
    force). `dropped` gives every business capability that is not active its reason,
    so `capabilities` and `dropped` partition the business's capabilities. `version` is
    the protocol version agreed: the platform's, which the business profile negotiated
    against declares too.
    """

    version: str
    capabilities: Mapping[str, str] = field(default_factory=dict)
    dropped: Mapping[str, DropReason] = field(default_factory=dict)
    entries: Mapping[str, CapabilityEntry] = field(default_factory=dict)
    _scoped: dict[str, UcpAgreement] = field(default_factory=dict, init=False, repr=False, compare=False)
    """`for_operation` results: agreements are cached per platform and asked the same roots."""
    _blocks: dict[str, tuple[tuple[str, str], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`to_ucp_block`'s capabilities per root, as (name, version) pairs: every stamped
    response needs its own copy, built from these."""

    def __post_init__(self) -> None:
        for name in ("capabilities", "dropped", "entries"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def for_operation(self, root: str) -> UcpAgreement:
        """The agreement restricted to one operation: `root` and its extensions, transitively.

        Responses must list only the capabilities relevant to their operation, and an
        operation whose own capability did not survive cannot be served at all; that
        is `capabilities_incompatible`, which UCP answers as a tool result, not a
        transport error. `dropped` is kept whole, for diagnostics.
        """
        if root not in self.capabilities:
            reason = self.dropped.get(root, "not declared by the business")
            raise UcpError(
                CAPABILITIES_INCOMPATIBLE,
                f"{root} is not available for this platform ({reason})",
                version=self.version,
            )
        scoped = self._scoped.get(root)
        if scoped is None:
            # Only roots the agreement holds get here: at most one entry per business capability.
            relevant = _closure({root}, self.entries)
            scoped = self._scoped[root] = UcpAgreement(
                version=self.version,
                capabilities={name: v for name, v in self.capabilities.items() if name in relevant},
                dropped=self.dropped,
                entries={name: e for name, e in self.entries.items() if name in relevant},
            )
        return scoped

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: the version, the chosen capability versions, what was dropped."""
        return {
            "version": self.version,
            "capabilities": dict(self.capabilities),
            "dropped": dict(self.dropped),
        }

    def to_ucp_block(self, root: str) -> dict[str, Any]:
        """The `ucp` object a response to an operation on `root` carries, a new copy each time.

        Stamped on every response, so what it lists is found once per root and each copy is
        built from that: whoever amends one response's block cannot reach another's.
        """
        pairs = self._blocks.get(root)
        if pairs is None:
            scoped = self.for_operation(root)
            pairs = self._blocks[root] = tuple(sorted(scoped.capabilities.items()))
        # Built anew from strings, which no one can amend.
        capabilities = {name: [{"version": version}] for name, version in pairs}
        return {"version": self.version, "capabilities": capabilities}


def _closure(seed: set[str], candidates: Mapping[str, CapabilityEntry]) -> set[str]:
    """`seed` plus every candidate that extends a member, until nothing more joins."""
    reached = set(seed)
    grew = True
    while grew:
        joining = {
            name
            for name, entry in candidates.items()
            if name not in reached and any(parent in reached for parent in entry.extends)
        }
        reached |= joining
        grew = bool(joining)
    return reached


def _refusal(name: str, entry: CapabilityEntry, version: str) -> DropReason | None:
    """Why a profile at protocol `version` may not declare `entry` of `name`, if it may not."""
    if version < RELEASE_RULES_FROM:
        return None
    if name.startswith("dev.ucp.") and entry.version != version:
        return RELEASE_VERSION_MISMATCH
    if entry.schema is not None and not authority_binds(name, entry.schema):
        return AUTHORITY_MISMATCH
    return None


def _select(
    name: str, ours: tuple[CapabilityEntry, ...], theirs: tuple[CapabilityEntry, ...], version: str
) -> CapabilityEntry | DropReason:
    """The business entry at the latest version both sides declare validly, or why there is none.

    Only versions both sides list are looked at, latest first, so entries of a platform's
    that the business does not share cost no check; when every shared version is refused,
    the latest one's reason is kept (the business's entry's before the platform's).
    """
    mine = {entry.version: entry for entry in ours}
    platform_at = {entry.version: entry for entry in theirs}
    reason: DropReason = NO_COMMON_VERSION
    for shared in sorted(mine.keys() & platform_at.keys(), reverse=True):
        refused = _refusal(name, mine[shared], version) or _refusal(name, platform_at[shared], version)
        if refused is None:
            return mine[shared]
        if reason == NO_COMMON_VERSION:
            reason = refused
    return reason


def _anchored(offered: Mapping[str, CapabilityEntry]) -> set[str]:
    """The offered capabilities that survive pruning: the roots and what extends them, transitively."""
    return _closure({name for name, entry in offered.items() if not entry.extends}, offered)


def negotiate_capabilities(
    business: Profile, platform: Profile, *, requires: Requirements | None = None
) -> UcpAgreement:
    """Negotiate the capabilities a business serves a platform, by the specification's rules.

    `business` is the business's profile *at the platform's protocol version*: its
    current profile, or, for an older version it lists in `supported_versions`, the
    profile that entry points to (whose own version is that one). Given the current
    profile for a platform at a listed older version, this raises `ValueError`, because
    the specification says not to combine profiles across versions: the current one's
    capabilities are not what the business serves at the older version.

    `requires` gives the `requires` of the business's extensions (from their schemas),
    checked once versions are selected.
    """
    version = platform.version
    if version != business.version:
        if version in business.supported_versions:
            raise PolicyError(
                f"protocol version {version} is served by the business profile that supported_versions"
                f" lists for it ({business.supported_versions[version]}): negotiate against that profile"
            )
        served = ", ".join(sorted({business.version, *business.supported_versions}))
        raise UcpError(
            VERSION_UNSUPPORTED,
            f"protocol version {version} is not supported; this business supports {served}",
        )
    dropped: dict[str, DropReason] = {}
    offered: dict[str, CapabilityEntry] = {}
    for name in sorted(business.capabilities):
        theirs = platform.capabilities.get(name)
        if theirs is None:
            dropped[name] = NOT_OFFERED
            continue
        selected = _select(name, business.capabilities[name], theirs, version)
        if isinstance(selected, str):
            dropped[name] = selected
        else:
            offered[name] = selected
    active = _anchored(offered)
    if requires:
        chosen = {name: offered[name].version for name in active}
        unmet = {name for name in active if not requires.admits(name, chosen[name], version, chosen)}
        dropped.update(dict.fromkeys(unmet, REQUIREMENT_UNMET))
        for name in unmet:
            del offered[name]
        active = _anchored(offered)
    for name in offered.keys() - active:
        dropped[name] = ORPHANED_EXTENSION
    return UcpAgreement(
        version=version,
        capabilities={name: offered[name].version for name in sorted(active)},
        dropped=dict(sorted(dropped.items())),
        entries={name: offered[name] for name in sorted(active)},
    )
