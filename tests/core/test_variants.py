"""The call rule and tool variants as the core decides them (`core.variants`, and the
variant-aware `core.listings.catalogued`), with no SDK: plain facts, plain listings."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation import Policy
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.listings import REQUIRED_CAPABILITIES_META_KEY as KEY
from mcp_negotiation.core.listings import catalogued
from mcp_negotiation.core.negotiation import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from mcp_negotiation.core.outcome import Known
from mcp_negotiation.core.variants import (
    CAPABILITY_SCOPE_META_KEY,
    GATES,
    Implementation,
    Served,
    VariantOf,
    call_decision,
    choose,
    scope_fingerprint,
)

RESEARCH = Served(
    Implementation("research"),
    (
        Implementation("ask_model", ("sampling",), VariantOf("research", when="sampling")),
        Implementation("lookup", (), VariantOf("research", unless="elicitation")),
    ),
)
SUMMARIZE = Served(
    Implementation("summarize", ("sampling",)), (Implementation("local", (), VariantOf("summarize")),)
)
TOOLS = {
    "research": RESEARCH,
    "summarize": SUMMARIZE,
    "ask_model": Served(RESEARCH.variants[0]),
    "lookup": Served(RESEARCH.variants[1]),
    "gated": Served(Implementation("gated", ("roots",))),
}


@pytest.fixture(autouse=True)
def gated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GATES, "any", True)


def known(caps: dict[str, Any], policy: Policy | None = None) -> Known:
    outcome = Engine(policy or Policy()).decide(call("echo", caps))
    assert outcome.known is not None
    return outcome.known


def call(name: str, caps: dict[str, Any], arguments: Any = None) -> PlainFacts:
    params = {"name": name, "arguments": arguments or {}}
    envelope = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: caps}
    return PlainFacts("tools/call", {**params, "_meta": envelope}, "2026-07-28", transport="memory")


@pytest.mark.parametrize(
    ("caps", "chosen"),
    [
        ({}, "lookup"),
        ({"elicitation": {}}, "research"),
        ({"sampling": {}}, "ask_model"),  # the first whose condition holds, in the server's order
        ({"sampling": {}, "elicitation": {}}, "ask_model"),
    ],
)
def test_the_first_variant_whose_condition_holds_is_chosen(caps: dict[str, Any], chosen: str) -> None:
    assert choose(RESEARCH, known(caps).record).key == chosen


def test_without_a_record_the_base_serves() -> None:
    assert choose(RESEARCH, None) is RESEARCH.tool


def test_a_variant_without_a_condition_is_the_fallback_of_a_base_the_client_cannot_use() -> None:
    assert choose(SUMMARIZE, known({}).record).key == "local"
    assert choose(SUMMARIZE, known({"sampling": {}}).record).key == "summarize"
    # Withdrawn by the policy, declared or not: the fallback, as `client_supports` says no.
    assert choose(SUMMARIZE, known({"sampling": {}}, Policy(withhold=("sampling",))).record).key == "local"


def test_the_call_rule() -> None:
    plain = known({})
    assert call_decision(plain, "research", TOOLS.get) == "lookup"
    assert call_decision(known({"elicitation": {}}), "research", TOOLS.get) is None  # served as named
    assert call_decision(plain, "echo", TOOLS.get) is None  # nothing the library knows: the SDK's
    unknown = call_decision(plain, "lookup", TOOLS.get)
    assert not isinstance(unknown, str)
    assert unknown is not None
    assert (unknown.code, unknown.message) == (-32602, "Unknown tool: lookup")
    refused = call_decision(plain, "gated", TOOLS.get)
    assert not isinstance(refused, str)
    assert refused is not None
    assert (refused.code, refused.data) == (-32021, {"requiredCapabilities": {"roots": {}}})


def test_the_engine_decides_a_call_before_anything_reads_its_arguments() -> None:
    engine = Engine(Policy(), tools=TOOLS.get)
    refused = engine.decide(call("gated", {}, arguments={"not": "its schema"}))
    dispatched = engine.decide(call("research", {}))
    again = engine.decide(call("research", {}))
    served = engine.decide(call("research", {"elicitation": {}}))
    assert refused.action == "refuse"
    assert refused.refusal is not None
    assert refused.refusal.code == -32021
    # The tool's answer, not a refused negotiation: the negotiation is traced as made.
    assert (refused.trace, refused.known is not None) == ("negotiated", True)
    assert (dispatched.action, dispatched.dispatch) == ("serve", "lookup")
    assert again.dispatch == "lookup"  # a repeat served from the memo is dispatched the same
    assert (served.action, served.dispatch) == ("serve", None)


def test_no_gate_anywhere_no_look(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GATES, "any", False)
    looked: list[str] = []

    def lookup(name: str) -> Served | None:
        looked.append(name)
        return TOOLS.get(name)

    assert Engine(Policy(), tools=lookup).decide(call("gated", {})).action == "serve"
    assert looked == []


def test_the_fingerprint_is_the_view_in_any_order_and_short() -> None:
    one = scope_fingerprint({"sampling": True, "elicitation": False})
    assert one == scope_fingerprint({"elicitation": False, "sampling": True})
    assert one != scope_fingerprint({"sampling": False, "elicitation": False})
    assert one != scope_fingerprint({"sampling": True})
    assert len(one) == 16
    assert set(one) <= set("0123456789abcdef")


def _entry(name: str, *properties: str, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in properties}}
    return {"name": name, "inputSchema": schema, **extra}


LISTING = {
    "tools": [
        _entry("research", "topic", title="Research"),
        _entry("echo", "text"),
        _entry("ask_model", "prompt"),
        _entry("lookup", "query", title="Lookup"),
    ]
}


def test_a_listing_shows_each_client_the_variant_it_is_served() -> None:
    plain = catalogued("tools/list", LISTING, TOOLS.get, known({}))
    sampling = catalogued("tools/list", LISTING, TOOLS.get, known({"sampling": {}}))
    full = catalogued("tools/list", LISTING, TOOLS.get, known({"elicitation": {}}))
    assert plain["tools"] == [_entry("research", "query", title="Research"), LISTING["tools"][1]]
    # The variant's entry (what it takes, and declares) under the base's name and title.
    declared = {"_meta": {KEY: {"sampling": {}}}}
    assert sampling["tools"][0] == {**_entry("research", "prompt", title="Research"), **declared}
    assert full["tools"] == LISTING["tools"][:2]
    scopes = {listing["_meta"][CAPABILITY_SCOPE_META_KEY] for listing in (plain, sampling, full)}
    assert len(scopes) == 3
    assert plain["_meta"][CAPABILITY_SCOPE_META_KEY] == scope_fingerprint(
        {"sampling": False, "elicitation": False}
    )


def test_a_variant_whose_entry_is_not_found_leaves_the_base_listed() -> None:
    page = {"tools": [_entry("research", "topic")], "cacheScope": "public"}
    listed = catalogued("tools/list", page, TOOLS.get, known({}))
    assert listed["tools"] == page["tools"]
    assert listed["cacheScope"] == "private"  # it still depended on the client
    elsewhere = {"lookup": _entry("lookup", "query")}
    found = catalogued("tools/list", page, TOOLS.get, known({}), elsewhere=elsewhere)
    assert found["tools"] == [_entry("research", "query")]


def test_a_listing_made_without_a_negotiation_lists_the_bases_unfingerprinted() -> None:
    listed = catalogued("tools/list", LISTING, TOOLS.get, None)
    assert listed["tools"] == LISTING["tools"][:2]
    assert "_meta" not in listed
