"""mcp 1.x servers (FastMCP and lowlevel), negotiated through wrapt, end to end.

The same contract as the 2.x suite: the record equals what the client declared and the
revision agreed; refusals use the specification's codes and the next request is served.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import mcp.types as types
import pytest
from harness_v1 import seen, serve_http, server_params, session, stateless_call
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from v1_server import build

from mcp_negotiation import NegotiationUnavailable, Policy, instrument, negotiate, requires, uninstrument
from mcp_negotiation.adapters import MCP_MAJOR
from mcp_negotiation.adapters.mcp1.seams import sdk_revisions
from mcp_negotiation.adapters.mcp1.shell import is_negotiated, missing_targets
from mcp_negotiation.core import revisions
from support.decisions import decisions

pytestmark = pytest.mark.anyio

KINDS = ("memory", "stdio", "http", "http-stateless", "sse")
SERVED = sdk_revisions()
"""What this 1.x release serves: 1.23 stops at 2025-06-18, 1.24 onward reach 2025-11-25."""
NEWEST = SERVED[-1]
CAPS = {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {}, "x-vendor": {"deep": {"k": [1]}}}


def test_this_environment_is_mcp_1x_and_every_target_resolves() -> None:
    assert MCP_MAJOR == 1
    assert missing_targets() == []


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[Policy | None], Any]]]:
    kind: str = request.param
    opened: list[Any] = []

    def target(policy: Policy | None = None) -> Any:
        if kind == "memory":
            return build(policy)
        if kind == "stdio":
            args: list[str] = []
            if policy and policy.min_revision:
                args += ["--min-revision", policy.min_revision]
            for name in policy.required_capabilities if policy else ():
                args += ["--require", name]
            return server_params(*args)
        server = build(policy, stateless=kind == "http-stateless")
        app = server.sse_app() if kind == "sse" else server.streamable_http_app()
        cm = serve_http(app, "/sse" if kind == "sse" else "/mcp")
        opened.append(cm)
        return cm.__enter__()

    yield kind, target
    for cm in reversed(opened):
        cm.__exit__(None, None, None)


def _mcp_error(failure: BaseException) -> McpError | None:
    """The McpError inside `failure` (task groups wrap what a session context raises)."""
    if isinstance(failure, McpError):
        return failure
    for inner in getattr(failure, "exceptions", ()):
        found = _mcp_error(inner)
        if found is not None:
            return found
    return None


def _label(kind: str) -> str:
    return "http" if kind.startswith("http") or kind == "sse" else kind


@pytest.mark.parametrize("revision", SERVED)
async def test_record_matches_what_the_client_declared(endpoint: Any, revision: str) -> None:
    kind, make = endpoint
    async with session(kind, make(None), revision, CAPS) as (client, init):
        assert init.protocolVersion == revision
        record = seen(await client.call_tool("negotiation", {}))
    assert (record["era"], record["protocol_version"], record["transport"]) == (
        "legacy",
        revision,
        _label(kind),
    )
    if kind == "http-stateless":
        assert record["capabilities_known"] is False
        assert not any(record["supports"].values())
        return
    assert record["client_capabilities"] == CAPS
    assert record["supports"]["sampling"] is True
    assert record["supports"]["roots.listChanged"] is True
    assert record["supports"]["elicitation"] is revisions.is_at_least(revision, "2025-06-18")


async def test_counter_offer_is_answered_and_recorded(endpoint: Any) -> None:
    kind, make = endpoint
    async with session(kind, make(Policy(min_revision="2025-06-18")), "2025-03-26", {}) as (client, init):
        assert init.protocolVersion == NEWEST
        record = seen(await client.call_tool("negotiation", {}))
    assert record["protocol_version"] == NEWEST
    if kind != "http-stateless":
        assert (record["requested_version"], record["outcome"]) == ("2025-03-26", "counter_offered")


async def test_unknown_revision_is_counter_offered(endpoint: Any) -> None:
    kind, make = endpoint
    async with session(kind, make(None), "zzz", {}) as (client, init):
        assert init.protocolVersion == NEWEST
        assert seen(await client.call_tool("negotiation", {}))["protocol_version"] == NEWEST


async def test_requires_refuses_with_32021_then_serves(endpoint: Any) -> None:
    kind, make = endpoint
    async with session(kind, make(None), NEWEST, {}) as (client, _):
        with pytest.raises(McpError) as refused:
            await client.call_tool("summarize", {"text": "hello"})
        assert refused.value.error.code == -32021
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        assert seen(await client.call_tool("negotiation", {}))["era"] == "legacy"


async def test_required_capability_policy_refuses_initialize(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(Policy(required_capabilities=("sampling",)))
    refused: McpError | None = None
    try:
        async with session(kind, target, NEWEST, {}):
            pass
    except BaseException as failure:  # the session's task group wraps the refusal
        refused = _mcp_error(failure)
    assert refused is not None
    assert refused.error.code == -32021
    async with session(kind, target, NEWEST, {"sampling": {}}) as (client, _):
        assert seen(await client.call_tool("negotiation", {}))["supports"]["sampling"] is (
            kind != "http-stateless"
        )


async def test_twenty_concurrent_http_clients_see_their_own_negotiation() -> None:
    failures: list[str] = []
    with serve_http(build().streamable_http_app()) as url:

        async def one(index: int) -> None:
            revision = SERVED[index % len(SERVED)]
            caps = {"experimental": {f"client-{index}": {}}}
            async with session("http", url, revision, caps) as (client, _):
                record = seen(await client.call_tool("negotiation", {}))
            if (record["protocol_version"], record["client_capabilities"]) != (revision, caps):
                failures.append(f"{index}: {record['protocol_version']} {record['client_capabilities']}")

        async with anyio.create_task_group() as tg:
            for index in range(20):
                tg.start_soon(one, index)
    assert failures == []


async def test_lowlevel_server_and_instrument() -> None:
    from mcp.server.fastmcp import FastMCP
    from mcp.server.lowlevel.server import Server

    from mcp_negotiation import negotiation_of

    before = FastMCP("before")
    instrument(Policy(), before)
    try:
        later = Server("later")

        @later.list_tools()
        async def list_tools() -> list[types.Tool]:
            return [types.Tool(name="version", inputSchema={"type": "object"})]

        @later.call_tool()
        async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
            return [types.TextContent(type="text", text=negotiation_of().protocol_version)]

        assert is_negotiated(before)
        assert is_negotiated(later)
        wrapper = type("Wrapper", (), {"_mcp_server": later})()
        async with session("memory", wrapper, "2025-06-18") as (client, _):
            result = await client.call_tool("version", {})
        assert isinstance(result.content[0], types.TextContent)
        assert result.content[0].text == "2025-06-18"
    finally:
        uninstrument(before)
    assert not is_negotiated(before)
    assert not is_negotiated(Server("after"))


def test_not_a_server_warns_or_raises_in_strict_mode(caplog: pytest.LogCaptureFixture) -> None:
    thing = object()
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        assert negotiate(thing, Policy()) is thing
    assert "not an mcp 1.x server" in caplog.text
    with pytest.raises(NegotiationUnavailable):
        negotiate(thing, Policy(strict=True))


async def test_initialize_records_a_capability_negotiated_span() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    async with session("memory", build(Policy(min_revision="2025-06-18")), "2025-03-26", CAPS) as (client, _):
        await client.call_tool("negotiation", {})
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "capability_negotiated"]
    attributes = dict(span.attributes or {})
    assert attributes["mcp.protocol.version"] == NEWEST
    assert attributes["mcp.negotiation.outcome"] == "counter_offered"
    assert attributes["mcp.negotiation.requested_version"] == "2025-03-26"
    assert attributes["network.transport"] == "inproc"


async def test_the_documented_1x_example_runs_over_stdio() -> None:
    import sys

    from harness_v1 import HERE
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=[str(HERE.parents[2] / "examples/mcp1_server.py")]
    )
    async with session("stdio", params, "2025-03-26", {"elicitation": {}}) as (client, init):
        assert init.protocolVersion == NEWEST  # below the example's minimum: counter-offered
        result = await client.call_tool("greet", {"name": "Ada"})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text == "Hello Ada (I could ask you for more)"


async def test_stateful_http_records_the_session_id() -> None:
    with serve_http(build().streamable_http_app()) as url:
        async with session("http", url, NEWEST) as (client, _):
            first = seen(await client.call_tool("negotiation", {}))
            second = seen(await client.call_tool("negotiation", {}))
    assert isinstance(first["session_id"], str)
    assert len(first["session_id"]) >= 16
    assert second["session_id"] == first["session_id"]


@pytest.mark.parametrize("kind", ["memory", "http", "sse"])
async def test_a_sessions_requests_are_served_from_its_handshake_without_a_decision(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on mcp 2.x: after its handshake a session's requests publish the record it holds,
    and nothing is decided again (over stateful HTTP, after the first request, whose
    decision adds the session id). Each session still sees its own record, and the held
    record still refuses what it lacks."""
    decided = decisions(monkeypatch)
    server = build()
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            target: Any = server
        else:
            app = server.sse_app() if kind == "sse" else server.streamable_http_app()
            target = stack.enter_context(serve_http(app, "/sse" if kind == "sse" else "/mcp"))
        async with (
            session(kind, target, NEWEST, {"sampling": {}}) as (sampling, _),
            session(kind, target, SERVED[0]) as (plain, _),
        ):
            for _ in range(3):
                mine = seen(await sampling.call_tool("negotiation", {}))
                theirs = seen(await plain.call_tool("negotiation", {}))
                assert (mine["protocol_version"], mine["supports"]["sampling"]) == (NEWEST, True)
                assert (theirs["protocol_version"], theirs["supports"]["sampling"]) == (SERVED[0], False)
                with pytest.raises(McpError) as refused:
                    await plain.call_tool("summarize", {"text": "needs sampling"})
                assert refused.value.error.code == -32021
    assert decided.count("initialize") == 2
    # Over stateful HTTP each session's first request is decided, to add its session id
    # (SSE names its session in the URL's query, which no record keeps). The three calls of
    # `summarize` are the engine's refusals, made from the held record before the SDK reads
    # their arguments: no negotiation again.
    assert decided.count("tools/call") == (2 if kind == "http" else 0) + 3, decided


