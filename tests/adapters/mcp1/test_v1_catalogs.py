"""mcp 1.x: listings declare each entry's requirements and, with `Policy(hide_unusable=True)`,
list each session only what it can use (issue 25), over memory, stdio and HTTP."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import mcp.types as types
import pytest
from harness_v1 import serve_http, session
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from v1_catalog_server import HERE, build

from mcp_negotiation import Policy, instrument, negotiate, requires, uninstrument
from mcp_negotiation.adapters.mcp1.seams import sdk_revisions
from mcp_negotiation.core.listings import REQUIRED_CAPABILITIES_META_KEY as KEY
from mcp_negotiation.core.listings import required_capabilities_meta
from mcp_negotiation.core.variants import CAPABILITY_SCOPE_META_KEY

pytestmark = pytest.mark.anyio

KINDS = ("memory", "stdio", "http", "http-stateless")
REVISION = sdk_revisions()[-1]
SAMPLING = {KEY: {"sampling": {}}}


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[bool], Any]]]:
    kind: str = request.param
    opened: list[Any] = []

    def target(hide: bool, variants: bool = False) -> Any:
        if kind == "memory":
            return build(hide=hide, variants=variants)
        if kind == "stdio":
            # This tree's library, whatever the environment's editable install points at.
            env = {**get_default_environment(), "PYTHONPATH": str(HERE.parents[2] / "src")}
            flags = [flag for flag, on in (("--hide", hide), ("--variants", variants)) if on]
            args = [str(HERE / "v1_catalog_server.py"), *flags]
            return StdioServerParameters(command=sys.executable, args=args, env=env)
        built = build(hide=hide, stateless=kind == "http-stateless", variants=variants)
        served = serve_http(built.streamable_http_app())
        opened.append(served)
        return served.__enter__()

    yield kind, target
    for served in reversed(opened):
        served.__exit__(None, None, None)


def _metas(result: types.ListToolsResult) -> dict[str, Any]:
    return {tool.name: tool.meta for tool in result.tools}


async def _refused(client: Any, name: str) -> Any:
    with pytest.raises(McpError) as refused:
        await client.call_tool(name, {"text": "x"})
    assert refused.value.error.code == -32021
    return refused.value.error.data


async def test_every_session_sees_the_requirements_its_refusal_would_carry(endpoint: Any) -> None:
    kind, make = endpoint
    async with session(kind, make(False), REVISION, {}) as (client, _):
        listed = _metas(await client.list_tools())
        refusal = await _refused(client, "summarize")
        prompts = {p.name: p.meta for p in (await client.list_prompts()).prompts}
        templates = {
            t.uriTemplate: t.meta for t in (await client.list_resource_templates()).resourceTemplates
        }
    assert listed == {"summarize": SAMPLING, "echo": None}
    assert refusal == {"requiredCapabilities": listed["summarize"][KEY]}
    assert prompts == {"brief": SAMPLING}
    assert templates == {"notes://{topic}": {KEY: {"elicitation": {}}}}


async def test_each_session_lists_only_what_it_can_use(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(True)
    async with session(kind, target, REVISION, {}) as (client, _):
        assert list(_metas(await client.list_tools())) == ["echo"]
        assert (await client.list_prompts()).prompts == []
        assert await _refused(client, "summarize") == {"requiredCapabilities": SAMPLING[KEY]}
    async with session(kind, target, REVISION, {"sampling": {}}) as (client, _):
        listed = _metas(await client.list_tools())
    # Stateless HTTP: the handshake's capabilities are gone, so nothing is assumed.
    assert listed == ({"echo": None} if kind == "http-stateless" else {"summarize": SAMPLING, "echo": None})


@pytest.mark.parametrize("hide", [False, True])
async def test_a_withheld_tool_is_refused_before_its_arguments_are_read(endpoint: Any, hide: bool) -> None:
    # `{}` lacks the `text` the schema requires: FastMCP's validation would name it (and
    # `summarizeArguments`); the refusal comes first and names what the session lacks only.
    kind, make = endpoint
    target = make(hide)
    async with session(kind, target, REVISION, {}) as (client, _):
        with pytest.raises(McpError) as refused:
            await client.call_tool("summarize", {})
    error = refused.value.error
    assert (error.code, error.data) == (-32021, {"requiredCapabilities": SAMPLING[KEY]})
    exposed = json.dumps(error.model_dump(mode="json"))
    assert "text" not in exposed, exposed
    assert "Arguments" not in exposed, exposed
    if kind != "http-stateless":  # (where no handshake's capabilities are kept, every call is refused)
        async with session(kind, target, REVISION, {"sampling": {}}) as (client, _):
            validated = await client.call_tool("summarize", {})
        assert validated.isError
        assert "text" in str(validated.content)


async def test_each_session_is_listed_and_served_its_variant(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(False, True)
    async with session(kind, target, REVISION, {}) as (client, _):
        plain = await client.list_tools()
        local = await client.call_tool("summarize", {"text": "one two three four"})
        with pytest.raises(McpError) as unknown:
            await client.call_tool("summarize_locally", {"text": "x"})
    schemas = {tool.name: list(tool.inputSchema["properties"]) for tool in plain.tools}
    assert schemas == {"summarize": ["text", "words"], "echo": ["text"]}
    assert _metas(plain) == {"summarize": None, "echo": None}
    assert isinstance(local.content[0], types.TextContent)
    assert local.content[0].text == "one two three"
    refused = unknown.value.error
    assert (refused.code, refused.message) == (-32602, "Unknown tool: summarize_locally")
    if kind == "http-stateless":
        return  # (no handshake's capabilities are kept: every session gets the fallback)
    async with session(kind, target, REVISION, {"sampling": {}}) as (client, _):
        full = await client.list_tools()
    assert [list(tool.inputSchema["properties"]) for tool in full.tools] == [["text"], ["text"]]
    assert _metas(full) == {"summarize": SAMPLING, "echo": None}
    fingerprints = {(listing.meta or {}).get(CAPABILITY_SCOPE_META_KEY) for listing in (plain, full)}
    assert len(fingerprints) == 2
    assert None not in fingerprints


async def test_entries_without_requirements_are_listed_as_without_the_library() -> None:
    caps = {"sampling": {}, "elicitation": {}}
    async with session("memory", build(hide=True), REVISION, caps) as (client, _):
        negotiated = (await client.list_tools()).model_dump(by_alias=True, exclude_none=True)
    async with session("memory", build(negotiated=False), REVISION, caps) as (client, _):
        plain = (await client.list_tools()).model_dump(by_alias=True, exclude_none=True)
    declared = [tool for tool in negotiated["tools"] if "_meta" in tool]
    assert [tool["_meta"] for tool in declared] == [SAMPLING]
    assert [{k: v for k, v in t.items() if k != "_meta"} for t in negotiated["tools"]] == plain["tools"]


@requires("sampling")
async def _summarize(text: str) -> str:
    return text


def _lowlevel(hide: bool) -> Server:  # type: ignore[type-arg]
    server: Server = Server("v1-lowlevel-catalog")  # type: ignore[type-arg]
    tools = [
        types.Tool(
            name="summarize", inputSchema={"type": "object"}, _meta=required_capabilities_meta(_summarize)
        ),
        types.Tool(name="echo", inputSchema={"type": "object"}),
    ]

    @server.list_tools()  # type: ignore[misc, no-untyped-call]
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool()  # type: ignore[misc]
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        text = await _summarize("x") if name == "summarize" else name
        return [types.TextContent(type="text", text=text)]

    return negotiate(server, Policy(hide_unusable=hide))


class _Holder:
    def __init__(self, server: Any) -> None:
        self._mcp_server = server


async def test_a_lowlevel_server_declares_with_required_capabilities_meta() -> None:
    async with session("memory", _Holder(_lowlevel(False)), REVISION, {}) as (client, _):
        assert _metas(await client.list_tools()) == {"summarize": SAMPLING, "echo": None}
        assert await _refused(client, "summarize") == {"requiredCapabilities": SAMPLING[KEY]}
    async with session("memory", _Holder(_lowlevel(True)), REVISION, {}) as (client, _):
        assert list(_metas(await client.list_tools())) == ["echo"]
    async with session("memory", _Holder(_lowlevel(True)), REVISION, {"sampling": {}}) as (client, _):
        assert list(_metas(await client.list_tools())) == ["summarize", "echo"]


async def test_a_fastmcp_server_built_under_instrument_declares_its_requirements() -> None:
    # `instrument()` reaches only the lowlevel server inside; its listing finds the FastMCP one.
    instrument(Policy(hide_unusable=True))
    try:
        server = build(negotiated=False)
    finally:
        uninstrument()
    async with session("memory", server, REVISION, {"sampling": {}}) as (client, _):
        assert _metas(await client.list_tools()) == {"summarize": SAMPLING, "echo": None}
    async with session("memory", server, REVISION, {}) as (client, _):
        assert _metas(await client.list_tools()) == {"echo": None}
        with pytest.raises(McpError) as refused:  # before FastMCP validates the missing `text`
            await client.call_tool("summarize", {})
    assert refused.value.error.data == {"requiredCapabilities": SAMPLING[KEY]}
