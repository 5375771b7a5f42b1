"""A server author's slips: each is caught where it is made, with an error that says what to write.

Accepted, each would fail later and far away: on every request, as a logged error, or
as a refusal that blames the client.
"""

from __future__ import annotations

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
    require,
    requires,
    requires_ucp,
    uninstrument,
)
from mcp_negotiation.sdk import install

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


def test_require_with_no_names_is_a_mistake_not_a_pass() -> None:
    with pytest.raises(ValueError, match=r"require\(\) needs one or more capability names"):
        require()


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