async def test_a_refusal_the_tool_catches_is_the_tools_answer() -> None:
    server = negotiate(FastMCP("soft"), Policy())

    @requires("sampling")
    async def sample() -> str:
        return "sampled"

    @server.tool()
    async def soft(ctx: Context) -> str:  # type: ignore[type-arg]
        try:
            return await sample()
        except McpError:
            return "fallback"

    @server.tool()
    async def hard(ctx: Context) -> str:  # type: ignore[type-arg]
        return await sample()

    async with session("memory", server, NEWEST) as (client, _):
        answer = await client.call_tool("soft", {})
        with pytest.raises(McpError) as refused:
            await client.call_tool("hard", {})
    block = answer.content[0]
    assert isinstance(block, types.TextContent)
    assert (answer.isError, block.text) == (False, "fallback")
    assert refused.value.error.code == -32021


async def test_negotiating_again_with_more_withheld_reaches_open_sessions() -> None:
    """A session opened before `withhold` grew loses the feature too, as on mcp 2.x."""
    server = build()
    async with session("memory", server, NEWEST, CAPS) as (client, _):
        assert seen(await client.call_tool("negotiation", {}))["supports"]["sampling"] is True
        negotiate(server, Policy(withhold="sampling"))
        record = seen(await client.call_tool("negotiation", {}))
        with pytest.raises(McpError) as refused:
            await client.call_tool("summarize", {"text": "hello"})
    assert record["supports"]["sampling"] is False
    assert record["withheld"] == ["sampling"]
    assert refused.value.error.code == -32021


