"""Seed 003 (what a bridge can honestly promise) as tests."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_negotiation import revisions
from mcp_negotiation.bridge import (
    A2A_MCP,
    MCP_SERVER_FEATURES,
    Agreement,
    FeatureMapping,
    Leg,
    RefusedBy,
    Withheld,
    advertised_capabilities,
    agree,
)
from mcp_negotiation.protocols import ProtocolName

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bridge_agreement.py"

_SWAP = {
    RefusedBy.DOWNSTREAM: RefusedBy.UPSTREAM,
    RefusedBy.UPSTREAM: RefusedBy.DOWNSTREAM,
    RefusedBy.BOTH: RefusedBy.BOTH,
}


def mcp(*features: str, revision: str = "2025-11-25", peer: str = "client") -> Leg:
    return Leg(peer, "mcp", revision, features)


def a2a(*features: str) -> Leg:
    return Leg("agent", "a2a", "1.0.0", features)


def refusals(agreement: Agreement) -> dict[str, RefusedBy]:
    return {w.feature: w.refused_by for w in agreement.withheld}


# --- Legs ---------------------------------------------------------------------------------


def test_leg_normalises_and_validates() -> None:
    leg = Leg("client", "mcp", "2025-03-26", ["tools", "tools"])
    assert leg.protocol is ProtocolName.MCP
    assert leg.features == frozenset({"tools"})
    with pytest.raises(ValueError, match="peer must be a non-empty string"):
        Leg("", "mcp", "2025-03-26", ())
    with pytest.raises(ValueError, match="version must be a non-empty string"):
        Leg("client", "mcp", "", ())
    with pytest.raises(ValueError, match="unknown protocol"):
        Leg("client", "smtp", "1", ())
    with pytest.raises(ValueError, match="not the single string 'tools'"):
        Leg("client", "mcp", "2025-03-26", "tools")


# --- agree --------------------------------------------------------------------------------


def test_serves_the_intersection_and_records_who_refused() -> None:
    agreement = agree(mcp("tools", "prompts", "logging"), mcp("tools", "resources", peer="server"))
    assert agreement.served == {"tools"}
    assert agreement.withheld == (
        Withheld("logging", RefusedBy.UPSTREAM),
        Withheld("prompts", RefusedBy.UPSTREAM),
        Withheld("resources", RefusedBy.DOWNSTREAM),
    )


def test_both_versions_are_kept() -> None:
    client = mcp("tools", revision="2025-03-26")
    server = mcp("tools", revision="2026-07-28", peer="server")
    agreement = agree(client, server)
    assert agreement.downstream.version == "2025-03-26"
    assert agreement.upstream.version == "2026-07-28"
    assert agreement.downstream is client
    assert agreement.upstream is server


def test_an_agreement_claims_no_reachability() -> None:
    names = {field.name for field in dataclasses.fields(Agreement)}
    assert names == {"downstream", "upstream", "served", "withheld"}
    assert {field.name for field in dataclasses.fields(Leg)} == {"peer", "protocol", "version", "features"}


def test_cross_protocol_uses_a2a_mcp_by_default() -> None:
    agreement = agree(
        mcp("tools", "tasks", "resources", "elicitation"),
        a2a("skills", "tasks", "pushNotifications", "streaming"),
    )
    assert agreement.served == {"tools", "tasks"}
    assert refusals(agreement) == {
        "resources": RefusedBy.UPSTREAM,
        "elicitation": RefusedBy.UPSTREAM,  # the agent never asks for input
        "pushNotifications": RefusedBy.DOWNSTREAM,  # no MCP counterpart: keeps its A2A name
        "progress.message": RefusedBy.DOWNSTREAM,  # A2A streaming, in MCP's words
    }


def test_a2a_downstream_of_an_mcp_server() -> None:
    agreement = agree(a2a("skills", "streaming", "inputRequired"), mcp("tools", "elicitation", "prompts"))
    assert agreement.served == {"skills", "inputRequired"}
    assert refusals(agreement) == {"streaming": RefusedBy.UPSTREAM, "prompts": RefusedBy.DOWNSTREAM}


def test_a_shared_word_with_different_meanings_is_refused_by_both() -> None:
    agreement = agree(mcp("extensions", "tools", revision="2026-07-28"), a2a("extensions", "skills"))
    assert agreement.served == {"tools"}
    assert agreement.withheld == (Withheld("extensions", RefusedBy.BOTH),)


def test_mapping_errors() -> None:
    with pytest.raises(ValueError, match="both legs speak mcp"):
        agree(mcp("tools"), mcp("tools"), A2A_MCP)
    acp = Leg("runner", "acp", "0.2.0", {"runs.stream"})
    with pytest.raises(ValueError, match="no default feature mapping between acp and mcp"):
        agree(mcp("tools"), acp)
    with pytest.raises(ValueError, match="the mapping joins a2a and mcp, but the legs speak mcp and acp"):
        agree(mcp("tools"), acp, A2A_MCP)


def test_a_custom_mapping() -> None:
    acp_mcp = FeatureMapping("acp", "mcp", {"runs.stream": "progress.message", "discovery": "tools"})
    acp = Leg("runner", "acp", "0.2.0", {"runs.stream", "discovery", "sessions"})
    agreement = agree(mcp("tools", "progress.message"), acp, acp_mcp)
    assert agreement.served == {"tools", "progress.message"}
    assert refusals(agreement) == {"sessions": RefusedBy.DOWNSTREAM}


def test_feature_mapping_translates_both_ways() -> None:
    assert A2A_MCP.translate("skills", source="a2a") == "tools"
    assert A2A_MCP.translate("tools", source=ProtocolName.MCP) == "skills"
    assert A2A_MCP.translate("pushNotifications", source="a2a") is None
    assert A2A_MCP.translate("skills", source="mcp") is None
    with pytest.raises(ValueError, match="joins a2a and mcp, not acp"):
        A2A_MCP.translate("skills", source="acp")


def test_feature_mapping_validation() -> None:
    with pytest.raises(ValueError, match="two different protocols"):
        FeatureMapping("mcp", "mcp", {})
    with pytest.raises(ValueError, match="each mcp feature may be paired once"):
        FeatureMapping("a2a", "mcp", [("skills", "tools"), ("tasks", "tools")])
    with pytest.raises(ValueError, match="non-empty strings"):
        FeatureMapping("a2a", "mcp", {"": "tools"})
    assert FeatureMapping("a2a", "mcp", [("b", "y"), ("a", "x")]).pairs == (("a", "x"), ("b", "y"))
    for bad in ("ab", [("a", "x", "extra")], [("a",)], 5):
        with pytest.raises(TypeError, match="pairs must be a mapping or"):
            FeatureMapping("a2a", "mcp", bad)  # type: ignore[arg-type]


def test_an_untranslatable_feature_is_not_lost_behind_a_translated_one_of_its_name() -> None:
    """`a` → `b` mapped: the upstream's own `b` has no counterpart, and must still be seen."""
    mapping = FeatureMapping("a2a", "mcp", {"a": "b"})
    agreement = agree(mcp("b"), a2a("a", "b"), mapping)
    assert agreement.served == {"b"}
    assert refusals(agreement) == {"a2a:b": RefusedBy.DOWNSTREAM}


