"""A server whose policy serves no 2026-07-28 revision, and the clients that probe it first.

The SDK's default `Client(...)` (`mode="auto"`) opens a stdio connection with a modern
`server/discover` probe and, refused, falls back to `initialize` on the same connection.
The SDK's stream driver locks a connection to the era of its first request, so without
`adapters/mcp2/fallback.py` that `initialize` is refused and the client cannot connect.
Here the clients connect: the SDK's default client over stdio and in-memory streams, and
the TypeScript client in its default (legacy) and `auto` modes, against a real stdio
subprocess of the bundled demo server.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy, negotiate
from mcp_negotiation.adapters.mcp2 import seams
from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import ROOT, RawRequest, demo_params, envelope, initialize_params, structured
from support.node import ensure_packages, run_ts_client

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

LEGACY_ONLY = ("--max-revision", "2025-11-25")
SERVED = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
"""What a -32022 of that policy lists, newest first."""


async def test_the_sdks_default_client_connects_to_a_legacy_only_stdio_server() -> None:
    async with Client(stdio_client(demo_params(*LEGACY_ONLY))) as client:
        seen = structured(await client.call_tool("negotiation", {}))
    assert (seen["era"], seen["protocol_version"], seen["transport"]) == ("legacy", "2025-11-25", "stdio")
    assert seen["outcome"] == "accepted"
    assert seen["capabilities_known"] is True


async def test_the_sdks_default_client_connects_over_in_memory_streams_too() -> None:
    async with Client(InMemoryTransport(build(Policy(max_revision="2025-06-18")))) as client:
        seen = structured(await client.call_tool("negotiation", {}))
    assert (seen["era"], seen["protocol_version"]) == ("legacy", "2025-06-18")  # counter-offered


async def test_the_probe_is_refused_naming_the_policys_revisions_then_the_handshake_is_served() -> None:
    """What the default client does, by hand on one connection: the probe's answer is the
    policy's -32022 (the middleware saw it), the fallback's is the handshake's."""
    streams = stdio_client(demo_params(*LEGACY_ONLY))
    async with streams as (read, write), ClientSession(read, write) as session:
        with pytest.raises(MCPError) as refused:
            await session.send_request(
                RawRequest(method="server/discover", params={"_meta": envelope()}), types.DiscoverResult
            )
        assert refused.value.error.code == -32022
        assert refused.value.error.data == {"supported": SERVED, "requested": "2026-07-28"}
        answer = await session.send_request(
            RawRequest(method="initialize", params=initialize_params("2025-06-18", {"sampling": {}})),
            types.InitializeResult,
        )
        assert answer.protocol_version == "2025-06-18"
        session.adopt(answer)
        await session.send_notification(types.InitializedNotification())
        seen = structured(await session.call_tool("negotiation", {}))
        assert (seen["protocol_version"], seen["client_capabilities"]) == ("2025-06-18", {"sampling": {}})
        # The connection is a legacy one now, as one opened by `initialize` is: the SDK refuses
        # a request with the modern envelope on it.
        with pytest.raises(MCPError) as enveloped:
            await session.send_request(
                RawRequest(method="tools/list", params={"_meta": envelope()}), types.ListToolsResult
            )
        assert enveloped.value.error.code == -32600


async def test_a_modern_client_still_gets_32022_and_a_policy_serving_modern_is_untouched() -> None:
    async with Client(stdio_client(demo_params(*LEGACY_ONLY)), mode="2026-07-28") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("negotiation", {})
    assert refused.value.error.data == {"supported": SERVED, "requested": "2026-07-28"}
    async with Client(stdio_client(demo_params())) as client:  # the default Policy: the probe is served
        assert structured(await client.call_tool("negotiation", {}))["protocol_version"] == "2026-07-28"


@pytest.mark.peers
@pytest.mark.parametrize("mode", [None, "auto"], ids=["default", "auto"])
def test_the_typescript_client_connects_to_a_legacy_only_stdio_server(mode: str | None) -> None:
    ensure_packages()
    spec: dict[str, Any] = {"sdk": "v2", "transport": "stdio", "command": sys.executable, "cwd": str(ROOT)}
    spec["args"] = ["-m", "mcp_negotiation.tools.demo", *LEGACY_ONLY]
    if mode is not None:
        spec["mode"] = mode
    out = run_ts_client({**spec, "calls": [{"name": "negotiation", "arguments": {}}]})
    (seen,) = out["results"]
    assert seen["isError"] is False
    assert (seen["structured"]["era"], seen["structured"]["protocol_version"]) == ("legacy", "2025-11-25")


def test_the_sdk_drives_stream_connections_where_the_fallback_wraps_it() -> None:
    """Fails when the SDK moves or renames the driver `Server.run` calls: negotiate() then warns."""
    from mcp.server.lowlevel import server as lowlevel

    assert seams.era_loop_site() is lowlevel
    negotiate(MCPServer("legacy-only"), Policy(max_revision="2025-11-25"))
    import wrapt

    assert isinstance(getattr(lowlevel, seams.ERA_LOOP), wrapt.FunctionWrapper)
    assert seams.era_loop_site() is lowlevel  # the wrapped driver is still recognised


@pytest.mark.parametrize(("policy", "warned"), [(Policy(max_revision="2025-11-25"), True), (Policy(), False)])
def test_without_the_driver_a_legacy_only_policy_warns_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, policy: Policy, warned: bool
) -> None:
    monkeypatch.setattr(seams, "era_loop_site", lambda: None)  # an SDK whose Server.run drives another
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        negotiate(MCPServer("s"), policy)
    said = [record.getMessage() for record in caplog.records if "serves no 2026-07-28" in record.getMessage()]
    assert bool(said) is warned
    if warned:
        assert "Client(..., mode='legacy')" in said[0]
    assert revisions.MODERN == ("2026-07-28",)  # what "serves no 2026-07-28" names
