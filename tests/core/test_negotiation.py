"""The pure negotiation core: Negotiator (both eras), supports, refusals, the deprecation
window through a Policy (what a Policy accepts and refuses to be built with: test_policy.py).

Refusals are checked against the specification's own error models, as shipped by the SDK
(`mcp_types._v2026_07_28.UnsupportedProtocolVersionError`, ...), not only against dicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date
from types import MappingProxyType
from typing import Any

import mcp_types._v2026_07_28 as v2026
import pytest
from mcp_types import jsonrpc

from mcp_negotiation.core import errors, negotiation, revisions
from mcp_negotiation.core.bounded import MAX_ENTRY_BYTES
from mcp_negotiation.core.engine import MEMO_SIZE, Engine
from mcp_negotiation.core.errors import NegotiationRefused, Refusal
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    MAX_CAPABILITY_DEPTH,
    MAX_CAPABILITY_NODES,
    MAX_REVISION_LENGTH,
    MAX_STRING_LENGTH,
    PROTOCOL_VERSION_KEY,
    Negotiation,
    Negotiator,
    Policy,
    required_capabilities_object,
    supports,
)
from mcp_negotiation.core.outcome import Known
from mcp_negotiation.core.revisions import LEGACY
from support.harness import FakeClock

MODERN = "2026-07-28"
INFO = {"name": "test-client", "version": "1.2.3"}


def init(version: Any = "2025-11-25", caps: Any = None, info: Any = INFO) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": version, "capabilities": {} if caps is None else caps}
    if info is not None:
        params["clientInfo"] = info
    return params


def envelope(version: Any = MODERN, caps: Any = None, info: Any = INFO) -> dict[str, Any]:
    meta: dict[str, Any] = {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: {} if caps is None else caps,
    }
    if info is not None:
        meta[CLIENT_INFO_KEY] = info
    return meta


def refusal_of(call: Callable[[], object]) -> Refusal:
    with pytest.raises(NegotiationRefused) as raised:
        call()
    return raised.value.refusal


def legacy(caps: dict[str, Any], version: str = "2025-11-25", policy: Policy | None = None) -> Negotiation:
    return Negotiator(policy or Policy()).initialize(init(version, caps))


def modern(caps: dict[str, Any], policy: Policy | None = None) -> Negotiation:
    return Negotiator(policy or Policy()).request(envelope(MODERN, caps))


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"a": node}
    return node


# --- Error codes ---------------------------------------------------------------------------


def test_codes_are_the_specifications() -> None:
    assert errors.INVALID_PARAMS == jsonrpc.INVALID_PARAMS == -32602
    assert errors.METHOD_NOT_FOUND == jsonrpc.METHOD_NOT_FOUND
    assert errors.HEADER_MISMATCH == jsonrpc.HEADER_MISMATCH == -32020
    assert errors.MISSING_REQUIRED_CLIENT_CAPABILITY == jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021
    assert errors.UNSUPPORTED_PROTOCOL_VERSION == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION == -32022


def test_refusal_to_jsonrpc_error() -> None:
    assert Refusal(-32602, "bad").to_jsonrpc_error() == {"code": -32602, "message": "bad"}
    error = Refusal(-32022, "no", {"supported": ["x"], "requested": "y"}).to_jsonrpc_error()
    assert error == {"code": -32022, "message": "no", "data": {"supported": ["x"], "requested": "y"}}
    assert type(error["data"]) is dict


def test_negotiation_refused_carries_its_refusal() -> None:
    refusal = Refusal(-32021, "missing")
    exc = NegotiationRefused(refusal)
    assert exc.refusal is refusal
    assert str(exc) == "missing"


# --- Negotiator.initialize (legacy) ------------------------------------------------------------


@pytest.mark.parametrize("revision", LEGACY)
def test_initialize_accepts_an_accepted_revision(revision: str) -> None:
    n = Negotiator(Policy()).initialize(
        init(revision, {"sampling": {}}), transport="stdio", headers={"x": "y"}, session_id="s1"
    )
    assert n.outcome == "accepted"
    assert n.era == "legacy"
    assert n.protocol_version == revision
    assert n.requested_version == revision
    assert n.transport == "stdio"
    assert n.session_id == "s1"
    assert dict(n.headers) == {"x": "y"}
    assert n.capabilities_known is True
    assert n.client_name == "test-client"
    assert n.client_version == "1.2.3"


@pytest.mark.parametrize(
    ("policy", "requested", "agreed"),
    [
        (Policy(min_revision="2025-06-18"), "2024-11-05", "2025-11-25"),
        (Policy(min_revision="2025-06-18"), "2025-03-26", "2025-11-25"),
        (Policy(max_revision="2025-06-18"), "2025-11-25", "2025-06-18"),
        (Policy(max_revision="2025-03-26"), "2025-06-18", "2025-03-26"),
        (Policy(), "zzz", "2025-11-25"),
        (Policy(), "2099-01-01", "2025-11-25"),
        (Policy(), MODERN, "2025-11-25"),  # a modern revision is no initialize answer
        (Policy(min_revision="2025-03-26", max_revision="2025-06-18"), "zzz", "2025-06-18"),
    ],
)
def test_initialize_counter_offers_the_newest_accepted_legacy_revision(
    policy: Policy, requested: str, agreed: str
) -> None:
    n = Negotiator(policy).initialize(init(requested))
    assert n.outcome == "counter_offered"
    assert n.protocol_version == agreed
    assert n.requested_version == requested
    assert n.era == "legacy"
    assert n.protocol_version in policy.accepted()


@pytest.mark.parametrize("advertise", ["modern", "all"])
@pytest.mark.parametrize("requested", ["2025-06-18", "zzz", MODERN])
def test_initialize_refuses_when_no_legacy_revision_is_accepted(advertise: str, requested: str) -> None:
    policy = Policy(min_revision=MODERN, advertise=advertise)  # type: ignore[arg-type]
    refusal = refusal_of(lambda: Negotiator(policy).initialize(init(requested)))
    assert refusal.code == -32022
    assert refusal.data == {"supported": [MODERN], "requested": requested}
    v2026.UnsupportedProtocolVersionError.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
    )


MALFORMED_INIT: list[tuple[str, Any]] = [
    ("params None", None),
    ("params list", [init()]),
    ("params string", "initialize"),
    ("params int", 7),
    ("no protocolVersion", {"capabilities": {}}),
    ("protocolVersion int", init(20251125)),
    ("protocolVersion None", init(None)),
    ("protocolVersion empty", init("")),
    ("protocolVersion list", init(["2025-11-25"])),
    ("protocolVersion too long", init("2" * (MAX_REVISION_LENGTH + 1))),
    ("protocolVersion huge", init("x" * 1_000_000)),
    ("no capabilities", {"protocolVersion": "2025-11-25"}),
    ("capabilities list", init(caps=[{"sampling": {}}])),
    ("capabilities string", init(caps="sampling")),
    ("capabilities true", init(caps=True)),
    ("clientInfo list", init(info=["x"])),
    ("clientInfo string", init(info="client")),
    ("too deep", init(caps=nested(MAX_CAPABILITY_DEPTH + 1))),
    ("far too deep", init(caps=nested(50_000))),
    ("too wide", init(caps={f"k{i}": {} for i in range(MAX_CAPABILITY_NODES + 1)})),
    ("too many list items", init(caps={"x": list(range(MAX_CAPABILITY_NODES + 1))})),
    ("huge string value", init(caps={"x": "y" * (MAX_STRING_LENGTH + 1)})),
    ("huge string key", init(caps={"y" * (MAX_STRING_LENGTH + 1): {}})),
    ("int key", init(caps={1: {}})),
    ("tuple key", init(caps={("a",): {}})),
    ("nested non-string key", init(caps={"sampling": {None: {}}})),
    ("non-JSON value", init(caps={"sampling": object()})),
    ("bytes value", init(caps={"sampling": b"x"})),
    ("huge clientInfo", init(info={"name": "n" * (MAX_STRING_LENGTH + 1)})),
]


@pytest.mark.parametrize("params", [p for _, p in MALFORMED_INIT], ids=[i for i, _ in MALFORMED_INIT])
def test_initialize_refuses_malformed_params_with_invalid_params(params: Any) -> None:
    refusal = refusal_of(lambda: Negotiator(Policy()).initialize(params))
    assert refusal.code == -32602
    assert refusal.data is None
    assert refusal.message.startswith("Invalid params")
    assert len(refusal.message) < 200


def test_initialize_limits_are_inclusive() -> None:
    ng = Negotiator(Policy())
    assert ng.initialize(init("2" * MAX_REVISION_LENGTH)).outcome == "counter_offered"
    assert ng.initialize(init(caps=nested(MAX_CAPABILITY_DEPTH))).protocol_version == "2025-11-25"
    assert ng.initialize(init(caps={"x": "y" * MAX_STRING_LENGTH})).outcome == "accepted"
    wide = {f"k{i}": 1 for i in range(MAX_CAPABILITY_NODES - 1)}  # plus the map itself
    assert len(ng.initialize(init(caps=wide)).client_capabilities) == MAX_CAPABILITY_NODES - 1


def test_initialize_keeps_unknown_capability_keys_read_only() -> None:
    caps = {
        "sampling": {"tools": {}},
        "io.vendor/thing": {"x": [1, {"y": 2}]},
        "weird": True,
        "number": 1.5,
        "nothing": None,
    }
    n = Negotiator(Policy()).initialize(init(caps=caps))
    got = n.client_capabilities
    assert got["weird"] is True
    assert got["number"] == 1.5
    assert got["nothing"] is None
    assert got["io.vendor/thing"]["x"] == (1, {"y": 2})
    assert set(got) == set(caps)
    with pytest.raises(TypeError):
        got["new"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        got["sampling"]["tools"] = None
    with pytest.raises(TypeError):
        got["io.vendor/thing"]["x"][1]["y"] = 3
    with pytest.raises(TypeError):
        del got["weird"]  # type: ignore[attr-defined]


def test_initialize_copies_what_the_client_sent() -> None:
    caps: dict[str, Any] = {"sampling": {}}
    n = Negotiator(Policy()).initialize(init(caps=caps))
    caps["roots"] = {"listChanged": True}
    caps["sampling"]["tools"] = {}
    assert "roots" not in n.client_capabilities
    assert "tools" not in n.client_capabilities["sampling"]
    assert not n.supports("roots")


def test_negotiation_is_frozen() -> None:
    n = legacy({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.protocol_version = "2024-11-05"  # type: ignore[misc]


def test_client_info_is_optional_and_typed() -> None:
    n = Negotiator(Policy()).initialize(init(info=None))
    assert n.client_info is None
    assert n.client_name is None
    assert n.client_version is None
    odd = Negotiator(Policy()).initialize(init(info={"name": 3, "version": ["1"]}))
    assert odd.client_name is None
    assert odd.client_version is None


@pytest.mark.parametrize(
    ("required", "caps", "expected"),
    [
        (("sampling",), {}, {"sampling": {}}),
        (("roots.listChanged",), {"roots": {}}, {"roots": {"listChanged": True}}),
        (("roots.listChanged",), {"roots": {"listChanged": False}}, {"roots": {"listChanged": True}}),
        (("elicitation.url",), {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (("io.x/y",), {"extensions": {"io.x/z": {}}}, {"extensions": {"io.x/y": {}}}),
        (("experimental.foo",), {"experimental": {}}, {"experimental": {"foo": {}}}),
        (("sampling", "roots"), {"roots": {}}, {"sampling": {}, "roots": {}}),
    ],
)
def test_initialize_missing_required_capability(
    required: tuple[str, ...], caps: dict[str, Any], expected: dict[str, Any]
) -> None:
    policy = Policy(required_capabilities=required)
    refusal = refusal_of(lambda: Negotiator(policy).initialize(init("2025-11-25", caps)))
    assert refusal.code == -32021
    assert refusal.data == {"requiredCapabilities": expected}
    v2026.MissingRequiredClientCapabilityError.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
    )


def test_initialize_required_capability_present_is_accepted() -> None:
    policy = Policy(required_capabilities=("sampling", "roots.listChanged", "io.x/y"))
    caps = {"sampling": {}, "roots": {"listChanged": True}, "extensions": {"io.x/y": {}}}
    n = Negotiator(policy).initialize(init("2025-11-25", caps))
    assert n.outcome == "accepted"


def test_required_capability_the_revision_lacks_is_counter_offered() -> None:
    # elicitation.url does not exist at 2025-06-18: the policy does not accept that revision,
    # so its client is counter-offered one that has it (no longer accepted, then -32021).
    policy = Policy(required_capabilities=("elicitation.url",))
    caps: dict[str, Any] = {"elicitation": {"url": {}}}
    countered = Negotiator(policy).initialize(init("2025-06-18", caps))
    assert (countered.outcome, countered.protocol_version) == ("counter_offered", "2025-11-25")
    assert Negotiator(policy).initialize(init("2025-11-25", caps)).outcome == "accepted"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"months_since_deprecation": 12}, "which the policy withholds"),
        ({"withhold": "sampling"}, "which the policy withholds"),
        (
            {"max_revision": "2024-11-05", "required": "elicitation"},
            "which no accepted revision .2024-11-05 to 2024-11-05. has",
        ),
        ({"min_revision": "2026-07-28", "required": "roots.listChanged"}, "which no accepted revision"),
    ],
)
def test_a_required_capability_no_client_could_be_served_is_a_configuration_error(
    options: dict[str, Any], says: str
) -> None:
    required = options.pop("required", "sampling")
    with pytest.raises(ValueError, match=f"required_capabilities names '{required}', {says}"):
        Policy(required_capabilities=(required,), **options)


def test_required_capability_withdrawn_when_the_window_closes_later_is_missing() -> None:
    clock = FakeClock(date(2027, 7, 27))
    negotiator = Negotiator(Policy(required_capabilities=("sampling",), clock=clock))
    clock.day = date(2027, 7, 28)
    clock.seconds += negotiation.DATE_RECHECK_SECONDS
    refusal = refusal_of(lambda: negotiator.initialize(init(caps={"sampling": {}})))
    assert refusal.code == -32021
    assert refusal.data == {"requiredCapabilities": {"sampling": {}}}
    assert "withheld by the server's policy" in refusal.message


def test_a_refusal_for_a_feature_the_revision_lacks_says_so() -> None:
    negotiator = Negotiator(Policy(min_revision="2025-03-26"))
    record = negotiator.initialize(init(version="2025-03-26", caps={"elicitation": {}}))
    refusal = negotiator.missing_required(record, ("elicitation",))
    assert refusal is not None
    assert (
        refusal.message
        == "Missing required client capability: elicitation (elicitation not in revision 2025-03-26)"
    )


@pytest.mark.parametrize(
    ("revision", "expected"),
    [
        ("2025-11-25", frozenset()),
        ("2025-06-18", {"icons"}),
        ("2025-03-26", {"icons", "structured_output", "resource_links"}),
        (
            "2024-11-05",
            {
                "icons",
                "structured_output",
                "resource_links",
                "completions",
                "tool_annotations",
                "audio_content",
                "progress.message",
            },
        ),
    ],
)
def test_degraded_is_what_the_best_legacy_revision_has_and_this_one_lacks(
    revision: str, expected: set[str]
) -> None:
    assert legacy({}, revision).degraded == expected


def test_degraded_is_relative_to_the_best_accepted_revision() -> None:
    n = legacy({}, "2025-03-26", Policy(max_revision="2025-06-18"))
    assert n.degraded == {"structured_output", "resource_links"}
    assert modern({}).degraded == frozenset()


# --- Negotiator.request (modern) ---------------------------------------------------------------


def test_request_accepts_the_modern_revision() -> None:
    n = Negotiator(Policy()).request(envelope(caps={"sampling": {}}), transport="http", headers={"h": "v"})
    assert n.era == "modern"
    assert n.protocol_version == MODERN
    assert n.requested_version == MODERN
    assert n.outcome == "accepted"
    assert n.transport == "http"
    assert dict(n.headers) == {"h": "v"}
    assert n.client_name == "test-client"
    assert n.session_id is None
    assert n.supports("sampling")


@pytest.mark.parametrize(
    ("policy", "supported"),
    [
        (Policy(), [MODERN]),
        (Policy(advertise="all"), [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]),
        (Policy(advertise="all", min_revision="2025-06-18"), [MODERN, "2025-11-25", "2025-06-18"]),
        (Policy(min_revision="2025-06-18"), [MODERN]),
    ],
)
@pytest.mark.parametrize("requested", ["zzz", "2099-01-01", "2025-11-25", "2024-11-05"])
def test_request_refuses_unsupported_revisions(policy: Policy, supported: list[str], requested: str) -> None:
    refusal = refusal_of(lambda: Negotiator(policy).request(envelope(requested)))
    assert refusal.code == -32022
    assert refusal.data == {"supported": supported, "requested": requested}
    v2026.UnsupportedProtocolVersionError.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
    )


def test_request_on_a_legacy_only_server_lists_its_legacy_revisions() -> None:
    # Nothing modern is accepted, so "modern" advertising falls back to what is accepted.
    policy = Policy(min_revision="2025-06-18", max_revision="2025-11-25")
    refusal = refusal_of(lambda: Negotiator(policy).request(envelope(MODERN)))
    assert refusal.code == -32022
    assert refusal.data == {"supported": ["2025-11-25", "2025-06-18"], "requested": MODERN}


def test_supported_advertised_is_newest_first() -> None:
    assert Negotiator(Policy(advertise="all")).supported_advertised == list(revisions.all())
    assert Negotiator(Policy()).supported_advertised == [MODERN]


MALFORMED_META: list[tuple[str, Any]] = [
    ("meta None", None),
    ("meta list", [envelope()]),
    ("meta string", MODERN),
    ("no version", {CLIENT_CAPABILITIES_KEY: {}}),
    ("version int", envelope(20260728)),
    ("version empty", envelope("")),
    ("version too long", envelope("z" * (MAX_REVISION_LENGTH + 1))),
    ("no capabilities", {PROTOCOL_VERSION_KEY: MODERN}),
    ("capabilities list", envelope(caps=[])),
    ("capabilities string", envelope(caps="all")),
    ("info list", envelope(info=[1])),
    ("too deep", envelope(caps=nested(MAX_CAPABILITY_DEPTH + 1))),
    ("far too deep", envelope(caps=nested(100_000))),
    ("too wide", envelope(caps={str(i): {} for i in range(MAX_CAPABILITY_NODES + 1)})),
    ("huge string", envelope(caps={"x": "y" * (MAX_STRING_LENGTH + 1)})),
    ("non-string key", envelope(caps={1.5: {}})),
    ("unprintable integer", envelope(caps={"x": 10**5000})),
]


@pytest.mark.parametrize("meta", [m for _, m in MALFORMED_META], ids=[i for i, _ in MALFORMED_META])
def test_request_refuses_malformed_meta_with_invalid_params(meta: Any) -> None:
    refusal = refusal_of(lambda: Negotiator(Policy()).request(meta))
    assert refusal.code == -32602
    assert refusal.data is None


def test_request_checks_the_version_before_the_revision_gate() -> None:
    # A malformed version is a malformed request, not an unsupported revision.
    assert refusal_of(lambda: Negotiator(Policy()).request(envelope(None))).code == -32602


def test_identical_envelopes_are_served_the_same_negotiation() -> None:
    engine = Engine(Policy())
    first = _served(engine, envelope(caps={"sampling": {"tools": {}}}))
    second = _served(engine, envelope(caps={"sampling": {"tools": {}}}))  # equal, not the same dict
    assert second is first


@pytest.mark.parametrize(
    "other",
    [
        {"caps": {"roots": {}}},
        {"caps": {"sampling": {"tools": {}, "context": {}}}},
        {"info": {"name": "other-client", "version": "1"}},
        {"info": None},
    ],
)
def test_different_envelopes_do_not_cross(other: dict[str, Any]) -> None:
    engine = Engine(Policy())
    mine = _served(engine, envelope(caps={"sampling": {"tools": {}}}))
    theirs = _served(engine, envelope(**{"caps": {"sampling": {"tools": {}}}, **other}))
    assert theirs is not mine
    assert mine.record.supports("sampling.tools")
    assert dict(mine.record.client_info or {}) == INFO
    assert _served(engine, envelope(caps={"sampling": {"tools": {}}})) is mine


def test_cache_separates_transports_and_headers() -> None:
    ng = Negotiator(Policy())
    a = ng.request(envelope(), transport="http", headers={"ucp-agent": 'profile="https://a"'})
    b = ng.request(envelope(), transport="http", headers={"ucp-agent": 'profile="https://b"'})
    c = ng.request(envelope(), transport="stdio")
    assert len({id(a), id(b), id(c)}) == 3
    assert b.headers["ucp-agent"] == 'profile="https://b"'
    assert c.transport == "stdio"


def test_cache_does_not_confuse_true_with_one() -> None:
    ng = Negotiator(Policy())
    as_true = ng.request(envelope(caps={"experimental": {"x": True}}))
    as_one = ng.request(envelope(caps={"experimental": {"x": 1}}))
    assert as_true.supports("experimental.x")
    assert not as_one.supports("experimental.x")


def _served(engine: Engine, meta: Any, transport: Any = "memory", headers: Any = None) -> Known:
    """The `Known` the engine serves a modern request carrying `meta` with (memoised by content)."""
    facts = PlainFacts("tools/call", {"_meta": meta}, MODERN, transport=transport, headers=headers or {})
    known = engine.decide(facts).known
    assert known is not None
    return known


def test_refusals_are_not_memoised() -> None:
    engine = Engine(Policy())
    for _ in range(3):
        outcome = engine.decide(PlainFacts("tools/call", {"_meta": envelope("zzz")}, MODERN))
        assert outcome.refusal is not None
        assert outcome.refusal.code == -32022
    assert len(engine.memo) == 0


def test_the_memo_is_bounded() -> None:
    engine = Engine(Policy())
    first = _served(engine, envelope(caps={"experimental": {"n": 0}}))
    for i in range(1, MEMO_SIZE + 1):
        _served(engine, envelope(caps={"experimental": {"n": i}}))
    assert len(engine.memo) == MEMO_SIZE
    again = _served(engine, envelope(caps={"experimental": {"n": 0}}))
    assert again is not first
    assert again.record == first.record


def test_large_envelopes_are_negotiated_but_not_memoised() -> None:
    caps = {f"k{i}": "v" * MAX_STRING_LENGTH for i in range(20)}  # ~80 kB of text
    engine = Engine(Policy())
    first = _served(engine, envelope(caps=caps))
    second = _served(engine, envelope(caps=caps))
    assert first.record == second.record
    assert first is not second
    assert not engine.memo


def test_the_memo_tells_apart_what_json_tells_apart() -> None:
    engine = Engine(Policy())
    known = [
        _served(engine, envelope(caps={"experimental": {"x": value}}))
        for value in (1, True, 1.0, "1", [1], None, {"1": 1})
    ]
    assert len({id(k) for k in known}) == len(known)
    values = [negotiation.thaw(k.record.client_capabilities)["experimental"]["x"] for k in known]
    assert values == [1, True, 1.0, "1", [1], None, {"1": 1}]
    assert [type(v) for v in values] == [int, bool, float, str, list, type(None), dict]
    assert _served(engine, envelope(caps={"experimental": {"x": True}})) is known[1]


def test_mappings_that_are_not_dicts_are_negotiated_but_not_memoised() -> None:
    caps = MappingProxyType({"sampling": MappingProxyType({})})
    engine = Engine(Policy())
    first = _served(engine, envelope(caps=caps))
    assert first.record.supports("sampling")
    assert _served(engine, envelope(caps=caps)) is not first
    assert not engine.memo


def test_request_required_capabilities_apply_to_cached_records() -> None:
    ng = Negotiator(Policy(required_capabilities=("sampling",)))
    for _ in range(2):
        refusal = refusal_of(lambda: ng.request(envelope(caps={"roots": {}})))
        assert refusal.code == -32021
        assert refusal.data == {"requiredCapabilities": {"sampling": {}}}
    unchecked = ng.request(envelope(caps={"roots": {}}), check_required=False)
    assert unchecked.era == "modern"
    assert ng.request(envelope(caps={"sampling": {}})).supports("sampling")


def test_request_requires_extension_capability() -> None:
    ng = Negotiator(Policy(required_capabilities=("io.modelcontextprotocol/ui",)))
    refusal = refusal_of(lambda: ng.request(envelope(caps={})))
    assert refusal.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/ui": {}}}}
    n = ng.request(envelope(caps={"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["x"]}}}))
    assert n.supports("io.modelcontextprotocol/ui")


# --- without_session ----------------------------------------------------------------------------


def test_without_session_knows_no_capabilities() -> None:
    n = Negotiator(Policy()).without_session("2025-06-18", transport="http")
    assert n.capabilities_known is False
    assert n.era == "legacy"
    assert n.protocol_version == "2025-06-18"
    assert n.outcome == "accepted"
    for name in [*revisions.FEATURES, "io.x/y", "experimental.x", "nope"]:
        assert n.supports(name) is False, name


def test_a_missing_capability_says_why_when_the_client_may_have_declared_it() -> None:
    ng = Negotiator(Policy(withhold=frozenset({"elicitation"})))
    unknown = ng.without_session("2025-06-18", transport="http")
    refusal = ng.missing_required(unknown, ["sampling"])
    assert refusal is not None
    assert refusal.message == (
        "Missing required client capability: sampling"
        " (its capabilities are unknown: no handshake is known for this request)"
    )
    declared = ng.initialize(init(caps={"sampling": {}, "elicitation": {}}))
    refusal = ng.missing_required(declared, ["sampling", "elicitation.form", "roots"])
    assert refusal is not None
    assert refusal.message == (
        "Missing required client capability: elicitation.form, roots"
        " (elicitation.form withheld by the server's policy)"
    )
    assert ng.missing_required(declared, ["sampling"]) is None
    refusal = ng.missing_required(declared, ["roots"])
    assert refusal is not None
    assert refusal.message == "Missing required client capability: roots"


def test_requests_without_a_session_repeated_are_the_same_negotiation() -> None:
    engine = Engine(Policy())
    agent = {"ucp-agent": 'profile="https://p.example/a.json"'}

    def served(revision: str, headers: Any) -> Known:
        known = engine.decide(PlainFacts("tools/list", {}, revision, transport="http", headers=headers)).known
        assert known is not None
        return known

    first = served("2025-06-18", agent)
    assert served("2025-06-18", dict(agent)) is first
    assert served("2025-11-25", agent) is not first
    other = served("2025-06-18", {"ucp-agent": 'profile="b"'})
    assert other is not first
    assert other.record.headers == {"ucp-agent": 'profile="b"'}


def test_negotiations_made_with_huge_headers_are_not_memoised() -> None:
    huge = {"ucp-agent": "x" * MAX_ENTRY_BYTES}
    engine = Engine(Policy())
    first = engine.decide(PlainFacts("tools/list", {}, "2025-06-18", transport="http", headers=huge)).known
    again = engine.decide(PlainFacts("tools/list", {}, "2025-06-18", transport="http", headers=huge)).known
    assert first is not None
    assert again is not first
    modern = _served(engine, envelope(), transport="http", headers=huge)
    assert _served(engine, envelope(), transport="http", headers=huge) is not modern
    assert not engine.memo


@pytest.mark.parametrize("revision", ["zzz", "2025-03-26", "2025-11-25"])
def test_without_session_refuses_a_revision_the_policy_does_not_accept(revision: str) -> None:
    """No handshake to counter-offer in: served at that revision, the record would lie."""
    negotiator = Negotiator(Policy(min_revision="2025-06-18", max_revision="2025-06-18"))
    refusal = refusal_of(lambda: negotiator.without_session(revision, transport="http"))
    assert refusal.code == -32022
    assert refusal.data == {"supported": ["2025-06-18"], "requested": revision}
    served = negotiator.without_session("2025-06-18", transport="http")
    assert (served.protocol_version, served.requested_version, served.outcome) == (
        "2025-06-18",
        "2025-06-18",
        "accepted",
    )
    # A ping is served at any revision; off HTTP (a ping before `initialize`) the record
    # names the counter-offer the handshake would make.
    for anything in (
        negotiator.without_session(revision, transport="http", any_revision=True),
        negotiator.without_session(revision, transport="stdio"),
    ):
        assert (anything.protocol_version, anything.outcome) == ("2025-06-18", "counter_offered")
    # The ping's record, memoised, must not let the next request at that revision through.
    engine = Engine(Policy(min_revision="2025-06-18", max_revision="2025-06-18"))
    assert engine.decide(PlainFacts("ping", {}, revision, transport="http")).action == "serve"
    refused = engine.decide(PlainFacts("tools/list", {}, revision, transport="http")).refusal
    assert refused is not None
    assert refused.code == -32022


def test_a_ping_without_a_session_under_a_modern_only_policy_is_not_labelled_legacy() -> None:
    record = Negotiator(Policy(min_revision="2026-07-28")).without_session(
        "2025-11-25", transport="http", any_revision=True
    )
    assert (record.era, record.protocol_version) == ("modern", "2026-07-28")


def test_a_stateless_legacy_request_refused_is_told_the_legacy_revisions_it_could_use() -> None:
    negotiator = Negotiator(Policy(min_revision="2025-06-18"))
    with pytest.raises(NegotiationRefused) as refused:
        negotiator.without_session("2025-03-26", transport="http")
    assert refused.value.refusal.data == {
        "supported": ["2025-11-25", "2025-06-18"],
        "requested": "2025-03-26",
    }
    modern_only = Negotiator(Policy(min_revision="2026-07-28"))
    with pytest.raises(NegotiationRefused) as nothing_legacy:
        modern_only.without_session("2025-11-25", transport="http")
    assert nothing_legacy.value.refusal.data["supported"] == ["2026-07-28"]  # the advertised, then


# --- supports --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "name", "revision", "expected"),
    [
        ({"sampling": {"tools": {}}}, "sampling.tools", "2025-11-25", True),
        ({"sampling": {"tools": {}}}, "sampling.tools", "2025-06-18", False),  # revision lacks it
        ({"sampling": {"tools": {}}}, "sampling.context", "2025-11-25", False),  # not declared
        ({"sampling": {}}, "sampling", "2024-11-05", True),
        ({"sampling": {}}, "sampling.tools", "2025-11-25", False),
        ({"roots": {"listChanged": True}}, "roots.listChanged", "2025-11-25", True),
        ({"roots": {"listChanged": False}}, "roots.listChanged", "2025-11-25", False),
        ({"roots": {}}, "roots.listChanged", "2025-11-25", False),
        ({"roots": {}}, "roots", "2025-11-25", True),
        ({"roots": True}, "roots.listChanged", "2025-11-25", False),
        ({"elicitation": {}}, "elicitation", "2025-11-25", True),
        ({"elicitation": {}}, "elicitation.form", "2025-11-25", True),  # empty object = form
        ({"elicitation": {}}, "elicitation.url", "2025-11-25", False),
        ({"elicitation": {"url": {}}}, "elicitation.form", "2025-11-25", False),
        ({"elicitation": {"url": {}}}, "elicitation.url", "2025-11-25", True),
        ({"elicitation": {"form": {}}}, "elicitation.url", "2025-11-25", False),
        ({"elicitation": {"form": {}, "url": {}}}, "elicitation.form", "2025-11-25", True),
        ({"elicitation": {}}, "elicitation.form", "2025-06-18", True),
        ({"elicitation": {"url": {}}}, "elicitation.url", "2025-06-18", False),
        ({"elicitation": {}}, "elicitation", "2025-03-26", False),  # before elicitation existed
        ({"elicitation": "yes"}, "elicitation.form", "2025-11-25", False),
        ({"tasks": {"requests": {}}}, "tasks", "2025-11-25", True),
        ({"tasks": {}}, "tasks", "2025-06-18", False),
        ({"experimental": {"foo": {}}}, "experimental.foo", "2025-11-25", True),
        ({"experimental": {"foo": {}}}, "experimental.bar", "2025-11-25", False),
        ({"experimental": {"foo": {}}}, "experimental", "2025-11-25", True),
        ({"experimental": {"a.b": {}}}, "experimental.a.b", "2025-11-25", True),
        ({"experimental": []}, "experimental.foo", "2025-11-25", False),
        ({}, "structured_output", "2025-06-18", True),  # server-side row: the revision decides
        ({}, "structured_output", "2025-03-26", False),
        ({}, "batching", "2025-03-26", True),
        ({}, "logging.setLevel", "2025-11-25", True),
        ({"sampling": {}}, "nope", "2025-11-25", False),
        ({"sampling": {}}, "", "2025-11-25", False),
        ({"sampling": {}}, "sampling.", "2025-11-25", False),
        ({"sampling": {"foo": {}}}, "sampling.foo", "2025-11-25", False),
        ({"roots": {"listChanged": True}}, "roots.listChanged.x", "2025-11-25", False),
        ({"extensions": {"io.x/y": {}}}, "io.x/y", "2025-11-25", True),  # extensions negotiate themselves
    ],
)
def test_supports_legacy(caps: dict[str, Any], name: str, revision: str, expected: bool) -> None:
    assert supports(legacy(caps, revision), name) is expected


@pytest.mark.parametrize(
    ("caps", "name", "expected"),
    [
        ({"extensions": {"io.modelcontextprotocol/ui": {}}}, "io.modelcontextprotocol/ui", True),
        ({"extensions": {"io.modelcontextprotocol/ui": {}}}, "io.modelcontextprotocol/tasks", False),
        ({"extensions": {"io.modelcontextprotocol/ui": {}}}, "extensions", True),
        ({"extensions": {"io.x/y": None}}, "io.x/y", False),
        ({"extensions": ["io.x/y"]}, "io.x/y", False),
        ({}, "io.x/y", False),
        ({"roots": {"listChanged": True}}, "roots.listChanged", False),  # gone in 2026-07-28
        ({"roots": {}}, "roots", True),
        ({"tasks": {}}, "tasks", False),  # an extension now, not a capability
        ({"sampling": {"tools": {}}}, "sampling.tools", True),
        ({"elicitation": {}}, "elicitation.form", True),
        ({}, "logging.setLevel", False),
        ({}, "resources.subscribe", False),
        ({}, "subscriptions.listen", True),
        ({}, "server.discover", True),
        ({}, "sessions", False),
    ],
)
def test_supports_modern(caps: dict[str, Any], name: str, expected: bool) -> None:
    assert supports(modern(caps), name) is expected


@pytest.mark.parametrize("name", [None, 1, ["sampling"], b"sampling"])
def test_supports_non_string_names_are_false(name: Any) -> None:
    assert supports(legacy({"sampling": {}}), name) is False


def test_negotiation_supports_is_the_function() -> None:
    n = legacy({"sampling": {}, "elicitation": {}})
    for name in ["sampling", "elicitation.url", "elicitation.form", "roots", "nope"]:
        assert n.supports(name) is supports(n, name)


# --- The deprecation window through a Policy ---------------------------------------------------

ALL_DEPRECATED = {"roots": {"listChanged": True}, "sampling": {"tools": {}}, "elicitation": {}}


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
def test_closed_window_withdraws_roots_sampling_logging(revision: str) -> None:
    n = legacy(ALL_DEPRECATED, revision, Policy(months_since_deprecation=12))
    assert n.withheld == revisions.DEPRECATED_FEATURES
    for name in ("sampling", "roots", "roots.listChanged", "logging", "logging.setLevel"):
        assert supports(n, name) is False, name
    assert supports(n, "elicitation") is True


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
def test_open_window_serves_roots_sampling_logging(revision: str) -> None:
    n = legacy(ALL_DEPRECATED, revision, Policy(months_since_deprecation=0))
    assert n.withheld == frozenset()
    for name in ("sampling", "roots", "roots.listChanged", "logging", "logging.setLevel", "elicitation"):
        assert supports(n, name) is True, name


def test_closed_window_applies_to_modern_requests() -> None:
    n = modern({"sampling": {}, "roots": {}}, Policy(months_since_deprecation=12))
    assert not n.supports("sampling")
    assert not n.supports("roots")
    assert modern({"sampling": {}}, Policy(months_since_deprecation=11)).supports("sampling")


@pytest.mark.parametrize(("today", "expected"), [(date(2027, 7, 27), True), (date(2027, 7, 28), False)])
def test_window_by_today(today: date, expected: bool) -> None:
    assert legacy({"sampling": {}}, policy=Policy(today=today)).supports("sampling") is expected


def test_withhold_withdraws_a_feature_and_its_sub_features() -> None:
    n = legacy(
        {"elicitation": {"url": {}}, "sampling": {}}, policy=Policy(withhold=frozenset({"elicitation"}))
    )
    assert not n.supports("elicitation")
    assert not n.supports("elicitation.url")
    assert n.supports("sampling")
    assert n.withheld >= {"elicitation"}


def test_withholding_extensions_withholds_every_extension() -> None:
    policy = Policy(withhold="extensions")
    record = Negotiator(policy).initialize(
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {"io.modelcontextprotocol/ui": {}}, "experimental": {"x": {}}},
            "clientInfo": {"name": "c", "version": "1"},
        }
    )
    assert not supports(record, "io.modelcontextprotocol/ui")
    assert supports(record, "experimental.x")


def test_unpinned_clock_closes_the_window_on_a_running_negotiator() -> None:
    clock = FakeClock(date(2027, 7, 27))
    engine = Engine(Policy(clock=clock))
    ng = engine.negotiator
    before = _served(engine, envelope(caps={"sampling": {}}))
    assert before.record.supports("sampling")
    assert ng.initialize(init(caps={"sampling": {}})).supports("sampling")
    clock.day = date(2027, 7, 28)
    clock.seconds += negotiation.DATE_RECHECK_SECONDS - 1
    # Within the minute the clock is not read again: the window is still open.
    assert _served(engine, envelope(caps={"sampling": {}})) is before
    clock.seconds += 1
    after = _served(engine, envelope(caps={"sampling": {}}))
    assert after is not before
    assert not after.record.supports("sampling")
    assert not ng.initialize(init(caps={"sampling": {}})).supports("sampling")
    assert ng.withdrawn == revisions.DEPRECATED_FEATURES


def test_pinned_clock_ignores_the_wall_clock() -> None:
    late = FakeClock(date(2040, 1, 1))
    sampling = {"sampling": {}}
    assert legacy(sampling, policy=Policy(months_since_deprecation=3, clock=late)).supports("sampling")
    assert legacy(sampling, policy=Policy(today=date(2027, 1, 1), clock=late)).supports("sampling")
    assert not legacy(sampling, policy=Policy(clock=late)).supports("sampling")


def test_a_clock_without_today_and_monotonic_is_refused_when_the_policy_is_built() -> None:
    with pytest.raises(TypeError, match=r"clock must have today\(\) and monotonic\(\)"):
        Policy(clock=date(2027, 1, 1))  # type: ignore[arg-type]


# --- required_capabilities_object and missing_required -------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["sampling"], {"sampling": {}}),
        (["roots.listChanged"], {"roots": {"listChanged": True}}),
        (["roots", "roots.listChanged"], {"roots": {"listChanged": True}}),
        (["roots.listChanged", "roots"], {"roots": {"listChanged": True}}),
        (["io.x/y"], {"extensions": {"io.x/y": {}}}),
        (["io.x/y", "io.x/z"], {"extensions": {"io.x/y": {}, "io.x/z": {}}}),
        (["elicitation.form", "elicitation.url"], {"elicitation": {"form": {}, "url": {}}}),
        (["sampling.tools", "sampling"], {"sampling": {"tools": {}}}),
        (["experimental.a.b"], {"experimental": {"a.b": {}}}),
        ([], {}),
    ],
)
def test_required_capabilities_object(names: list[str], expected: dict[str, Any]) -> None:
    got = required_capabilities_object(names)
    assert got == expected
    v2026.ClientCapabilities.model_validate(got)


def test_missing_required() -> None:
    ng = Negotiator(Policy())
    n = legacy({"sampling": {}})
    assert ng.missing_required(n, ["sampling"]) is None
    assert ng.missing_required(n, []) is None
    refusal = ng.missing_required(n, ["sampling", "roots.listChanged"])
    assert refusal is not None
    assert refusal.code == -32021
    assert "roots.listChanged" in refusal.message
    assert "sampling" not in refusal.message
    assert refusal.data == {"requiredCapabilities": {"sampling": {}, "roots": {"listChanged": True}}}