async def test_negotiating_again_refuses_open_sessions_the_new_policy_would_not_serve() -> None:
    """A capability now required that an open session lacks: its next request is refused,
    as on mcp 2.x; a ping still answers; the session is served again once the policy allows."""
    server = build()
    async with session("memory", server, NEWEST, {}) as (client, _):
        assert seen(await client.call_tool("negotiation", {}))["supports"]["sampling"] is False
        negotiate(server, Policy(required_capabilities=("sampling",)))
        with pytest.raises(McpError) as refused:
            await client.call_tool("negotiation", {})
        await client.send_ping()
        negotiate(server, Policy())
        assert seen(await client.call_tool("negotiation", {}))["supports"]["sampling"] is False
    assert refused.value.error.code == -32021


async def test_a_client_that_goes_on_after_a_refused_initialize_is_refused_again() -> None:
    """1.x serves a client that sends `initialized` and its requests after a refused
    handshake: each request is refused as the handshake was; a ping is still answered."""
    from harness_v1 import streams
    from mcp.client.session import ClientSession

    server = build(Policy(required_capabilities=("sampling",)))
    params = types.InitializeRequestParams.model_validate(
        {"protocolVersion": NEWEST, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    )
    call = types.ClientRequest(types.CallToolRequest(params=types.CallToolRequestParams(name="negotiation")))
    async with streams("memory", server) as (read, write), ClientSession(read, write) as client:
        with pytest.raises(McpError) as refused:
            await client.send_request(
                types.ClientRequest(types.InitializeRequest(params=params)), types.InitializeResult
            )
        await client.send_notification(types.ClientNotification(types.InitializedNotification()))
        with pytest.raises(McpError) as again:
            await client.send_request(call, types.CallToolResult)
        await client.send_ping()
    assert refused.value.error.code == again.value.error.code == -32021


@pytest.mark.parametrize(
    ("revision", "capabilities", "code"),
    [("9" * 65, {"sampling": {}}, -32602), (NEWEST, {}, -32021)],
    ids=["malformed", "missing-required"],
)
async def test_a_refused_initialize_after_an_accepted_one_answers_only_itself(
    revision: str, capabilities: dict[str, Any], code: int
) -> None:
    """1.x keeps serving a session whose client sends `initialize` again: a refusal of that
    one answers only itself, and the handshake agreed before stays in force (as on 2.x)."""
    server = build(Policy(required_capabilities=("sampling",)))
    again = types.InitializeRequestParams.model_validate(
        {
            "protocolVersion": revision,
            "capabilities": capabilities,
            "clientInfo": {"name": "c", "version": "1"},
        }
    )
    async with session("memory", server, NEWEST, {"sampling": {}, "elicitation": {}}) as (client, _):
        with pytest.raises(McpError) as refused:
            await client.send_request(
                types.ClientRequest(types.InitializeRequest(params=again)), types.InitializeResult
            )
        served = [seen(await client.call_tool("negotiation", {})) for _ in range(2)]
    assert refused.value.error.code == code
    assert all(record["supports"]["elicitation"] is True for record in served)
    assert {record["protocol_version"] for record in served} == {NEWEST}


@pytest.mark.parametrize("header", ["2025-03-26", None])
async def test_stateless_requests_below_the_policy_are_refused(header: str | None) -> None:
    """No session to counter-offer in: the revision the SDK would serve is the one judged."""
    answer = await stateless_call(build(Policy(min_revision="2025-06-18"), stateless=True), header)
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["requested"] == (header or "2025-03-26")


async def test_what_a_session_declared_leaves_with_the_session() -> None:
    """Sessions whose `initialize` carried ~2.8 MB capability maps, each closed in turn: the
    adapter's maps are keyed weakly by session, and telemetry and the caches keep no record
    over 64 KiB, so what stays allocated does not grow with the number of sessions."""
    import gc
    import tracemalloc

    server = build()
    text = "x" * 4_080

    async def open_and_close(i: int) -> None:
        caps = {"experimental": {f"k{j}": {"v": f"{i}:{j}:{text}"} for j in range(700)}}
        async with session("memory", server, NEWEST, caps) as (client, _):
            assert seen(await client.call_tool("negotiation", {}))["capabilities_known"] is True

    tracemalloc.start()
    try:
        for i in range(3):  # warm-up: lazy imports, pools
            await open_and_close(-1 - i)
        retained = []
        for start, stop in ((0, 3), (3, 9)):
            for i in range(start, stop):
                await open_and_close(i)
            gc.collect()
            retained.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert retained[1] - retained[0] < 700 * 4_096  # six more sessions: not even one more kept
