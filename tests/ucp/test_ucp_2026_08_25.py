"""UCP 2026-08-25 on the specification's own examples: authority binding, the release rule
for `dev.ucp.*` entries, extensions' `requires`, and one profile per version.

Where each vector comes from is in vectors/ucp-2026-08-25/SOURCES.md; "spec:" comments
name the section of the 2026-08-25 overview a vector is copied from, "derived:" marks an
expectation this project worked out from the rules, which the specification does not print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_negotiation.ucp import (
    AUTHORITY_MISMATCH,
    CAPABILITIES_INCOMPATIBLE,
    NO_COMMON_VERSION,
    NOT_OFFERED,
    ORPHANED_EXTENSION,
    RELEASE_VERSION_MISMATCH,
    REQUIREMENT_UNMET,
    Profile,
    Requirements,
    Requires,
    UcpError,
    VersionRange,
    advertisement,
    authority_binds,
    negotiate_capabilities,
)
from mcp_negotiation.ucp.authority import authority_prefix

VECTORS = Path(__file__).parent / "vectors" / "ucp-2026-08-25"
BUSINESS_DOC = json.loads((VECTORS / "business_profile.json").read_text())
PLATFORM_DOC = json.loads((VECTORS / "platform_profile.json").read_text())
BUSINESS = Profile.from_json(BUSINESS_DOC)
PLATFORM = Profile.from_json(PLATFORM_DOC)

D, OLD = "2026-08-25", "2026-04-08"
CHECKOUT = "dev.ucp.shopping.checkout"
CART = "dev.ucp.shopping.cart"
FULFILLMENT = "dev.ucp.shopping.fulfillment"
DISCOUNT = "dev.ucp.shopping.discount"
IDENTITY = "dev.ucp.common.identity_linking"
LOYALTY = "com.acme.shopping.loyalty"
TIERS = "com.acme.shopping.loyalty_tiers"
UCP_SCHEMA = "https://ucp.dev/2026-08-25/schemas/shopping/checkout.json"

# spec: Schema Composition › Extension Schema Pattern › Version Requirements (both blocks).
LOYALTY_REQUIRES = {
    "protocol": {"min": "2026-01-23"},
    "capabilities": {"dev.ucp.shopping.checkout": {"min": "2026-06-01"}},
}
RANGED_REQUIRES = {
    "protocol": {"min": "2026-01-23", "max": "2026-09-01"},
    "capabilities": {"dev.ucp.shopping.checkout": {"min": "2026-06-01"}},
}
# spec: the same section's schema document; its `$defs` value is `{ ... }` in the original,
# which is not JSON, so it is `{}` here (only the key matters).
LOYALTY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://acme.com/ucp/schemas/loyalty.json",
    "name": "com.acme.shopping.loyalty",
    "version": "2026-06-15",
    "title": "Acme Loyalty Points",
    "requires": LOYALTY_REQUIRES,
    "$defs": {"dev.ucp.shopping.checkout": {}},
}


PAY = "com.example.pay"


def profile(version: str, capabilities: dict[str, list[dict[str, Any]]]) -> Profile:
    return Profile.from_json({"ucp": {"version": version, "capabilities": capabilities}})


class TestTheSpecificationsProfiles:
    def test_they_parse_with_their_schemas_and_keys(self) -> None:
        assert BUSINESS.version == PLATFORM.version == D
        assert BUSINESS.capabilities[CHECKOUT][0].schema == UCP_SCHEMA
        assert BUSINESS.capabilities[FULFILLMENT][0].extends == (CHECKOUT,)
        # spec: Profile Structure: "they MUST appear in the top-level keys[] array".
        assert [key["kid"] for key in BUSINESS.keys] == [k["kid"] for k in BUSINESS_DOC["keys"]]
        assert [key["kid"] for key in PLATFORM.keys] == ["platform_2025"]
        assert dict(PLATFORM.keys[0]) == PLATFORM_DOC["keys"][0]

    def test_every_entry_is_valid_at_2026_08_25(self) -> None:
        # derived: every dev.ucp.* entry declares D, and every schema URL binds to its name.
        for document in (BUSINESS_DOC, PLATFORM_DOC):
            for registry in ("capabilities", "services", "payment_handlers"):
                for name, entries in document["ucp"][registry].items():
                    for entry in entries:
                        if name.startswith("dev.ucp."):
                            assert entry["version"] == D
                        if "schema" in entry:
                            assert authority_binds(name, entry["schema"]), (name, entry["schema"])

    def test_their_agreement(self) -> None:
        # derived: the spec prints no agreement; this one follows its intersection algorithm.
        agreement = negotiate_capabilities(BUSINESS, PLATFORM)
        assert agreement.version == D
        assert agreement.capabilities == {CHECKOUT: D, FULFILLMENT: D, IDENTITY: D}
        assert agreement.dropped == {DISCOUNT: NOT_OFFERED}

    def test_the_checkout_response_block(self) -> None:
        # spec: Capability Declaration in Responses (its payment_handlers are not negotiated here).
        block = negotiate_capabilities(BUSINESS, PLATFORM).to_ucp_block(CHECKOUT)
        assert block == {
            "version": D,
            "capabilities": {CHECKOUT: [{"version": D}], FULFILLMENT: [{"version": D}]},
        }

    def test_keys_are_never_advertised(self) -> None:
        advertised = advertisement(BUSINESS)
        assert "keys" not in advertised
        assert "poqkLGiymh" not in json.dumps(advertised)


# spec: Namespace Governance › Authority Binding › Derivation algorithm, the table verbatim.
AUTHORITY_TABLE = [
    ("dev.ucp.shopping.checkout", "ucp.dev", "dev.ucp", True),
    ("dev.ucp.shopping.checkout", "shopping.ucp.dev", "dev.ucp.shopping", True),
    ("com.example.payments.installments", "example.com", "com.example", True),
    ("com.example.pay", "pay.example.com", "com.example.pay", True),
    ("com.example.pay", "example.com", "com.example", True),
    ("com.example.pay", "evil.example", "example.evil", False),
    ("dev.ucp.shopping.checkout", "evil.example", "example.evil", False),
    ("com.examplecorp.pay", "example.com", "com.example", False),
    ("com.example.pay", "cdn.example.com", "com.example.cdn", False),
]

# ucp-schema src/namespace.rs at 2a554be…: inputs and expectations of its unit tests, except
# `rejects_empty_remainder`, which the 2026-08-25 table (exact match) overrules.
REFERENCE_CASES = [
    ("org.example.catalog", "https://example.org/catalog.json", True),
    ("uk.co.example.shopping.cart", "https://example.co.uk/cart.json", True),
    ("com.example.pay", "https://EXAMPLE.COM/x.json", True),
    ("com.example-shop.shopping.checkout", "https://example-shop.com/checkout.json", True),
    ("com.xn--mnchen-3ya.checkout", "https://xn--mnchen-3ya.com/x.json", True),
    ("xn--p1ai.example.checkout", "https://example.xn--p1ai/x.json", True),
    ("com.example.pay", "https://example.com@evil.com/x.json", False),
    ("com.example.pay", "http://example.com/x.json", False),
    ("com.example.pay", "https://93.184.216.34/x.json", False),
    ("com.example.pay", "https://[2001:db8::1]/x.json", False),
    ("localhost.pay", "https://localhost/x.json", False),
    ("com.example.pay", "https://examplepay.com/x.json", False),
    ("com.example-co.shopping.cart", "https://shop.example-co.com/cart.json", False),
]


class TestAuthorityBinding:
    @pytest.mark.parametrize(("name", "host", "prefix", "accepted"), AUTHORITY_TABLE)
    def test_the_specifications_table(self, name: str, host: str, prefix: str, accepted: bool) -> None:
        url = f"https://{host}/schemas/x.json"
        assert authority_prefix(url) == prefix
        assert authority_binds(name, url) is accepted

    @pytest.mark.parametrize(("name", "url", "accepted"), REFERENCE_CASES)
    def test_the_reference_validators_cases(self, name: str, url: str, accepted: bool) -> None:
        assert authority_binds(name, url) is accepted

    @pytest.mark.parametrize(
        "url",
        [
            "https://ucp.dev@evil.example/x.json",  # spec: step 1, the host is evil.example
            "https://203.0.113.10/x.json",  # spec: step 2, an IP literal
            "https://localhost/x.json",  # spec: step 2, one label
            "https://ucp.dev\\@evil.example/x.json",  # parsers disagree on this host: refused
            "https://ucp.d%65v/x.json",  # a percent-escaped host: refused, not decoded
            "https://ücp.dev/x.json",  # not A-label form: refused, not converted
            "https://ucp..dev/x.json",
            "https://127.1/x.json",  # an IPv4 address to a WHATWG parser
            "https://ucp.0x7f/x.json",
            "https://xn--zz.dev/x.json",  # an A-label that is no punycode
            "https:ucp.dev/x.json",
            "//ucp.dev/x.json",
            "schemas/checkout.json",
            "",
            None,
            42,
        ],
    )
    def test_what_binds_nothing(self, url: object) -> None:
        assert authority_prefix(url) is None
        assert not authority_binds("dev.ucp.shopping.checkout", url)

    @pytest.mark.parametrize(
        "url", ["https://ucp.dev./x.json", "https://UCP.dev/x.json", "https://ucp.dev:8443/x.json"]
    )
    def test_the_host_is_normalised_and_its_port_ignored(self, url: str) -> None:
        # spec: step 3, "the host without any port ... lowercase; strip a trailing `.`".
        assert authority_prefix(url) == "dev.ucp"

    def test_a_platform_entry_that_fails_is_absent_and_its_extensions_go_too(self) -> None:
        platform = json.loads(json.dumps(PLATFORM_DOC))
        platform["ucp"]["capabilities"][CHECKOUT][0]["schema"] = "https://evil.example/checkout.json"
        agreement = negotiate_capabilities(BUSINESS, Profile.from_json(platform))
        assert agreement.dropped == {
            CHECKOUT: AUTHORITY_MISMATCH,
            DISCOUNT: NOT_OFFERED,
            FULFILLMENT: ORPHANED_EXTENSION,
        }
        assert agreement.capabilities == {IDENTITY: D}
        with pytest.raises(UcpError) as refused:
            agreement.for_operation(CHECKOUT)
        assert refused.value.code == CAPABILITIES_INCOMPATIBLE
        assert "authority_mismatch" in refused.value.message

    def test_the_businesss_own_entry_is_held_to_it_too(self) -> None:
        # A platform rejects such an entry of the business's, so the business does not count on it.
        business = json.loads(json.dumps(BUSINESS_DOC))
        business["ucp"]["capabilities"][IDENTITY][0]["schema"] = "https://cdn.example.net/identity.json"
        agreement = negotiate_capabilities(Profile.from_json(business), PLATFORM)
        assert agreement.dropped[IDENTITY] == AUTHORITY_MISMATCH

    def test_an_entry_without_a_schema_is_not_judged(self) -> None:
        # Minimal real platform profiles carry no schema; binding applies to "every entity with
        # a remote schema".
        agreement = negotiate_capabilities(BUSINESS, profile(D, {CHECKOUT: [{"version": D}]}))
        assert agreement.capabilities == {CHECKOUT: D}

    def test_a_later_valid_entry_is_not_hidden_by_a_failing_one(self) -> None:
        # The latest version both sides declare *validly* wins.
        business = profile(D, {PAY: [{"version": "2026-09-01"}, {"version": "2026-06-01"}]})
        platform = profile(
            D,
            {
                PAY: [
                    {"version": "2026-09-01", "schema": "https://evil.example/pay.json"},
                    {"version": "2026-06-01", "schema": "https://pay.example.com/pay.json"},
                ]
            },
        )
        agreement = negotiate_capabilities(business, platform)
        assert agreement.capabilities == {"com.example.pay": "2026-06-01"}

    def test_not_applied_before_2026_08_25(self) -> None:
        entry = [{"version": OLD, "schema": "https://evil.example/checkout.json"}]
        agreement = negotiate_capabilities(profile(OLD, {CHECKOUT: entry}), profile(OLD, {CHECKOUT: entry}))
        assert agreement.capabilities == {CHECKOUT: OLD}


class TestReleaseVersions:
    """spec: Component Versioning and Release Snapshots: "A Platform that encounters a dev.ucp.*
    entry whose version differs from the profile's ucp.version MUST reject that entry"."""

    def test_an_older_dev_ucp_entry_in_a_2026_08_25_profile_is_absent(self) -> None:
        business = profile(D, {CHECKOUT: [{"version": D}, {"version": OLD}]})
        platform = profile(D, {CHECKOUT: [{"version": OLD}]})
        agreement = negotiate_capabilities(business, platform)
        assert agreement.dropped == {CHECKOUT: RELEASE_VERSION_MISMATCH}

    def test_the_release_entry_is_chosen_over_it(self) -> None:
        both = [{"version": "2026-09-30"}, {"version": D}]
        agreement = negotiate_capabilities(profile(D, {CHECKOUT: both}), profile(D, {CHECKOUT: both}))
        assert agreement.capabilities == {CHECKOUT: D}

    def test_third_party_versions_are_their_authors(self) -> None:
        # spec: "A third-party extension's version is never tied to ucp.version."
        entries = [{"version": "2026-06-15", "extends": CHECKOUT}]
        business = profile(D, {CHECKOUT: [{"version": D}], LOYALTY: entries})
        agreement = negotiate_capabilities(business, business)
        assert agreement.capabilities == {CHECKOUT: D, LOYALTY: "2026-06-15"}

    def test_older_releases_let_dev_ucp_entries_version_independently(self) -> None:
        entries = [{"version": "2026-01-23"}]
        agreement = negotiate_capabilities(
            profile(OLD, {CHECKOUT: entries}), profile(OLD, {CHECKOUT: entries})
        )
        assert agreement.capabilities == {CHECKOUT: "2026-01-23"}

    def test_no_shared_version_is_still_no_common_version(self) -> None:
        agreement = negotiate_capabilities(
            profile(D, {CHECKOUT: [{"version": D}]}),
            profile(D, {CHECKOUT: [{"version": OLD}]}),
        )
        assert agreement.dropped == {CHECKOUT: NO_COMMON_VERSION}


