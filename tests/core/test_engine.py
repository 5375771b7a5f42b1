"""The per-message engine with plain values: no SDK, no transport, every decision it makes.

Both SDK adapters apply these decisions; the end-to-end suites prove they do. Here each
rule is pinned where it is made, so a change to one shows up as a failing decision.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation import Policy
from mcp_negotiation.core.bounded import MAX_ENTRY_BYTES
from mcp_negotiation.core.engine import Engine, Inbound
from mcp_negotiation.core.errors import Refusal
from mcp_negotiation.core.negotiation import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY
from mcp_negotiation.ucp import StaticResolver, UcpPolicy

MODERN = "2026-07-28"


def envelope(caps: Any = None, version: str = MODERN) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: {} if caps is None else caps,
        CLIENT_INFO_KEY: {"name": "c", "version": "1"},
    }


def message(method: str, params: Any = None, revision: str = MODERN, **facts: Any) -> Inbound:
    return Inbound(
        method=method, params=params or {}, revision=revision, transport="memory", headers={}, **facts
    )


def handshake(engine: Engine, caps: Any = None, version: str = "2025-06-18", held: Any = None) -> Any:
    params = {
        "protocolVersion": version,
        "capabilities": caps or {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    return engine.decide(message("initialize", params, revision="2025-11-25", held=held))


def test_a_modern_request_is_served_from_its_own_envelope_and_traced() -> None:
    engine = Engine(Policy())
    decision = engine.decide(message("tools/list", {"_meta": envelope({"sampling": {}})}))
    assert decision.action == "serve"
    assert decision.record is not None
    assert decision.record.supports("sampling")
    assert decision.trace
    assert decision.judged
    assert decision.repeat is decision.record  # a repeat of it may publish the same record


def test_a_modern_request_without_its_envelope_is_refused_and_traced() -> None:
    decision = Engine(Policy()).decide(message("tools/list", {}))
    assert decision.action == "refuse"
    assert decision.refusal is not None
    assert decision.refusal.code == -32602
    assert decision.trace
    assert decision.hold is None


def test_a_modern_initialize_passes_to_the_sdk_unjudged() -> None:
    decision = Engine(Policy()).decide(message("initialize", {}))
    assert decision.action == "pass"
    assert not decision.judged


def test_a_legacy_handshake_is_served_and_kept_after_the_sdk_answers() -> None:
    engine = Engine(Policy(min_revision="2025-06-18"))
    decision = handshake(engine, {"sampling": {}}, version="2024-11-05")
    assert decision.action == "serve"
    assert decision.handshake
    assert not decision.trace
    record = decision.record
    assert record is not None
    assert record.protocol_version == "2025-11-25"  # the counter-offer the SDK must answer
    held = engine.handshaken(record, {}, record.protocol_version)
    assert held.record is record


def test_a_refused_handshake_is_held_so_later_requests_are_refused_too() -> None:
    engine = Engine(Policy(required_capabilities=("sampling",)))
    refused = handshake(engine)
    assert refused.action == "refuse"
    assert isinstance(refused.hold, Refusal)
    later = engine.decide(message("tools/list", revision="2025-11-25", held=refused.hold))
    assert later.action == "refuse"
    assert later.refusal == refused.hold
    ping = engine.decide(message("ping", revision="2025-11-25", held=refused.hold))
    assert ping.action != "refuse"  # a ping still answers


def test_a_refused_reinitialize_leaves_the_accepted_handshake_in_force() -> None:
    engine = Engine(Policy(required_capabilities=("sampling",)))
    accepted = handshake(engine, {"sampling": {}})
    assert accepted.record is not None
    again = handshake(engine, {}, held=accepted.record)
    assert again.action == "refuse"
    assert again.hold is None  # the connection keeps its accepted record
    later = engine.decide(message("tools/list", revision="2025-06-18", held=accepted.record))
    assert later.action == "serve"
    assert later.record is accepted.record


def test_a_legacy_request_without_a_session_is_served_with_capabilities_unknown() -> None:
    decision = Engine(Policy()).decide(message("tools/list", revision="2025-06-18"))
    assert decision.action == "serve"
    assert decision.record is not None
    assert not decision.record.capabilities_known
    assert decision.trace  # each such request is a connection of its own


def test_a_notification_sees_its_session_record_and_is_never_refused() -> None:
    engine = Engine(Policy())
    record = handshake(engine).record
    decision = engine.decide(
        message("notifications/initialized", revision="2025-06-18", held=record, notification=True)
    )
    assert decision.action == "serve"
    assert decision.record is record
    assert not decision.trace
    assert not decision.judged
    refusal = Refusal(-32021, "no")
    held_refusal = engine.decide(
        message("notifications/initialized", revision="2025-06-18", held=refusal, notification=True)
    )
    assert held_refusal.action == "pass"


def test_the_sdks_own_listing_for_a_refused_call_is_answered_empty_untraced() -> None:
    decision = Engine(Policy()).decide(message("tools/list", {}, on_behalf=True))
    assert decision.action == "empty"
    assert not decision.trace
    assert not decision.judged


def test_the_repeat_shape_is_exact_and_only_for_modern_envelopes() -> None:
    def shape(params: Any, revision: str = MODERN, pipe: Any = False) -> Any:
        return Engine(Policy()).memo.find("tools/list", params, revision, pipe)[0]

    same = shape({"_meta": envelope({"x": True})})
    assert same == shape({"_meta": envelope({"x": True})})
    assert same != shape({"_meta": envelope({"x": 1})})  # true is not 1
    assert same != shape({"_meta": envelope({"x": True})}, pipe=True)  # stdio counts
    http = ((b"mcp-protocol-version", MODERN.encode()),)
    assert shape({"_meta": envelope({"x": True})}, pipe=http) not in (same, None)  # and HTTP headers
    assert shape({"_meta": envelope({"x": True})}, pipe=None) is None  # decided in full every time
    assert shape({}) is None
    assert shape({"_meta": {PROTOCOL_VERSION_KEY: []}}) is None  # unhashable, and no revision
    assert shape({"_meta": {"traceparent": "x"}}, "2025-06-18") is None


def test_only_traced_outcomes_and_small_shapes_are_remembered() -> None:
    engine = Engine(Policy())
    decision = engine.decide(message("tools/list", {"_meta": envelope()}))
    key, repeat = engine.memo.find("tools/list", {"_meta": envelope()}, MODERN, False)
    assert key is not None
    assert repeat is None
    engine.remember(key, decision, None)  # nothing traced it: a repeat must trace it in full
    assert engine.memo.find("tools/list", {"_meta": envelope()}, MODERN, False)[1] is None
    engine.remember(key, decision, "handle")
    repeat = engine.memo.find("tools/list", {"_meta": envelope()}, MODERN, False)[1]
    assert repeat is not None
    assert repeat.published[0] is decision.record
    assert repeat.traced == "handle"
    huge = (*key[:4], b"x" * (MAX_ENTRY_BYTES + 1))
    engine.remember(huge, decision, "handle")
    huge_headers = (*key[:3], ((b"mcp-protocol-version", b"x" * MAX_ENTRY_BYTES),), key[4])
    engine.remember(huge_headers, decision, "handle")  # headers weigh too
    assert len(engine.memo) == 1


def test_a_session_record_is_published_as_held_until_the_day_or_policy_changes() -> None:
    engine = Engine(Policy())
    record = handshake(engine).record
    assert engine.held_entry(record, "tools/list") == (record, engine.negotiator)
    assert engine.held_entry(Refusal(-32021, "no"), "tools/list") is None
    assert engine.held_entry(record, "initialize") is None  # a handshake again is decided as one
    other = Engine(Policy(withhold=("sampling",)))
    assert other.held_entry(record, "tools/list") is None  # made under another policy: decide


def test_a_session_record_for_a_ucp_call_is_handed_back_alone_for_its_agreement_to_be_found() -> None:
    version = "2026-04-08"
    checkout = {"dev.ucp.shopping.checkout": [{"version": version}]}
    shop = {"ucp": {"version": version, "capabilities": checkout}}
    engine = Engine(Policy(ucp=UcpPolicy(business_profile=shop, resolver=StaticResolver({}))))
    record = handshake(engine).record
    assert engine.held_entry(record, "tools/call") is record
    assert engine.held_entry(record, "tools/list") == (record, engine.negotiator)
    plain = Engine(Policy())
    held = handshake(plain).record
    assert plain.held_entry(held, "tools/call") == (held, plain.negotiator)  # no UCP: nothing to find


@pytest.mark.parametrize("method", ["server/discover", "ping"])
def test_discovery_and_ping_need_no_required_capability(method: str) -> None:
    engine = Engine(Policy(required_capabilities=("sampling",)))
    assert engine.decide(message(method, {"_meta": envelope()})).action == "serve"
    assert engine.decide(message("tools/list", {"_meta": envelope()})).action == "refuse"
