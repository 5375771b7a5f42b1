"""Negotiation by the specification's intersection algorithm, on its own examples."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation.ucp import (
    CAPABILITIES_INCOMPATIBLE,
    VERSION_UNSUPPORTED,
    CapabilityEntry,
    Profile,
    UcpAgreement,
    UcpError,
    negotiate_capabilities,
)

CHECKOUT = "dev.ucp.shopping.checkout"
CART = "dev.ucp.shopping.cart"
ORDER = "dev.ucp.shopping.order"
FULFILLMENT = "dev.ucp.shopping.fulfillment"
DISCOUNT = "dev.ucp.shopping.discount"
GIFT_WRAP = "com.example.gift_wrap"

V1, V2, V3 = "2026-01-23", "2026-04-08", "2026-08-25"


def profile(version: str = V2, supported: dict[str, str] | None = None, **capabilities: Any) -> Profile:
    """A profile from `name=versions` or `name=(versions, extends)` keyword pairs."""
    caps: dict[str, list[dict[str, Any]]] = {}
    for key, spec in capabilities.items():
        versions, extends = spec if isinstance(spec, tuple) else (spec, None)
        name = NAMES[key]
        caps[name] = [{"version": v, **({"extends": extends} if extends else {})} for v in versions]
    return Profile.from_json(
        {"ucp": {"version": version, "supported_versions": supported or {}, "capabilities": caps}}
    )


NAMES = {
    "checkout": CHECKOUT,
    "cart": CART,
    "order": ORDER,
    "fulfillment": FULFILLMENT,
    "discount": DISCOUNT,
    "gift_wrap": GIFT_WRAP,
}

BUSINESS = profile(
    checkout=[V1, V2],
    cart=[V2],
    order=[V2],
    fulfillment=([V2], CHECKOUT),
    discount=([V2], [CHECKOUT, CART]),
    gift_wrap=([V2], FULFILLMENT),
)


def test_everything_shared_picks_the_latest_common_date() -> None:
    platform = profile(
        checkout=[V1, V2, V3], cart=[V2], order=[V2], fulfillment=[V2], discount=[V2], gift_wrap=[V2]
    )
    agreement = negotiate_capabilities(BUSINESS, platform)
    assert agreement.version == V2
    assert agreement.capabilities == {name: V2 for name in NAMES.values()}
    assert agreement.dropped == {}


def test_chain_is_pruned_when_checkout_is_gone() -> None:
    # gift_wrap → fulfillment → checkout: losing checkout takes both extensions with it,
    # fulfillment on the first pass and gift_wrap on the next.
    platform = profile(checkout=[V3], fulfillment=[V2], gift_wrap=[V2], order=[V2])
    agreement = negotiate_capabilities(BUSINESS, platform)
    assert agreement.capabilities == {ORDER: V2}
    assert agreement.dropped == {
        CHECKOUT: "no_common_version",
        CART: "not_offered",
        DISCOUNT: "not_offered",
        FULFILLMENT: "orphaned_extension",
        GIFT_WRAP: "orphaned_extension",
    }


def test_multi_parent_extension_survives_through_one_parent() -> None:
    platform = profile(cart=[V2], discount=[V2])
    agreement = negotiate_capabilities(BUSINESS, platform)
    assert agreement.capabilities == {CART: V2, DISCOUNT: V2}
    assert agreement.dropped[CHECKOUT] == "not_offered"


def test_capability_without_a_common_version_is_dropped_silently() -> None:
    platform = profile(checkout=[V3], cart=[V2])
    agreement = negotiate_capabilities(BUSINESS, platform)
    assert agreement.capabilities == {CART: V2}
    assert agreement.dropped[CHECKOUT] == "no_common_version"


def test_versions_match_exactly_never_by_date_order() -> None:
    business = profile(checkout=[V2])
    platform = profile(checkout=[V3])  # newer, but not the same string
    assert negotiate_capabilities(business, platform).dropped == {CHECKOUT: "no_common_version"}


def test_the_active_entry_is_the_business_entry_for_the_chosen_version() -> None:
    business = Profile.from_json(
        {
            "ucp": {
                "version": V2,
                "capabilities": {
                    CHECKOUT: [{"version": V2}, {"version": V1}],
                    FULFILLMENT: [
                        {"version": V1, "extends": CHECKOUT, "config": {"old": True}},
                        {"version": V2, "extends": CART},
                    ],
                },
            }
        }
    )
    platform = profile(checkout=[V1, V2], fulfillment=[V1])
    agreement = negotiate_capabilities(business, platform)
    assert agreement.capabilities == {CHECKOUT: V2, FULFILLMENT: V1}
    assert agreement.entries[FULFILLMENT] == CapabilityEntry(V1, (CHECKOUT,), {"old": True})


def test_the_platforms_extends_is_ignored() -> None:
    platform = profile(checkout=[V2], fulfillment=([V2], CART))
    assert negotiate_capabilities(
        profile(checkout=[V2], fulfillment=([V2], CHECKOUT)), platform
    ).capabilities == {
        CHECKOUT: V2,
        FULFILLMENT: V2,
    }


def test_extensions_extending_only_each_other_have_no_root_and_are_dropped() -> None:
    business = profile(checkout=[V2], cart=([V2], DISCOUNT), discount=([V2], CART))
    platform = profile(checkout=[V2], cart=[V2], discount=[V2])
    agreement = negotiate_capabilities(business, platform)
    assert agreement.capabilities == {CHECKOUT: V2}
    assert agreement.dropped == {CART: "orphaned_extension", DISCOUNT: "orphaned_extension"}


class TestProtocolGate:
    def test_same_version_passes(self) -> None:
        assert negotiate_capabilities(profile(V2), profile(V2)).version == V2

    def test_other_version_fails_without_supported_versions(self) -> None:
        with pytest.raises(UcpError) as raised:
            negotiate_capabilities(profile(V2), profile(V1))
        assert raised.value.code == VERSION_UNSUPPORTED
        assert raised.value.to_jsonrpc_error()["data"]["code"] == VERSION_UNSUPPORTED

    def test_a_supported_older_version_is_negotiated_against_its_own_profile(self) -> None:
        leaf = profile(V1, checkout=[V1])
        agreement = negotiate_capabilities(leaf, profile(V1, checkout=[V1]))
        assert agreement.version == V1
        assert agreement.capabilities == {CHECKOUT: V1}

    def test_never_against_the_current_profile_combined_with_an_older_version(self) -> None:
        # "Platforms SHOULD NOT combine or intersect capabilities across profiles" (2026-08-25,
        # Protocol Version): the current profile's capabilities are not what V1 is served.
        business = profile(
            V2, supported={V1: "https://biz.example/.well-known/ucp/2026-01-23"}, checkout=[V1, V2]
        )
        with pytest.raises(ValueError, match=r"2026-01-23 is served by the business profile .*/2026-01-23"):
            negotiate_capabilities(business, profile(V1, checkout=[V1]))

    def test_a_newer_version_is_not_inferred_compatible(self) -> None:
        business = profile(V2, supported={V1: "https://biz.example/old"})
        with pytest.raises(UcpError) as raised:
            negotiate_capabilities(business, profile(V3))
        assert raised.value.code == VERSION_UNSUPPORTED
        assert f"supports {V1}, {V2}" in raised.value.message


class TestForOperation:
    AGREEMENT = negotiate_capabilities(
        BUSINESS,
        profile(checkout=[V2], cart=[V2], order=[V2], fulfillment=[V2], discount=[V2], gift_wrap=[V2]),
    )

    @pytest.mark.parametrize(
        ("root", "relevant"),
        [
            # The specification's selection table, plus gift_wrap reached through fulfillment.
            (CHECKOUT, {CHECKOUT, DISCOUNT, FULFILLMENT, GIFT_WRAP}),
            (CART, {CART, DISCOUNT}),
            (ORDER, {ORDER}),
        ],
    )
    def test_selects_the_root_and_its_extensions(self, root: str, relevant: set[str]) -> None:
        scoped = self.AGREEMENT.for_operation(root)
        assert set(scoped.capabilities) == relevant
        assert set(scoped.entries) == relevant
        assert scoped.version == V2

    def test_ucp_block(self) -> None:
        expected = {"version": V2, "capabilities": {CART: [{"version": V2}], DISCOUNT: [{"version": V2}]}}
        block = self.AGREEMENT.to_ucp_block(CART)
        assert block == expected
        block["capabilities"][CART][0]["version"] = "amended by one response"
        block["capabilities"].clear()
        assert self.AGREEMENT.to_ucp_block(CART) == expected  # each response gets its own copy

    def test_missing_root_is_capabilities_incompatible(self) -> None:
        agreement = negotiate_capabilities(BUSINESS, profile(checkout=[V3], order=[V2]))
        with pytest.raises(UcpError) as raised:
            agreement.for_operation(CHECKOUT)
        error = raised.value
        assert error.code == CAPABILITIES_INCOMPATIBLE
        assert "no_common_version" in error.message
        assert error.to_tool_result() == {
            "ucp": {"version": V2, "status": "error"},
            "messages": [
                {
                    "type": "error",
                    "code": CAPABILITIES_INCOMPATIBLE,
                    "content": error.message,
                    "severity": "unrecoverable",
                }
            ],
        }
        with pytest.raises(UcpError):
            agreement.to_ucp_block(CHECKOUT)

    def test_unknown_root_is_capabilities_incompatible(self) -> None:
        with pytest.raises(UcpError) as raised:
            self.AGREEMENT.for_operation("com.example.unknown")
        assert raised.value.code == CAPABILITIES_INCOMPATIBLE


def test_agreement_is_immutable() -> None:
    agreement = UcpAgreement(V2, {CHECKOUT: V2})
    with pytest.raises(TypeError):
        agreement.capabilities[CART] = V2  # type: ignore[index]
    with pytest.raises(AttributeError):
        agreement.version = V1  # type: ignore[misc]
