"""UCP capability negotiation: the business decides, from two profiles, what is active.

The rules are the specification's intersection algorithm, with two choices made
explicit:

- Versions match by exact string only. A later date is never assumed to be compatible
  with an earlier one; the latest date *both* sides list wins.
- Pruning keeps an extension when at least one of its parents survives, repeated until
  nothing changes. It is computed from the roots up (a capability without `extends`
  anchors its extensions), which gives the same answer as repeated removal for every
  chain the specification describes, and also drops extensions that only extend each
  other in a cycle, which repeated removal would keep with no root beneath them.

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

from .errors import CAPABILITIES_INCOMPATIBLE, VERSION_UNSUPPORTED, UcpError
from .profile import CapabilityEntry, Profile

__all__ = [
    "NOT_OFFERED",
    "NO_COMMON_VERSION",
    "ORPHANED_EXTENSION",
    "DropReason",
    "UcpAgreement",
    "negotiate_capabilities",
]

DropReason = Literal["not_offered", "no_common_version", "orphaned_extension"]

NOT_OFFERED: Final = "not_offered"
"""The platform's profile does not declare the capability."""
NO_COMMON_VERSION: Final = "no_common_version"
"""Both declare it, but no version string appears on both sides."""
ORPHANED_EXTENSION: Final = "orphaned_extension"
"""An extension none of whose parents survived (directly or down a chain)."""


@dataclass(frozen=True, slots=True)
class UcpAgreement:
    """What a business and a platform agreed to speak.

    `capabilities` maps each active capability to its chosen version and `entries` to
    the business's entry for that version (its `extends` and `config` are the ones in
    force). `dropped` gives every business capability that is not active its reason,
    so `capabilities` and `dropped` partition the business's capabilities.
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
        # Built anew from strings, which no one can amend: cheaper than any deep copy (and a
        # loop, cheaper than a comprehension's frame, on every stamped response).
        capabilities = {}
        for name, version in pairs:
            capabilities[name] = [{"version": version}]
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


def _accepts(business: Profile, version: str) -> bool:
    return version == business.version or version in business.supported_versions


def negotiate_capabilities(business: Profile, platform: Profile) -> UcpAgreement:
    """Negotiate the capabilities a business serves a platform, by the specification's rules.

    When the platform speaks an older protocol version that the business lists in
    `supported_versions`, pass the business profile *for that version* (the one its URL
    points to): this function negotiates against the profile it is given.
    """
    if not _accepts(business, platform.version):
        served = ", ".join(sorted({business.version, *business.supported_versions}))
        raise UcpError(
            VERSION_UNSUPPORTED,
            f"protocol version {platform.version} is not supported; this business supports {served}",
        )
    dropped: dict[str, DropReason] = {}
    offered: dict[str, CapabilityEntry] = {}
    for name in sorted(business.capabilities):
        theirs = platform.capabilities.get(name)
        if theirs is None:
            dropped[name] = NOT_OFFERED
            continue
        ours = {entry.version: entry for entry in business.capabilities[name]}
        shared = ours.keys() & {entry.version for entry in theirs}
        if not shared:
            dropped[name] = NO_COMMON_VERSION
            continue
        offered[name] = ours[max(shared)]
    roots = {name for name, entry in offered.items() if not entry.extends}
    active = _closure(roots, offered)
    for name in offered.keys() - active:
        dropped[name] = ORPHANED_EXTENSION
    return UcpAgreement(
        version=platform.version,
        capabilities={name: offered[name].version for name in sorted(active)},
        dropped=dict(sorted(dropped.items())),
        entries={name: offered[name] for name in sorted(active)},
    )
