"""The MCP revision registry: the enumerated set, eras, ordering and the deprecation window.

The SDK's own registry (`mcp_types.version`) is the reference: our sets must equal it,
and our ordering must agree with `is_version_at_least` on every pair.
"""

from __future__ import annotations

import itertools
from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import version as sdk_version

from mcp_negotiation.core import revisions
from mcp_negotiation.core.revisions import KNOWN, LEGACY, MODERN

UNKNOWN_STRINGS = ["zzz", "", "2099-01-01", "2024-11-04", "2025-6-18", " 2025-06-18", "2025-06-18 ", "DRAFT"]
NOT_STRINGS: list[object] = [None, 0, 20250618, 1.5, b"2025-06-18", ["2025-06-18"], {"v": 1}, ("2025-06-18",)]
unknown_text = st.text().filter(lambda s: s not in KNOWN)


# --- The enumerated set --------------------------------------------------------------------


def test_known_equals_the_sdk_registry() -> None:
    assert KNOWN == sdk_version.KNOWN_PROTOCOL_VERSIONS


def test_legacy_equals_the_sdk_handshake_revisions() -> None:
    assert LEGACY == sdk_version.HANDSHAKE_PROTOCOL_VERSIONS


def test_modern_equals_the_sdk_modern_revisions() -> None:
    assert MODERN == sdk_version.MODERN_PROTOCOL_VERSIONS


def test_the_issue_names_exactly_these_revisions() -> None:
    assert KNOWN == ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
    assert set(LEGACY) | set(MODERN) == set(KNOWN)
    assert not set(LEGACY) & set(MODERN)


# --- era -----------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", LEGACY)
def test_era_of_legacy_revisions(revision: str) -> None:
    assert revisions.era(revision) == "legacy"


@pytest.mark.parametrize("revision", MODERN)
def test_era_of_modern_revisions(revision: str) -> None:
    assert revisions.era(revision) == "modern"


@pytest.mark.parametrize("value", UNKNOWN_STRINGS + NOT_STRINGS)
def test_era_of_anything_else_is_unknown(value: object) -> None:
    # Includes unhashable values (lists, dicts): "anything unrecognised" never raises.
    assert revisions.era(value) == "unknown"


@given(unknown_text)
def test_era_of_arbitrary_text_is_unknown(value: str) -> None:
    assert revisions.era(value) == "unknown"


# --- all() and latest() --------------------------------------------------------------------


def test_all_is_newest_first() -> None:
    assert revisions.all() == tuple(reversed(sdk_version.KNOWN_PROTOCOL_VERSIONS))
    assert revisions.all()[0] == sdk_version.LATEST_PROTOCOL_VERSION
    assert revisions.all()[-1] == sdk_version.OLDEST_SUPPORTED_VERSION


def test_all_is_a_fresh_immutable_tuple() -> None:
    assert isinstance(revisions.all(), tuple)
    assert len(revisions.all()) == len(set(revisions.all())) == 5


def test_latest_legacy_is_the_sdk_latest_handshake_version() -> None:
    assert revisions.latest("legacy") == sdk_version.LATEST_HANDSHAKE_VERSION == "2025-11-25"


def test_latest_modern_is_the_sdk_latest_modern_version() -> None:
    assert revisions.latest("modern") == sdk_version.LATEST_MODERN_VERSION == "2026-07-28"


@pytest.mark.parametrize("name", ["unknown", "", "LEGACY", "both"])
def test_latest_of_an_unknown_era_raises(name: str) -> None:
    with pytest.raises(ValueError, match="era must be"):
        revisions.latest(name)  # type: ignore[arg-type]


# --- is_at_least: a total order on KNOWN ------------------------------------------------------

PAIRS = list(itertools.product(KNOWN, repeat=2))


@pytest.mark.parametrize(("revision", "minimum"), PAIRS)
def test_is_at_least_agrees_with_the_sdk(revision: str, minimum: str) -> None:
    assert revisions.is_at_least(revision, minimum) is sdk_version.is_version_at_least(revision, minimum)
    assert revisions.is_at_least(revision, minimum) is (KNOWN.index(revision) >= KNOWN.index(minimum))


@pytest.mark.parametrize("revision", KNOWN)
def test_is_at_least_is_reflexive(revision: str) -> None:
    assert revisions.is_at_least(revision, revision)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_is_at_least_is_antisymmetric_and_total(a: str, b: str) -> None:
    ab, ba = revisions.is_at_least(a, b), revisions.is_at_least(b, a)
    assert ab or ba  # total
    if ab and ba:  # antisymmetric
        assert a == b


@pytest.mark.parametrize(("a", "b", "c"), list(itertools.product(KNOWN, repeat=3)))
def test_is_at_least_is_transitive(a: str, b: str, c: str) -> None:
    if revisions.is_at_least(a, b) and revisions.is_at_least(b, c):
        assert revisions.is_at_least(a, c)


