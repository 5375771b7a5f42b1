"""A server author's slips: each is caught where it is made, with an error that says what to write.

Accepted, each would fail later and far away: on every request, as a logged error, or
as a refusal that blames the client.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import (
    Policy,
    instrument,
    negotiate,
    negotiated,
    requires,
    requires_ucp,
    revisions,
    uninstrument,
)
from mcp_negotiation.bridge import Leg
from mcp_negotiation.errors import Refusal
from mcp_negotiation.negotiation import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, Negotiator
from mcp_negotiation.sdk import install
from mcp_negotiation.ucp import CapabilityEntry, Profile, UcpPolicy, negotiate_capabilities
from ucp_shop import BUSINESS_PROFILE

pytestmark = pytest.mark.anyio


def test_negotiate_takes_a_policy_not_a_mapping() -> None:
    with pytest.raises(
        TypeError, match=r"negotiate\(server, policy\) takes a mcp_negotiation\.Policy, not dict"
    ):
        negotiate(MCPServer("s"), {"min_revision": "2025-06-18"})  # type: ignore[arg-type]


def test_instrument_with_a_server_where_the_policy_goes_instruments_nothing() -> None:
    existing = MCPServer("existing")
    with pytest.raises(TypeError, match=r"instrument\(policy, \*servers\) takes a mcp_negotiation\.Policy"):
        instrument(existing)  # type: ignore[arg-type]
    try:
        assert install._INSTRUMENTED == []
    finally:
        uninstrument()


def test_decorators_written_without_their_parentheses() -> None:
    def build() -> MCPServer:
        return MCPServer("s")

    with pytest.raises(TypeError, match=r"@negotiated\(\)"):
        negotiated(build)  # type: ignore[arg-type]

    async def tool() -> None: ...

    with pytest.raises(TypeError, match=r"@requires\('name', \.\.\.\)"):
        requires(tool)  # type: ignore[arg-type]


def test_negotiated_keeps_the_builders_signature_and_policy() -> None:
    @negotiated(Policy(min_revision="2025-06-18"))
    def build(name: str, *, loud: bool = False) -> MCPServer:
        return MCPServer(name.upper() if loud else name)

    server = build("shop", loud=True)
    assert server.name == "SHOP"
    assert install._installed(install.seams.middleware_list(server) or []) is not None


def test_requires_with_no_names_is_a_mistake_not_a_pass() -> None:
    with pytest.raises(ValueError, match=r"requires\(\) needs one or more capability names"):
        requires()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_requires_ucp_without_a_ucp_policy_blames_the_server(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = negotiate(MCPServer("shop"), Policy())

    @server.tool()
    @requires_ucp("dev.ucp.shopping.checkout")
    async def create_checkout(ctx: Context) -> dict[str, Any]:
        return {}

    arguments = {"meta": {"ucp-agent": {"profile": "https://platform.example/profile.json"}}}
    with caplog.at_level(logging.ERROR, logger="mcp_negotiation"):
        async with Client(server, mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("create_checkout", arguments)
    assert refused.value.error.code == -32603
    assert refused.value.error.message == "this server is not configured for UCP"
    assert any("has no ucp=UcpPolicy" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"today": datetime.datetime(2026, 11, 30, 12, 0)}, "today must be a datetime.date"),
        ({"removal_date": datetime.datetime(2027, 1, 1)}, "removal_date must be a datetime.date"),
        ({"months_since_deprecation": "3"}, "months_since_deprecation must be a whole number"),
        ({"months_since_deprecation": True}, "months_since_deprecation must be a whole number"),
    ],
)
def test_policy_dates_and_months_of_the_wrong_type(options: dict[str, Any], says: str) -> None:
    with pytest.raises(TypeError, match=says):
        Policy(**options)


# -- what a caller keeps cannot change a record, a refusal or a profile afterwards --------------


def test_a_callers_headers_cannot_rewrite_a_cached_record() -> None:
    negotiator = Negotiator(Policy())
    headers = {"mcp-protocol-version": "2026-07-28"}
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}
    record = negotiator.request(meta, transport="http", headers=headers)
    headers["mcp-protocol-version"] = "CHANGED"
    assert record.headers == {"mcp-protocol-version": "2026-07-28"}
    assert (
        negotiator.request(meta, transport="http", headers={"mcp-protocol-version": "2026-07-28"}) is record
    )


def test_an_amended_jsonrpc_error_leaves_the_refusal_alone() -> None:
    refusal = Refusal(-32021, "missing", {"requiredCapabilities": {"sampling": {}}, "supported": ["a"]})
    error = refusal.to_jsonrpc_error()
    error["data"]["requiredCapabilities"]["sampling"] = "MUTATED"
    error["data"]["supported"].append("b")
    assert refusal.data == {"requiredCapabilities": {"sampling": {}}, "supported": ["a"]}


def test_a_profile_built_directly_negotiates_like_one_read_from_json() -> None:
    checkout, fulfillment = "dev.ucp.shopping.checkout", "dev.ucp.shopping.fulfillment"
    config = {"regions": ["eu"]}
    entry = CapabilityEntry("2026-04-08", extends=checkout, config=config)  # type: ignore[arg-type]
    business = Profile("2026-04-08", {checkout: [CapabilityEntry("2026-04-08")], fulfillment: [entry]})  # type: ignore[dict-item]
    config["regions"].append("us")
    assert entry.extends == (checkout,)
    assert entry.config == {"regions": ("eu",)}
    assert isinstance(business.capabilities[fulfillment], tuple)
    agreement = negotiate_capabilities(business, business)
    assert agreement.capabilities == {checkout: "2026-04-08", fulfillment: "2026-04-08"}


def test_ucp_policies_built_alike_are_equal() -> None:
    assert UcpPolicy(business_profile=BUSINESS_PROFILE) == UcpPolicy(business_profile=BUSINESS_PROFILE)
    assert Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE)) == Policy(
        ucp=UcpPolicy(business_profile=BUSINESS_PROFILE)
    )


def test_smaller_slips_fail_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="unknown client capability"):
        Policy(required_capabilities=("/",))
    with pytest.raises(ValueError, match="version is a revision date"):
        Leg("client", "mcp", "1.0.0", {"tools"})
    with pytest.raises(ValueError, match="side must be 'client' or 'server'"):
        revisions.feature_names("zzz")  # type: ignore[arg-type]
    assert revisions.is_deprecated(None) is False  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="resolver must have a resolve"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, resolver="https://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="continue_url must be a URL string"):
        UcpPolicy(business_profile=BUSINESS_PROFILE, continue_url=123)  # type: ignore[arg-type]
