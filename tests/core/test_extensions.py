"""Extensions negotiated by their settings, pure: the satisfaction rule, the declaration
`Policy(extensions=...)` refuses, families of identifiers, and what each record agrees."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation import ClientOverride, Extension, Policy, PolicyError, UsageError, requires_extension
from mcp_negotiation.core.extensions import json_equal, satisfies
from mcp_negotiation.core.negotiation import Negotiation, Negotiator

APPS = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
SEARCH, SEARCH_V2 = "com.example/search", "com.example/search-v2"


@pytest.mark.parametrize(
    ("declared", "wanted", "held"),
    [
        ({"mimeTypes": [APP_MIME, "text/plain"]}, {"mimeTypes": [APP_MIME]}, True),
        ({"mimeTypes": ["text/plain"]}, {"mimeTypes": [APP_MIME]}, False),
        ({"mimeTypes": APP_MIME}, {"mimeTypes": [APP_MIME]}, False),  # a list asked, a scalar held
        ({"mimeTypes": [APP_MIME]}, {"mimeTypes": []}, True),
        ({"mimeTypes": [APP_MIME]}, {"mimeTypes": [APP_MIME, APP_MIME]}, True),
        ({"version": 2}, {"version": 2}, True),
        ({"version": 2}, {"version": 3}, False),
        ({"pages": 1}, {"pages": True}, False),  # true is not 1
        ({"pages": True}, {"pages": 1}, False),
        ({"limits": {"rows": 10, "cols": 3}}, {"limits": {"rows": 10}}, True),  # objects: the same rule
        ({"limits": {"rows": 11}}, {"limits": {"rows": 10}}, False),
        ({"features": [{"a": 1}]}, {"features": [{"a": 1}]}, True),
        ({}, {"mimeTypes": [APP_MIME]}, False),
        ({}, {}, True),
        ("not an object", {}, True),  # nothing asked: presence alone
        ("not an object", {"x": 1}, False),
    ],
)
def test_list_settings_are_contained_and_scalars_equal(
    declared: Any, wanted: dict[str, Any], held: bool
) -> None:
    assert satisfies(declared, wanted) is held


def test_json_equality_tells_true_from_one_and_lists_from_objects() -> None:
    assert json_equal([1, {"a": [True]}], (1, {"a": (True,)}))
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert not json_equal([], {})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert json_equal(1, 1.0)  # JSON has one number type


def record(extensions: dict[str, Any], declared: dict[str, Any], **policy: Any) -> Negotiation:
    negotiator = Negotiator(Policy(extensions=declared, **policy))
    return negotiator.initialize(
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": extensions},
            "clientInfo": {"name": "acme", "version": "1.0.0"},
        }
    )


def test_a_family_agrees_the_most_preferred_identifier_the_client_declared() -> None:
    family = {SEARCH: Extension({SEARCH_V2: {"pages": True}, SEARCH: {}})}
    both = record({SEARCH: {}, SEARCH_V2: {"pages": True}}, family)
    assert both.extensions[SEARCH].identifier == SEARCH_V2
    assert both.supports(SEARCH, pages=True)
    old = record({SEARCH: {"pages": True}}, family)
    assert (old.extensions[SEARCH].identifier, old.supports(SEARCH, pages=True)) == (SEARCH, True)
    assert record({}, family).extensions == {}
    assert record({"com.example/other": {}}, family).extensions == {}


def test_the_advertisement_lists_every_identifier_of_every_family() -> None:
    policy = Policy(extensions={SEARCH: Extension({SEARCH_V2: {"pages": True}, SEARCH: {}}), APPS: {}})
    assert policy.declared_extensions().advertised() == {SEARCH_V2: {"pages": True}, SEARCH: {}, APPS: {}}
    stage = policy.declared_extensions().stage()
    assert stage.advertisement("modern") == {"extensions": policy.declared_extensions().advertised()}
    assert stage.advertisement("legacy") == {"experimental": policy.declared_extensions().advertised()}


def test_a_revoked_extension_is_not_agreed() -> None:
    rules = [ClientOverride("acme", revoke=[APPS], id="acme-no-apps")]
    shown = record({APPS: {"mimeTypes": [APP_MIME]}}, {APPS: {}}, client_overrides=rules)
    assert shown.extensions == {}
    assert not shown.supports(APPS)
    assert shown.source_of(APPS) == "acme-no-apps"
    every = record({APPS: {}}, {APPS: {}}, client_overrides=[ClientOverride("acme", revoke=["extensions"])])
    assert not every.supports(APPS)


def test_the_record_and_its_dict_carry_the_agreed_settings() -> None:
    shown = record({APPS: {"mimeTypes": [APP_MIME]}}, {APPS: {}})
    assert shown.as_dict()["extensions"] == {
        APPS: {"identifier": APPS, "settings": {"mimeTypes": [APP_MIME]}}
    }


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ({"io.modelcontextprotocol/ui/v2": {}}, "did you mean 'io.modelcontextprotocol/ui-v2'"),
        ({"ui": {}}, "is no extension identifier"),
        (
            {SEARCH: Extension([SEARCH_V2])},
            "the name an extension is declared under is one of its identifiers",
        ),
        ({SEARCH: Extension([SEARCH, SEARCH_V2]), SEARCH_V2: {}}, "accepted for both"),
        (
            {
                APPS: {
                    "deep": {
                        "er": {
                            "er": {
                                "er": {
                                    "er": {"er": {"er": {"er": {"er": {"er": {"er": {"er": {"er": 1}}}}}}}}
                                }
                            }
                        }
                    }
                }
            },
            "deep",
        ),
        ({APPS: {"many": list(range(5000))}}, "2000"),
        ({f"com.example/e{i}": {"v": list(range(100))} for i in range(30)}, "what they advertise holds more"),
        ({APPS: {"nan": float("nan")}}, "NaN"),
    ],
)
def test_policy_refuses_a_declaration_it_cannot_advertise(declared: dict[str, Any], problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        Policy(extensions=declared)


def test_policy_refuses_settings_that_are_no_object_and_a_declaration_that_is_no_mapping() -> None:
    with pytest.raises(UsageError, match="settings object"):
        Policy(extensions={APPS: ["text/html"]})
    with pytest.raises(UsageError, match="a mapping of identifier to settings"):
        Policy(extensions=[APPS])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="several identifiers"):
        Extension(APPS)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="one identifier at least"):
        Extension([])


def test_requires_extension_refuses_a_malformed_identifier_or_settings_at_import() -> None:
    with pytest.raises(PolicyError, match=r"did you mean 'io\.modelcontextprotocol/ui-v2'"):
        requires_extension("io.modelcontextprotocol/ui/v2")
    with pytest.raises(PolicyError, match="2000"):
        requires_extension(APPS, mimeTypes=list(range(5000)))


def test_a_policy_with_rules_and_extensions_pickles_and_copies() -> None:
    """As every policy does (tests/core/test_policy.py): worker processes get theirs so."""
    import copy
    import pickle

    policy = Policy(
        client_overrides=[ClientOverride("acme", versions="<2", grant={APPS: {"mimeTypes": [APP_MIME]}})],
        extensions={SEARCH: Extension({SEARCH_V2: {"pages": True}, SEARCH: {}}), APPS: {}},
    )
    again = pickle.loads(pickle.dumps(policy))
    assert (again.client_overrides, again.extensions) == (policy.client_overrides, policy.extensions)
    assert copy.deepcopy(policy).client_overrides == policy.client_overrides
    assert again.declared_extensions().advertised() == policy.declared_extensions().advertised()
    granted = record({}, {APPS: {}}, client_overrides=again.client_overrides)
    assert granted.supports(APPS, mimeTypes=[APP_MIME])


def test_the_refusal_names_the_extension_its_settings_and_why() -> None:
    negotiator = Negotiator(
        Policy(
            extensions={SEARCH: Extension([SEARCH_V2, SEARCH]), APPS: {}},
            client_overrides=[ClientOverride("acme", revoke=["extensions"], id="acme-no-extensions")],
        )
    )

    def refusal(name: str, extensions: dict[str, Any], **settings: Any) -> Any:
        made = negotiator.initialize(
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"extensions": extensions},
                "clientInfo": {"name": name, "version": "1"},
            }
        )
        return negotiator.missing_extension(made, SEARCH, settings)

    assert refusal("other", {SEARCH: {"pages": True}}, pages=True) is None
    unsettled = refusal("other", {SEARCH: {}}, pages=True)
    assert unsettled.code == -32021
    assert unsettled.data == {"requiredCapabilities": {"extensions": {SEARCH_V2: {"pages": True}}}}
    assert unsettled.message == (
        "Missing required client capability: extension com.example/search-v2 with pages=True"
        " (declared without these settings)"
    )
    revoked = refusal("acme", {SEARCH: {}})
    assert revoked.message.endswith("(revoked for this client by rule 'acme-no-extensions')")
    absent = refusal("other", {})
    assert absent.message == "Missing required client capability: extension com.example/search-v2"
