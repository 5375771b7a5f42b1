"""A2A legs of a bridge, and refusals relayed across a bridge in both legs' words.

The refusals come from the library itself: MCP's from `Policy`'s negotiator shapes
(-32022 `data.supported`/`data.requested`, -32021 `data.requiredCapabilities`), A2A's from
`negotiate_a2a` (-32009/-32008 with a google.rpc.ErrorInfo, A2A 1.0 §9.5 as quoted in
/work/notes/a2a.md §2.3 and §3.5).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_negotiation import Refusal
from mcp_negotiation.semver import (
    A2A_MCP,
    Leg,
    RefusedBy,
    a2a_error_info,
    a2a_leg,
    a2a_refusal,
    agree,
    negotiate_a2a,
    read_agent_card,
    relay_refusal,
)

CITATIONS = "https://standards.org/extensions/citations/v1"
CARD = read_agent_card(
    {
        "supportedInterfaces": [
            {"url": "https://agent.example/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://agent.example/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        ],
        "capabilities": {
            "streaming": True,
            "extensions": [{"uri": CITATIONS, "required": True}],
        },
        "skills": [{"id": "plan"}],
    }
)
CLIENT = Leg("desktop-client", "mcp", "2025-11-25", {"tools", "tasks", "progress.message"})
AGENT = a2a_leg("route-planner", CARD, "1.0", [CITATIONS])
MCP_DOWN = agree(CLIENT, AGENT)
A2A_DOWN = agree(AGENT, Leg("server", "mcp", "2026-07-28", {"tools"}))

UNSUPPORTED_REVISION = Refusal(
    -32022,
    "Unsupported protocol version: 2025-11-25",
    {"supported": ["2026-07-28"], "requested": "2025-11-25"},
)
MISSING_SAMPLING = Refusal(
    -32021, "Missing required client capability: sampling", {"requiredCapabilities": {"sampling": {}}}
)


def a2a_refused(headers: dict[str, str]) -> Refusal:
    refusal = negotiate_a2a(CARD, headers).refusal
    assert refusal is not None
    return refusal


def metadata(refusal: Refusal) -> Any:
    info = a2a_error_info(refusal)
    assert info is not None
    return info["metadata"]


# --- A2A legs ------------------------------------------------------------------------------------


def test_an_a2a_leg_has_the_cards_features_at_the_agreed_version_and_its_extensions() -> None:
    assert AGENT.version == "1.0"
    assert AGENT.features == {
        "skills",
        "streaming",
        "tasks",
        "tasks.cancel",
        "tasks.list",
        "inputRequired",
        "multipleInterfaces",
        "extensions",
        CITATIONS,
    }
    assert a2a_leg("agent", CARD, "1.0.1").version == "1.0"


def test_an_agreement_withholds_each_extension_by_name() -> None:
    withheld = {w.feature: w.refused_by for w in MCP_DOWN.withheld}
    assert withheld[CITATIONS] is RefusedBy.DOWNSTREAM  # an A2A extension has no MCP counterpart
    assert MCP_DOWN.served == {"tools", "tasks", "progress.message"}  # skills→tools, streaming→progress
    assert A2A_MCP.translate(CITATIONS, source="a2a") is None


def test_an_a2a_leg_is_only_built_for_what_the_card_serves() -> None:
    with pytest.raises(ValueError, match="serves no A2A version"):
        a2a_leg("agent", CARD, "0.3")
    with pytest.raises(ValueError, match="lists no extension https://other/v1"):
        a2a_leg("agent", CARD, "1.0", ["https://other/v1"])
    old_card = {"supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]}
    assert a2a_leg("agent", old_card, "0.3").version == "0.3"


# --- Upstream refusals relayed to the client ------------------------------------------------------


def test_an_a2a_version_refusal_upstream_is_an_mcp_32022_downstream_naming_the_agent() -> None:
    refusal = a2a_refused({"A2A-Version": "0.3"})
    relayed = relay_refusal(MCP_DOWN, refusal, refused_by="upstream")
    assert relayed.refused_by is RefusedBy.UPSTREAM
    assert relayed.upstream is refusal
    error = relayed.downstream.to_jsonrpc_error()
    assert error["code"] == -32022
    assert error["data"]["supported"] == []  # no revision of the client's would help
    assert error["data"]["requested"] == "2025-11-25"
    assert error["data"]["refusedBy"] == "upstream"
    assert error["data"]["refusing"] == {
        "peer": "route-planner",
        "protocol": "a2a",
        "version": "1.0",
        "code": -32009,
        "message": refusal.message,
    }
    assert "the bridge's upstream route-planner refused a2a 1.0" in error["message"]


def test_an_a2a_extension_refusal_upstream_is_an_mcp_32021_that_asks_the_client_for_nothing() -> None:
    """-32021 must carry `data.requiredCapabilities`; an A2A extension URI is no MCP capability, so it
    is empty, and the URI is in the refusing peer's message."""
    refusal = a2a_refused({"A2A-Version": "1.0"})
    relayed = relay_refusal(MCP_DOWN, refusal, refused_by=RefusedBy.UPSTREAM)
    error = relayed.downstream.to_jsonrpc_error()
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {}
    assert error["data"]["refusing"]["code"] == -32008
    assert CITATIONS in error["data"]["refusing"]["message"]


