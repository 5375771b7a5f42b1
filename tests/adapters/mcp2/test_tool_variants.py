"""Tool variants (issue 37): one listed name, served to each client by the implementation
its negotiation selects, listed with that implementation's schema and dispatched to it;
scoped listings fingerprinted by the capability view they were made for.

Over every transport (memory, stdio, stateful and stateless HTTP), in both eras, with the
SDK's own client; on an MCPServer (examples/tool_variants.py) and a paging FastMCP 4 server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from fastmcp import FastMCP
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import ClientOverride, Policy, PolicyError, UsageError, negotiate, requires, variant_of
from mcp_negotiation.core.listings import REQUIRED_CAPABILITIES_META_KEY as KEY
from mcp_negotiation.core.variants import CAPABILITY_SCOPE_META_KEY as SCOPE
from support.harness import legacy_session, open_streams, serve_http, stdio_params
from tool_variants import build

pytestmark = pytest.mark.anyio

KINDS = ("memory", "stdio", "http", "http-stateless")
EVERYTHING = {"elicitation": {}, "sampling": {}}
PLAIN = {"research": ["query", "limit"], "summarize": ["text", "words"]}
"""What a client that can neither be asked nor sample is listed: the variants' schemas."""
FULL = {"research": ["topic"], "summarize": ["text"]}


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """(transport kind, the connection target of examples/tool_variants.py over it)."""
    kind: str = request.param
    if kind == "memory":
        yield kind, build()
    elif kind == "stdio":
        yield kind, stdio_params("tool_variants.py")
    else:
        with serve_http(build().streamable_http_app(stateless_http=kind == "http-stateless")) as url:
            yield kind, url


@asynccontextmanager
async def legacy(kind: str, target: Any, caps: dict[str, Any]) -> AsyncIterator[ClientSession]:
    async with (
        open_streams("http" if kind.startswith("http") else kind, target) as streams,
        legacy_session(streams, "2025-11-25", caps) as (session, _),
    ):
        yield session


async def _elicit(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"focus": "bees"})


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled"), model="m"
    )


def _schemas(listing: types.ListToolsResult) -> dict[str, list[str]]:
    return {tool.name: list(tool.input_schema.get("properties", {})) for tool in listing.tools}


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


async def test_each_client_is_listed_and_served_its_variant(endpoint: tuple[str, Any]) -> None:
    kind, target = endpoint
    async with Client(target, mode="2026-07-28") as client:
        plain = await client.list_tools()
        looked_up = _text(await client.call_tool("research", {"query": "bees", "limit": 2}))
        local = _text(await client.call_tool("summarize", {"text": "one two three four five six"}))
        # The schema it was listed is the one it is validated against: `topic` is not `lookup`'s.
        assert (await client.call_tool("research", {"topic": "bees"})).is_error
    async with Client(
        target, mode="2026-07-28", elicitation_callback=_elicit, sampling_callback=_sample
    ) as client:
        full = await client.list_tools()
        researched = _text(await client.call_tool("research", {"topic": "bees"}))
        sampled = _text(await client.call_tool("summarize", {"text": "one two three"}))
    assert (_schemas(plain), _schemas(full)) == (PLAIN, FULL)
    assert (looked_up, local) == ("top 2 results for bees", "one two three four five")
    assert (researched, sampled) == ("research on bees, focused on bees", "sampled")
    assert plain.tools[0].description == "Look up `query` as given: the top `limit` results."
    # The fallback needs nothing, so it declares nothing; `summarize` itself declares sampling.
    assert [tool.meta for tool in plain.tools] == [None, None]
    assert full.tools[1].meta == {KEY: {"sampling": {}}}
    async with legacy(kind, target, {}) as session:
        legacy_plain = await session.list_tools()
        assert _text(await session.call_tool("research", {"query": "bees"})) == "top 3 results for bees"
    async with legacy(kind, target, EVERYTHING) as session:
        legacy_full = await session.list_tools()
    assert _schemas(legacy_plain) == PLAIN
    # Legacy stateless HTTP: what the handshake declared is gone, so the fallbacks serve.
    assert _schemas(legacy_full) == (PLAIN if kind == "http-stateless" else FULL)
    if kind != "http-stateless":  # the user asked and the model sampled mid-call, as legacy does
        async with Client(
            target, mode="legacy", elicitation_callback=_elicit, sampling_callback=_sample
        ) as client:
            assert _text(await client.call_tool("research", {"topic": "bees"})) == researched
            assert _text(await client.call_tool("summarize", {"text": "one two three"})) == sampled


