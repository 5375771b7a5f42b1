"""Semver negotiation for MCP, A2A and ACP version lists (the API of Bernstein's protocol_negotiation).

Two peers each list the versions of one protocol they speak; `negotiate_version` answers
which one they actually speak and what the local side gives up by settling there.
Users of Bernstein expect its names and results, so the algorithm is the seed's:

1. Both lists are sorted by (major, minor, patch).
2. No shared major: failure (`success=False`, `negotiated_version=None`).
3. Otherwise the highest shared major M, then within M the highest shared minor m, then
   within M.m the highest patch both list. When no patch of M.m is shared, the lower
   side's highest patch of M.m is taken (the smaller of the two sides' highest patches).
4. When no minor of M is shared, the *lower side* is the side whose highest version in M
   is lower (the highest minors differ, so this is never a tie) and its highest version
   in M is taken.
5. `degraded_capabilities` is `local_best.capabilities - negotiated.capabilities`: what
   the local side loses, never what the remote side loses.

`negotiated_version` is always an entry of one of the two lists, never a new value: the
local side's own entry when both list the version, otherwise the entry of the lower side,
the only side that lists it. Steps 3 and 4 are safe only because minor (and patch)
versions are additive: the higher side's newer version speaks everything the lower
side's did, so the lower side's declaration describes what both will speak. A local
side that is the lower side settles on its own best version, and so loses nothing.

This module is pure (no I/O, no `mcp` import); the only outside fact it uses is the MCP
deprecation window, whose single definition is `revisions.deprecation_window_open`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from itertools import pairwise
from types import MappingProxyType
from typing import Final, NoReturn

from mcp_negotiation.core import revisions
from mcp_negotiation.core.errors import PolicyError

__all__ = [
    "MCP_SEMVER",
    "NegotiationResult",
    "ProtocolName",
    "ProtocolVersion",
    "get_supported_versions",
    "name_set",
    "negotiate_version",
    "version_is_compatible",
]

_Triple = tuple[int, int, int]


class ProtocolName(StrEnum):
    """The wire protocols a peer may speak; plain strings are accepted wherever one is passed."""

    MCP = "mcp"
    A2A = "a2a"
    ACP = "acp"

    @classmethod
    def _missing_(cls, value: object) -> NoReturn:
        # Enum's own message ("'x' is not a valid ProtocolName") does not say what would be.
        raise PolicyError(f"unknown protocol {value!r}; expected one of {', '.join(cls)}")


def _version_number(field: str, value: object) -> int:
    # bool is an int subclass; `True` as a minor version is always a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{field} must be an int, got {value!r}")
    if value < 0:
        raise PolicyError(f"{field} cannot be negative, got {value}")
    return value


def name_set(field: str, values: Iterable[str]) -> frozenset[str]:
    """Freeze a collection of feature names, refusing the classic bare-string mistake.

    Shared with `bridge`, whose legs carry the same kind of name sets.
    """
    if isinstance(values, str | bytes):
        raise PolicyError(f"{field} must be a collection of names, not the single string {values!r}")
    names = frozenset(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise PolicyError(f"{field} must contain non-empty strings, got {name!r}")
    return names


@dataclass(frozen=True, slots=True, init=False)
class ProtocolVersion:
    """One version of one protocol, with the capabilities it carries.

    The constructor accepts a plain string for `protocol` and any iterable of names for
    `capabilities`, and rejects what could only be a mistake (negative or non-int numbers).
    """

    protocol: ProtocolName
    major: int
    minor: int
    patch: int
    capabilities: frozenset[str]

    def __init__(
        self,
        protocol: ProtocolName | str,
        major: int,
        minor: int,
        patch: int,
        capabilities: Iterable[str] = frozenset(),
    ) -> None:
        object.__setattr__(self, "protocol", ProtocolName(protocol))
        object.__setattr__(self, "major", _version_number("major", major))
        object.__setattr__(self, "minor", _version_number("minor", minor))
        object.__setattr__(self, "patch", _version_number("patch", patch))
        object.__setattr__(self, "capabilities", name_set("capabilities", capabilities))

    @property
    def version_string(self) -> str:
        """The dotted form peers exchange, e.g. ``"1.0.0"``."""
        return f"{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True, slots=True)
class NegotiationResult:
    """The outcome of `negotiate_version`.

    `local_version` and `remote_version` are each side's highest version whatever the
    outcome, so a failure still says what each side would have wanted. On failure
    `negotiated_version` is None and `degraded_capabilities` is empty: nothing was
    settled, so nothing was given up by settling.
    """

    local_version: ProtocolVersion
    remote_version: ProtocolVersion
    negotiated_version: ProtocolVersion | None
    degraded_capabilities: frozenset[str]
    success: bool


def _key(version: ProtocolVersion) -> _Triple:
    return (version.major, version.minor, version.patch)


def _sorted_versions(versions: Iterable[ProtocolVersion], side: str) -> tuple[ProtocolVersion, ...]:
    listed = tuple(versions)
    if not listed:
        raise PolicyError(f"the {side} version list is empty")
    for version in listed:
        if not isinstance(version, ProtocolVersion):
            raise PolicyError(f"the {side} version list must hold ProtocolVersion values, got {version!r}")
    protocols = sorted({version.protocol for version in listed})
    if len(protocols) > 1:
        raise PolicyError(f"the {side} version list mixes protocols: {', '.join(protocols)}")
    ordered = tuple(sorted(listed, key=_key))
    for lower, upper in pairwise(ordered):
        if _key(lower) == _key(upper):
            # Two entries for one version could carry different capabilities: ambiguous.
            raise PolicyError(f"the {side} version list has {upper.version_string} more than once")
    return ordered


def _same_protocol(local: ProtocolVersion, remote: ProtocolVersion) -> None:
    if local.protocol is not remote.protocol:
        raise PolicyError(
            f"local and remote speak different protocols ({local.protocol} and {remote.protocol}); "
            "versions of different protocols cannot be negotiated"
        )


def _settle(mine: Sequence[ProtocolVersion], theirs: Sequence[ProtocolVersion]) -> ProtocolVersion:
    """The entry to speak within one shared major (both sequences sorted, non-empty).

    Steps 3 and 4 are one rule applied at two levels: a level both share narrows the
    choice, and where the minors, or the patches of the chosen minor, stop being shared,
    the lower side's highest entry is taken as that side declared it.
    """
    minors = {v.minor for v in mine} & {v.minor for v in theirs}
    if minors:
        minor = max(minors)
        mine = [v for v in mine if v.minor == minor]
        theirs = [v for v in theirs if v.minor == minor]
        patches = {v.patch for v in mine} & {v.patch for v in theirs}
        if patches:
            patch = max(patches)
            return next(v for v in mine if v.patch == patch)
    # The two highest versions differ here (nothing at this level is shared): no tie.
    return min(mine[-1], theirs[-1], key=_key)


def negotiate_version(
    local: Iterable[ProtocolVersion], remote: Iterable[ProtocolVersion]
) -> NegotiationResult:
    """The version two sides settle on by the seed's rules, and what the local side loses.

    See the module docstring for the exact rules, including the fallback to the lower
    side's own entry. A minor both sides list wins over that fallback, so the result is
    not always the highest version both could speak: `[1.2]` against `[1.1, 1.3]`
    settles on 1.2 (the fallback), but with 1.0 added to both lists on 1.0, their
    highest shared minor. That is Bernstein's answer, kept for its users.

    Raises `ValueError` for an empty list, a list mixing protocols, two lists of
    different protocols, or a version listed twice.
    """
    mine = _sorted_versions(local, "local")
    theirs = _sorted_versions(remote, "remote")
    _same_protocol(mine[0], theirs[0])
    local_best, remote_best = mine[-1], theirs[-1]
    majors = {v.major for v in mine} & {v.major for v in theirs}
    if not majors:
        return NegotiationResult(local_best, remote_best, None, frozenset(), success=False)
    major = max(majors)
    negotiated = _settle([v for v in mine if v.major == major], [v for v in theirs if v.major == major])
    return NegotiationResult(
        local_best,
        remote_best,
        negotiated,
        local_best.capabilities - negotiated.capabilities,
        success=True,
    )


def version_is_compatible(local: ProtocolVersion, remote: ProtocolVersion) -> bool:
    """Whether two versions share a major: a cheap pre-check, with no minor or capability logic.

    Raises `ValueError` when the two are versions of different protocols, which are never
    compatible and are almost certainly a wiring mistake.
    """
    for side, version in (("local", local), ("remote", remote)):
        if not isinstance(version, ProtocolVersion):
            raise PolicyError(f"{side} must be a ProtocolVersion, got {version!r}")
    _same_protocol(local, remote)
    return local.major == remote.major


# --- This project's own version lists ---------------------------------------------------


def _mcp_features(revision: str) -> frozenset[str]:
    return frozenset(name for name, row in revisions.FEATURES.items() if row.at(revision))


def _mcp_semver() -> Mapping[str, _Triple]:
    """Number the MCP revisions so that semver's promise holds for our feature table.

    A revision that removes any feature of its predecessor starts a new major; one that
    only adds starts a new minor. The fallback in `negotiate_version` relies on exactly
    that additivity, so the numbering is derived from `revisions.FEATURES`, not typed in.
    """
    numbering: dict[str, _Triple] = {}
    major, minor = 1, 0
    previous: frozenset[str] | None = None
    for revision in revisions.KNOWN:
        features = _mcp_features(revision)
        if previous is not None:
            major, minor = (major + 1, 0) if previous - features else (major, minor + 1)
        numbering[revision] = (major, minor, 0)
        previous = features
    return MappingProxyType(numbering)


MCP_SEMVER: Final[Mapping[str, _Triple]] = _mcp_semver()
"""MCP revision → its semver-ish (major, minor, patch) in `get_supported_versions("mcp")`.

