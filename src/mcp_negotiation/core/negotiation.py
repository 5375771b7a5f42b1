"""One negotiation, as a frozen record, and the pure rules that produce or refuse it.

Everything a client sends is untrusted: capability maps are copied into read-only
structures under size limits, revisions are looked up in the enumerated set, and every
problem becomes a `Refusal` with the specification's code. The SDK adapter calls
`Negotiator`; proxies, clients and tests can call it with plain dictionaries.
"""

from __future__ import annotations

import difflib
import logging
import math
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import date
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, cast

from . import revisions
from .bounded import MAX_ENTRY_BYTES
from .client_log import first_time
from .errors import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    NegotiationRefused,
    PolicyError,
    Refusal,
    UsageError,
)
from .extensions import AgreedExtension, Extensions, identifier_problem, satisfies
from .frozen_json import Budget, NotFreezable, footprint, freeze, is_object, thaw
from .overrides import ASSERTED_NAMESPACE, ClientOverride, apply_overrides, asserted_name_problem
from .revisions import FEATURES, Era, FeatureName

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "DATE_RECHECK_SECONDS",
    "MAX_CAPABILITY_DEPTH",
    "MAX_CAPABILITY_NODES",
    "MAX_REVISION_LENGTH",
    "MAX_STRING_LENGTH",
    "NO_HEADERS",
    "PROTOCOL_VERSION_KEY",
    "SYSTEM_CLOCK",
    "Clock",
    "Negotiation",
    "Negotiator",
    "Outcome",
    "Policy",
    "Transport",
    "policy_given",
    "required_at",
    "required_capabilities_object",
    "supports",
    "thaw",
]

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"

MAX_CAPABILITY_DEPTH: Final = 12
"""Nesting deeper than this in a capability map or client info is refused (-32602)."""
MAX_CAPABILITY_NODES: Final = 2_000
"""More keys and items than this in one capability map or client info is refused."""
MAX_STRING_LENGTH: Final = 4_096
"""Longer strings (keys or values) in a capability map or client info are refused."""
MAX_REVISION_LENGTH: Final = 64
"""A protocol revision longer than this is not a revision; refused as malformed."""
DATE_RECHECK_SECONDS: Final = 60.0
"""How often an unpinned clock's day is read again: not on every request, since a
deprecation closing a minute late harms no one."""
_RECORD: Final = 256
"""What a `Negotiation` costs beyond its maps: the object, its fields, the shared sets."""

Transport = Literal["stdio", "http", "memory", "unknown"]
Outcome = Literal["accepted", "counter_offered"]
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
NO_HEADERS: Final[Mapping[str, str]] = _EMPTY
"""The headers of a message that came with none (off HTTP), shared read-only."""

logger = logging.getLogger("mcp_negotiation")


class Clock(Protocol):
    """Where a negotiator reads the time: the calendar day, which opens and closes the
    deprecation window, and monotonic seconds, which say how long a reading of it stands.

    `Policy(clock=...)` takes one, so that a test can move the date on under a running
    server (a removal date passing during a session); servers keep `SYSTEM_CLOCK`.
    """

    def today(self) -> date: ...

    def monotonic(self) -> float: ...


class _SystemClock:
    __slots__ = ()
    monotonic = staticmethod(time.monotonic)

    def today(self) -> date:
        return revisions.calendar_day()

    def __repr__(self) -> str:
        return "SYSTEM_CLOCK"


SYSTEM_CLOCK: Final[Clock] = _SystemClock()
"""The system's calendar and `time.monotonic`: the clock of every `Policy` not given one."""


def _invalid(message: str) -> NegotiationRefused:
    return NegotiationRefused(Refusal(INVALID_PARAMS, f"Invalid params: {message}"))


def _object(value: Any, what: str, *, required: bool) -> Mapping[str, Any] | None:
    if value is None:
        if required:
            raise _invalid(f"{what} is required")
        return None
    if not isinstance(value, Mapping):
        raise _invalid(f"{what} must be an object")
    try:
        frozen: Mapping[str, Any] = freeze(
            value, Budget(MAX_CAPABILITY_NODES), max_depth=MAX_CAPABILITY_DEPTH, max_string=MAX_STRING_LENGTH
        )
    except NotFreezable as reason:
        raise _invalid(f"{what} {reason}") from None
    return frozen