async def test_the_fingerprint_tells_capability_views_apart(endpoint: tuple[str, Any]) -> None:
    kind, target = endpoint
    fingerprints: dict[str, set[str]] = {"plain": set(), "full": set()}
    for _ in range(2):  # stable: the same view gives the same fingerprint, connection after connection
        async with legacy(kind, target, {}) as session:
            fingerprints["plain"].add((await session.list_tools()).meta[SCOPE])
        async with Client(target, mode="2026-07-28") as client:
            fingerprints["plain"].add((await client.list_tools()).meta[SCOPE])
        async with Client(
            target, mode="2026-07-28", elicitation_callback=_elicit, sampling_callback=_sample
        ) as client:
            fingerprints["full"].add((await client.list_tools()).meta[SCOPE])
    (plain,), (full,) = fingerprints["plain"], fingerprints["full"]
    assert plain != full
    assert all(len(found) == 16 and set(found) <= set("0123456789abcdef") for found in (plain, full))


async def test_a_variant_is_never_listed_nor_called_by_its_own_name() -> None:
    server = build()
    async with Client(server, mode="2026-07-28") as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("lookup", {"query": "bees"})
    assert names == ["research", "summarize"]
    assert (unknown.value.error.code, unknown.value.error.message) == (-32602, "Unknown tool: lookup")


async def test_what_the_policy_withholds_chooses_the_variant_too() -> None:
    # A client that declares elicitation but does not render it (see docs/tool-variants.md):
    # withheld by the policy, it is served `lookup`, as `client_supports` says it cannot be asked.
    server = build(policy=Policy(withhold=("elicitation",)))
    async with Client(server, mode="2026-07-28", elicitation_callback=_elicit) as client:
        assert _schemas(await client.list_tools())["research"] == PLAIN["research"]
        assert _text(await client.call_tool("research", {"query": "bees"})) == "top 3 results for bees"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_per_client_override_chooses_the_variant_for_that_client_alone(mode: str) -> None:
    # Claude Code in the desktop app declared elicitation and did not render the form
    # (docs/client-overrides.md): revoked for that client only, it is served `lookup`.
    rule = ClientOverride("desk-*", revoke=["elicitation"], id="desk-no-forms")
    server = build(policy=Policy(client_overrides=[rule]))
    for name, expected in (("desk-app", PLAIN["research"]), ("cli", FULL["research"])):
        info = types.Implementation(name=name, version="1.0.0")
        async with Client(server, mode=mode, client_info=info, elicitation_callback=_elicit) as client:
            assert _schemas(await client.list_tools())["research"] == expected, name


async def test_a_hiding_policy_lists_the_fallback_instead_of_hiding_the_tool() -> None:
    async with Client(build(policy=Policy(hide_unusable=True)), mode="2026-07-28") as client:
        assert _schemas(await client.list_tools()) == PLAIN


async def test_a_listing_that_depends_on_no_client_carries_no_fingerprint() -> None:
    server = negotiate(MCPServer("unscoped"), Policy())

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text

    async with Client(server, mode="2026-07-28") as client:
        assert SCOPE not in ((await client.list_tools()).meta or {})


def _fastmcp() -> FastMCP:
    server = negotiate(FastMCP("fm-variants", list_page_size=1), Policy())

    @server.tool()
    async def research(topic: str) -> str:
        return f"research on {topic}"

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    @variant_of("research", unless="elicitation")
    async def lookup(query: str) -> str:
        return f"lookup of {query}"

    return server


async def _all_pages(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    while True:
        result = await client.list_tools(cursor=cursor)
        tools += result.tools
        cursor = result.next_cursor
        if cursor is None:
            return tools


async def test_a_paging_fastmcp_server_lists_a_variant_from_another_page() -> None:
    server = _fastmcp()._mcp_server
    async with Client(server, mode="2026-07-28") as client:
        tools = await _all_pages(client)
        served = _text(await client.call_tool("research", {"query": "bees"}))
    assert [(tool.name, list(tool.input_schema["properties"])) for tool in tools] == [
        ("research", ["query"]),
        ("echo", ["text"]),
    ]
    assert served == "lookup of bees"
    async with Client(server, mode="2026-07-28", elicitation_callback=_elicit) as client:
        tools = await _all_pages(client)
        assert [list(tool.input_schema["properties"]) for tool in tools] == [["topic"], ["text"]]
        assert _text(await client.call_tool("research", {"topic": "bees"})) == "research on bees"


def test_variant_of_is_checked_where_it_is_written() -> None:
    with pytest.raises(PolicyError, match="name of the tool"):
        variant_of("")
    with pytest.raises(PolicyError, match="elicitaton"):
        variant_of("research", unless="elicitaton")
    with pytest.raises(UsageError, match="decorates a function"):
        variant_of("research")(type("NotATool", (), {}))
    marked = variant_of("research", when="sampling")

    async def tool() -> None: ...

    marked(tool)
    with pytest.raises(UsageError, match="already a variant of 'research'"):
        variant_of("other")(tool)