def test_an_mcp_version_refusal_upstream_is_an_a2a_32009_downstream() -> None:
    relayed = relay_refusal(A2A_DOWN, UNSUPPORTED_REVISION, refused_by="upstream")
    assert relayed.upstream is UNSUPPORTED_REVISION
    assert relayed.downstream.code == -32009
    assert metadata(relayed.downstream) == {
        "refusedBy": "upstream",
        "refusingPeer": "server",
        "refusingProtocol": "mcp",
        "refusingVersion": "2026-07-28",
        "refusingCode": "-32022",
        "refusingMessage": UNSUPPORTED_REVISION.message,
        "requestedVersion": "1.0",
    }
    assert relayed.downstream.to_jsonrpc_error()["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"


def test_an_mcp_requirement_upstream_is_an_a2a_32008_downstream() -> None:
    relayed = relay_refusal(A2A_DOWN, MISSING_SAMPLING, refused_by="upstream")
    assert relayed.downstream.code == -32008
    assert metadata(relayed.downstream)["refusingCode"] == "-32021"
    assert "requiredExtensions" not in metadata(relayed.downstream)  # sampling is no A2A extension


# --- Downstream refusals, said in the upstream's words -----------------------------------------------


def test_a_refusal_of_the_downstream_a2a_client_has_its_mcp_counterpart_upstream() -> None:
    refusal = a2a_refused({"A2A-Version": "2.0"})
    relayed = relay_refusal(A2A_DOWN, refusal, refused_by="downstream")
    assert relayed.refused_by is RefusedBy.DOWNSTREAM
    assert relayed.downstream is refusal
    error = relayed.upstream.to_jsonrpc_error()
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2026-07-28"
    assert error["data"]["refusedBy"] == "downstream"
    assert error["data"]["refusing"]["peer"] == "route-planner"


def test_a_refusal_of_the_downstream_mcp_client_has_its_a2a_counterpart_upstream() -> None:
    relayed = relay_refusal(MCP_DOWN, MISSING_SAMPLING, refused_by="downstream")
    assert relayed.downstream is MISSING_SAMPLING
    assert relayed.upstream.code == -32008
    assert metadata(relayed.upstream)["refusedBy"] == "downstream"
    assert metadata(relayed.upstream)["refusingPeer"] == "desktop-client"


# --- Legs of one protocol carry what was required --------------------------------------------------


def test_between_mcp_legs_the_required_capabilities_travel() -> None:
    agreement = agree(CLIENT, Leg("server", "mcp", "2026-07-28", {"tools"}))
    relayed = relay_refusal(agreement, MISSING_SAMPLING, refused_by="upstream")
    error = relayed.downstream.to_jsonrpc_error()
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    version = relay_refusal(agreement, UNSUPPORTED_REVISION, refused_by="upstream").downstream
    assert version.to_jsonrpc_error()["data"]["supported"] == []  # the server's list is for the bridge


def test_between_a2a_legs_the_required_extensions_travel() -> None:
    agreement = agree(a2a_leg("client", CARD, "1.0"), AGENT)
    relayed = relay_refusal(agreement, a2a_refused({"A2A-Version": "1.0"}), refused_by="upstream")
    assert relayed.downstream.code == -32008
    assert metadata(relayed.downstream)["requiredExtensions"] == CITATIONS


# --- What is not relayed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agreement", "refusal", "side", "message"),
    [
        (MCP_DOWN, UNSUPPORTED_REVISION, "both", "refused_by is downstream or upstream"),
        (
            MCP_DOWN,
            UNSUPPORTED_REVISION,
            "upstream",
            r"-32022 is not a negotiation refusal of a2a \(-32009 or -32008\)",
        ),
        (MCP_DOWN, a2a_refusal(-32009, "no"), "downstream", "-32009 is not a negotiation refusal of mcp"),
        (MCP_DOWN, Refusal(-32602, "Invalid params"), "downstream", "-32602 is not a negotiation refusal"),
        (
            agree(Leg("a", "acp", "0.2.0", {"ping"}), Leg("b", "acp", "0.2.0", {"ping"})),
            Refusal(-32009, "x"),
            "upstream",
            "no refusal of acp is mapped",
        ),
        (
            MCP_DOWN,
            Refusal(-32001, "Task not found"),
            "upstream",
            "-32001 is not a negotiation refusal of a2a",
        ),
    ],
)
def test_only_negotiation_refusals_of_the_refusing_legs_protocol_are_relayed(
    agreement: Any, refusal: Refusal, side: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        relay_refusal(agreement, refusal, refused_by=side)


def test_a_peers_long_message_is_cut_and_a_bare_a2a_refusal_is_relayed_too() -> None:
    """a2a-python's VersionNotSupportedError says 'Version not supported' and may carry no ErrorInfo
    (notes §5.3: "I did not verify whether the SDK's JSON-RPC error carries the data array")."""
    bare = Refusal(-32009, "Version not supported " + "x" * 10_000)
    relayed = relay_refusal(MCP_DOWN, bare, refused_by="upstream")
    error = relayed.downstream.to_jsonrpc_error()
    assert len(error["data"]["refusing"]["message"]) == 256
    assert len(error["message"]) < 400
    hostile = relay_refusal(MCP_DOWN, Refusal(-32009, "no\n\x1b[31mversion"), refused_by="upstream")
    assert "\x1b" not in hostile.downstream.message
    assert "\n" not in hostile.downstream.message


# --- Properties ---------------------------------------------------------------------------------------

_REFUSALS = {
    ("mcp", "version"): UNSUPPORTED_REVISION,
    ("mcp", "requirement"): MISSING_SAMPLING,
    ("a2a", "version"): a2a_refusal(-32009, "Version not supported"),
    ("a2a", "requirement"): a2a_refusal(-32008, "Extension support required"),
}
_CODES = {
    ("mcp", "version"): -32022,
    ("mcp", "requirement"): -32021,
    ("a2a", "version"): -32009,
    ("a2a", "requirement"): -32008,
}
_LEGS = {"mcp": CLIENT, "a2a": AGENT}


@given(
    st.sampled_from(["mcp", "a2a"]),
    st.sampled_from(["mcp", "a2a"]),
    st.sampled_from(["version", "requirement"]),
    st.sampled_from([RefusedBy.DOWNSTREAM, RefusedBy.UPSTREAM]),
)
def test_each_leg_gets_its_own_protocols_code_for_the_same_kind_of_refusal(
    down: str, up: str, kind: str, side: RefusedBy
) -> None:
    agreement = agree(_LEGS[down], _LEGS[up])
    refusing = up if side is RefusedBy.UPSTREAM else down
    other = down if side is RefusedBy.UPSTREAM else up
    refusal = _REFUSALS[(refusing, kind)]
    relayed = relay_refusal(agreement, refusal, refused_by=side)
    said, counterpart = (
        (relayed.upstream, relayed.downstream)
        if side is RefusedBy.UPSTREAM
        else (relayed.downstream, relayed.upstream)
    )
    assert said is refusal
    assert counterpart.code == _CODES[(other, kind)]
    if other == "mcp":
        assert isinstance(counterpart.data, dict)
        assert counterpart.data["refusedBy"] == side.value
        assert counterpart.data["refusing"]["code"] == refusal.code
    else:
        assert metadata(counterpart)["refusedBy"] == side.value
        assert metadata(counterpart)["refusingCode"] == str(refusal.code)