def test_a2a_mcp_pairs_only_honest_counterparts() -> None:
    assert dict(A2A_MCP.pairs) == {
        "skills": "tools",
        "streaming": "progress.message",
        "tasks": "tasks",
        "tasks.cancel": "tasks.cancel",
        "tasks.list": "tasks.list",
        "inputRequired": "elicitation",
    }
    for unpaired in ("pushNotifications", "extendedAgentCard", "extensions"):
        assert A2A_MCP.translate(unpaired, source="a2a") is None
    for unpaired in ("resources", "prompts", "logging", "completions", "sampling", "extensions"):
        assert A2A_MCP.translate(unpaired, source="mcp") is None


# --- advertised_capabilities ----------------------------------------------------------------


def test_advertises_only_what_the_upstream_backs() -> None:
    client = mcp(
        "tools",
        "tools.listChanged",
        "resources",
        "resources.subscribe",
        "prompts",
        "prompts.listChanged",
        "logging",
        "completions",
    )
    server = mcp("tools", "tools.listChanged", "resources", "resources.subscribe", "logging", peer="server")
    capabilities = advertised_capabilities(agree(client, server))
    assert capabilities == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True},
        "logging": {},
    }


def test_tasks_in_2025_11_25() -> None:
    features = ("tools", "tasks", "tasks.list", "tasks.cancel")
    capabilities = advertised_capabilities(agree(mcp(*features), mcp(*features, peer="server")))
    assert capabilities == {
        "tools": {},
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    }


def test_the_downstream_revision_decides_what_can_be_said() -> None:
    features = ("tools", "resources", "resources.subscribe", "completions", "tasks", "tasks.list")
    modern = advertised_capabilities(
        agree(mcp(*features, revision="2026-07-28"), mcp(*features, peer="server"))
    )
    assert modern == {
        "tools": {},
        "resources": {},  # resources/subscribe is gone in 2026-07-28
        "completions": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},  # tasks became an extension
    }
    oldest = advertised_capabilities(
        agree(mcp(*features, revision="2024-11-05"), mcp(*features, peer="server"))
    )
    assert oldest == {"tools": {}, "resources": {"subscribe": True}}  # no completions, no tasks yet


def test_a_sub_feature_needs_its_parent() -> None:
    features = ("tools.listChanged", "prompts", "prompts.listChanged", "tasks.cancel", "progress.message")
    capabilities = advertised_capabilities(agree(mcp(*features), mcp(*features, peer="server")))
    assert capabilities == {"prompts": {"listChanged": True}}