def test_is_at_least_is_not_string_order() -> None:
    # "zzz" sorts after every date as a string, but satisfies no minimum.
    assert sorted([*KNOWN, "zzz"])[-1] == "zzz"
    assert not revisions.is_at_least("zzz", KNOWN[0])
    assert not revisions.is_at_least("2099-01-01", KNOWN[0])


@pytest.mark.parametrize("minimum", KNOWN)
@pytest.mark.parametrize("value", UNKNOWN_STRINGS + NOT_STRINGS)
def test_an_unknown_revision_satisfies_no_minimum(value: object, minimum: str) -> None:
    assert revisions.is_at_least(value, minimum) is False


@given(unknown_text, st.sampled_from(KNOWN))
def test_arbitrary_text_satisfies_no_minimum(value: str, minimum: str) -> None:
    assert revisions.is_at_least(value, minimum) is False


@given(st.sampled_from(KNOWN), st.sampled_from(KNOWN))
def test_is_at_least_matches_the_sdk_for_any_pair(revision: str, minimum: str) -> None:
    assert revisions.is_at_least(revision, minimum) == sdk_version.is_version_at_least(revision, minimum)


@pytest.mark.parametrize("minimum", [*UNKNOWN_STRINGS, None, 1, ["2025-06-18"]])
def test_an_unknown_minimum_raises(minimum: object) -> None:
    with pytest.raises(ValueError, match="minimum must be one of"):
        revisions.is_at_least("2025-06-18", minimum)  # type: ignore[arg-type]


@given(unknown_text)
def test_any_unknown_minimum_raises_even_for_a_known_revision(minimum: str) -> None:
    with pytest.raises(ValueError, match="minimum"):
        revisions.is_at_least(KNOWN[-1], minimum)


# --- known_revisions and is_deprecated ------------------------------------------------------


def test_known_revisions_filters_orders_and_deduplicates() -> None:
    values = ["2026-07-28", "zzz", "2024-11-05", 7, None, "2026-07-28", "2025-06-18"]
    assert revisions.known_revisions(values) == ("2024-11-05", "2025-06-18", "2026-07-28")
    assert revisions.known_revisions([]) == ()
    assert revisions.known_revisions(["zzz", ""]) == ()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("roots", True),
        ("roots.listChanged", True),
        ("sampling", True),
        ("sampling.tools", True),
        ("logging", True),
        ("logging.setLevel", True),
        ("elicitation", False),
        ("tasks", False),
        ("rootsy", False),
        ("", False),
        (None, False),
    ],
)
def test_is_deprecated(name: str | None, expected: bool) -> None:
    assert revisions.is_deprecated(name) is expected  # type: ignore[arg-type]


def test_deprecated_features_are_the_sep_2577_trio() -> None:
    assert frozenset({"roots", "sampling", "logging"}) == revisions.DEPRECATED_FEATURES


# --- The deprecation window -------------------------------------------------------------------


def test_deprecation_dates() -> None:
    assert date(2026, 7, 28) == revisions.DEPRECATION_DATE
    assert date(2027, 7, 28) == revisions.DEFAULT_REMOVAL_DATE


@pytest.mark.parametrize("months", range(12))
def test_window_is_open_for_the_first_twelve_months(months: int) -> None:
    assert revisions.deprecation_window_open(months_since_deprecation=months) is True


@pytest.mark.parametrize("months", [12, 13, 24, 120])
def test_window_is_closed_from_month_twelve(months: int) -> None:
    assert revisions.deprecation_window_open(months_since_deprecation=months) is False


@pytest.mark.parametrize("months", [-1, -12])
def test_negative_months_raise(months: int) -> None:
    with pytest.raises(ValueError, match="negative"):
        revisions.deprecation_window_open(months_since_deprecation=months)


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        (date(2026, 7, 28), True),
        (date(2027, 7, 27), True),
        (date(2027, 7, 28), False),
        (date(2030, 1, 1), False),
        (date(2020, 1, 1), True),
    ],
)
def test_window_by_date(today: date, expected: bool) -> None:
    assert revisions.deprecation_window_open(today=today) is expected


def test_window_with_a_custom_removal_date() -> None:
    removal = date(2027, 1, 28)  # six months after the deprecation
    assert revisions.deprecation_window_open(months_since_deprecation=5, removal=removal) is True
    assert revisions.deprecation_window_open(months_since_deprecation=6, removal=removal) is False
    assert revisions.deprecation_window_open(today=removal - timedelta(days=1), removal=removal) is True
    assert revisions.deprecation_window_open(today=removal, removal=removal) is False


@given(st.integers(min_value=0, max_value=10_000))
def test_window_by_months_is_a_threshold(months: int) -> None:
    assert revisions.deprecation_window_open(months_since_deprecation=months) is (months < 12)


def test_a_star_import_leaves_the_builtin_all_alone() -> None:
    namespace: dict[str, object] = {}
    exec("from mcp_negotiation.core.revisions import *", namespace)
    assert "all" not in namespace
    assert "KNOWN" in namespace
