"""A negotiated server whose tool calls another negotiated server in process (a proxy).

The other server's requests, and the callbacks they make back into the proxy's client
(progress, elicitation), run inside the other server's request. Asked with its own
`ctx` there, the proxy must still learn about its own client, not about itself as the
other server's client.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of

pytestmark = pytest.mark.anyio


class Name(BaseModel):
    name: str


def _with_ask(server: MCPServer) -> MCPServer:
    @server.tool()
    async def ask(ctx: Context) -> str:
        await ctx.report_progress(1, 1, "working")
        if negotiation_of(ctx).era == "legacy":
            return (await ctx.elicit("name?", Name)).action
        return "done"

    return server


def _proxy(backend: MCPServer | None, seen: list[tuple[str, str | None, bool]]) -> MCPServer:
    """A proxy to `backend`, or to itself (the same negotiator on both sides) when None."""
    proxy = negotiate(MCPServer("proxy"), Policy())
    upstream_server = backend if backend is not None else _with_ask(proxy)

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
            upstream_server,
            mode=mode,
            elicitation_callback=forward_elicitation,
            client_info=types.Implementation(name="proxy-as-client", version="1"),
        ) as upstream:
            answer = await upstream.call_tool("ask", {}, progress_callback=forward_progress)
        note("after")
        return str(answer.content[0].text)  # type: ignore[union-attr]

    return proxy


@pytest.mark.parametrize("upstream", ["another server", "itself"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_proxys_callbacks_see_the_proxys_own_client(mode: str, upstream: str) -> None:
    seen: list[tuple[str, str | None, bool]] = []
    real = types.Implementation(name="real-client", version="1")  # declares no elicitation
    backend = _with_ask(negotiate(MCPServer("backend"), Policy())) if upstream == "another server" else None
    async with Client(_proxy(backend, seen), mode=mode, client_info=real) as client:
        answer = await client.call_tool("relay", {"mode": mode})
    assert not answer.is_error, answer.content
    wheres = [where for where, _, _ in seen]
    assert "progress" in wheres
    assert ("elicitation" in wheres) is (mode == "legacy")
    assert {(name, supported) for _, name, supported in seen} == {("real-client", False)}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_worker_started_by_one_request_answers_for_the_ctx_it_is_handed(mode: str) -> None:
    """A task inherits the ContextVars of the request that started it, not of the ones it serves."""
    server = negotiate(MCPServer("s"), Policy())
    jobs: anyio.abc.ObjectSendStream[tuple[Context, anyio.abc.ObjectSendStream[Any]]]
    jobs, queued = anyio.create_memory_object_stream(1)
    started: list[asyncio.Task[None]] = []

    async def work() -> None:
        async for ctx, reply in queued:
            await reply.send((negotiation_of(ctx).client_name, client_supports(ctx, "sampling")))

    @server.tool()
    async def job(ctx: Context) -> list[Any]:
        if not started:  # lazily, by the first request: the worker inherits its ContextVars
            started.append(asyncio.create_task(work()))
        reply, replied = anyio.create_memory_object_stream[Any](1)
        await jobs.send((ctx, reply))
        return [negotiation_of(ctx).client_name, *(await replied.receive())]

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=""), model="m"
        )

    first, second = (types.Implementation(name=name, version="1") for name in ("first", "second"))
    try:
        async with (
            Client(server, mode=mode, client_info=first, sampling_callback=sample) as one,
            Client(server, mode=mode, client_info=second) as two,
        ):
            answers = [(await client.call_tool("job", {})).structured_content for client in (one, two)]
    finally:
        started[0].cancel()
    assert answers == [{"result": ["first", "first", True]}, {"result": ["second", "second", False]}]


async def test_a_server_run_in_process_by_a_stdio_servers_tool_is_not_stdio() -> None:
    """The stdio mark is inherited by every task under it; the SDK's in-process dispatcher
    (2026-07-28) is memory whatever it inherits. (Legacy in-memory streams run their
    handlers in the caller's context: there the mark cannot be told apart; documented.)"""
    from mcp.client.stdio import StdioServerParameters

    from support.harness import ROOT

    server = ROOT / "tests/support/servers/nested_stdio.py"
    params = StdioServerParameters(command=sys.executable, args=[str(server)])
    async with Client(params, mode="legacy") as client:
        answer = await client.call_tool("transports", {"mode": "2026-07-28"})
    assert not answer.is_error, answer.content
    assert answer.structured_content == {"result": ["stdio", "memory"]}
    # The server calling itself with the envelope its stdio client sends: not a repeat of it.
    async with Client(params, mode="2026-07-28") as client:
        for _ in range(2):
            answer = await client.call_tool("own_transports", {})
            assert not answer.is_error, answer.content
            assert answer.structured_content == {"result": ["stdio", "memory"]}
