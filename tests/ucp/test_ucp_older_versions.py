"""A platform at an older UCP version the business still lists in `supported_versions`.

The specification gives each listed version its own business profile (the URL in
`supported_versions`); the platform is negotiated against that one, pinned in
`UcpPolicy(supported_profiles=...)` or fetched by the resolver. Real SDK clients, both
eras, in memory; the profiles are served by a `StaticResolver`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy, negotiate, negotiation_of, requires_ucp
from mcp_negotiation.adapters.kernel import decided
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from mcp_negotiation.tools.probe import Row, render_ucp, ucp_outcome
from mcp_negotiation.ucp import Profile, StaticResolver, UcpPolicy, advertisement
from support.harness import EXAMPLES, structured
from ucp_shop import BUSINESS_PROFILE, CHECKOUT, build

pytestmark = pytest.mark.anyio

OLD, NEW = "2026-01-23", "2026-04-08"
GIFT_WRAP = "dev.ucp.shopping.gift_wrap"
OLD_URL = "https://shop.example/.well-known/ucp/2026-01-23"
OLD_PLATFORM_URL = "https://old-platform.example/profile.json"
NEW_PLATFORM_URL = "https://new-platform.example/profile.json"
OLD_PLATFORM = {
    "ucp": {
        "version": OLD,
        "capabilities": {
            CHECKOUT: [{"version": OLD}],
            GIFT_WRAP: [{"version": OLD, "extends": CHECKOUT}],
        },
    }
}
NEW_PLATFORM = json.loads((EXAMPLES / "ucp/platform_profile.json").read_text())
OLD_BUSINESS = json.loads((EXAMPLES / "ucp/business_profile_2026-01-23.json").read_text())
MODES = ["legacy", "2026-07-28"]


def _args(url: str) -> dict[str, Any]:
    return {"items": ["tea"], "meta": {"ucp-agent": {"profile": url}}}


def _platforms(**more: Any) -> StaticResolver:
    return StaticResolver({OLD_PLATFORM_URL: OLD_PLATFORM, NEW_PLATFORM_URL: NEW_PLATFORM, **more})


def _shop(resolver: StaticResolver, business_profile: Any = BUSINESS_PROFILE, **options: Any) -> MCPServer:
    ucp = UcpPolicy(business_profile=business_profile, resolver=resolver, stamp_results=True, **options)
    server = negotiate(MCPServer("shop"), Policy(ucp=ucp))

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
        agreement = negotiation_of(ctx).ucp
        assert agreement is not None
        return {"items": items, "dropped": dict(agreement.dropped)}

    return server


@pytest.mark.parametrize("mode", MODES)
async def test_the_example_shop_serves_an_older_platform_what_it_served_then(mode: str) -> None:
    """Its current profile has no gift_wrap at 2026-01-23; its pinned 2026-01-23 profile has."""
    async with Client(build(_platforms()), mode=mode) as client:
        old = structured(await client.call_tool("create_checkout", _args(OLD_PLATFORM_URL)))
        new = structured(await client.call_tool("create_checkout", _args(NEW_PLATFORM_URL)))
        again = structured(await client.call_tool("create_checkout", _args(OLD_PLATFORM_URL)))
    assert old["ucp"] == {
        "version": OLD,
        "capabilities": {CHECKOUT: [{"version": OLD}], GIFT_WRAP: [{"version": OLD}]},
    }
    assert old["extensions"] == [CHECKOUT, GIFT_WRAP]
    # The current platform, on the same server, still gets the current profile's agreement.
    assert new["ucp"]["version"] == NEW
    assert GIFT_WRAP not in new["extensions"]
    assert again == old


@pytest.mark.parametrize("mode", MODES)
async def test_an_unpinned_older_profile_is_fetched_from_its_listed_url(mode: str) -> None:
    async with Client(_shop(_platforms(**{OLD_URL: OLD_BUSINESS})), mode=mode) as client:
        old = structured(await client.call_tool("create_checkout", _args(OLD_PLATFORM_URL)))
    assert old["ucp"]["capabilities"] == {CHECKOUT: [{"version": OLD}], GIFT_WRAP: [{"version": OLD}]}
    # The current profile's capabilities that the older one lacks are simply not offered.
    assert old["dropped"] == {}


def _wrong_version() -> dict[str, Any]:
    document = json.loads(json.dumps(OLD_BUSINESS))
    document["ucp"]["version"] = NEW
    return document


def _not_a_leaf() -> dict[str, Any]:
    """The older version's profile listing versions of its own, which that profile must not."""
    document = json.loads(json.dumps(OLD_BUSINESS))
    document["ucp"]["supported_versions"] = {"2026-01-11": "https://shop.example/.well-known/ucp/2026-01-11"}
    return document


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("listed", "logged"),
    [
        ({}, "profile_unreachable"),  # the resolver cannot fetch it
        ({OLD_URL: _wrong_version()}, "declares ucp.version 2026-04-08"),
        ({OLD_URL: _not_a_leaf()}, "lists supported_versions of its own"),
    ],
    ids=["unreachable", "wrong-version", "not-a-leaf"],
)
async def test_an_unusable_older_profile_refuses_that_version_only(
    mode: str, listed: dict[str, Any], logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The platform is told the version cannot be served; the operator, why; others are served."""
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        async with Client(_shop(_platforms(**listed)), mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("create_checkout", _args(OLD_PLATFORM_URL))
            served = structured(await client.call_tool("create_checkout", _args(NEW_PLATFORM_URL)))
    assert refused.value.error.code == -32001
    assert refused.value.error.data["code"] == "version_unsupported"
    assert "profile for that version cannot be loaded" in refused.value.error.data["content"]
    assert OLD_URL not in refused.value.error.data["content"]  # the business's own trouble stays private
    warning = next(r.getMessage() for r in caplog.records if OLD_URL in r.getMessage())
    assert logged in warning
    assert served["ucp"]["version"] == NEW


async def test_pinned_profiles_are_never_fetched_and_agreements_are_reused() -> None:
    asked: list[str] = []

    class Counting(StaticResolver):
        async def resolve(self, url: str) -> Profile:
            asked.append(url)
            return await super().resolve(url)

    resolver = Counting({OLD_PLATFORM_URL: OLD_PLATFORM, OLD_URL: _wrong_version()})
    pinned = {OLD: OLD_BUSINESS}
    ucp = UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver, supported_profiles=pinned)
    engine = Engine(Policy(ucp=ucp))
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}
    arguments = {"meta": {"ucp-agent": {"profile": OLD_PLATFORM_URL}}}
    params = {"name": "checkout", "arguments": arguments, "_meta": meta}
    facts = PlainFacts("tools/call", params, "2026-07-28")
    first, second = [(await decided(engine, facts)).known for _ in "12"]
    assert first is not None
    assert first is second
    assert first.record.ucp.capabilities == {CHECKOUT: OLD, GIFT_WRAP: OLD}
    assert OLD_URL not in asked  # the pinned profile is never fetched


def test_a_pin_must_name_a_listed_version_and_declare_it() -> None:
    with pytest.raises(ValueError, match=r"pins version '2025-01-01'.*lists 2026-01-23"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, supported_profiles={"2025-01-01": OLD_BUSINESS})
    with pytest.raises(ValueError, match=r"pinned for version 2026-01-23 declares ucp\.version 2026-04-08"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, supported_profiles={OLD: _wrong_version()})
    with pytest.raises(
        ValueError, match=r"pinned for version 2026-01-23 lists supported_versions of its own"
    ):
        UcpPolicy(business_profile=BUSINESS_PROFILE, supported_profiles={OLD: _not_a_leaf()})


RELEASE = "2026-08-25"
LOYALTY = "com.acme.shopping.loyalty"
LEAF_URLS = {
    NEW: "https://shop.example/.well-known/ucp/2026-04-08",
    OLD: "https://shop.example/.well-known/ucp/2026-01-23",
}
LOYALTY_ENTRY = {"version": "2026-06-15", "extends": CHECKOUT}
CURRENT = {
    "ucp": {
        "version": RELEASE,
        "supported_versions": LEAF_URLS,
        "capabilities": {CHECKOUT: [{"version": RELEASE}], LOYALTY: [LOYALTY_ENTRY]},
        "services": {},
        "payment_handlers": {},
    },
    "keys": [],
}
"""A business at 2026-08-25 still serving 2026-04-08 (pinned) and 2026-01-23 (fetched)."""
AT_NEW = {"ucp": {"version": NEW, "capabilities": {CHECKOUT: [{"version": NEW}], LOYALTY: [LOYALTY_ENTRY]}}}
RELEASE_PLATFORM_URL = "https://release-platform.example/profile.json"


def _platform(version: str) -> dict[str, Any]:
    return {
        "ucp": {
            "version": version,
            "capabilities": {CHECKOUT: [{"version": version}], LOYALTY: [LOYALTY_ENTRY]},
        }
    }


@pytest.mark.parametrize("mode", MODES)
async def test_a_2026_08_25_business_serves_each_version_from_that_versions_profile(mode: str) -> None:
    """Three platforms, three versions, three business profiles; the loyalty extension's
    `requires` (checkout 2026-06-01 or later) is met only by the 2026-08-25 checkout."""
    resolver = StaticResolver(
        {
            RELEASE_PLATFORM_URL: _platform(RELEASE),
            NEW_PLATFORM_URL: _platform(NEW),
            OLD_PLATFORM_URL: OLD_PLATFORM,
            LEAF_URLS[OLD]: OLD_BUSINESS,
        }
    )
    server = _shop(
        resolver,
        CURRENT,
        supported_profiles={NEW: AT_NEW},
        requires={LOYALTY: {"capabilities": {CHECKOUT: {"min": "2026-06-01"}}}},
    )
    async with Client(server, mode=mode) as client:
        release = structured(await client.call_tool("create_checkout", _args(RELEASE_PLATFORM_URL)))
        new = structured(await client.call_tool("create_checkout", _args(NEW_PLATFORM_URL)))
        old = structured(await client.call_tool("create_checkout", _args(OLD_PLATFORM_URL)))
    assert release == {
        "ucp": {
            "version": RELEASE,
            "capabilities": {CHECKOUT: [{"version": RELEASE}], LOYALTY: [{"version": "2026-06-15"}]},
        },
        "items": ["tea"],
        "dropped": {},
    }
    assert new == {
        "ucp": {"version": NEW, "capabilities": {CHECKOUT: [{"version": NEW}]}},
        "items": ["tea"],
        "dropped": {LOYALTY: "requirement_unmet"},
    }
    # 2026-01-23's own profile has gift wrap and no loyalty: nothing of the current one leaks in.
    assert old == {
        "ucp": {
            "version": OLD,
            "capabilities": {CHECKOUT: [{"version": OLD}], GIFT_WRAP: [{"version": OLD}]},
        },
        "items": ["tea"],
        "dropped": {},
    }


def test_requirements_are_checked_when_the_policy_is_built() -> None:
    with pytest.raises(ValueError, match="is empty"):
        UcpPolicy(business_profile=CURRENT, requires={LOYALTY: {"protocol": {"min": RELEASE, "max": NEW}}})


def test_the_probe_says_an_older_platform_is_not_predicted_from_the_advertisement() -> None:
    business = Profile.from_file(BUSINESS_PROFILE)
    row = Row(revision="2025-11-25", era="legacy", outcome="agreed", ucp_advertised=advertisement(business))
    outcome = ucp_outcome([row], Profile.from_json(OLD_PLATFORM))
    assert outcome == {"version": OLD, "business_profile": OLD_URL}
    assert OLD_URL in render_ucp(outcome)
    current = ucp_outcome([row], Profile.from_json(NEW_PLATFORM))
    assert current["version"] == NEW
    assert "capabilities" in current
