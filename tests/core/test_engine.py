"""The per-message engine with plain values: no SDK, no transport, every decision it makes.

Both SDK adapters apply these outcomes through one kernel; the end-to-end suites prove they
do. Here each rule is pinned where it is made, so a change to one shows up as a failing
outcome.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from mcp_negotiation import Policy
from mcp_negotiation.core import engine as engine_module
from mcp_negotiation.core.bounded import MAX_ENTRY_BYTES
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.errors import Refusal
from mcp_negotiation.core.facts import Origin, PlainFacts
from mcp_negotiation.core.negotiation import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY
from mcp_negotiation.core.outcome import Known, Need
from mcp_negotiation.ucp import UCP_EXTENSION_ID, Profile, StaticResolver, UcpPolicy

MODERN = "2026-07-28"
UCP_V = "2026-04-08"
CHECKOUT = "dev.ucp.shopping.checkout"
SHOP = {"ucp": {"version": UCP_V, "capabilities": {CHECKOUT: [{"version": UCP_V}]}}}
PLATFORM = "https://platform.example/profile.json"


def envelope(caps: Any = None, version: str = MODERN) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: {} if caps is None else caps,
        CLIENT_INFO_KEY: {"name": "c", "version": "1"},
    }


def message(method: str, params: Any = None, revision: str | None = MODERN, **facts: Any) -> PlainFacts:
    return PlainFacts(method=method, params=params or {}, revision=revision, transport="memory", **facts)


def handshake(engine: Engine, caps: Any = None, version: str = "2025-06-18", held: Any = None) -> Any:
    params = {
        "protocolVersion": version,
        "capabilities": caps or {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    return engine.decide(message("initialize", params, revision="2025-11-25", held=held))


def test_a_modern_request_is_served_from_its_own_envelope_and_traced() -> None:
    engine = Engine(Policy())
    outcome = engine.decide(message("tools/list", {"_meta": envelope({"sampling": {}})}))
    assert outcome.action == "serve"
    assert outcome.known is not None
    assert outcome.known.record.supports("sampling")
    assert outcome.trace == "negotiated"
    assert outcome.judged
    assert outcome.listing


def test_a_repeated_envelope_is_the_same_known_and_anything_else_another() -> None:
    engine = Engine(Policy())
    first = engine.decide(message("tools/call", {"_meta": envelope({"x": True})})).known
    assert engine.decide(message("tools/list", {"_meta": envelope({"x": True})})).known is first
    one = engine.decide(message("tools/call", {"_meta": envelope({"x": 1})})).known
    assert one is not first  # true is not 1
    stdio = PlainFacts("tools/call", {"_meta": envelope({"x": True})}, MODERN, transport="stdio")
    assert engine.decide(stdio).known is not first  # where it came from counts
    with_header = PlainFacts(
        "tools/call", {"_meta": envelope({"x": True})}, MODERN, transport="memory",
        headers={"mcp-protocol-version": MODERN},
    )  # fmt: skip
    assert engine.decide(with_header).known is not first  # and the headers a record keeps
    assert len(engine.memo) == 4


def test_an_envelope_too_big_to_keep_is_negotiated_each_time() -> None:
    engine = Engine(Policy())
    big = {"experimental": {f"k{i}": {"v": "x" * 100} for i in range(700)}}
    assert len(repr(big)) > MAX_ENTRY_BYTES
    first = engine.decide(message("tools/call", {"_meta": envelope(big)})).known
    second = engine.decide(message("tools/call", {"_meta": envelope(big)})).known
    assert first is not None
    assert second is not None
    assert first is not second
    assert first.record == second.record
    assert len(engine.memo) == 0


def test_a_modern_request_without_its_envelope_is_refused_and_traced() -> None:
    outcome = Engine(Policy()).decide(message("tools/list", {}))
    assert outcome.action == "refuse"
    assert outcome.refusal is not None
    assert outcome.refusal.code == -32602
    assert outcome.trace == "refused"
    assert outcome.hold is None


def test_a_modern_initialize_passes_to_the_sdk_unjudged() -> None:
    outcome = Engine(Policy()).decide(message("initialize", {}))
    assert outcome.action == "pass"
    assert not outcome.judged


def test_a_legacy_handshake_is_steered_held_and_traced() -> None:
    engine = Engine(Policy(min_revision="2025-06-18"))
    outcome = handshake(engine, {"sampling": {}}, version="2024-11-05")
    assert outcome.action == "serve"
    known = outcome.known
    assert known is not None
    assert known.record.protocol_version == "2025-11-25"  # the counter-offer the SDK must answer
    assert outcome.steer == "2025-11-25"
    assert outcome.hold is known
    assert outcome.trace == "negotiated"
    assert outcome.advertise is None  # no stage advertises anything


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
    assert accepted.known is not None
    again = handshake(engine, {}, held=accepted.known)
    assert again.action == "refuse"
    assert again.hold is None  # the connection keeps its accepted record
    later = engine.decide(message("tools/list", revision="2025-06-18", held=accepted.known))
    assert later.action == "serve"
    assert later.known is accepted.known
    assert later.trace is None  # a session's record is traced once, at its handshake


def test_a_legacy_request_without_a_session_is_served_with_capabilities_unknown() -> None:
    engine = Engine(Policy())
    outcome = engine.decide(message("tools/list", revision="2025-06-18"))
    assert outcome.action == "serve"
    assert outcome.known is not None
    assert not outcome.known.record.capabilities_known
    assert outcome.trace == "negotiated"  # each such request is a connection of its own
    assert engine.decide(message("tools/list", revision="2025-06-18")).known is outcome.known


def test_a_message_the_sdk_names_no_revision_for_is_served_at_the_specifications_default() -> None:
    outcome = Engine(Policy()).decide(message("tools/list", revision=None))
    assert outcome.known is not None
    assert outcome.known.record.protocol_version == "2025-03-26"


def test_a_notification_sees_its_session_record_and_is_never_refused() -> None:
    engine = Engine(Policy())
    known = handshake(engine).known
    outcome = engine.decide(
        message("notifications/initialized", revision="2025-06-18", held=known, notification=True)
    )
    assert outcome.action == "serve"
    assert outcome.known is known
    assert outcome.trace is None
    assert not outcome.judged
    refusal = Refusal(-32021, "no")
    held_refusal = engine.decide(
        message("notifications/initialized", revision="2025-06-18", held=refusal, notification=True)
    )
    assert held_refusal.action == "pass"


def test_the_sdks_own_listing_for_a_refused_call_is_answered_empty_untraced() -> None:
    outcome = Engine(Policy()).decide(message("tools/list", {}, on_behalf=True))
    assert outcome.action == "empty"
    assert outcome.trace is None
    assert not outcome.judged


def test_a_session_record_is_published_as_held_until_the_day_or_policy_changes() -> None:
    engine = Engine(Policy())
    known = handshake(engine).known
    served = engine.decide(message("tools/list", revision="2025-06-18", held=known))
    assert served.known is known
    assert served.hold is None
    other = Engine(Policy(withhold=("sampling",)))  # the policy applied again
    refreshed = other.decide(message("tools/list", revision="2025-06-18", held=known))
    assert refreshed.known is not known
    assert refreshed.hold is refreshed.known  # the connection holds the new one from now on
    assert refreshed.known is not None
    assert "sampling" in refreshed.known.record.withheld


@pytest.mark.parametrize("method", ["server/discover", "ping"])
def test_discovery_and_ping_need_no_required_capability(method: str) -> None:
    engine = Engine(Policy(required_capabilities=("sampling",)))
    assert engine.decide(message(method, {"_meta": envelope()})).action == "serve"
    assert engine.decide(message("tools/list", {"_meta": envelope()})).action == "refuse"


class _ModernListing:
    """The facts of a modern `tools/list`, for a subclass to break one of."""

    method = "tools/list"
    revision = MODERN
    notification = False


def test_a_bug_of_ours_passes_the_message_through_judged_as_it_would_be(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(_ModernListing):
        origin = Origin("memory")

        @property
        def params(self) -> Any:
            raise RuntimeError("a bug")

    outcome = Engine(Policy()).decide(Broken())  # type: ignore[arg-type]
    assert outcome.action == "pass"
    assert outcome.judged
    assert "negotiation failed unexpectedly" in caplog.text


def test_a_bug_of_ours_in_reading_the_origin_still_passes_the_message_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(_ModernListing):
        params: ClassVar[Any] = {"_meta": envelope()}

        @property
        def origin(self) -> Origin:
            raise RuntimeError("a bug")

    outcome = Engine(Policy()).decide(Broken())  # type: ignore[arg-type]
    assert outcome.action == "pass"
    assert not outcome.judged
    assert "negotiation failed unexpectedly" in caplog.text


# --- stages: UCP, the first of them -----------------------------------------------------------


def _ucp_engine(resolver: Any) -> Engine:
    return Engine(Policy(ucp=UcpPolicy(business_profile=SHOP, resolver=resolver)))


def _ucp_call(**facts: Any) -> PlainFacts:
    params = {"name": "checkout", "arguments": {"meta": {"ucp-agent": {"profile": PLATFORM}}}}
    return message("tools/call", params, revision="2025-11-25", **facts)


def test_a_stage_advertises_in_each_eras_answer() -> None:
    engine = _ucp_engine(StaticResolver({}))
    legacy = handshake(engine).advertise
    assert legacy is not None
    assert set(legacy) == {"experimental"}
    assert UCP_EXTENSION_ID in legacy["experimental"]
    modern = engine.decide(message("server/discover", {"_meta": envelope()})).advertise
    assert modern is not None
    assert set(modern) == {"extensions"}


def test_a_profile_the_resolver_must_fetch_is_a_need_met_by_the_caller() -> None:
    class Fetching:
        async def resolve(self, url: str) -> Profile:  # never awaited here: the caller's job
            raise AssertionError

    engine = _ucp_engine(Fetching())
    known = handshake(engine).known
    asked = engine.decide(_ucp_call(held=known))
    assert asked.need == Need(PLATFORM, engine.policy.ucp.fetcher)
    assert asked.action == "pass"
    platform = Profile.from_json(SHOP)
    answered = engine.decide(_ucp_call(held=known), {PLATFORM: platform})
    assert answered.action == "serve"
    assert answered.known is not None
    assert answered.known.record.ucp is not None
    assert answered.known.source is known  # derived from the session's negotiation
    assert answered.trace == "negotiated"  # a record scoped per call is traced per call
    failed = engine.decide(_ucp_call(held=known), {PLATFORM: OSError("down")})
    assert failed.action == "refuse"
    assert failed.refusal is not None
    assert failed.refusal.code == -32001


def test_a_scoped_call_is_kept_on_its_negotiation_while_the_profile_stands() -> None:
    engine = _ucp_engine(StaticResolver({PLATFORM: SHOP}))
    known = handshake(engine).known
    assert isinstance(known, Known)
    first = engine.decide(_ucp_call(held=known)).known
    second = engine.decide(_ucp_call(held=known)).known
    assert first is second
    assert first is not None
    assert len(known.derived) == 1
    other = handshake(engine).known  # another session: its own scoped record
    assert engine.decide(_ucp_call(held=other)).known is not first


def test_memo_size_bounds_the_memo() -> None:
    engine = Engine(Policy())
    for i in range(engine_module.MEMO_SIZE + 20):
        engine.decide(message("tools/call", {"_meta": envelope({"experimental": {f"c{i}": {}}})}))
    assert len(engine.memo) == engine_module.MEMO_SIZE