class TestRequires:
    @pytest.mark.parametrize(
        ("protocol", "admitted"),
        # derived: inclusive bounds on RANGED_REQUIRES' protocol range.
        [
            ("2026-01-11", False),
            ("2026-01-23", True),
            (OLD, True),
            (D, True),
            ("2026-09-01", True),
            ("2026-09-02", False),
        ],
    )
    def test_the_specifications_range_on_the_protocol(self, protocol: str, admitted: bool) -> None:
        requires = Requires.from_json(RANGED_REQUIRES)
        assert requires.protocol == VersionRange("2026-01-23", "2026-09-01")
        assert requires.admits(protocol, {CHECKOUT: D}) is admitted

    @pytest.mark.parametrize(("checkout", "admitted"), [(OLD, False), ("2026-06-01", True), (D, True)])
    def test_the_specifications_range_on_checkout(self, checkout: str, admitted: bool) -> None:
        assert Requires.from_json(LOYALTY_REQUIRES).admits(D, {CHECKOUT: checkout}) is admitted

    def test_the_schema_document_gives_the_same_requirements(self) -> None:
        from_schema = Requirements(schemas=[LOYALTY_SCHEMA])
        assert from_schema.of(LOYALTY, "2026-06-15") == Requires.from_json(LOYALTY_REQUIRES)
        assert from_schema.of(LOYALTY, "2026-01-01") is None  # the schema declares its version
        assert Requirements({LOYALTY: LOYALTY_REQUIRES}).of(LOYALTY, "2026-01-01") is not None

    def business(self, version: str, checkout: str) -> Profile:
        return profile(
            version,
            {
                CHECKOUT: [{"version": checkout}],
                LOYALTY: [{"version": "2026-06-15", "extends": CHECKOUT}],
                TIERS: [{"version": "2026-06-15", "extends": LOYALTY}],
            },
        )

    def test_met_the_extension_is_active(self) -> None:
        business = self.business(D, D)
        agreement = negotiate_capabilities(
            business, business, requires=Requirements(schemas=[LOYALTY_SCHEMA])
        )
        assert agreement.capabilities == {CHECKOUT: D, LOYALTY: "2026-06-15", TIERS: "2026-06-15"}

    def test_unmet_it_is_excluded_and_its_own_extensions_pruned_again(self) -> None:
        # spec: Resolution Flow step 4, "Exclude incompatible extensions and re-prune orphaned
        # extensions"; checkout selected at 2026-04-08 is below loyalty's min of 2026-06-01.
        business = self.business(OLD, OLD)
        agreement = negotiate_capabilities(
            business, business, requires=Requirements(schemas=[LOYALTY_SCHEMA])
        )
        assert agreement.capabilities == {CHECKOUT: OLD}
        assert agreement.dropped == {LOYALTY: REQUIREMENT_UNMET, TIERS: ORPHANED_EXTENSION}

    def test_a_protocol_range_is_checked_against_the_agreed_version(self) -> None:
        business = self.business(OLD, "2026-06-01")
        requires = Requirements({LOYALTY: {"protocol": {"min": D}}})
        assert (
            negotiate_capabilities(business, business, requires=requires).dropped[LOYALTY]
            == REQUIREMENT_UNMET
        )

    def test_absent_requires_assumes_compatible(self) -> None:
        # spec: "If requires is absent, the extension is assumed to be compatible".
        business = self.business(OLD, OLD)
        schema = {key: value for key, value in LOYALTY_SCHEMA.items() if key != "requires"}
        agreement = negotiate_capabilities(business, business, requires=Requirements(schemas=[schema]))
        assert LOYALTY in agreement.capabilities

    def test_a_constraint_on_an_inactive_parent_holds(self) -> None:
        # Not in the spec: a multi-parent extension alive through cart is not refused over
        # checkout, which is not active at all (see docs/ucp.md).
        business = profile(
            D,
            {
                CHECKOUT: [{"version": D}],
                CART: [{"version": D}],
                DISCOUNT: [{"version": D, "extends": [CHECKOUT, CART]}],
            },
        )
        platform = profile(D, {CART: [{"version": D}], DISCOUNT: [{"version": D}]})
        requires = Requirements(
            {DISCOUNT: {"capabilities": {CHECKOUT: {"min": "2099-01-01"}, CART: {"min": D}}}}
        )
        agreement = negotiate_capabilities(business, platform, requires=requires)
        assert agreement.capabilities == {CART: D, DISCOUNT: D}

    @pytest.mark.parametrize(
        ("given", "message"),
        [
            ({LOYALTY: {"protocol": {}}}, "protocol must be an object with a min"),
            ({LOYALTY: {"protocol": {"min": "2026-6-1"}}}, "YYYY-MM-DD"),
            ({LOYALTY: {"protocol": {"min": D, "max": OLD}}}, "is empty"),
            ({LOYALTY: {"capabilities": []}}, "capabilities must be an object"),
            ({LOYALTY: []}, "must be an object"),
            ({"": {}}, "extension name"),
        ],
    )
    def test_malformed_configuration_raises_at_start_up(self, given: Any, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            Requirements(given)

    def test_a_schemas_requires_must_name_its_defs(self) -> None:
        # spec: "Keys in requires.capabilities MUST be a subset of the extension's $defs keys."
        schema = {**LOYALTY_SCHEMA, "$defs": {CART: {}}}
        with pytest.raises(
            ValueError, match=r"names dev\.ucp\.shopping\.checkout, which its \$defs does not"
        ):
            Requirements(schemas=[schema])

    def test_only_a_mapping_gives_requirements_by_name(self) -> None:
        with pytest.raises(TypeError, match="must be a mapping"):
            Requirements([LOYALTY_SCHEMA])  # type: ignore[arg-type]

    def test_given_twice_raises(self) -> None:
        with pytest.raises(ValueError, match="given twice"):
            Requirements(schemas=[LOYALTY_SCHEMA, LOYALTY_SCHEMA])

    def test_schemas_are_read_from_files(self, tmp_path: Path) -> None:
        path = tmp_path / "loyalty.json"
        path.write_text(json.dumps(LOYALTY_SCHEMA))
        assert Requirements(schemas=[path]) == Requirements(schemas=[LOYALTY_SCHEMA])
        assert Requirements(schemas=str(path)) == Requirements(schemas=[LOYALTY_SCHEMA])


def test_one_profile_per_version_never_a_combined_one() -> None:
    # spec: Protocol Version: "SHOULD NOT combine or intersect capabilities across profiles".
    current = Profile.from_json(
        {
            "ucp": {
                "version": D,
                "supported_versions": {OLD: "https://business.example.com/.well-known/ucp/2026-04-08"},
                "capabilities": {CHECKOUT: [{"version": D}]},
            }
        }
    )
    leaf = profile(OLD, {CHECKOUT: [{"version": OLD}]})
    platform = profile(OLD, {CHECKOUT: [{"version": OLD}]})
    with pytest.raises(ValueError, match="negotiate against that profile"):
        negotiate_capabilities(current, platform)
    assert current.leaf_problem(OLD) == "declares ucp.version 2026-08-25"
    assert leaf.leaf_problem(OLD) is None
    assert negotiate_capabilities(leaf, platform).capabilities == {CHECKOUT: OLD}
