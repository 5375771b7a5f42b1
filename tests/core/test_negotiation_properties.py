"""Property tests for the negotiation core: whatever a client sends, the core either agrees
on a revision the policy accepts or refuses with the specification's code and data.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types._v2026_07_28 as v2026
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st

from mcp_negotiation.core import revisions
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.errors import NegotiationRefused, Refusal
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    Negotiation,
    Negotiator,
    Policy,
    required_capabilities_object,
    supports,
)
from mcp_negotiation.core.outcome import Known
from mcp_negotiation.core.revisions import FEATURES, KNOWN, LEGACY

REFUSAL_CODES = {-32602, -32021, -32022}

# --- Strategies ----------------------------------------------------------------------------

CAPABILITY_WORDS = [
    "roots",
    "sampling",
    "elicitation",
    "tasks",
    "extensions",
    "experimental",
    "listChanged",
    "tools",
    "context",
    "form",
    "url",
    "io.x/y",
    "io.modelcontextprotocol/ui",
    "foo",
    "",
]
keys = st.sampled_from(CAPABILITY_WORDS) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)
capability_maps = st.dictionaries(keys, json_values, max_size=6)
client_infos = (
    st.fixed_dictionaries({"name": st.text(max_size=10), "version": st.text(max_size=10)}) | json_values
)

feature_names = (
    st.sampled_from(sorted(FEATURES))
    | st.sampled_from(["io.x/y", "io.modelcontextprotocol/ui", "experimental.foo", "experimental.", "/", "."])
    | st.builds(".".join, st.lists(st.sampled_from(CAPABILITY_WORDS), min_size=1, max_size=3))
    | st.text()
)
revision_strings = st.sampled_from(KNOWN) | st.text(min_size=1, max_size=70)
any_revision: st.SearchStrategy[Any] = revision_strings | json_values

BOUNDS = [(lo, hi) for lo, hi in itertools.product(KNOWN, repeat=2) if KNOWN.index(lo) <= KNOWN.index(hi)]
CLIENT_REQUIREMENTS = [*revisions.feature_names("client"), "io.x/y", "experimental.foo"]


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    low, high = draw(st.sampled_from(BOUNDS))
    try:
        return Policy(
            min_revision=draw(st.sampled_from([low, None])) if low == KNOWN[0] else low,
            max_revision=draw(st.sampled_from([high, None])) if high == KNOWN[-1] else high,
            required_capabilities=draw(
                st.just(()) | st.lists(st.sampled_from(CLIENT_REQUIREMENTS), max_size=2).map(tuple)
            ),
            advertise=draw(st.sampled_from(["modern", "all"])),
            months_since_deprecation=draw(st.sampled_from([None, 0, 11, 12, 40])),
        )
    except ValueError as contradiction:
        # A requirement no accepted revision has, or one the policy withholds, would refuse
        # every request: Policy refuses it at construction, so there is nothing to serve.
        if not str(contradiction).startswith("required_capabilities names"):
            raise
        reject()


def initialize_params() -> st.SearchStrategy[Any]:
    well_shaped = st.fixed_dictionaries(
        {"protocolVersion": any_revision, "capabilities": capability_maps | capability_maps | json_values},
        optional={"clientInfo": client_infos, "_meta": json_values},
    )
    return st.one_of(well_shaped, well_shaped, json_values)


def envelopes() -> st.SearchStrategy[Any]:
    well_shaped = st.fixed_dictionaries(
        {
            PROTOCOL_VERSION_KEY: st.just("2026-07-28") | any_revision,
            CLIENT_CAPABILITIES_KEY: capability_maps | capability_maps | json_values,
        },
        optional={CLIENT_INFO_KEY: client_infos, "traceparent": st.text(max_size=10)},
    )
    return st.one_of(well_shaped, well_shaped, json_values)


# --- Helpers -------------------------------------------------------------------------------


def check_refusal(refusal: Refusal, negotiator: Negotiator, requested: Any) -> None:
    """Refusals carry exactly the documented data, in the specification's shapes."""
    assert refusal.code in REFUSAL_CODES
    assert isinstance(refusal.message, str)
    assert refusal.message
    if refusal.code == -32602:
        assert refusal.data is None
    elif refusal.code == -32022:
        assert refusal.data is not None
        # A revision the requirements narrowed away says which ones it cannot have.
        lacking = negotiator.policy.narrowed().get(requested)
        extra = {"requiredCapabilities"} if lacking else set()
        assert set(refusal.data) == {"supported", "requested", *extra}
        if lacking:
            assert refusal.data["requiredCapabilities"] == required_capabilities_object(lacking)
        assert refusal.data["requested"] == requested
        supported = refusal.data["supported"]
        assert supported
        assert set(supported) <= set(negotiator.accepted)
        assert supported == sorted(supported, key=KNOWN.index, reverse=True)
        v2026.UnsupportedProtocolVersionError.model_validate(
            {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
        )
    else:
        assert refusal.data is not None
        assert set(refusal.data) == {"requiredCapabilities"}
        assert refusal.data["requiredCapabilities"] == required_capabilities_object(
            negotiator.policy.required_capabilities
        )
        v2026.MissingRequiredClientCapabilityError.model_validate(
            {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
        )


def attempt(call: Callable[[], Negotiation]) -> Negotiation | Refusal:
    """The record, or the refusal the core raised (anything else propagates and fails the test)."""
    try:
        return call()
    except NegotiationRefused as refused:
        return refused.refusal


def thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


# --- supports never raises --------------------------------------------------------------------


@given(
    name=feature_names,
    caps=capability_maps,
    revision=revision_strings,
    known=st.booleans(),
    withheld=st.frozensets(st.sampled_from([*revisions.DEPRECATED_FEATURES, "elicitation", "io"])),
)
def test_supports_never_raises_on_a_raw_record(
    name: str, caps: dict[str, Any], revision: str, known: bool, withheld: frozenset[str]
) -> None:
    n = Negotiation(
        era=revisions.era(revision),
        protocol_version=revision,
        requested_version=revision,
        transport="memory",
        client_capabilities=caps,
        capabilities_known=known,
        withheld=withheld,
    )
    answer = supports(n, name)
    assert isinstance(answer, bool)
    if answer:
        assert known
        assert name.split(".", 1)[0] not in withheld
        assert name not in withheld
    if revisions.era(revision) == "unknown" and "/" not in name and not name.startswith("experimental."):
        assert answer is False  # an unknown revision has no feature


@given(name=feature_names, caps=capability_maps, revision=st.sampled_from(LEGACY))
def test_supports_never_raises_through_initialize(name: str, caps: dict[str, Any], revision: str) -> None:
    n = attempt(lambda: Negotiator(Policy()).initialize({"protocolVersion": revision, "capabilities": caps}))
    if isinstance(n, Refusal):  # only for maps beyond the size limits
        assert n.code == -32602
        return
    assert isinstance(supports(n, name), bool)
    if name not in FEATURES and "/" not in name and not name.startswith("experimental."):
        assert supports(n, name) is False


@given(name=feature_names, caps=capability_maps)
def test_supports_never_raises_through_request(name: str, caps: dict[str, Any]) -> None:
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: caps}
    n = attempt(lambda: Negotiator(Policy()).request(meta))
    if isinstance(n, Refusal):
        assert n.code == -32602
        return
    assert isinstance(n.supports(name), bool)


@given(name=feature_names, caps=capability_maps, revision=st.sampled_from(KNOWN))
def test_a_supported_client_feature_exists_at_the_revision_and_was_declared(
    name: str, caps: dict[str, Any], revision: str
) -> None:
    n = Negotiation(
        era=revisions.era(revision),
        protocol_version=revision,
        requested_version=revision,
        transport="memory",
        client_capabilities=caps,
    )
    row = FEATURES.get(name)
    if row is not None and supports(n, name):
        assert revisions.feature(name, revision)
        if row.side == "client":
            assert name.split(".", 1)[0] in caps


# --- Counter-offers ---------------------------------------------------------------------------


@given(
    bounds=st.sampled_from([(lo, hi) for lo, hi in BOUNDS if lo in LEGACY]),
    requested=st.sampled_from(KNOWN) | st.text(min_size=1, max_size=64),
    caps=capability_maps,
    advertise=st.sampled_from(["modern", "all"]),
)
def test_a_counter_offer_is_always_an_accepted_legacy_revision(
    bounds: tuple[str, str], requested: str, caps: dict[str, Any], advertise: Any
) -> None:
    policy = Policy(min_revision=bounds[0], max_revision=bounds[1], advertise=advertise)
    negotiator = Negotiator(policy)
    n = attempt(
        lambda: negotiator.initialize({"protocolVersion": requested, "capabilities": caps}, transport="stdio")
    )
    if isinstance(n, Refusal):
        # Only a capability map beyond the size limits; never the revision.
        assert n.code == -32602
        return
    accepted_legacy = [r for r in policy.accepted() if revisions.era(r) == "legacy"]
    assert n.era == "legacy"
    assert n.protocol_version in accepted_legacy
    assert n.requested_version == requested
    if requested in accepted_legacy:
        assert n.outcome == "accepted"
        assert n.protocol_version == requested
    else:
        assert n.outcome == "counter_offered"
        assert n.protocol_version == accepted_legacy[-1]


# --- Arbitrary input: a Negotiation or a documented refusal, nothing else ----------------------


@settings(max_examples=300)
@given(policy=policies(), params=initialize_params())
def test_initialize_on_arbitrary_json(policy: Policy, params: Any) -> None:
    negotiator = Negotiator(policy)
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    n = attempt(lambda: negotiator.initialize(params))
    if isinstance(n, Refusal):
        check_refusal(n, negotiator, requested)
        return
    assert isinstance(n, Negotiation)
    assert n.era == "legacy"
    assert n.protocol_version in policy.accepted()
    assert n.requested_version == requested
    assert thaw(n.client_capabilities) == thaw(params["capabilities"])
    for name in policy.required_capabilities:
        assert n.supports(name)


@settings(max_examples=300)
@given(policy=policies(), meta=envelopes())
def test_request_on_arbitrary_json(policy: Policy, meta: Any) -> None:
    negotiator = Negotiator(policy)
    requested = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    n = attempt(lambda: negotiator.request(meta))
    if isinstance(n, Refusal):
        check_refusal(n, negotiator, requested)
        return
    assert isinstance(n, Negotiation)
    assert n.era == "modern"
    assert n.protocol_version == requested
    assert n.protocol_version in policy.accepted()
    assert thaw(n.client_capabilities) == thaw(meta[CLIENT_CAPABILITIES_KEY])
    engine = Engine(policy)
    served = engine.decide(PlainFacts("tools/call", {"_meta": meta}, "2026-07-28")).known
    assert served is not None
    assert served.record == n
    assert engine.decide(PlainFacts("tools/call", {"_meta": meta}, "2026-07-28")).known is served


@given(first=capability_maps, second=capability_maps)
def test_memoised_negotiations_never_cross_clients(first: dict[str, Any], second: dict[str, Any]) -> None:
    engine = Engine(Policy())

    def ask(caps: dict[str, Any]) -> Known | None:
        meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: caps}
        return engine.decide(PlainFacts("tools/call", {"_meta": meta}, "2026-07-28")).known

    a, b, a_again = ask(first), ask(second), ask(first)
    assume(a is not None and b is not None)
    assert a is not None
    assert b is not None
    assert a_again is a
    assert thaw(a.record.client_capabilities) == thaw(first)
    assert thaw(b.record.client_capabilities) == thaw(second)
    if repr(first) != repr(second):
        assert b is not a


@given(st.lists(st.sampled_from(CLIENT_REQUIREMENTS), max_size=6))
def test_required_capabilities_object_is_always_client_capabilities(names: list[str]) -> None:
    obj = required_capabilities_object(names)
    v2026.ClientCapabilities.model_validate(obj)
    for name in names:
        top = "extensions" if "/" in name else name.split(".", 1)[0]
        assert top in obj
