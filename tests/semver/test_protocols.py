"""Seed 000 (Bernstein's protocol_negotiation) as tests, plus the edges it left open."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from datetime import date, datetime
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_negotiation import Policy
from mcp_negotiation.core import revisions
from mcp_negotiation.semver.protocols import (
    MCP_SEMVER,
    NegotiationResult,
    ProtocolName,
    ProtocolVersion,
    get_supported_versions,
    negotiate_version,
    version_is_compatible,
)

ROOT = Path(__file__).resolve().parents[2]


def v(text: str, *capabilities: str, protocol: str = "mcp") -> ProtocolVersion:
    major, minor, patch = (int(part) for part in text.split("."))
    return ProtocolVersion(protocol, major, minor, patch, frozenset(capabilities))


def negotiated(result: NegotiationResult) -> ProtocolVersion:
    assert result.negotiated_version is not None
    return result.negotiated_version


# --- The seed's usage example and algorithm, step by step -------------------------------


def test_seed_usage_example() -> None:
    local = get_supported_versions("mcp")
    remote = [ProtocolVersion(protocol="mcp", major=1, minor=0, patch=0)]
    result = negotiate_version(local, remote)
    assert result.success
    assert negotiated(result).version_string == "1.0.0"
    assert negotiated(result) is local[0]
    assert result.degraded_capabilities == local[-1].capabilities - local[0].capabilities
    assert "elicitation" in result.degraded_capabilities


def test_result_fields_are_the_seeds() -> None:
    result = negotiate_version([v("1.0.0")], [v("1.0.0")])
    assert set(NegotiationResult.__dataclass_fields__) == {
        "local_version",
        "remote_version",
        "negotiated_version",
        "degraded_capabilities",
        "success",
    }
    assert isinstance(result.degraded_capabilities, frozenset)


def test_lists_are_sorted_before_anything_else() -> None:
    ordered = negotiate_version([v("1.0.0"), v("1.1.0"), v("2.0.0")], [v("1.0.0"), v("1.1.0")])
    shuffled = negotiate_version([v("2.0.0"), v("1.0.0"), v("1.1.0")], [v("1.1.0"), v("1.0.0")])
    assert ordered == shuffled
    assert negotiated(shuffled).version_string == "1.1.0"
    assert shuffled.local_version.version_string == "2.0.0"


def test_no_shared_major_fails_and_still_reports_each_best() -> None:
    result = negotiate_version([v("1.0.0", "a"), v("1.4.2", "a", "b")], [v("2.0.0"), v("3.1.0")])
    assert not result.success
    assert result.negotiated_version is None
    assert result.degraded_capabilities == frozenset()
    assert result.local_version.version_string == "1.4.2"
    assert result.remote_version.version_string == "3.1.0"


def test_highest_shared_major_wins() -> None:
    result = negotiate_version([v("1.0.0"), v("2.0.0"), v("3.0.0")], [v("1.5.0"), v("2.0.0"), v("4.0.0")])
    assert negotiated(result).version_string == "2.0.0"


def test_highest_shared_minor_within_the_major() -> None:
    result = negotiate_version([v("2.0.0"), v("2.1.0"), v("2.3.0")], [v("2.1.0"), v("2.2.0"), v("2.3.0")])
    assert negotiated(result).version_string == "2.3.0"
    result = negotiate_version([v("2.0.0"), v("2.1.0"), v("2.3.0")], [v("2.0.0"), v("2.1.0"), v("2.2.0")])
    assert negotiated(result).version_string == "2.1.0"


def test_a_version_both_list_is_the_local_entry() -> None:
    mine = v("1.1.0", "a", "b")
    result = negotiate_version([v("1.0.0", "a"), mine, v("1.2.0", "a", "b", "c")], [v("1.1.0", "z")])
    assert negotiated(result) is mine
    assert result.degraded_capabilities == {"c"}


def test_degraded_is_from_the_local_point_of_view() -> None:
    ours = [v("1.0.0", "a"), v("1.1.0", "a", "b")]
    theirs = [v("1.0.0", "a"), v("1.1.0", "a", "x")]
    assert negotiate_version(ours, theirs).degraded_capabilities == frozenset()  # "x" is not ours to lose
    assert negotiate_version(theirs, ours).degraded_capabilities == frozenset()


# --- The fallback: a version only one side lists ----------------------------------------


def test_fallback_to_the_lower_sides_highest_minor_when_we_are_lower() -> None:
    ours = [v("1.0.0", "tasks"), v("1.2.0", "tasks", "streaming", "push")]
    theirs = [v("1.1.0", "tasks", "streaming"), v("1.3.0", "tasks", "streaming", "push", "list")]
    result = negotiate_version(ours, theirs)
    assert result.success
    # Seed step 4: the lower side's highest minor, as that side declared it; they speak 1.3.
    assert negotiated(result) is ours[1]
    assert result.degraded_capabilities == frozenset()  # we settle on our own best


def test_fallback_to_the_lower_sides_highest_minor_when_they_are_lower() -> None:
    ours = [v("1.0.0", "a"), v("1.3.0", "a", "b", "c", "d")]
    theirs = [v("1.1.0", "a", "b"), v("1.2.0", "a", "b", "c")]
    result = negotiate_version(ours, theirs)
    assert negotiated(result) is theirs[1]  # only they list it: their entry
    assert result.degraded_capabilities == {"d"}  # what our 1.3.0 has and their 1.2.0 lacks


def test_fallback_where_the_higher_side_lists_nothing_below() -> None:
    mine = v("1.2.0", "a")
    result = negotiate_version([mine], [v("1.4.0", "a", "b")])
    assert negotiated(result) is mine
    assert result.degraded_capabilities == frozenset()


def test_what_the_remote_declares_never_costs_us_more() -> None:
    """Declaring more at a higher version is not a reason for the local side to lose it."""
    lacking = negotiate_version([v("1.2.0", "a")], [v("1.2.0")])
    richer = negotiate_version([v("1.2.0", "a")], [v("1.4.0", "a")])
    assert lacking.degraded_capabilities == richer.degraded_capabilities == frozenset()


def test_fallback_is_within_the_highest_shared_major() -> None:
    result = negotiate_version([v("1.9.0"), v("2.0.0"), v("2.2.0")], [v("1.9.0"), v("2.1.0"), v("3.0.0")])
    assert negotiated(result).version_string == "2.1.0"


def test_highest_patch_both_list() -> None:
    result = negotiate_version([v("1.0.0"), v("1.0.2"), v("1.0.5")], [v("1.0.0"), v("1.0.2"), v("1.0.3")])
    assert negotiated(result).version_string == "1.0.2"


def test_no_shared_patch_takes_the_lower_sides_highest_patch() -> None:
    theirs = v("1.0.2", "a", "b")
    result = negotiate_version([v("1.0.1", "a"), v("1.0.4", "a", "b", "c")], [theirs])
    assert negotiated(result) is theirs  # only the remote lists it
    assert result.degraded_capabilities == {"c"}


# --- version_is_compatible ---------------------------------------------------------------


def test_version_is_compatible_compares_majors_only() -> None:
    assert version_is_compatible(v("1.0.0", "a"), v("1.9.9", "b"))
    assert not version_is_compatible(v("1.0.0"), v("2.0.0"))
    assert version_is_compatible(v("0.1.0", protocol="acp"), v("0.2.0", protocol="acp"))


def test_version_is_compatible_refuses_different_protocols() -> None:
    with pytest.raises(ValueError, match="different protocols"):
        version_is_compatible(v("1.0.0"), v("1.0.0", protocol="a2a"))
    with pytest.raises(ValueError, match="must be a ProtocolVersion"):
        version_is_compatible(v("1.0.0"), "1.0.0")  # type: ignore[arg-type]


# --- Clear errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "remote", "message"),
    [
        ([], [v("1.0.0")], "local version list is empty"),
        ([v("1.0.0")], [], "remote version list is empty"),
        (
            [v("1.0.0"), v("1.1.0", protocol="a2a")],
            [v("1.0.0")],
            "local version list mixes protocols: a2a, mcp",
        ),
        ([v("1.0.0")], [v("1.0.0", protocol="acp"), v("1.0.0")], "remote version list mixes protocols"),
        ([v("1.0.0")], [v("1.0.0", protocol="a2a")], "different protocols"),
        ([v("1.0.0", "a"), v("1.0.0", "b")], [v("1.0.0")], "has 1.0.0 more than once"),
        (["1.0.0"], [v("1.0.0")], "must hold ProtocolVersion values"),
    ],
)
def test_negotiate_version_rejects_bad_lists(
    local: list[ProtocolVersion], remote: list[ProtocolVersion], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        negotiate_version(local, remote)


@pytest.mark.parametrize(
    ("numbers", "message"),
    [
        ((-1, 0, 0), "major cannot be negative"),
        ((1, -2, 0), "minor cannot be negative"),
        ((1, 0, -3), "patch cannot be negative"),
        ((1.0, 0, 0), "major must be an int"),
        ((1, "2", 0), "minor must be an int"),
        ((1, 0, True), "patch must be an int"),
    ],
)
def test_protocol_version_rejects_bad_numbers(numbers: tuple[object, object, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProtocolVersion("mcp", *numbers)  # type: ignore[arg-type]


def test_protocol_names() -> None:
    assert ProtocolVersion("a2a", 1, 0, 0).protocol is ProtocolName.A2A
    assert ProtocolVersion(ProtocolName.ACP, 0, 1, 0).protocol == "acp"
    assert [str(name) for name in ProtocolName] == ["mcp", "a2a", "acp"]
    with pytest.raises(ValueError, match="unknown protocol 'grpc'; expected one of mcp, a2a, acp"):
        ProtocolVersion("grpc", 1, 0, 0)
    with pytest.raises(ValueError, match="unknown protocol 'MCP'"):
        get_supported_versions("MCP")


def test_capabilities() -> None:
    version = ProtocolVersion("mcp", 1, 2, 3, ["b", "a", "a"])
    assert version.capabilities == frozenset({"a", "b"})
    assert version.version_string == "1.2.3"
    assert ProtocolVersion("mcp", 1, 0, 0).capabilities == frozenset()
    with pytest.raises(ValueError, match="not the single string 'streaming'"):
        ProtocolVersion("a2a", 1, 0, 0, "streaming")
    with pytest.raises(ValueError, match="non-empty strings"):
        ProtocolVersion("a2a", 1, 0, 0, {""})


# --- get_supported_versions ---------------------------------------------------------------


def test_mcp_semver_view() -> None:
    assert dict(MCP_SEMVER) == {
        "2024-11-05": (1, 0, 0),
        "2025-03-26": (1, 1, 0),
        "2025-06-18": (2, 0, 0),
        "2025-11-25": (2, 1, 0),
        "2026-07-28": (3, 0, 0),
    }
    versions = get_supported_versions(ProtocolName.MCP, months_since_deprecation=0)
    assert [x.version_string for x in versions] == ["1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0"]
    by_revision = dict(zip(revisions.KNOWN, versions, strict=True))
    assert "batching" in by_revision["2025-03-26"].capabilities
    assert "batching" not in by_revision["2025-06-18"].capabilities
    assert "sessions" not in by_revision["2026-07-28"].capabilities
    assert "tasks" in by_revision["2025-11-25"].capabilities


def test_mcp_minors_are_additive() -> None:
    versions = get_supported_versions("mcp", months_since_deprecation=0)
    for older, newer in pairwise(versions):
        if older.major == newer.major:
            assert older.capabilities <= newer.capabilities


def test_deprecated_features_present_while_the_window_is_open() -> None:
    latest = get_supported_versions("mcp", months_since_deprecation=0)[-1]
    assert {"roots", "sampling", "logging", "sampling.tools"} <= latest.capabilities


@pytest.mark.parametrize("months", [12, 13, 60])
def test_deprecated_features_gone_once_the_window_closes(months: int) -> None:
    versions = get_supported_versions("mcp", months_since_deprecation=months)
    for version in versions:
        assert not {c for c in version.capabilities if revisions.is_deprecated(c)}
    assert {"elicitation", "completions"} <= versions[-1].capabilities


def test_the_window_is_revisions_own() -> None:
    for months in range(15):
        latest = get_supported_versions("mcp", months_since_deprecation=months)[-1]
        assert ("roots" in latest.capabilities) is revisions.deprecation_window_open(
            months_since_deprecation=months
        )
    assert "logging" in get_supported_versions("mcp", today=date(2027, 7, 27))[-1].capabilities
    assert "logging" not in get_supported_versions("mcp", today=date(2027, 7, 28))[-1].capabilities
    with pytest.raises(ValueError, match="cannot be negative"):
        get_supported_versions("a2a", months_since_deprecation=-1)


_NOT_A_MONTH_COUNT = "months_since_deprecation must be a whole number of months"
_NOT_A_DAY = "today must be a datetime.date"


@pytest.mark.parametrize(
    ("clock", "message"),
    [
        ({"months_since_deprecation": True}, _NOT_A_MONTH_COUNT),
        ({"months_since_deprecation": math.nan}, _NOT_A_MONTH_COUNT),
        ({"months_since_deprecation": 11.9}, _NOT_A_MONTH_COUNT),
        ({"months_since_deprecation": 12.0}, _NOT_A_MONTH_COUNT),
        ({"months_since_deprecation": "3"}, _NOT_A_MONTH_COUNT),
        ({"today": datetime(2027, 1, 1, 12, 0)}, _NOT_A_DAY),
        ({"today": "2027-01-01"}, _NOT_A_DAY),
        ({"today": "not a date", "months_since_deprecation": 0}, _NOT_A_DAY),
    ],
)
@pytest.mark.parametrize("protocol", ["mcp", "a2a"])
def test_deprecation_clock_of_the_wrong_type_is_refused_as_policy_refuses_it(
    clock: dict[str, object], message: str, protocol: str
) -> None:
    with pytest.raises(ValueError, match=message):
        get_supported_versions(protocol, **clock)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=message):  # Policy's own error class, the same words
        Policy(**clock)  # type: ignore[arg-type]


def test_today_and_months_together_must_name_the_same_month() -> None:
    with pytest.raises(ValueError, match=r"41 whole months after .*not months_since_deprecation=0"):
        get_supported_versions("mcp", months_since_deprecation=0, today=date(2030, 1, 1))
    with pytest.raises(ValueError, match="pass one of them"):
        Policy(months_since_deprecation=0, today=date(2030, 1, 1))
    # 2027-01-15 is five whole months after 2026-07-28: no conflict, the window is open.
    both = get_supported_versions("mcp", months_since_deprecation=5, today=date(2027, 1, 15))
    assert both == get_supported_versions("mcp", months_since_deprecation=5)
    assert "roots" in both[-1].capabilities


def test_a2a_versions() -> None:
    versions = get_supported_versions("a2a")
    assert [x.version_string for x in versions] == [
        "0.1.0",
        "0.2.0",
        "0.2.1",
        "0.2.2",
        "0.2.3",
        "0.2.4",
        "0.2.5",
        "0.2.6",
        "0.3.0",
        "1.0.0",
        "1.0.1",
    ]
    by_version = {x.version_string: x.capabilities for x in versions}
    assert {"streaming", "pushNotifications", "tasks"} <= by_version["0.1.0"]
    assert "extendedAgentCard" not in by_version["0.2.0"]
    assert "extendedAgentCard" in by_version["0.2.1"]
    assert "tasks.list" in by_version["1.0.0"] - by_version["0.3.0"]
    assert "stateTransitionHistory" in by_version["0.3.0"] - by_version["1.0.0"]
    assert all(x.protocol is ProtocolName.A2A for x in versions)


def test_acp_versions() -> None:
    versions = get_supported_versions("acp")
    assert [x.version_string for x in versions] == ["0.1.0", "0.2.0"]
    assert {"runs.stream", "runs.await", "sessions"} <= versions[0].capabilities
    assert versions[1].capabilities - versions[0].capabilities == {"ping", "runs.events"}


def test_supported_lists_are_fresh_copies() -> None:
    first = get_supported_versions("a2a")
    first.clear()
    assert get_supported_versions("a2a")


def test_negotiating_a2a_0x_against_our_list() -> None:
    remote = [v("0.2.5", protocol="a2a"), v("0.3.0", protocol="a2a")]
    result = negotiate_version(get_supported_versions("a2a"), remote)
    assert negotiated(result).version_string == "0.3.0"
    assert result.degraded_capabilities == {"tasks.list", "multiTenancy"}


# --- Properties ---------------------------------------------------------------------------

_CAPABILITIES = st.frozensets(st.sampled_from("abcde"), max_size=5)
_TRIPLES = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 2))
_VERSION_LISTS = st.dictionaries(_TRIPLES, _CAPABILITIES, min_size=1, max_size=8).map(
    lambda table: [ProtocolVersion("a2a", *key, capabilities=caps) for key, caps in table.items()]
)


Versions = list[ProtocolVersion]


def _key(version: ProtocolVersion) -> tuple[int, int, int]:
    return (version.major, version.minor, version.patch)


@given(_VERSION_LISTS, _VERSION_LISTS)
def test_never_newer_than_either_sides_best(local: Versions, remote: Versions) -> None:
    result = negotiate_version(local, remote)
    assert result.local_version == max(local, key=_key)
    assert result.remote_version == max(remote, key=_key)
    if result.negotiated_version is not None:
        assert _key(result.negotiated_version) <= _key(result.local_version)
        assert _key(result.negotiated_version) <= _key(result.remote_version)


@given(_VERSION_LISTS, _VERSION_LISTS)
def test_success_iff_a_major_is_shared(local: Versions, remote: Versions) -> None:
    result = negotiate_version(local, remote)
    shared = {x.major for x in local} & {x.major for x in remote}
    assert result.success is bool(shared)
    assert (result.negotiated_version is None) is not result.success
    if result.negotiated_version is not None:
        assert result.negotiated_version.major == max(shared)


@given(_VERSION_LISTS, _VERSION_LISTS)
def test_degraded_is_within_the_local_best(local: Versions, remote: Versions) -> None:
    result = negotiate_version(local, remote)
    assert result.degraded_capabilities <= result.local_version.capabilities
    if result.negotiated_version is not None:
        assert result.degraded_capabilities == (
            result.local_version.capabilities - result.negotiated_version.capabilities
        )


@given(_VERSION_LISTS, _VERSION_LISTS)
def test_the_negotiated_version_is_an_entry_of_a_list(local: Versions, remote: Versions) -> None:
    """Never a rebuilt value: the local entry when both list it, else the one side's entry."""
    result = negotiate_version(local, remote)
    chosen = result.negotiated_version
    if chosen is None:
        return
    mine = {_key(x): x for x in local}
    theirs = {_key(x): x for x in remote}
    key = _key(chosen)
    assert chosen is (mine[key] if key in mine else theirs[key])


