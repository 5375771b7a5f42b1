"""What a bridge can honestly promise: the agreement of two independently negotiated legs.

A bridge (proxy, gateway, protocol translator) sits between a downstream client and an
upstream server. Each negotiated with the bridge alone; neither saw the other. If the
bridge advertised the downstream negotiation, the client would call something that dies
behind the bridge where it cannot see why. So `agree` serves the intersection and
records every feature it had to drop with the side that could not provide it: a dropped
feature with a reason is a limitation an operator can see, one without is a bug that
surfaces as a failed call.

Both legs keep their own protocol and version (the client may speak MCP 2025-03-26 and
the server 2026-07-28, or A2A 1.0.0): that difference is the reason to run a bridge and
the first thing an operator needs when a message is translated.

An `Agreement` makes no claim of reachability. It is computed from two negotiations; the
bridge has not proved that either peer is answering now, so nothing in it says so.

Cross-protocol legs are compared through a `FeatureMapping`, which translates upstream
feature names into the downstream's vocabulary. The default A2A 1.0 ↔ MCP table pairs
only features with an honest counterpart:

==============  ====================  ==================================================
A2A             MCP                   why they correspond
==============  ====================  ==================================================
skills          tools                 a skill is invoked by one message, a tool by one
                                      call; lossy: a skill has no input schema
streaming       progress.message      status updates relayed as progress notifications
                                      with their message text; artifact chunks are
                                      assembled into the final result
tasks           tasks                 a durable unit of work with states, polled by id
                                      (MCP: task-augmented `tools/call`, `tasks/get`)
tasks.cancel    tasks.cancel          CancelTask ↔ `tasks/cancel`
tasks.list      tasks.list            ListTasks (A2A 1.0) ↔ `tasks/list`
inputRequired   elicitation           the input-required task state ↔ asking the client
                                      with `elicitation/create`
==============  ====================  ==================================================

Left out, because the other protocol has nothing that behaves alike: A2A push
notifications (webhooks to a disconnected client; MCP notifications ride the client's
own connection), the extended and signed agent cards, multi-tenancy, and extensions (the
two protocols' extension registries share a word, not a namespace); MCP resources,
prompts, list-changed notifications, logging, completions, sampling and roots.

`advertised_capabilities` turns an agreement whose downstream speaks MCP into the
`ServerCapabilities` object a proxy should send, so it never promises what its upstream
refused.

`a2a_leg` makes an A2A leg from what A2A's own negotiation (`semver.a2a`) settled, and
`relay_refusal` says a refusal on one leg in both legs' words: an MCP -32022 or -32021
on one side is an A2A -32009 or -32008 on the other, and the relayed one names the leg
that refused, so a client learns that the bridge's other side said no, not the bridge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, NoReturn

from mcp_negotiation.core import revisions
from mcp_negotiation.core.errors import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    PolicyError,
    Refusal,
    UsageError,
)
from mcp_negotiation.core.revisions import FeatureRow
from mcp_negotiation.semver.a2a import (
    EXTENSION_SUPPORT_REQUIRED,
    MAX_EXTENSIONS_LENGTH,
    VERSION_NOT_SUPPORTED,
    A2ACard,
    a2a_error_info,
    a2a_refusal,
    excerpt,
    parse_a2a_version,
    read_agent_card,
)
from mcp_negotiation.semver.protocols import ProtocolName, name_set

__all__ = [
    "A2A_MCP",
    "MCP_SERVER_FEATURES",
    "Agreement",
    "FeatureMapping",
    "Leg",
    "RefusedBy",
    "RelayedRefusal",
    "Withheld",
    "a2a_leg",
    "advertised_capabilities",
    "agree",
    "relay_refusal",
]


class RefusedBy(StrEnum):
    """Which peer could not provide a withheld feature.

    `BOTH` is for a name each leg offers that still cannot be served: in a cross-protocol
    bridge, both protocols use the word for different things and the mapping pairs
    neither with the other (A2A and MCP both say "extensions").
    """

    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"
    BOTH = "both"

    @classmethod
    def _missing_(cls, value: object) -> NoReturn:
        # Enum's own would be a bare ValueError, outside the library's errors.
        raise PolicyError(f"refused_by must be one of {', '.join(cls)}; got {value!r}")


def _non_empty(field: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise PolicyError(f"{field} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, init=False)
class Leg:
    """One side of a bridge, as negotiated with the bridge and nobody else.

    `version` is spelled the way the protocol spells it: an MCP revision date
    (``"2025-11-25"``), A2A's `Major.Minor` (``"1.0"``, as `a2a_leg` makes it; a release
    number such as ``"1.0.0"`` is accepted too), or a semver string. `features` are names
    in that protocol's vocabulary, already limited to what this leg agreed.
    """

    peer: str
    protocol: ProtocolName
    version: str
    features: frozenset[str]

    def __init__(
        self, peer: str, protocol: ProtocolName | str, version: str, features: Iterable[str]
    ) -> None:
        object.__setattr__(self, "peer", _non_empty("peer", peer))
        object.__setattr__(self, "protocol", ProtocolName(protocol))
        object.__setattr__(self, "version", _non_empty("version", version))
        if self.protocol is ProtocolName.MCP and not revisions.is_date_version(version):
            # A revision this library does not know yet is fine (a newer peer); a semver is a mix-up.
            raise PolicyError(f"an MCP leg's version is a revision date such as 2025-11-25; got {version!r}")
        object.__setattr__(self, "features", name_set("features", features))


@dataclass(frozen=True, slots=True, order=True)
class Withheld:
    """A feature the bridge will not serve, and which side could not provide it.

    Named in the downstream's vocabulary when it has a word for it; an upstream feature
    with no counterpart keeps its upstream name, qualified by its protocol (`a2a:b`) when
    a translated feature already goes by that name, and again (`a2a:a2a:b`) while the
    qualified name is taken too: each record names one dropped feature.
    """

    feature: str
    refused_by: RefusedBy


@dataclass(frozen=True, slots=True)
class Agreement:
    """Both legs, and what the bridge can therefore serve downstream.

    `served` and `withheld` never overlap, no two withheld records share a name, and
    together they cover every feature either leg offered (after translation; an
    untranslatable upstream feature whose name is taken is qualified, `a2a:b`, see
    `Withheld`). `withheld` is sorted by feature name.
    There is no reachability here: agreeing is not connecting.
    """

    downstream: Leg
    upstream: Leg
    served: frozenset[str]
    withheld: tuple[Withheld, ...]


@dataclass(frozen=True, slots=True, init=False)
class FeatureMapping:
    """A one-to-one table between the feature names of two protocols.

    One-to-one so that translating is never a guess and an agreement reads the same
    whichever side is downstream. Names absent from the table have no counterpart.
    """

    left: ProtocolName
    right: ProtocolName
    pairs: tuple[tuple[str, str], ...]
    # `pairs` indexed once, each way, so that translating costs a lookup, not a scan of the
    # table (an agreement translates every upstream feature). Derived, so not compared.
    _from_left: Mapping[str, str] = field(repr=False, compare=False)
    _from_right: Mapping[str, str] = field(repr=False, compare=False)

    def __init__(
        self,
        left: ProtocolName | str,
        right: ProtocolName | str,
        pairs: Mapping[str, str] | Iterable[tuple[str, str]],
    ) -> None:
        left_name, right_name = ProtocolName(left), ProtocolName(right)
        if left_name is right_name:
            raise PolicyError(f"a feature mapping joins two different protocols, got {left_name} twice")
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        try:
            if isinstance(items, str | bytes):
                raise TypeError
            table = tuple(sorted((a, b) for a, b in items))
        except (TypeError, ValueError):
            raise UsageError("pairs must be a mapping or (left, right) pairs of feature names") from None
        for side, names in ((left_name, [a for a, _ in table]), (right_name, [b for _, b in table])):
            name_set(f"{side} feature names", names)
            if len(set(names)) != len(names):
                raise PolicyError(f"each {side} feature may be paired once; the table repeats one")
        object.__setattr__(self, "left", left_name)
        object.__setattr__(self, "right", right_name)
        object.__setattr__(self, "pairs", table)
        object.__setattr__(self, "_from_left", dict(table))
        object.__setattr__(self, "_from_right", {b: a for a, b in table})

    def translate(self, feature: str, *, source: ProtocolName | str) -> str | None:
        """The counterpart of `feature` (named in `source`'s vocabulary), or None."""
        origin = ProtocolName(source)
        if origin is self.left:
            return self._from_left.get(feature)
        if origin is self.right:
            return self._from_right.get(feature)
        raise PolicyError(f"this mapping joins {self.left} and {self.right}, not {origin}")


A2A_MCP: Final[FeatureMapping] = FeatureMapping(
    ProtocolName.A2A,
    ProtocolName.MCP,
    {
        "skills": "tools",
        "streaming": "progress.message",
        "tasks": "tasks",
        "tasks.cancel": "tasks.cancel",
        "tasks.list": "tasks.list",
        "inputRequired": "elicitation",
    },
)
"""A2A 1.0 ↔ MCP (any revision that has the MCP side); each pairing is explained above."""


def _translator(
    downstream: ProtocolName, upstream: ProtocolName, mapping: FeatureMapping | None
) -> Callable[[str], str | None]:
    if downstream is upstream:
        if mapping is not None:
            raise PolicyError(
                f"both legs speak {downstream}; a feature mapping is for cross-protocol bridges"
            )
        return lambda feature: feature
    if mapping is None and {downstream, upstream} == {A2A_MCP.left, A2A_MCP.right}:
        mapping = A2A_MCP
    if mapping is None:
        raise PolicyError(f"no default feature mapping between {upstream} and {downstream}; pass mapping=")
    if {mapping.left, mapping.right} != {downstream, upstream}:
        raise PolicyError(
            f"the mapping joins {mapping.left} and {mapping.right}, but the legs speak {downstream} "
            f"and {upstream}"
        )
    table = mapping
    return lambda feature: table.translate(feature, source=upstream)


def _qualified(protocol: ProtocolName, feature: str, taken: set[str]) -> str:
    """`feature` prefixed by its protocol (`a2a:b`) as often as it takes to name no other record.

    Feature names may themselves contain `a2a:`, so a single prefix can collide with a
    downstream feature, a translated one, or another upstream name; a record sharing a
    name with another would hide one of the two drops.
    """
    name = f"{protocol.value}:{feature}"
    while name in taken:
        name = f"{protocol.value}:{name}"
    return name


def agree(downstream: Leg, upstream: Leg, mapping: FeatureMapping | None = None) -> Agreement:
    """Reconcile two legs: serve what both provide, withhold the rest with its reason.

    Upstream features are first translated into the downstream's vocabulary (legs of one
    protocol need no mapping; A2A ↔ MCP uses `A2A_MCP` unless `mapping` is given). Then:
    a withheld feature only the downstream offers is refused by the upstream, one only the
    upstream offers is refused by the downstream, and a name both offer without being
    matched is refused by both. Every feature either leg offered is then served or has
    exactly one record of its own, and the cost is linear in the number of features.
    """
    translate = _translator(downstream.protocol, upstream.protocol, mapping)
    from_upstream: set[str] = set()
    unmatched: set[str] = set()
    for feature in upstream.features:
        counterpart = translate(feature)
        if counterpart is None:
            unmatched.add(feature)
        else:
            from_upstream.add(counterpart)
    served = downstream.features & from_upstream
    withheld = [
        Withheld(feature, RefusedBy.BOTH if feature in unmatched else RefusedBy.UPSTREAM)
        for feature in downstream.features - served
    ]
    withheld += [Withheld(feature, RefusedBy.DOWNSTREAM) for feature in from_upstream - downstream.features]
    # An untranslatable upstream feature keeps its own name when no record or served
    # feature has it; otherwise (a translated feature already goes by it) it is qualified
    # by its protocol. Plain names are settled first, so that the upstream's own `a2a:b`
    # keeps its name and a qualified `b` moves on to `a2a:a2a:b`; sorting makes the
    # names the same on every run.
    taken = {*downstream.features, *from_upstream}
    plain = unmatched - taken
    taken |= plain
    withheld += [Withheld(feature, RefusedBy.DOWNSTREAM) for feature in plain]
    for feature in sorted(unmatched & from_upstream):
        name = _qualified(upstream.protocol, feature, taken)
        taken.add(name)
        withheld.append(Withheld(name, RefusedBy.DOWNSTREAM))
    return Agreement(downstream, upstream, frozenset(served), tuple(sorted(withheld)))


# --- What an MCP proxy advertises downstream ---------------------------------------------


@dataclass(frozen=True, slots=True)
class _Placement:
    feature: str
    path: tuple[str, ...]
    row: FeatureRow


def _always(name: str, source: str) -> FeatureRow:
    return FeatureRow(name, "server", revisions.KNOWN[0], None, source)


_TASKS_2025: Final[str] = "ServerCapabilities.tasks exists in mcp_types._v2025_11_25 only"

_PLACEMENTS: Final[tuple[_Placement, ...]] = (
    _Placement("tools", ("tools",), _always("tools", "ServerCapabilities.tools in every revision")),
    _Placement(
        "tools.listChanged",
        ("tools", "listChanged"),
        _always("tools.listChanged", "Tools.listChanged in every revision"),
    ),
    _Placement(
        "resources", ("resources",), _always("resources", "ServerCapabilities.resources in every revision")
    ),
    _Placement("resources.subscribe", ("resources", "subscribe"), revisions.FEATURES["resources.subscribe"]),
    _Placement(
        "resources.listChanged",
        ("resources", "listChanged"),
        _always("resources.listChanged", "Resources.listChanged in every revision"),
    ),
    _Placement("prompts", ("prompts",), _always("prompts", "ServerCapabilities.prompts in every revision")),
    _Placement(
        "prompts.listChanged",
        ("prompts", "listChanged"),
        _always("prompts.listChanged", "Prompts.listChanged in every revision"),
    ),
    _Placement("logging", ("logging",), revisions.FEATURES["logging"]),
    _Placement("completions", ("completions",), revisions.FEATURES["completions"]),
    # tools/call is the only request a 2025-11-25 server can run as a task, so `tasks`
    # means exactly that; from 2026-07-28 tasks are an extension with its own settings.
    _Placement(
        "tasks",
        ("tasks", "requests", "tools", "call"),
        FeatureRow("tasks", "server", "2025-11-25", "2025-11-25", _TASKS_2025),
    ),
    _Placement(
        "tasks.list",
        ("tasks", "list"),
        FeatureRow("tasks.list", "server", "2025-11-25", "2025-11-25", _TASKS_2025),
    ),
    _Placement(
        "tasks.cancel",
        ("tasks", "cancel"),
        FeatureRow("tasks.cancel", "server", "2025-11-25", "2025-11-25", _TASKS_2025),
    ),
    _Placement(
        "tasks",
        ("extensions", "io.modelcontextprotocol/tasks"),
        FeatureRow(
            "tasks", "server", "2026-07-28", None, "ServerCapabilities.extensions in mcp_types._v2026_07_28"
        ),
    ),
)

MCP_SERVER_FEATURES: Final[frozenset[str]] = frozenset(p.feature for p in _PLACEMENTS)
"""The MCP server feature names `advertised_capabilities` understands."""

_FLAGS: Final[frozenset[str]] = frozenset({"listChanged", "subscribe"})


def advertised_capabilities(agreement: Agreement) -> dict[str, dict[str, Any]]:
    """The MCP `ServerCapabilities` a proxy should send downstream for this agreement.

    Only served features appear, and only where the downstream revision can say them: a
    sub-feature needs its top-level feature served too, `resources.subscribe` ends with
    2025-11-25, `completions` starts with 2025-03-26, and `tasks` is the `tasks` object
    in 2025-11-25 but the ``io.modelcontextprotocol/tasks`` extension from 2026-07-28
    (whose settings are not ours to invent, so `tasks.list`/`tasks.cancel` are not
    said there). Served names outside `MCP_SERVER_FEATURES` (`progress.message`, client
    features) have no capability flag and are not mentioned.
    """
    leg = agreement.downstream
    if leg.protocol is not ProtocolName.MCP:
        raise PolicyError(
            f"the downstream leg speaks {leg.protocol}; MCP capabilities need an MCP downstream"
        )
    if revisions.era(leg.version) == "unknown":
        raise PolicyError(f"the downstream leg's version {leg.version!r} is not a known MCP revision")
    capabilities: dict[str, dict[str, Any]] = {}
    for placement in _PLACEMENTS:
        top = placement.feature.split(".", 1)[0]
        if not (
            placement.feature in agreement.served
            and top in agreement.served
            and placement.row.at(leg.version)
        ):
            continue
        *parents, leaf = placement.path
        node: dict[str, Any] = capabilities
        for key in parents:
            node = node.setdefault(key, {})
        if leaf in _FLAGS:
            node[leaf] = True
        else:
            node.setdefault(leaf, {})
    return capabilities


# --- A2A legs and refusals across a bridge -----------------------------------------------------


def a2a_leg(
    peer: str, card: A2ACard | Mapping[str, Any], version: str, extensions: Iterable[str] = ()
) -> Leg:
    """The A2A leg of a bridge, from the agent's card and what A2A's negotiation settled.

    `version` is the `Major.Minor` agreed (`A2ANegotiation.version` when the bridge is the
    agent, `A2AChoice.version` when it is the client) and `extensions` the URIs activated.
    Its features are the card's at that version (`A2ACard.features_at`) and the extension
    URIs themselves: an extension has no counterpart in MCP, so an agreement withholds each
    by name. `ValueError` when the card does not serve `version` or list an extension.
    """
    offer = card if isinstance(card, A2ACard) else read_agent_card(card)
    activated = name_set("extensions", extensions)
    unlisted = activated - {extension.uri for extension in offer.extensions}
    if unlisted:
        raise PolicyError(f"the card lists no extension {', '.join(sorted(unlisted))}")
    features = offer.features_at(version)
    return Leg(peer, ProtocolName.A2A, parse_a2a_version(version) or version, features | activated)


@dataclass(frozen=True, slots=True)
class RelayedRefusal:
    """One refusal on one leg of a bridge, in each leg's own words.

    `refused_by` is the leg whose peer (or whose negotiation) refused; that leg's field is
    the refusal as it was made, the other leg's is the same refusal in the other leg's
    protocol. The bridge answers its client with `downstream` when the upstream refused,
    and its server with `upstream` when the downstream refused a request coming up from it.
    """

    refused_by: RefusedBy
    downstream: Refusal
    upstream: Refusal


_KINDS: Final[Mapping[ProtocolName, Mapping[int, str]]] = {
    ProtocolName.MCP: {
        UNSUPPORTED_PROTOCOL_VERSION: "version",
        MISSING_REQUIRED_CLIENT_CAPABILITY: "requirement",
    },
    ProtocolName.A2A: {VERSION_NOT_SUPPORTED: "version", EXTENSION_SUPPORT_REQUIRED: "requirement"},
}
"""The refusals negotiation makes, by protocol: an unsupported version, a missing requirement."""

_MAX_RELAYED_MESSAGE: Final = 256
"""How much of the refusing peer's message is repeated: the peer may be anyone."""


def _codes(leg: Leg) -> Mapping[int, str]:
    codes = _KINDS.get(leg.protocol)
    if codes is None:
        raise PolicyError(f"no refusal of {leg.protocol} is mapped; only MCP and A2A refusals are")
    return codes


def _kind(leg: Leg, refusal: Refusal) -> str:
    codes = _codes(leg)
    kind = codes.get(refusal.code)
    if kind is None:
        expected = " or ".join(str(code) for code in codes)
        raise PolicyError(f"{refusal.code} is not a negotiation refusal of {leg.protocol} ({expected})")
    return kind


def _requirements_of(refusal: Refusal, leg: Leg) -> Any:
    """What the refusing peer said was required, when it said it in the words of `leg`'s protocol."""
    if leg.protocol is ProtocolName.MCP:
        data = refusal.data
        required = data.get("requiredCapabilities") if isinstance(data, Mapping) else None
        return required if isinstance(required, Mapping) else None
    info = a2a_error_info(refusal)
    metadata = info.get("metadata") if info is not None else None
    required = metadata.get("requiredExtensions") if isinstance(metadata, Mapping) else None
    return required if isinstance(required, str) and len(required) <= MAX_EXTENSIONS_LENGTH else None


def _in_words_of(leg: Leg, kind: str, refusing: Leg, side: RefusedBy, refusal: Refusal) -> Refusal:
    """`refusal` (made on `refusing`) as `leg`'s protocol says it, naming who refused.

    What was required is carried only between legs of one protocol: MCP capabilities and
    A2A extension URIs share no namespace, so neither is translated into the other.
    """
    said = excerpt(refusal.message, _MAX_RELAYED_MESSAGE)
    because = (
        f"the bridge's {side.value} {refusing.peer} refused "
        f"{refusing.protocol} {refusing.version} ({refusal.code}: {said})"
    )
    required = _requirements_of(refusal, refusing) if refusing.protocol is leg.protocol else None
    if leg.protocol is ProtocolName.MCP:
        who = {
            "refusedBy": side.value,
            "refusing": {
                "peer": refusing.peer,
                "protocol": refusing.protocol.value,
                "version": refusing.version,
                "code": refusal.code,
                "message": said,
            },
        }
        if kind == "version":
            # No revision would do: the version refused is the one the bridge speaks on its other leg.
            data: dict[str, Any] = {"supported": [], "requested": leg.version, **who}
            return Refusal(UNSUPPORTED_PROTOCOL_VERSION, f"Unsupported protocol version: {because}", data)
        data = {"requiredCapabilities": required if required is not None else {}, **who}
        message = f"Missing required client capability: {because}"
        return Refusal(MISSING_REQUIRED_CLIENT_CAPABILITY, message, data)
    metadata = {
        "refusedBy": side.value,
        "refusingPeer": refusing.peer,
        "refusingProtocol": refusing.protocol.value,
        "refusingVersion": refusing.version,
        "refusingCode": str(refusal.code),
        "refusingMessage": said,
    }
    if kind == "version":
        metadata["requestedVersion"] = leg.version
        return a2a_refusal(VERSION_NOT_SUPPORTED, f"Version not supported: {because}", metadata)
    if required is not None:
        metadata["requiredExtensions"] = required
    return a2a_refusal(EXTENSION_SUPPORT_REQUIRED, f"Extension support required: {because}", metadata)


def relay_refusal(agreement: Agreement, refusal: Refusal, *, refused_by: RefusedBy | str) -> RelayedRefusal:
    """A refusal one leg of `agreement` made, with its counterpart on the other leg.

    `refusal` is in the refusing leg's protocol: -32022 or -32021 from an MCP leg, -32009
    or -32008 from an A2A leg. The counterpart has the other leg's code for the same kind
    of refusal (a version refused, a requirement unmet) in that protocol's shape, and says
    who refused: MCP `data.refusedBy` and `data.refusing` (peer, protocol, version, code,
    message), A2A ErrorInfo metadata `refusedBy`, `refusingPeer`, `refusingProtocol`,
    `refusingVersion`, `refusingCode`, `refusingMessage`. A relayed -32022 lists no
    supported revision (`data.supported` is empty: the client's revision was never the
    problem); a relayed -32009 names the version of its own leg.

    `ValueError` for `RefusedBy.BOTH`, a protocol with no mapped refusals, or a code that
    is not one of its leg's negotiation refusals: other errors are relayed as they are.
    """
    side = RefusedBy(refused_by)
    if side is RefusedBy.BOTH:
        raise PolicyError("a refusal is made on one leg: refused_by is downstream or upstream")
    refusing, other = (
        (agreement.upstream, agreement.downstream)
        if side is RefusedBy.UPSTREAM
        else (agreement.downstream, agreement.upstream)
    )
    kind = _kind(refusing, refusal)
    _codes(other)
    relayed = _in_words_of(other, kind, refusing, side, refusal)
    if side is RefusedBy.UPSTREAM:
        return RelayedRefusal(side, downstream=relayed, upstream=refusal)
    return RelayedRefusal(side, downstream=refusal, upstream=relayed)
