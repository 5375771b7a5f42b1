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

from mcp_negotiation.core import revisions
from mcp_negotiation.semver.bridge import (
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
from mcp_negotiation.semver.protocols import ProtocolName

ROOT = Path(__file__).resolve().parents[2]
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
    with pytest.raises(ValueError, match="version is a revision date"):
        Leg("client", "mcp", "1.0.0", {"tools"})
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


@pytest.mark.parametrize(
    ("pairs", "downstream", "upstream", "served", "withheld"),
    [
        # The downstream itself offers `a2a:b`: the upstream's `b` moves on to `a2a:a2a:b`.
        (
            {"a": "b"},
            {"a2a:b", "b"},
            {"a", "b"},
            {"b"},
            {"a2a:b": RefusedBy.UPSTREAM, "a2a:a2a:b": RefusedBy.DOWNSTREAM},
        ),
        # A translated feature is called `a2a:b`: three upstream features, three records.
        (
            {"a": "b", "c": "a2a:b"},
            set(),
            {"a", "b", "c"},
            set(),
            {"b": RefusedBy.DOWNSTREAM, "a2a:b": RefusedBy.DOWNSTREAM, "a2a:a2a:b": RefusedBy.DOWNSTREAM},
        ),
        # A served feature is called `a2a:b`: it is not also withheld.
        (
            {"a": "a2a:b", "c": "b"},
            {"a2a:b"},
            {"a", "b", "c"},
            {"a2a:b"},
            {"b": RefusedBy.DOWNSTREAM, "a2a:a2a:b": RefusedBy.DOWNSTREAM},
        ),
        # The upstream's own `a2a:b` keeps its name; its qualified `b` does not merge into it.
        (
            {"a": "b"},
            set(),
            {"a", "b", "a2a:b"},
            set(),
            {"b": RefusedBy.DOWNSTREAM, "a2a:b": RefusedBy.DOWNSTREAM, "a2a:a2a:b": RefusedBy.DOWNSTREAM},
        ),
    ],
)
def test_a_qualified_name_never_takes_another_records_name(
    pairs: dict[str, str],
    downstream: set[str],
    upstream: set[str],
    served: set[str],
    withheld: dict[str, RefusedBy],
) -> None:
    agreement = agree(mcp(*downstream), a2a(*upstream), FeatureMapping("a2a", "mcp", pairs))
    assert agreement.served == served
    assert refusals(agreement) == withheld
    assert len(agreement.withheld) == len(withheld)


class _CountedName(str):
    """A feature name that counts the equality tests made on it, the unit of a lookup's work."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_agree_looks_each_feature_up_instead_of_scanning_the_mapping() -> None:
    """The work done per feature does not grow with the table (no timing: comparisons)."""
    size = 2_000
    pairs = {_CountedName(f"a{i}"): _CountedName(f"m{i}") for i in range(size)}
    mapping = FeatureMapping("a2a", "mcp", pairs)
    downstream = mcp(*(_CountedName(f"m{i}") for i in range(size)))
    upstream = a2a(*(_CountedName(f"a{i}") for i in range(size)))
    _CountedName.compared = 0
    agreement = agree(downstream, upstream, mapping)
    compared = _CountedName.compared
    assert compared <= 10 * size  # a scan of the pairs per feature: ~size**2 / 2
    assert agreement.served == {f"m{i}" for i in range(size)}
    assert agreement.withheld == ()


def test_feature_mapping_equality_is_its_pairs() -> None:
    """The lookup index is derived from `pairs`, so it neither shows nor decides equality."""
    from_dict = FeatureMapping("a2a", "mcp", {"skills": "tools", "tasks": "tasks"})
    from_pairs = FeatureMapping("a2a", "mcp", [("tasks", "tasks"), ("skills", "tools")])
    assert from_dict == from_pairs
    assert hash(from_dict) == hash(from_pairs)
    assert "tools" in repr(from_dict)
    assert repr(from_dict).count("tools") == 1
    assert from_pairs.translate("tools", source="mcp") == "skills"


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


def _check_partition(agreement: Agreement, mapping: FeatureMapping = A2A_MCP) -> None:
    """Seed 003's promise, for any mapping: every dropped feature has one record of its own.

    Checked by accounting, not by predicting names: each upstream feature is served, or
    withheld under its translation, or is the one `both` record of a name the downstream
    shares, or has one `downstream` record of its own; each unserved downstream feature
    is refused by the upstream or by both.
    """
    down, up = agreement.downstream, agreement.upstream
    by_name = refusals(agreement)
    assert len(by_name) == len(agreement.withheld)  # no name is withheld twice
    assert list(agreement.withheld) == sorted(agreement.withheld)
    assert agreement.served.isdisjoint(by_name)
    assert agreement.served <= down.features
    for feature in down.features - agreement.served:
        assert by_name[feature] in (RefusedBy.UPSTREAM, RefusedBy.BOTH)
    for feature in up.features:
        counterpart = (
            feature if up.protocol is down.protocol else mapping.translate(feature, source=up.protocol)
        )
        if counterpart is not None and counterpart not in agreement.served:
            assert by_name[counterpart] is RefusedBy.DOWNSTREAM
    blamed_downstream = {name for name, side in by_name.items() if side is RefusedBy.DOWNSTREAM}
    assert blamed_downstream.isdisjoint(down.features)  # never refused by the side offering it
    assert set(by_name) - blamed_downstream <= down.features
    both = [name for name, side in by_name.items() if side is RefusedBy.BOTH]
    assert len(agreement.served) + len(blamed_downstream) + len(both) == len(up.features)


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


_TRICKY = ("a", "b", "c", "a2a:b", "a2a:c", "a2a:a2a:b", "mcp:a")
"""Names that collide with their own qualified forms, in both directions."""


@st.composite
def _mapped_legs(draw: st.DrawFn) -> tuple[FeatureMapping, frozenset[str], frozenset[str]]:
    left = draw(st.lists(st.sampled_from(_TRICKY), unique=True, max_size=5))
    right = draw(st.permutations(_TRICKY))[: len(left)]
    mapping = FeatureMapping("a2a", "mcp", dict(zip(left, right, strict=True)))
    names = st.frozensets(st.sampled_from(_TRICKY))
    return mapping, draw(names), draw(names)


@given(_mapped_legs())
def test_every_dropped_feature_has_one_record_whatever_the_mapping(
    legs: tuple[FeatureMapping, frozenset[str], frozenset[str]],
) -> None:
    mapping, mcp_features, a2a_features = legs
    _check_partition(agree(mcp(*mcp_features), a2a(*a2a_features), mapping), mapping)
    _check_partition(agree(a2a(*a2a_features), mcp(*mcp_features), mapping), mapping)


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
