"""`Policy` (and the `UcpPolicy` it carries): what it accepts, what it refuses at
construction, and what it withdraws. Every slip an author can make in a Policy is caught
here, when the Policy is built, rather than on each request later."""

from __future__ import annotations

import dataclasses
import datetime
from datetime import date
from typing import Any

import pytest

from mcp_negotiation.core import revisions
from mcp_negotiation.core.negotiation import Policy
from mcp_negotiation.core.revisions import KNOWN
from mcp_negotiation.ucp import UcpPolicy
from ucp_shop import BUSINESS_PROFILE

MODERN = "2026-07-28"


def test_default_policy_accepts_every_known_revision() -> None:
    assert Policy().accepted() == KNOWN
    assert Policy().advertise == "modern"


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        ("2025-06-18", None, ("2025-06-18", "2025-11-25", MODERN)),
        (None, "2025-03-26", ("2024-11-05", "2025-03-26")),
        ("2025-03-26", "2025-11-25", ("2025-03-26", "2025-06-18", "2025-11-25")),
        (MODERN, MODERN, (MODERN,)),
    ],
)
def test_policy_bounds(low: str | None, high: str | None, expected: tuple[str, ...]) -> None:
    assert Policy(min_revision=low, max_revision=high).accepted() == expected


@pytest.mark.parametrize("value", ["zzz", "", "2099-01-01", "2025-6-18"])
@pytest.mark.parametrize("field", ["min_revision", "max_revision"])
def test_policy_unknown_revision_raises(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=field):
        Policy(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("low", "high"), [("2025-11-25", "2025-03-26"), (MODERN, "2025-11-25")])
def test_policy_accepting_nothing_raises(low: str, high: str) -> None:
    with pytest.raises(ValueError, match="accepts no revision"):
        Policy(min_revision=low, max_revision=high)


SERVER_SIDE = ("structured_output", "logging", "sessions")


@pytest.mark.parametrize(
    "name", ["nope", "telepathy", "", "/", "sampling.foo", "ROOTS", "experimental.", *SERVER_SIDE]
)
def test_policy_unknown_required_capability_raises(name: str) -> None:
    # Server-side rows are not client capabilities: requiring them of a client is a mistake.
    with pytest.raises(ValueError, match="required_capabilities") as raised:
        Policy(required_capabilities=(name,))
    said = "unknown client capability"
    if name in SERVER_SIDE:
        said = "is a server feature, not a client capability"
    assert said in str(raised.value)


@pytest.mark.parametrize(
    "name", ["sampling", "roots.listChanged", "elicitation.url", "tasks", "io.x/y", "experimental.foo"]
)
def test_policy_known_required_capability_is_accepted(name: str) -> None:
    assert Policy(required_capabilities=[name]).required_capabilities == (name,)  # type: ignore[arg-type]


def test_policy_single_required_string_is_one_name() -> None:
    assert Policy(required_capabilities="sampling").required_capabilities == ("sampling",)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["none", "legacy", "", "ALL"])
def test_policy_advertise_other_values_raise(value: str) -> None:
    with pytest.raises(ValueError, match="advertise"):
        Policy(advertise=value)  # type: ignore[arg-type]


def test_policy_withhold_takes_one_name_or_many_and_checks_them() -> None:
    assert Policy(withhold="sampling").withhold == {"sampling"}  # type: ignore[arg-type]
    names = {"sampling.tools", "logging", "io.x/y", "experimental.foo"}  # server-side rows too
    assert Policy(withhold=frozenset(names)).withhold == names
    for bad in ("bogus", "sampling.foo", "", 5):
        with pytest.raises(ValueError, match=f"unknown feature in withhold: {bad!r}"):
            Policy(withhold=frozenset({bad}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="withholds"):  # requiring what it withholds from everyone
        Policy(withhold="extensions", required_capabilities=("io.modelcontextprotocol/ui",))


@pytest.mark.parametrize("name", ["strict", "record_client_identity", "trace_every_request"])
@pytest.mark.parametrize("value", ["false", 0, 1, None])
def test_a_switch_is_true_or_false_nothing_that_reads_as_either(name: str, value: Any) -> None:
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        Policy(**{name: value})


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"today": "2027-08-01"}, r"today must be a datetime.date .*; got '2027-08-01'"),
        ({"removal_date": "2027-08-01"}, r"removal_date must be a datetime.date .*; got '2027-08-01'"),
        ({"today": datetime.datetime(2026, 11, 30, 12, 0)}, "today must be a datetime.date"),
        ({"removal_date": datetime.datetime(2027, 1, 1)}, "removal_date must be a datetime.date"),
        ({"months_since_deprecation": "3"}, "months_since_deprecation must be a whole number"),
        ({"months_since_deprecation": True}, "months_since_deprecation must be a whole number"),
    ],
)
def test_policy_dates_and_months_of_the_wrong_type(options: dict[str, Any], says: str) -> None:
    with pytest.raises(TypeError, match=says):
        Policy(**options)


