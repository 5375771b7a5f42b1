"""A negotiated server whose tool calls another negotiated server in process (a proxy).

The other server's requests, and the callbacks they make back into the proxy's client
(progress, elicitation), run inside the other server's request. Asked with its own
`ctx` there, the proxy must still learn about its own client, not about itself as the
other server's client.
"""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of

pytestmark = pytest.mark.anyio


class Name(BaseModel):
    name: str


def _backend() -> MCPServer:
    backend = negotiate(MCPServer("backend"), Policy())

    @backend.tool()
    async def ask(ctx: Context) -> str:
        await ctx.report_progress(1, 1, "working")
        if negotiation_of(ctx).era == "legacy":
            return (await ctx.elicit("name?", Name)).action
        return "done"

    return backend


def _proxy(backend: MCPServer, seen: list[tuple[str, str | None, bool]]) -> MCPServer:
    proxy = negotiate(MCPServer("proxy"), Policy())

    @proxy.tool()
    async def relay(ctx: Context, mode: str) -> str:
        def note(where: str) -> None:
            seen.append((where, negotiation_of(ctx).client_name, client_supports(ctx, "elicitation")))

        async def forward_elicitation(context: Any, params: Any) -> types.ElicitResult:
            note("elicitation")
            return types.ElicitResult(action="decline")

        async def forward_progress(progress: float, total: float | None, message: str | None) -> None:
            note("progress")

        note("before")
        async with Client(
            backend,
            mode=mode,
            elicitation_callback=forward_elicitation,
            client_info=types.Implementation(name="proxy-as-client", version="1"),
        ) as upstream:
            answer = await upstream.call_tool("ask", {}, progress_callback=forward_progress)
        note("after")
        return str(answer.content[0].text)  # type: ignore[union-attr]

    return proxy


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_proxys_callbacks_see_the_proxys_own_client(mode: str) -> None:
    seen: list[tuple[str, str | None, bool]] = []
    real = types.Implementation(name="real-client", version="1")  # declares no elicitation
    async with Client(_proxy(_backend(), seen), mode=mode, client_info=real) as client:
        answer = await client.call_tool("relay", {"mode": mode})
    assert not answer.is_error, answer.content
    wheres = [where for where, _, _ in seen]
    assert "progress" in wheres
    assert ("elicitation" in wheres) is (mode == "legacy")
    assert {(name, supported) for _, name, supported in seen} == {("real-client", False)}


async def test_a_server_run_in_process_by_a_stdio_servers_tool_is_not_stdio() -> None:
    """The stdio mark is inherited by every task under it; the SDK's in-process dispatcher
    (2026-07-28) is memory whatever it inherits. (Legacy in-memory streams run their
    handlers in the caller's context: there the mark cannot be told apart; documented.)"""
    from mcp.client.stdio import StdioServerParameters

    from harness import ROOT

    params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "tests/servers/nested_stdio.py")])
    async with Client(params, mode="legacy") as client:
        answer = await client.call_tool("transports", {"mode": "2026-07-28"})
    assert not answer.is_error, answer.content
    assert answer.structured_content == {"result": ["stdio", "memory"]}