2024-11-05 → 1.0.0, 2025-03-26 → 1.1.0, 2025-06-18 → 2.0.0 (JSON-RPC batching removed),
2025-11-25 → 2.1.0, 2026-07-28 → 3.0.0 (sessions, `logging/setLevel`,
`resources/subscribe`, root-list notifications and client `tasks` removed).
"""


def _history(
    protocol: ProtocolName, steps: Sequence[tuple[str, Iterable[str], Iterable[str]]]
) -> tuple[ProtocolVersion, ...]:
    """Versions from a changelog: each step names a version, what it added and what it removed."""
    versions: list[ProtocolVersion] = []
    capabilities: frozenset[str] = frozenset()
    for number, added, removed in steps:
        capabilities = (capabilities | frozenset(added)) - frozenset(removed)
        major, minor, patch = (int(part) for part in number.split("."))
        versions.append(ProtocolVersion(protocol, major, minor, patch, capabilities))
    return tuple(versions)


# A2A releases (github.com/a2aproject/A2A CHANGELOG). Names are the AgentCard's own
# (`streaming`, `pushNotifications`, `stateTransitionHistory`, `extendedAgentCard`,
# `extensions`) plus this project's names for core behaviour a bridge must map.
_A2A: Final[tuple[ProtocolVersion, ...]] = _history(
    ProtocolName.A2A,
    (
        # Initial public release: tasks/send, tasks/sendSubscribe (SSE), tasks/get,
        # tasks/cancel, push notification webhooks, the input-required task state.
        (
            "0.1.0",
            (
                "skills",
                "tasks",
                "tasks.cancel",
                "inputRequired",
                "streaming",
                "pushNotifications",
                "stateTransitionHistory",
            ),
            (),
        ),
        # message/send and message/stream replace tasks/send*; contextId. Renames only.
        ("0.2.0", (), ()),
        ("0.2.1", ("extendedAgentCard",), ()),  # supportsAuthenticatedExtendedCard
        ("0.2.2", ("extensions",), ()),  # protocol support for extensions; gRPC/REST definitions
        ("0.2.3", (), ()),
        ("0.2.4", ("multipleInterfaces",), ()),  # several transports announced on the card
        ("0.2.5", ("pushNotifications.multipleConfigs",), ()),  # and a required protocolVersion
        ("0.2.6", (), ()),
        ("0.3.0", ("signedAgentCard",), ()),  # AgentCard.signatures; agent-card.json; mTLS
        # tasks/list (ListTasks), multi-tenancy; deprecated stateTransitionHistory removed.
        ("1.0.0", ("tasks.list", "multiTenancy"), ("stateTransitionHistory",)),
        ("1.0.1", (), ()),
    ),
)

# IBM/BeeAI Agent Communication Protocol (i-am-bee/acp, docs/spec/openapi.yaml), a REST
# protocol archived in August 2025 when ACP joined A2A under the Linux Foundation.
_ACP: Final[tuple[ProtocolVersion, ...]] = _history(
    ProtocolName.ACP,
    (
        # GET /agents, POST /runs in sync/async/stream mode, awaiting runs resumed by
        # POST /runs/{id}, POST /runs/{id}/cancel, session_id for stateful agents.
        (
            "0.1.0",
            ("discovery", "runs.sync", "runs.async", "runs.stream", "runs.await", "runs.cancel", "sessions"),
            (),
        ),
        ("0.2.0", ("ping", "runs.events"), ()),  # GET /ping, GET /runs/{id}/events
    ),
)


def get_supported_versions(
    protocol: ProtocolName | str,
    *,
    months_since_deprecation: int | None = None,
    today: date | None = None,
) -> list[ProtocolVersion]:
    """This project's own version list for `protocol`, oldest first.

    For MCP each revision's capabilities are its features in `revisions.FEATURES`, and
    the deprecated roots, sampling and logging (with their sub-features) are present in
    every version only while `revisions.deprecation_window_open` says so: once the shim
    is removed, this project speaks them at no revision at all. Pass
    `months_since_deprecation` or `today` to ask about another moment than now; both are
    validated whatever the protocol, and only MCP depends on them.
    """
    name = ProtocolName(protocol)
    window_open = revisions.deprecation_window_open(
        today=today, months_since_deprecation=months_since_deprecation
    )
    if name is ProtocolName.A2A:
        return list(_A2A)
    if name is ProtocolName.ACP:
        return list(_ACP)
    return [
        ProtocolVersion(
            name,
            *MCP_SEMVER[revision],
            capabilities=frozenset(
                feature
                for feature in _mcp_features(revision)
                if window_open or not revisions.is_deprecated(feature)
            ),
        )
        for revision in revisions.KNOWN
    ]