def test_advertised_capabilities_needs_an_mcp_downstream_at_a_known_revision() -> None:
    with pytest.raises(ValueError, match="downstream leg speaks a2a"):
        advertised_capabilities(agree(a2a("skills"), mcp("tools")))
    with pytest.raises(ValueError, match="'2099-01-01' is not a known MCP revision"):
        advertised_capabilities(agree(mcp("tools", revision="2099-01-01"), mcp("tools")))


# --- Properties ---------------------------------------------------------------------------

_NAMES = st.frozensets(st.sampled_from(sorted(MCP_SERVER_FEATURES | {"x", "y", "extensions"})), max_size=10)
_A2A_NAMES = st.frozensets(
    st.sampled_from(sorted({a for a, _ in A2A_MCP.pairs} | {"pushNotifications", "extensions", "tools"})),
    max_size=8,
)


def _after_mapping(agreement: Agreement) -> frozenset[str]:
    """Every feature either leg offered, named as `agree` names them."""
    upstream = agreement.upstream
    if upstream.protocol is agreement.downstream.protocol:
        return agreement.downstream.features | upstream.features
    mapped = {f: A2A_MCP.translate(f, source=upstream.protocol) for f in upstream.features}
    translated = {name for name in mapped.values() if name is not None}
    untranslatable = {
        f"{upstream.protocol.value}:{f}" if f in translated else f for f, n in mapped.items() if n is None
    }
    return agreement.downstream.features | translated | untranslatable


def _check_partition(agreement: Agreement) -> None:
    withheld = [w.feature for w in agreement.withheld]
    assert len(withheld) == len(set(withheld))
    assert list(agreement.withheld) == sorted(agreement.withheld)
    assert agreement.served.isdisjoint(withheld)
    assert agreement.served | set(withheld) == _after_mapping(agreement)


@given(_NAMES, _NAMES)
def test_agree_is_symmetric_up_to_refused_by(down: frozenset[str], up: frozenset[str]) -> None:
    forward = agree(mcp(*down), mcp(*up, peer="server"))
    backward = agree(mcp(*up, peer="server"), mcp(*down))
    assert forward.served == backward.served == down & up
    assert refusals(backward) == {feature: _SWAP[side] for feature, side in refusals(forward).items()}


@given(_NAMES, _NAMES)
def test_served_and_withheld_partition_both_legs(down: frozenset[str], up: frozenset[str]) -> None:
    _check_partition(agree(mcp(*down), mcp(*up, peer="server")))


@given(_NAMES, _A2A_NAMES)
def test_cross_protocol_partition_and_symmetry(
    mcp_features: frozenset[str], a2a_features: frozenset[str]
) -> None:
    forward = agree(mcp(*mcp_features), a2a(*a2a_features))
    backward = agree(a2a(*a2a_features), mcp(*mcp_features))
    _check_partition(forward)
    _check_partition(backward)
    assert backward.served == {A2A_MCP.translate(f, source="mcp") for f in forward.served}


@given(_NAMES, _NAMES, st.sampled_from(revisions.KNOWN))
def test_never_advertises_what_is_not_served(down: frozenset[str], up: frozenset[str], revision: str) -> None:
    agreement = agree(mcp(*down, revision=revision), mcp(*up, peer="server"))
    capabilities = advertised_capabilities(agreement)
    for key, value in capabilities.items():
        assert ("tasks" if key == "extensions" else key) in agreement.served
        for flag, setting in value.items():
            if setting is True:
                assert f"{key}.{flag}" in agreement.served


# --- The example and its docs page ---------------------------------------------------------

EXPECTED = """\
desktop-client: mcp 2025-11-25
travel-agent: a2a 1.0.0
served: progress.message, tasks, tasks.cancel, tools
withheld: completions (refused by upstream)
withheld: elicitation (refused by upstream)
withheld: extendedAgentCard (refused by downstream)
withheld: logging (refused by upstream)
withheld: prompts (refused by upstream)
withheld: pushNotifications (refused by downstream)
withheld: resources (refused by upstream)
withheld: resources.subscribe (refused by upstream)
withheld: tasks.list (refused by upstream)
withheld: tools.listChanged (refused by upstream)
advertise: {"tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}, "tools": {}}
"""


def test_example_prints_the_agreement() -> None:
    run = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True)
    assert run.stdout == EXPECTED


def test_docs_page_shows_the_example_and_its_output() -> None:
    page = (ROOT / "docs" / "bridge.md").read_text()
    code = re.search(r"## Worked example\n.*?```python\n(.*?)```", page, re.S)
    shown = re.search(r"Output:\n\n```text\n(.*?)```", page, re.S)
    assert code is not None
    assert shown is not None
    assert code.group(1) == EXAMPLE.read_text()
    assert shown.group(1) == EXPECTED
