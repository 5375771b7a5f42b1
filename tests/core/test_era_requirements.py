"""Era-aware requirements (issue #25), with plain values: a policy accepts only the
revisions where its required capabilities can be had, so a client of another revision is
counter-offered or refused with -32022 naming where it would be served, never accepted and
then refused -32021 on every request. End to end: tests/adapters/mcp2/test_era_requirements_e2e.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp_types import _v2026_07_28 as v2026

from mcp_negotiation import Policy
from mcp_negotiation.core.errors import NegotiationRefused, Refusal
from mcp_negotiation.core.negotiation import Negotiator, required_at
from mcp_negotiation.core.revisions import KNOWN, LEGACY
from support.harness import envelope

MODERN = "2026-07-28"
TASKS_ONLY_AT = "2025-11-25"


def _refusal(call: Any) -> Refusal:
    with pytest.raises(NegotiationRefused) as raised:
        call()
    return raised.value.refusal


# --- The policy, with plain values -------------------------------------------------------------


@pytest.mark.parametrize(
    ("required", "bounds", "accepted"),
    [
        (("tasks",), {}, (TASKS_ONLY_AT,)),
        (("extensions",), {}, (MODERN,)),
        (("roots.listChanged",), {}, LEGACY),
        (("elicitation.url",), {}, ("2025-11-25", MODERN)),
        (("sampling.tools", "roots.listChanged"), {}, ("2025-11-25",)),
        (("roots.listChanged",), {"min_revision": "2025-06-18"}, ("2025-06-18", "2025-11-25")),
        # What negotiates itself, or exists at every revision, narrows nothing.
        (("sampling", "io.x/y", "experimental.foo"), {}, KNOWN),
        ((), {}, KNOWN),
    ],
)
def test_a_policy_accepts_only_the_revisions_where_its_requirements_can_be_had(
    required: tuple[str, ...], bounds: dict[str, str], accepted: tuple[str, ...]
) -> None:
    policy = Policy(required_capabilities=required, **bounds)  # type: ignore[arg-type]
    assert policy.accepted() == accepted
    assert Negotiator(policy).accepted == accepted
    assert all(required_at(name, r) for name in required for r in accepted)


def test_narrowed_names_each_left_out_revision_and_what_it_cannot_have() -> None:
    policy = Policy(required_capabilities=("sampling", "roots.listChanged", "elicitation.url"))
    assert policy.narrowed() == {
        "2024-11-05": ("elicitation.url",),
        "2025-03-26": ("elicitation.url",),
        "2025-06-18": ("elicitation.url",),
        MODERN: ("roots.listChanged",),
    }
    # Revisions the bounds leave out were never in question: they are not "narrowed".
    assert Policy(max_revision="2025-11-25", required_capabilities=("roots",)).narrowed() == {}


def test_the_repr_states_the_narrowing() -> None:
    narrowed = repr(Policy(required_capabilities=("tasks",)))
    assert narrowed.startswith(
        "Policy(min_revision=None, max_revision=None, required_capabilities=('tasks',),"
    )
    assert narrowed.endswith("ucp=None; revisions narrowed to 2025-11-25 by required_capabilities)")
    assert "narrowed" not in repr(Policy(min_revision="2025-11-25", max_revision="2025-11-25"))
    assert "narrowed" not in repr(Policy(required_capabilities=("sampling",)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"required_capabilities": ("tasks", "extensions")},
            "required_capabilities names 'tasks', 'extensions', which no accepted revision"
            " (2024-11-05 to 2026-07-28) has together: 'tasks' only at 2025-11-25;"
            " 'extensions' only at 2026-07-28",
        ),
        (
            {"required_capabilities": ("elicitation.url", "roots.listChanged"), "max_revision": "2025-06-18"},
            "required_capabilities names 'elicitation.url', which no accepted revision"
            " (2024-11-05 to 2025-06-18) has",
        ),
        (
            {"required_capabilities": ("tasks",), "min_revision": MODERN},
            "required_capabilities names 'tasks', which no accepted revision (2026-07-28 to 2026-07-28) has",
        ),
    ],
)
def test_requirements_no_accepted_revision_can_meet_are_a_value_error(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Policy(**options)


def test_a_modern_request_under_a_legacy_only_requirement_is_refused_32022() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("tasks",)))
    refusal = _refusal(lambda: negotiator.request(envelope(caps={"tasks": {}})))
    assert refusal.code == -32022
    assert refusal.message == (
        "Unsupported protocol version: 2026-07-28 (the server requires tasks, which 2026-07-28 does not have)"
    )
    assert refusal.data == {
        "supported": [TASKS_ONLY_AT],
        "requested": MODERN,
        "requiredCapabilities": {"tasks": {}},
    }
    v2026.UnsupportedProtocolVersionError.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
    )


def test_a_legacy_client_of_a_left_out_revision_is_counter_offered_one_that_serves_it() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("tasks",)))
    params = {"protocolVersion": "2025-06-18", "capabilities": {"tasks": {}}}
    record = negotiator.initialize(params)
    assert (record.outcome, record.protocol_version) == ("counter_offered", TASKS_ONLY_AT)
    assert record.supports("tasks")


def test_a_legacy_client_under_a_modern_only_requirement_is_refused_32022() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("extensions",)))
    refusal = _refusal(lambda: negotiator.initialize({"protocolVersion": "2025-11-25", "capabilities": {}}))
    assert refusal.code == -32022
    assert refusal.data == {
        "supported": [MODERN],
        "requested": "2025-11-25",
        "requiredCapabilities": {"extensions": {}},
    }


def test_a_stateless_legacy_request_of_a_left_out_revision_lists_the_legacy_revisions_that_serve() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("elicitation.url",)))
    refusal = _refusal(lambda: negotiator.without_session("2025-06-18", transport="http"))
    assert refusal.code == -32022
    assert refusal.data == {
        "supported": ["2025-11-25"],
        "requested": "2025-06-18",
        "requiredCapabilities": {"elicitation": {"url": {}}},
    }


def test_advertising_all_lists_only_the_revisions_left() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("roots.listChanged",), advertise="all"))
    refusal = _refusal(lambda: negotiator.request(envelope()))
    assert refusal.data is not None
    assert refusal.data["supported"] == list(reversed(LEGACY))


def test_an_unknown_or_bounded_out_revision_is_refused_as_before() -> None:
    negotiator = Negotiator(Policy(min_revision="2025-06-18", required_capabilities=("tasks",)))
    for requested in ("zzz", "2026-07-27"):
        refusal = _refusal(lambda requested=requested: negotiator.request(envelope(requested)))
        assert refusal.message == f"Unsupported protocol version: {requested}"
        assert refusal.data == {"supported": [TASKS_ONLY_AT], "requested": requested}