@given(_VERSION_LISTS, _VERSION_LISTS)
def test_settling_on_our_own_best_costs_nothing(local: Versions, remote: Versions) -> None:
    result = negotiate_version(local, remote)
    if result.negotiated_version is not None and _key(result.negotiated_version) == _key(
        result.local_version
    ):
        assert result.degraded_capabilities == frozenset()


# --- The worked example in docs/protocols.md runs and prints what the page shows ---------


def test_docs_example_runs() -> None:
    page = (ROOT / "docs" / "protocols.md").read_text()
    code = re.search(r"## Worked example\n\n```python\n(.*?)```", page, re.S)
    shown = re.search(r"Output:\n\n```text\n(.*?)```", page, re.S)
    assert code is not None
    assert shown is not None
    run = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True)
    assert run.stdout == shown.group(1)


def test_a_shared_minor_wins_over_the_fallback_as_the_seed_has_it() -> None:
    """Documented, not an accident: adding a shared 1.0 moves the answer from 1.2 to 1.0."""

    def versions(*numbers: tuple[int, int]) -> list[ProtocolVersion]:
        return [ProtocolVersion("a2a", major, minor, 0) for major, minor in numbers]

    assert negotiate_version(
        versions((1, 2)), versions((1, 1), (1, 3))
    ).negotiated_version == ProtocolVersion("a2a", 1, 2, 0)
    shared = negotiate_version(versions((1, 0), (1, 2)), versions((1, 0), (1, 1), (1, 3)))
    assert shared.negotiated_version == ProtocolVersion("a2a", 1, 0, 0)