def _revision(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid(f"{what} must be a non-empty string")
    if len(value) > MAX_REVISION_LENGTH:
        raise _invalid(f"{what} is longer than {MAX_REVISION_LENGTH} characters")
    return value


def _is_feature_name(name: object, *, client_only: bool) -> bool:
    """Whether `name` is a feature `supports` knows: a row of the table (client-side rows only,
    for what can be required of a client), an extension identifier, or `experimental.X`."""
    if not isinstance(name, str):
        return False
    if "/" in name:  # an extension identifier: `vendor.prefix/name`, both parts present
        prefix, _, rest = name.partition("/")
        return bool(prefix) and bool(rest)
    if name.startswith("experimental.") and len(name) > len("experimental."):
        return True
    if name.startswith(ASSERTED_NAMESPACE):  # asked (`client_supports`), never required
        return not client_only and asserted_name_problem(name) is None
    row = FEATURES.get(name)
    return row is not None and (row.side == "client" or not client_only)


_SERVER_CAPABILITIES: Final = frozenset(
    {"tools", "resources", "prompts", "tools.listChanged", "resources.listChanged", "prompts.listChanged"}
)
"""Server capabilities (`ServerCapabilities` keys and their flags) the feature table has no
row for: named where a client capability is wanted, they are called what they are."""

_MAX_NAME_SHOWN: Final = 100
"""Longer names are cut before they are compared or logged (difflib is quadratic)."""


def _folded(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _nearest(name: str, candidates: tuple[str, ...]) -> str | None:
    """The candidate `name` most likely misspells: the same but for case, `_` and `-`
    (`roots.list_changed`), else the closest by difflib (`elicitaton`), if any is close."""
    by_folded = {_folded(candidate): candidate for candidate in candidates}
    folded = _folded(name)
    if folded in by_folded:
        return by_folded[folded]
    close = difflib.get_close_matches(folded, by_folded, n=1, cutoff=0.75)
    return by_folded[close[0]] if close else None


def feature_name_problem(name: object, *, client_only: bool, where: str = "") -> str | None:
    """Why `name` is no feature name (no client capability, with `client_only`), or None.

    One sentence that says what to write instead: the nearest known name, the known names,
    and the open forms. The run-time log, the configuration errors and the mypy plugin all
    say it, so the three never disagree. `where` names the call or the field, if any.
    """
    if _is_feature_name(name, client_only=client_only):
        return None
    kind = "client capability" if client_only else "feature"
    at = f" in {where}" if where else ""
    if not isinstance(name, str):
        shown = f"{name!r:.{_MAX_NAME_SHOWN}}"
        return f"unknown {kind}{at}: {shown} (a name is a string, not {type(name).__name__})"
    name = name[:_MAX_NAME_SHOWN]
    if name.startswith(ASSERTED_NAMESPACE):
        problem = asserted_name_problem(name)
        if problem is not None:
            return f"{problem}{at}"
        return (
            f"{name!r}{at} is in the {ASSERTED_NAMESPACE!r} namespace, which only client_overrides rules"
            " assert (no client declares it): client_supports answers it; nothing can require it"
        )
    known = tuple(row.name for row in FEATURES.values() if row.side == "client" or not client_only)
    listed = f"{', '.join(known)}, an extension identifier `vendor/name`, or `experimental.NAME`"
    if name in FEATURES or name in _SERVER_CAPABILITIES:
        if client_only:
            return f"{name!r}{at} is a server feature, not a client capability; client capabilities: {listed}"
        return f"{name!r}{at} is a server capability: clients do not declare it, the feature table has no row"
    nearest = _nearest(name, known)
    hint = f"; did you mean {nearest!r}?" if nearest is not None else ""
    return f"unknown {kind}{at}: {name!r}{hint} (known: {listed})"


def override_name_problem(name: object, where: str) -> str | None:
    """Why a `ClientOverride` cannot revoke or grant `name`, or None: a client capability
    (sub-capabilities, extension identifiers and `experimental.X` included), or a name of
    the `client.` namespace that only rules assert."""
    if isinstance(name, str) and name.startswith(ASSERTED_NAMESPACE):
        problem = asserted_name_problem(name)
        return None if problem is None else f"{problem}, in {where}"
    if isinstance(name, str) and "/" in name:
        problem = identifier_problem(name)
        return None if problem is None else f"{problem}, in {where}"
    problem = feature_name_problem(name, client_only=True, where=where)
    if problem is not None and isinstance(name, str) and "." in name and not name.startswith("experimental."):
        # `client` spelt otherwise (`clients.x`, `Client.x`): the namespace may be what was meant.
        head, _, rest = name.partition(".")
        if _folded(head) in ("client", "clients") and asserted_name_problem(f"client.{rest}") is None:
            problem += f"; or, for what only a rule asserts, {ASSERTED_NAMESPACE}{rest!r:.100}"
    return problem


def capability_names(names: str | Iterable[str], where: str) -> tuple[str, ...]:
    """`names` as a tuple (one bare string is one name), each one a client capability.

    A misspelt name would make every client lack it, refusing every request: it is a
    configuration error, raised when the policy or the decorator is built.
    """
    result = (names,) if isinstance(names, str) else tuple(names)
    for name in result:
        problem = feature_name_problem(name, client_only=True, where=where)
        if problem is not None:
            raise PolicyError(problem)
    return result


def _warn_unknown(name: str) -> None:
    """Log an unknown name once, and only so many of them, whoever chose them."""
    shown = name[:_MAX_NAME_SHOWN]
    if not first_time(shown):
        return
    logger.warning(
        "%s; client_supports answers False for it, for every client",
        feature_name_problem(shown, client_only=False),
    )


def required_at(name: str, revision: str) -> bool:
    """Whether a client at `revision` can have the required capability `name` at all.

    The feature table decides for its rows (`tasks` is 2025-11-25's only); extension
    identifiers and `experimental.X` negotiate themselves, at every revision, as `supports`
    answers them. A policy's accepted revisions are those where all its requirements hold.
    """
    row = FEATURES.get(name)
    return row is None or row.at(revision)


@dataclass(frozen=True, slots=True)
class Policy:
    """What the server owner accepts: revisions, required capabilities, deprecations.

    `min_revision` / `max_revision` bound the accepted revisions (an unknown value is a
    configuration error and raises). `required_capabilities` are client capabilities
    every request needs (-32021 otherwise); a revision that cannot have one of them
    (`tasks` exists at 2025-11-25 only) is not accepted either, so that its clients are
    counter-offered or refused with -32022 instead of served nothing but -32021 (see
    `narrowed`, which the repr states). `advertise` chooses which accepted
    revisions a -32022 refusal lists. The deprecation window withdraws roots, sampling
    and logging once `removal_date` has passed; `today` or `months_since_deprecation`
    pin the clock for tests (both only if they name the same month, see
    `revisions.deprecation_window_open`). `withhold` withdraws further features by name.
    `strict` makes installation raise instead of warning when the SDK lacks a hook.
    `clock` is where an unpinned policy reads the date (a `Clock`; tests move it on).
    `record_client_identity` lets telemetry record client name and version.
    `trace_every_request` gives every modern request its own `capability_negotiated`
    span; by default a repeat of a cached negotiation links to the span that made it.
    `hide_unusable` leaves out of each client's `tools/list` (and `prompts/list`,
    `resources/templates/list`) what its negotiation cannot serve (see `catalog`).
    `ucp` holds the UCP settings (see `mcp_negotiation.ucp`).
    `client_overrides` are per-client rules (`ClientOverride`: a `clientInfo` name and
    version range, what it revokes and grants), applied as each record is made; the first
    rule naming a capability decides it (see `docs/client-overrides.md`). `extensions` declares the
    extensions the server speaks, by the identifier handlers ask about, each a settings
    mapping or an `Extension` (a family of identifiers): advertised to clients and agreed on
    each record (`Negotiation.extensions`) from this one declaration.
    """

    min_revision: str | None = None
    max_revision: str | None = None
    required_capabilities: Collection[str] = ()
    """Any collection of names (one string is one name); a tuple once the policy is built."""
    advertise: Literal["modern", "all"] = "modern"
    removal_date: date = revisions.DEFAULT_REMOVAL_DATE
    today: date | None = None
    months_since_deprecation: int | None = None
    clock: Clock = SYSTEM_CLOCK
    withhold: Collection[str] = frozenset()
    """Any collection of names (one string is one name); a frozenset once the policy is built."""
    strict: bool = False
    record_client_identity: bool = False
    trace_every_request: bool = False
    hide_unusable: bool = False
    client_overrides: Sequence[ClientOverride] = ()
    """Any sequence of `ClientOverride`s, in order; a tuple once the policy is built."""
    extensions: Mapping[str, Any] | None = None
    """Identifier to settings (or `Extension`); an `extensions.Extensions` once built."""
    ucp: Any = None
    """A `mcp_negotiation.ucp.UcpPolicy`, or None: the UCP stage's settings."""
    _accepted: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """`accepted()`, computed once by `__post_init__`."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Policy:
        """Say what a misspelt keyword meant (`min_revison`), which the generated `__init__`
        would only call unexpected. (`object.__new__`: a slotted dataclass breaks `super()`.)"""
        for name in kwargs.keys() - _POLICY_KEYWORDS:
            shown = name[:_MAX_NAME_SHOWN]
            nearest = _nearest(shown, _POLICY_KEYWORDS)
            hint = f"did you mean {nearest!r}?" if nearest else f"its keywords: {', '.join(_POLICY_KEYWORDS)}"
            raise UsageError(f"Policy() got an unexpected keyword argument {shown!r}; {hint}")
        return object.__new__(cls)

    def __post_init__(self) -> None:
        for name in ("min_revision", "max_revision"):
            value = getattr(self, name)
            if value is not None and revisions.era(value) == "unknown":
                raise PolicyError(f"{name} must be one of {', '.join(revisions.KNOWN)}; got {value!r}")
        if not all(callable(getattr(self.clock, name, None)) for name in ("today", "monotonic")):
            raise UsageError(
                f"clock must have today() and monotonic(), like SYSTEM_CLOCK; got {self.clock!r}"
            )
        if self.advertise not in ("modern", "all"):
            raise PolicyError(f"advertise must be 'modern' or 'all'; got {self.advertise!r}")
        for name in ("strict", "record_client_identity", "trace_every_request", "hide_unusable"):
            value = getattr(self, name)
            if type(value) is not bool:  # "false" is true: a switch read by truth would flip
                raise UsageError(f"{name} must be True or False; got {value!r}")
        object.__setattr__(
            self,
            "required_capabilities",
            capability_names(self.required_capabilities, "required_capabilities"),
        )
        # Whatever makes a stage (`stages.StageSource`), checked by what it offers: the core
        # names no stage's types.
        if self.ucp is not None and not callable(getattr(self.ucp, "stage", None)):
            raise PolicyError(f"ucp must be a UcpPolicy; got {type(self.ucp).__name__}")
        withhold = frozenset((self.withhold,) if isinstance(self.withhold, str) else self.withhold)
        for name in withhold:
            problem = feature_name_problem(name, client_only=False, where="withhold")
            if problem is not None:
                raise PolicyError(problem)
        object.__setattr__(self, "withhold", withhold)
        object.__setattr__(self, "client_overrides", _overrides_given(self.client_overrides))
        if not isinstance(self.extensions, Extensions):
            object.__setattr__(self, "extensions", Extensions(self.extensions))
        # Named here because the window's own check would call it `removal`.
        revisions.require_day("removal_date", self.removal_date)
        # The window checks `today` and `months_since_deprecation`, as it does for
        # `get_supported_versions`: wrong types, a negative count, the two disagreeing.
        withdrawn = self.withdrawn()
        bounds = self._bounds()
        if not bounds:
            raise PolicyError("the policy accepts no revision: check min_revision and max_revision")
        required = self.required_capabilities
        for name in required:
            # Either would refuse every request: a configuration error, like a misspelt name.
            if _is_withheld(name, withdrawn):
                raise PolicyError(f"required_capabilities names {name!r}, which the policy withholds")
            if not any(required_at(name, revision) for revision in bounds):
                raise PolicyError(
                    f"required_capabilities names {name!r}, which no accepted revision"
                    f" ({bounds[0]} to {bounds[-1]}) has"
                )
        accepted = tuple(r for r in bounds if all(required_at(name, r) for name in required))
        if not accepted:  # each one is met somewhere, but never all of them at once
            where = "; ".join(
                f"{name!r} only at {', '.join(r for r in bounds if required_at(name, r))}"
                for name in required
                if not all(required_at(name, r) for r in bounds)
            )
            raise PolicyError(
                f"required_capabilities names {', '.join(map(repr, required))}, which no accepted"
                f" revision ({bounds[0]} to {bounds[-1]}) has together: {where}"
            )
        object.__setattr__(self, "_accepted", accepted)

    def __repr__(self) -> str:
        """The dataclass's repr, saying when the requirements narrowed the bounds: a policy
        printed in a log or a debugger must not look as if it served every revision it names."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        if len(self._accepted) < len(self._bounds()):
            shown += f"; revisions narrowed to {', '.join(self._accepted)} by required_capabilities"
        return f"{type(self).__qualname__}({shown})"

    def declared_extensions(self) -> Extensions:
        """`extensions`, as built: each declared extension by the name handlers ask about."""
        return cast(Extensions, self.extensions)

    def _bounds(self) -> tuple[str, ...]:
        """The revisions from `min_revision` to `max_revision`, oldest first."""
        low = self.min_revision or revisions.KNOWN[0]
        high = self.max_revision or revisions.KNOWN[-1]
        return tuple(
            r for r in revisions.KNOWN if revisions.is_at_least(r, low) and revisions.is_at_least(high, r)
        )

    def accepted(self) -> tuple[str, ...]:
        """The revisions this policy serves, oldest first: those within its bounds where
        every required capability can be had (`required_at`)."""
        return self._accepted

    def narrowed(self) -> dict[str, tuple[str, ...]]:
        """The revisions within the bounds that the required capabilities leave out, oldest
        first, each with the required names it cannot have: what -32022 tells their clients."""
        return {
            revision: tuple(name for name in self.required_capabilities if not required_at(name, revision))
            for revision in self._bounds()
            if revision not in self._accepted
        }

    def withdrawn(self) -> frozenset[str]:
        """Features no client gets, whatever it declares: closed deprecations and `withhold`."""
        today = self.today
        if today is None and self.months_since_deprecation is None:
            today = self.clock.today()
        window_open = revisions.deprecation_window_open(
            today=today,
            months_since_deprecation=self.months_since_deprecation,
            removal=self.removal_date,
        )
        closed = frozenset() if window_open else revisions.DEPRECATED_FEATURES
        return closed | frozenset(self.withhold)


def _overrides_given(rules: object) -> tuple[ClientOverride, ...]:
    """`rules` as a tuple of rules, each naming only what a rule can decide, their ids unique:
    a misspelt name would silently leave the quirk it was written for in place."""
    if isinstance(rules, ClientOverride | str | Mapping) or not isinstance(rules, Iterable):
        raise UsageError("client_overrides takes a list of ClientOverride rules")
    given = tuple(rules)
    seen: set[str] = set()
    for rule in given:
        if not isinstance(rule, ClientOverride):
            raise UsageError(f"client_overrides takes ClientOverride rules; got {type(rule).__name__}")
        where = f"client_overrides rule {rule.rule_id!r}"
        if rule.rule_id in seen:
            raise PolicyError(f"{where} is there twice: each rule needs its own id (ClientOverride(id=...))")
        seen.add(rule.rule_id)
        for name in rule.names():
            problem = override_name_problem(name, where)
            if problem is not None:
                raise PolicyError(problem)
    return given


_POLICY_KEYWORDS: Final = tuple(f.name for f in fields(Policy) if f.init)
"""What `Policy(...)` takes, in order: what a misspelt keyword is matched against."""


@dataclass(frozen=True, slots=True)
class Negotiation:
    """What one client and this server agreed, for one request or one legacy session.

    `protocol_version` is the revision actually agreed (after any counter-offer);
    `requested_version` is what the client asked for. `client_capabilities` is the raw,
    read-only map with unknown keys kept. `capabilities_known` is False where no
    handshake is known (legacy stateless HTTP, or a client the SDK serves after no or a
    refused `initialize`): unknown is not absent, and `supports` answers False there.
    `degraded` lists server features lost at this revision compared with the newest
    accepted revision of the same era; `withheld` lists features the policy withdrew.

    Where each answer came from: `overrides` maps every name a `client_overrides` rule
    decided to that rule's id (`revoked` says which of them it revoked; the rest it
    granted), and every other answer is the client's declaration (`source_of`).
    `effective_capabilities` is the declaration with the grants added (None: no rule added
    anything). `extensions` holds, for each extension the policy declares, what this client
    agreed: the identifier and its settings (`extensions.AgreedExtension`).
    """

    era: Era
    protocol_version: str
    requested_version: str | None
    transport: Transport
    client_capabilities: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    client_info: Mapping[str, Any] | None = None
    capabilities_known: bool = True
    outcome: Outcome = "accepted"
    degraded: frozenset[str] = frozenset()
    withheld: frozenset[str] = frozenset()
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    session_id: str | None = None
    ucp: Any = None
    """The UCP agreement (`mcp_negotiation.ucp.UcpAgreement`) a call was scoped to, or None."""
    overrides: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    revoked: frozenset[str] = frozenset()
    effective_capabilities: Mapping[str, Any] | None = None
    extensions: Mapping[str, AgreedExtension] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        # Records are cached and shared between requests: a caller's headers dict, kept by
        # reference, would let one later edit rewrite every request that shares the record.
        if type(self.headers) is not MappingProxyType:
            object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @property
    def client_name(self) -> str | None:
        name = self.client_info.get("name") if self.client_info else None
        return name if isinstance(name, str) else None

    @property
    def client_version(self) -> str | None:
        version = self.client_info.get("version") if self.client_info else None
        return version if isinstance(version, str) else None

    def supports(self, feature: FeatureName | str, **settings: Any) -> bool:
        """Shorthand for `supports(self, feature, settings)`."""
        return supports(self, feature, settings)

    def source_of(self, name: str) -> str | None:
        """Where the answer for `name` came from: the id of the rule that decided it, else
        `"declared"` when the client declared it, else None (nobody said it)."""
        rule = self.overrides.get(name)
        if rule is not None:
            return rule
        if name.startswith(ASSERTED_NAMESPACE):
            return None
        return "declared" if _declares(self.client_capabilities, name) else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (plain dicts and lists), for logs, tool results and the probe."""
        ucp = self.ucp.as_dict() if self.ucp is not None else None
        return {
            "era": self.era,
            "protocol_version": self.protocol_version,
            "requested_version": self.requested_version,
            "transport": self.transport,
            "outcome": self.outcome,
            "capabilities_known": self.capabilities_known,
            "client_capabilities": thaw(self.client_capabilities),
            "client_info": thaw(self.client_info),
            "degraded": sorted(self.degraded),
            "withheld": sorted(self.withheld),
            "headers": dict(self.headers),
            "session_id": self.session_id,
            "ucp": ucp,
            "overrides": dict(self.overrides),
            "revoked": sorted(self.revoked),
            "effective_capabilities": thaw(self.effective_capabilities),
            "extensions": {
                name: {"identifier": agreed.identifier, "settings": thaw(agreed.settings)}
                for name, agreed in self.extensions.items()
            },
        }


def _declared(value: Any) -> bool:
    return isinstance(value, Mapping) or value is True


def _declares(capabilities: Mapping[str, Any], name: str) -> bool:
    """Whether `capabilities` declares `name` (a dotted name, an extension identifier, or
    `experimental.X`), as `supports` reads it but for revisions and policy."""
    if "/" in name:
        extensions = capabilities.get("extensions")
        return isinstance(extensions, Mapping) and _declared(extensions.get(name))
    if name.startswith("experimental."):
        experimental = capabilities.get("experimental")
        return isinstance(experimental, Mapping) and _declared(experimental.get(name[13:]))
    if name == "elicitation.form":
        # An empty elicitation object means form mode (2025-11-25 backwards compatibility).
        elicitation = capabilities.get("elicitation")
        if not isinstance(elicitation, Mapping):
            return False
        if "form" not in elicitation and "url" not in elicitation:
            return True
        return _declared(elicitation.get("form"))
    node: Any = capabilities
    for part in name.split("."):
        if not isinstance(node, Mapping):
            return False
        node = node.get(part)
    return _declared(node)


def _is_revoked(name: str, revoked: frozenset[str]) -> bool:
    """`name` or what it belongs to was revoked by a rule: `elicitation` revokes
    `elicitation.url`, `extensions` every extension identifier."""
    if name in revoked:
        return True
    if "/" in name:
        return "extensions" in revoked
    head, _, rest = name.partition(".")
    while rest:
        if head in revoked:
            return True
        part, _, rest = rest.partition(".")
        head = f"{head}.{part}"
    return False


def _is_withheld(name: str, withheld: frozenset[str]) -> bool:
    """`name` or what it belongs to is withheld: its top-level capability, and for an
    extension identifier (`io.modelcontextprotocol/ui`) `extensions`, where it is declared."""
    return bool(withheld) and (
        name in withheld or name.split(".", 1)[0] in withheld or ("/" in name and "extensions" in withheld)
    )


def _revoking_rule(name: str, negotiation: Negotiation) -> str:
    """The id of the rule that revoked `name` (or what it belongs to) for `negotiation`."""
    overrides = negotiation.overrides
    if name in overrides:
        return overrides[name]
    owner = next((r for r in sorted(negotiation.revoked) if _is_revoked(name, frozenset({r}))), "")
    return overrides.get(owner, "?")


def retained_size(record: Negotiation) -> int:
    """About how many bytes keeping `record` keeps alive: what the caches holding records
    weigh it by. Counted up to just past `MAX_ENTRY_BYTES` (over it, no cache keeps it);
    a UCP agreement it carries is the business's, bounded by its profile, and not counted."""
    maps = (record.client_capabilities, record.client_info, record.headers, record.effective_capabilities)
    return _RECORD + footprint(maps, MAX_ENTRY_BYTES)


def supports(
    negotiation: Negotiation, feature: FeatureName | str, settings: Mapping[str, Any] | None = None
) -> bool:
    """Whether the client declared `feature`, its revision has it, and the policy allows it.

    Dotted names reach sub-capabilities (`elicitation.url`, `roots.listChanged`);
    names with a `/` are extension identifiers in `capabilities.extensions` (extensions
    negotiate themselves, so no revision gate applies), and `settings` then asks that the
    client's settings for it satisfy them (`extensions.satisfies`: a list asked for is
    contained, anything else equal); `experimental.X` reaches experimental keys.
    Server-side feature names (`structured_output`, ...) answer whether the negotiated
    revision has them. The policy's `client_overrides` are honoured: a revoked name is
    False whatever was declared, a granted one is answered as if declared, and
    `client.NAME` is True only where a rule asserts it. Anything else is False, never an
    error: a handler must not fail a client for its author's typo, which is logged instead
    (once per name, with the name it most likely meant).
    """
    if not isinstance(feature, str):
        return False
    row = FEATURES.get(feature)
    if row is None and "/" not in feature and not feature.startswith("experimental."):
        if feature.startswith(ASSERTED_NAMESPACE) and not settings:
            return (
                feature in negotiation.overrides
                and feature not in negotiation.revoked
                and feature not in negotiation.withheld
            )
        _warn_unknown(feature)  # a misspelling would take every client down the fallback branch
        return False
    if settings and "/" not in feature:
        _warn_settings(feature)
        return False
    if not negotiation.capabilities_known:
        return False
    if _is_withheld(feature, negotiation.withheld):
        return False
    if negotiation.revoked and _is_revoked(feature, negotiation.revoked):
        return False
    caps = negotiation.effective_capabilities
    if caps is None:
        caps = negotiation.client_capabilities
    if "/" in feature:
        agreed = negotiation.extensions.get(feature)
        if agreed is not None:
            declared: Any = agreed.settings
        else:
            extensions = caps.get("extensions")
            declared = extensions.get(feature) if isinstance(extensions, Mapping) else None
            if not _declared(declared):
                return False
        return not settings or satisfies(declared, settings)
    if row is not None and row.side == "server":
        return row.at(negotiation.protocol_version)
    if row is None and not feature.startswith("experimental."):
        return False
    if row is not None and not row.at(negotiation.protocol_version):
        return False
    return _declares(caps, feature)


def _warn_settings(feature: str) -> None:
    shown = feature[:_MAX_NAME_SHOWN]
    if first_time(f"settings:{shown}"):
        logger.warning(
            "settings were asked of %r, which is no extension identifier; only extensions have"
            " settings (client_supports answers False)",
            shown,
        )


def required_capabilities_object(names: Iterable[str]) -> dict[str, Any]:
    """The ClientCapabilities-shaped object that -32021's `data.requiredCapabilities` carries."""
    result: dict[str, Any] = {}
    for name in names:
        if "/" in name:
            result.setdefault("extensions", {})[name] = {}
            continue
        parts = name.split(".")
        if parts[0] == "experimental" and len(parts) > 1:
            parts = ["experimental", ".".join(parts[1:])]
        node = result
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        last = parts[-1]
        # Boolean flags (listChanged, subscribe) are declared as true; capabilities as objects.
        node.setdefault(last, True if last in {"listChanged", "subscribe"} else {})
    return result


def policy_given(policy: object, who: str) -> Policy:
    """`policy`, or the default one for None; anything else is the caller's mistake.

    Caught here, where the call is made: accepted, a server (say) would only fail later,
    on every request, as a logged error far from the line that caused it.
    """
    if policy is None:
        return Policy()
    if not isinstance(policy, Policy):
        raise UsageError(f"{who} takes a mcp_negotiation.Policy, not {type(policy).__name__}")
    return policy


class Withdrawals:
    """What the policy withdraws today, with the clock read at most once a minute.

    With no pinned clock the date is read again at most once a minute (a deprecation
    closing a minute late harms no one), so a long-running server withdraws the deprecated
    features within a minute of the removal date. What was made from one reading (a
    session's record, a memo of a request's outcome) may be trusted until `until`.
    """

    __slots__ = ("_day", "_policy", "current", "monotonic", "until")

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.monotonic = policy.clock.monotonic
        """The policy's clock's seconds, which `until` is counted in."""
        pinned = policy.today is not None or policy.months_since_deprecation is not None
        self._day: date | None = None if pinned else policy.clock.today()
        self.until = math.inf if pinned else self.monotonic() + DATE_RECHECK_SECONDS
        """`monotonic()` time until which `current` stands (for ever with a pinned clock)."""
        self.current = policy.withdrawn()

    def now(self) -> frozenset[str]:
        """The features withdrawn now, the very same set object while the day is the same."""
        now = self.monotonic()
        if now >= self.until:
            self.until = now + DATE_RECHECK_SECONDS
            today = self._policy.clock.today()
            if today != self._day:
                self.current = self._policy.withdrawn()
                self._day = today
        return self.current

    def stands_for(self, record: Negotiation) -> bool:
        """Whether `record` was made (or refreshed) under the current reading."""
        return record.withheld is self.current and self.monotonic() < self.until


class Negotiator:
    """Applies one `Policy` to what clients send: the pure rules, with no memory of requests.

    One instance serves one server; what it works out once per revision (the accepted
    revisions, what each degrades) it keeps. Repeated requests are recognised by the engine
    (`Engine.memo`), not here: each call here negotiates.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.accepted = policy.accepted()
        self.withdrawals = Withdrawals(policy)
        self._accepted_legacy = tuple(r for r in self.accepted if revisions.era(r) == "legacy")
        self._accepted_modern = tuple(r for r in self.accepted if revisions.era(r) == "modern")
        self._degraded = {r: self._degraded_at(r) for r in self.accepted}
        self._narrowed = policy.narrowed()
        # Checked once, here: with neither configured a record is made as it always was.
        self._rules = tuple(policy.client_overrides)
        self._extensions = policy.declared_extensions() or None
        self._adjusts = bool(self._rules) or self._extensions is not None
        self.asserted_names = frozenset(
            name for rule in self._rules for name in rule.names() if name.startswith(ASSERTED_NAMESPACE)
        )
        """The `client.` names some rule of the policy decides: any other is answered False."""

    def answers(self, record: Negotiation, feature: FeatureName | str, settings: Mapping[str, Any]) -> bool:
        """`supports(record, feature, settings)`, for a handler asking (`client_supports`):
        a `client.` name no rule of this policy decides is False for every client, and
        logged once, as a misspelt name is."""
        if type(feature) is str and feature.startswith(ASSERTED_NAMESPACE):
            shown = feature[:_MAX_NAME_SHOWN]
            if shown not in self.asserted_names and first_time(f"asserted:{shown}"):
                logger.warning(
                    "no client_overrides rule of this server's policy asserts %r; client_supports"
                    " answers False for it, for every client",
                    shown,
                )
        return supports(record, feature, settings)

    def _checked(self, record: Negotiation) -> Negotiation:
        """`record` adjusted (`_adjusted`, where the policy has rules or extensions), then
        checked for the policy's required capabilities (`check_required`)."""
        return self.check_required(self._adjusted(record) if self._adjusts else record)

    def _adjusted(self, record: Negotiation) -> Negotiation:
        """`record` with the policy's client rules and declared extensions applied: what each
        rule decided, and what each declared extension agreed (see `Negotiation`)."""
        declared = record.client_capabilities
        applied = apply_overrides(self._rules, record.client_info, declared) if self._rules else None
        effective = applied.capabilities if applied is not None else None
        revoked = applied.revoked if applied is not None else frozenset()
        extensions = self._extensions
        agreed = extensions.agree(effective or declared, revoked) if extensions is not None else _EMPTY
        if applied is None and not agreed:
            return record
        if applied is None:
            return replace(record, extensions=agreed)
        overrides = applied.overrides
        return replace(
            record, overrides=overrides, revoked=revoked, effective_capabilities=effective, extensions=agreed
        )

    @property
    def withdrawn(self) -> frozenset[str]:
        """Features no client gets now: closed deprecations and the policy's `withhold`."""
        return self.withdrawals.now()

    def refreshed(self, record: Negotiation, check: bool = True) -> Negotiation:
        """A session's record under the policy as it stands *now*.

        A legacy session outlives the day of its handshake (a removal date can pass while
        it is open), and the policy may be applied again: what later clients are denied
        must not stay available to the ones that connected before. So the record takes the
        features withdrawn now and the degradation this policy sees, and, with `check`, a
        session this policy would not have served is refused as a new one would be: its
        revision no longer accepted (-32022), or a capability now required missing (-32021).
        """
        revision = record.protocol_version
        if check and revision not in self.accepted:
            raise self._unsupported(revision)
        withdrawn = self.withdrawn
        degraded = self._degraded.get(revision, record.degraded)
        # Identity, not equality: an equal set from another computation is swapped in once,
        # so that `Withdrawals.stands_for` holds for the record from then on.
        if record.withheld is not withdrawn or record.degraded != degraded:
            record = replace(record, withheld=withdrawn, degraded=degraded)
        return self.check_required(record) if check else record

    @property
    def supported_advertised(self) -> list[str]:
        """The revisions a -32022 refusal lists, newest first."""
        listed = self._accepted_modern if self.policy.advertise == "modern" else ()
        return list(reversed(listed or self.accepted))

    def _degraded_at(self, revision: str) -> frozenset[str]:
        same_era = [r for r in self.accepted if revisions.era(r) == revisions.era(revision)]
        best = same_era[-1]
        return frozenset(
            name
            for name in revisions.feature_names("server")
            if revisions.feature(name, best) and not revisions.feature(name, revision)
        )

    def _unsupported(self, requested: str, instead: tuple[str, ...] = ()) -> NegotiationRefused:
        """-32022 listing `instead` (newest first) when there are any, else the advertised.

        A revision the policy's requirements left out says so, and carries the
        requirements it cannot have as -32021 would (`requiredCapabilities`): the client
        learns why, and that a listed revision would serve it."""
        supported = list(reversed(instead)) or self.supported_advertised
        message = f"Unsupported protocol version: {requested[:MAX_REVISION_LENGTH]}"
        data: dict[str, Any] = {"supported": supported, "requested": requested}
        lacking = self._narrowed.get(requested)
        if lacking:
            message += f" (the server requires {', '.join(lacking)}, which {requested} does not have)"
            data["requiredCapabilities"] = required_capabilities_object(lacking)
        return NegotiationRefused(Refusal(UNSUPPORTED_PROTOCOL_VERSION, message, data))

    def missing_extension(
        self, negotiation: Negotiation, identifier: str, settings: Mapping[str, Any]
    ) -> Refusal | None:
        """A -32021 refusal when the client lacks extension `identifier` with `settings`
        (`extensions.satisfies`), else None. `data.requiredCapabilities` names the extension
        and the settings; for a family the policy declares under `identifier`, by the
        identifier it prefers. The message says why, where the client may have declared it."""
        if supports(negotiation, identifier, settings):
            return None
        declared = self.policy.declared_extensions().get(identifier)
        named = next(iter(declared.identifiers)) if declared is not None else identifier
        shown = ", ".join(f"{key}={value!r}" for key, value in thaw(settings).items())
        message = f"Missing required client capability: extension {named}{f' with {shown}' if shown else ''}"
        if negotiation.revoked and _is_revoked(identifier, negotiation.revoked):
            message += f" (revoked for this client by rule {_revoking_rule(identifier, negotiation)!r})"
        elif settings and supports(negotiation, identifier):
            message += " (declared without these settings)"
        elif not negotiation.capabilities_known:
            message += " (its capabilities are unknown: no handshake is known for this request)"
        data = {"requiredCapabilities": {"extensions": {named: thaw(settings)}}}
        return Refusal(MISSING_REQUIRED_CLIENT_CAPABILITY, message, data)

    def missing_required(self, negotiation: Negotiation, names: Iterable[str]) -> Refusal | None:
        """A -32021 refusal when the client lacks any of `names`, else None."""
        wanted = tuple(names)
        missing = [name for name in wanted if not supports(negotiation, name)]
        if not missing:
            return None
        message = "Missing required client capability: " + ", ".join(missing)
        # Say why, when the client may well have declared it: "missing" alone would mislead.
        withheld = [name for name in missing if _is_withheld(name, negotiation.withheld)]
        revoked = [name for name in missing if negotiation.revoked and _is_revoked(name, negotiation.revoked)]
        revision = negotiation.protocol_version
        absent = [name for name in missing if not required_at(name, revision)]
        if not negotiation.capabilities_known:
            message += " (its capabilities are unknown: no handshake is known for this request)"
        elif withheld:
            message += f" ({', '.join(withheld)} withheld by the server's policy)"
        elif revoked:
            rules = sorted({_revoking_rule(name, negotiation) for name in revoked})
            by = ", ".join(map(repr, rules))
            message += f" ({', '.join(revoked)} revoked for this client by rule {by})"
        elif absent:
            message += f" ({', '.join(absent)} not in revision {revision})"
        return Refusal(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            message,
            {"requiredCapabilities": required_capabilities_object(wanted)},
        )

    def check_required(self, negotiation: Negotiation) -> Negotiation:
        """`negotiation`, or -32021 raised (`NegotiationRefused`) when it lacks a capability
        the policy requires of every request."""
        if not self.policy.required_capabilities:
            return negotiation  # the common case, on every modern request: nothing to check
        refusal = self.missing_required(negotiation, self.policy.required_capabilities)
        if refusal is not None:
            raise NegotiationRefused(refusal)
        return negotiation

    def initialize(
        self,
        params: Any,
        *,
        transport: Transport = "unknown",
        headers: Mapping[str, str] = _EMPTY,
        session_id: str | None = None,
    ) -> Negotiation:
        """Negotiate a legacy `initialize`: accept the requested revision or counter-offer.

        An unknown or unaccepted revision is never refused here: the answer is the
        newest accepted legacy revision, as the specification's handshake requires.
        Only a policy that accepts no legacy revision at all refuses (-32022).
        """
        if not isinstance(params, Mapping):
            raise _invalid("initialize params must be an object")
        requested = _revision(params.get("protocolVersion"), "protocolVersion")
        capabilities = _object(params.get("capabilities"), "capabilities", required=True)
        client_info = _object(params.get("clientInfo"), "clientInfo", required=False)
        if not self._accepted_legacy:
            raise self._unsupported(requested)
        accepted = requested in self._accepted_legacy
        agreed = requested if accepted else self._accepted_legacy[-1]
        return self._checked(
            Negotiation(
                era="legacy",
                protocol_version=agreed,
                requested_version=requested,
                transport=transport,
                client_capabilities=capabilities or _EMPTY,
                client_info=client_info,
                outcome="accepted" if accepted else "counter_offered",
                degraded=self._degraded[agreed],
                withheld=self.withdrawn,
                headers=headers,
                session_id=session_id,
            )
        )

    def request(
        self,
        meta: Any,
        *,
        transport: Transport = "unknown",
        headers: Mapping[str, str] = _EMPTY,
        check_required: bool = True,
    ) -> Negotiation:
        """Negotiate one modern request from its `_meta` envelope; with `check_required`, the
        policy's required capabilities are checked too (-32021, see `check_required`)."""
        if not is_object(meta):
            raise _invalid("_meta must be an object carrying the protocol envelope")
        requested = _revision(meta.get(PROTOCOL_VERSION_KEY), PROTOCOL_VERSION_KEY)
        capabilities = _object(meta.get(CLIENT_CAPABILITIES_KEY), CLIENT_CAPABILITIES_KEY, required=True)
        client_info = _object(meta.get(CLIENT_INFO_KEY), CLIENT_INFO_KEY, required=False)
        if requested not in self._accepted_modern:
            raise self._unsupported(requested)
        record = Negotiation(
            era="modern",
            protocol_version=requested,
            requested_version=requested,
            transport=transport,
            client_capabilities=capabilities or _EMPTY,
            client_info=client_info,
            degraded=self._degraded[requested],
            withheld=self.withdrawn,
            headers=headers,
        )
        if self._adjusts:
            record = self._adjusted(record)
        return self.check_required(record) if check_required else record

    def check_sessionless(self, protocol_version: str, transport: Transport, *, any_revision: bool) -> None:
        """Refuse (-32022) a legacy request without a session over HTTP at a revision the
        policy does not accept: there is no handshake to counter-offer in, and the
        specification asks for the refusal. `any_revision`: served at any revision (`ping`).
        A legacy client is told the legacy revisions it could use, if any."""
        if protocol_version not in self._accepted_legacy and transport == "http" and not any_revision:
            raise self._unsupported(protocol_version, self._accepted_legacy)

    def without_session(
        self,
        protocol_version: str,
        *,
        transport: Transport,
        headers: Mapping[str, str] = _EMPTY,
        any_revision: bool = False,
    ) -> Negotiation:
        """The record for a legacy request with no session to remember its handshake.

        Legacy stateless HTTP builds a fresh connection per POST: what the client
        declared at `initialize` is gone, so capabilities are unknown, not absent.
        `protocol_version` is the revision the SDK serves this request at (over HTTP, its
        `MCP-Protocol-Version` header, else `revisions.UNANNOUNCED`); one the policy does
        not accept is refused (`check_sessionless`; `any_revision` for what is served at any
        revision). Off HTTP the only such request comes before `initialize` (a `ping`), and
        the record names the counter-offer that handshake would make.
        """
        self.check_sessionless(protocol_version, transport, any_revision=any_revision)
        accepted = protocol_version in self._accepted_legacy
        agreed = protocol_version if accepted else (self._accepted_legacy or self.accepted)[-1]
        return Negotiation(
            era=revisions.era(agreed),  # a modern-only policy's ping: 2026-07-28, not "legacy"
            protocol_version=agreed,
            requested_version=protocol_version,
            transport=transport,
            capabilities_known=False,
            outcome="accepted" if agreed == protocol_version else "counter_offered",
            degraded=self._degraded.get(agreed, frozenset()),
            withheld=self.withdrawn,
            headers=headers,
        )