def test_policy_negative_months_raise_at_construction() -> None:
    with pytest.raises(ValueError, match="negative"):
        Policy(months_since_deprecation=-1)


def test_ucp_policy_of_the_wrong_types_raises() -> None:
    with pytest.raises(TypeError, match="resolver must have a resolve"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, resolver="https://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="continue_url must be a URL string"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, continue_url=123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keyword", "says"),
    [
        ("min_revison", "did you mean 'min_revision'?"),
        ("Max_Revision", "did you mean 'max_revision'?"),
        ("required_capability", "did you mean 'required_capabilities'?"),
        ("hideunusable", "did you mean 'hide_unusable'?"),
        ("colour", "its keywords: min_revision, max_revision, required_capabilities, advertise,"),
    ],
)
def test_a_misspelt_keyword_is_told_what_it_meant(keyword: str, says: str) -> None:
    with pytest.raises(TypeError) as slip:
        Policy(**{keyword: "2025-06-18"})
    assert str(slip.value).startswith(f"Policy() got an unexpected keyword argument {keyword!r}; {says}")


def test_a_policy_is_still_built_every_way_a_dataclass_is() -> None:
    """Positionally, by keyword, by `dataclasses.replace`, by copying and pickling."""
    import copy
    import pickle

    policy = Policy("2025-06-18", strict=True)
    assert (policy.min_revision, policy.strict) == ("2025-06-18", True)
    assert dataclasses.replace(policy, min_revision=None).accepted() == KNOWN
    assert copy.copy(policy) == policy
    assert pickle.loads(pickle.dumps(policy)).accepted() == policy.accepted()


def test_policy_is_frozen() -> None:
    policy = Policy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.min_revision = "2025-06-18"  # type: ignore[misc]


def test_policies_built_alike_are_equal_and_hash_alike() -> None:
    """A Policy keys caches and is compared when a server is negotiated again: one carrying a
    UcpPolicy, built from the same profile (a path, or equal dicts), must be the same Policy."""
    assert UcpPolicy(business_profile=BUSINESS_PROFILE) == UcpPolicy(business_profile=BUSINESS_PROFILE)
    assert Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE)) == Policy(
        ucp=UcpPolicy(business_profile=BUSINESS_PROFILE)
    )
    business = {
        "ucp": {
            "version": "2026-04-08",
            "capabilities": {"dev.ucp.shopping.checkout": [{"version": "2026-04-08"}]},
        }
    }
    one = Policy(ucp=UcpPolicy(business_profile=business))
    other = Policy(ucp=UcpPolicy(business_profile=dict(business)))
    assert one == other
    assert hash(one) == hash(other)


# --- What a Policy withdraws ------------------------------------------------------------------


def test_policy_withdrawn() -> None:
    assert Policy(months_since_deprecation=0).withdrawn() == frozenset()
    assert Policy(months_since_deprecation=12).withdrawn() == revisions.DEPRECATED_FEATURES
    assert Policy(today=date(2027, 7, 27)).withdrawn() == frozenset()
    assert Policy(today=date(2027, 7, 28)).withdrawn() == revisions.DEPRECATED_FEATURES
    assert Policy(months_since_deprecation=0, withhold=frozenset({"elicitation"})).withdrawn() == {
        "elicitation"
    }
    early_removal = date(2026, 8, 28)  # a one-month window
    assert Policy(removal_date=early_removal, months_since_deprecation=0).withdrawn() == frozenset()
    assert Policy(removal_date=early_removal, months_since_deprecation=1).withdrawn() == {
        "roots",
        "sampling",
        "logging",
    }
    assert Policy(removal_date=early_removal, today=date(2026, 9, 1)).withdrawn() == {
        "roots",
        "sampling",
        "logging",
    }


def test_a_pinned_day_decides_the_window_to_the_day_whatever_the_month_count() -> None:
    """A removal date off the 28th: counting months alone would close the window early."""
    removal = date(2027, 1, 15)
    day_before = date(2026, 12, 28)  # five whole months after 2026-07-28
    assert Policy(removal_date=removal, today=day_before).withdrawn() == frozenset()
    both = Policy(removal_date=removal, today=day_before, months_since_deprecation=5)
    assert both.withdrawn() == frozenset()
    assert revisions.deprecation_window_open(removal=removal, today=day_before, months_since_deprecation=5)
