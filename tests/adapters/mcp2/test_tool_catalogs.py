"""Listings that declare what each entry requires, and, with `Policy(hide_unusable=True)`,
list each client only what its negotiation can serve (issue 25).

Over every transport (memory, stdio, stateful and stateless HTTP), in both eras, with the
SDK's own client and with raw JSON-RPC; on an MCPServer (examples/tool_catalogs.py), a
lowlevel `Server` and a FastMCP 4 server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from fastmcp import FastMCP
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_negotiation import Policy, instrument, negotiate, requires, uninstrument
from mcp_negotiation.core.listings import REQUIRED_CAPABILITIES_META_KEY as KEY
from mcp_negotiation.core.listings import required_capabilities_meta, requirement_names
from mcp_negotiation.core.negotiation import required_capabilities_object
from mcp_negotiation.core.variants import CAPABILITY_SCOPE_META_KEY
from support.harness import (
    RawRequest,
    direct_connection,
    legacy_session,
    open_streams,
    serve_http,
    stdio_params,
)
from tool_catalogs import build

pytestmark = pytest.mark.anyio

KINDS = ("memory", "stdio", "http", "http-stateless")
SAMPLING = {KEY: {"sampling": {}}}
FORM = {KEY: {"elicitation": {"form": {}}}}
ENVELOPE = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


class AnyResult(BaseModel):
    """Whatever the server answered, kept whole."""

    model_config = ConfigDict(extra="allow")


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[bool], Any]]]:
    """(transport kind, a factory giving the connection target of examples/tool_catalogs.py)."""
    kind: str = request.param
    opened: list[Any] = []

    def target(hide: bool) -> Any:
        if kind == "memory":
            return build(hide=hide)
        if kind == "stdio":
            return stdio_params("tool_catalogs.py", *(["--hide"] if hide else []))
        served = serve_http(build(hide=hide).streamable_http_app(stateless_http=kind == "http-stateless"))
        opened.append(served)
        return served.__enter__()

    yield kind, target
    for served in reversed(opened):
        served.__exit__(None, None, None)


@asynccontextmanager
async def legacy(kind: str, target: Any, caps: dict[str, Any]) -> AsyncIterator[ClientSession]:
    stream_kind = "http" if kind.startswith("http") else kind
    async with (
        open_streams(stream_kind, target) as streams,
        legacy_session(streams, "2025-11-25", caps) as (
            session,
            _,
        ),
    ):
        yield session


def modern(target: Any, **kwargs: Any) -> AbstractAsyncContextManager[Client]:
    return Client(target, mode="2026-07-28", **kwargs)


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
    )


async def _elicit(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


def _metas(result: types.ListToolsResult) -> dict[str, Any]:
    return {tool.name: tool.meta for tool in result.tools}


async def _refusal(call: Any) -> Any:
    with pytest.raises(MCPError) as refused:
        await call
    assert refused.value.error.code == -32021
    return refused.value.error.data


# --- declared in the listing -------------------------------------------------------------


async def test_every_client_sees_the_requirements_its_refusal_would_carry(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(False)
    async with legacy(kind, target, {}) as session:
        listed = _metas(await session.list_tools())
        refused = await _refusal(session.call_tool("summarize", {"text": "x"}))
        prompts = {p.name: p.meta for p in (await session.list_prompts()).prompts}
        templates = {
            t.uri_template: t.meta for t in (await session.list_resource_templates()).resource_templates
        }
    assert listed == {"summarize": SAMPLING, "ask_user": FORM, "echo": None}
    assert refused == {"requiredCapabilities": listed["summarize"][KEY]}
    assert prompts == {"brief": SAMPLING}
    assert templates == {"notes://{topic}": {KEY: {"elicitation": {}}}}
    async with modern(target) as client:
        assert _metas(await client.list_tools()) == listed
        assert await _refusal(client.call_tool("ask_user", {"question": "?"})) == {
            "requiredCapabilities": listed["ask_user"][KEY]
        }
    async with modern(target, sampling_callback=_sample) as client:  # a client that can use it too
        assert _metas(await client.list_tools()) == listed


@pytest.mark.parametrize("hide", [False, True])
async def test_prompts_and_templates_declare_what_their_refusal_carries(hide: bool) -> None:
    async with modern(build(hide=hide)) as client:
        prompts = {p.name: p.meta for p in (await client.list_prompts()).prompts}
        templates = {
            t.uri_template: t.meta for t in (await client.list_resource_templates()).resource_templates
        }
        prompt_refusal = await _refusal(client.get_prompt("brief", {"topic": "x"}))
        template_refusal = await _refusal(client.read_resource("notes://x"))
    if hide:  # hidden from a client that declares nothing, and refused the same
        assert prompts == templates == {}
    else:
        assert prompts["brief"] == {KEY: prompt_refusal["requiredCapabilities"]}
        assert templates["notes://{topic}"] == {KEY: template_refusal["requiredCapabilities"]}
    assert prompt_refusal == {"requiredCapabilities": {"sampling": {}}}
    assert template_refusal == {"requiredCapabilities": {"elicitation": {}}}


async def _raw_listing(session: ClientSession, method: str = "tools/list", **params: Any) -> dict[str, Any]:
    result = await session.send_request(RawRequest(method=method, params=params), AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)


def _undeclared(listing: dict[str, Any]) -> dict[str, Any]:
    """`listing` without the requirements this library declared, nor its scope's fingerprint."""
    return _without(
        {**listing, "tools": [_without(tool, KEY) for tool in listing["tools"]]}, CAPABILITY_SCOPE_META_KEY
    )


def _without(item: dict[str, Any], key: str) -> dict[str, Any]:
    """`item` without `key` in its `_meta`, and without a `_meta` that holds nothing else."""
    meta = {k: v for k, v in item.get("_meta", {}).items() if k != key}
    return {**{k: v for k, v in item.items() if k != "_meta"}, **({"_meta": meta} if meta else {})}


@pytest.mark.parametrize("hide", [False, True])
async def test_entries_without_requirements_are_listed_exactly_as_without_the_library(hide: bool) -> None:
    server = build(hide=hide)
    caps = {"sampling": {}, "elicitation": {}}
    async with (
        open_streams("memory", server) as streams,
        legacy_session(streams, "2025-11-25", caps) as (s, _),
    ):
        negotiated = await _raw_listing(s)
    uninstrument(server)
    async with (
        open_streams("memory", server) as streams,
        legacy_session(streams, "2025-11-25", caps) as (s, _),
    ):
        plain = await _raw_listing(s)
    assert [t for t in negotiated["tools"] if "_meta" not in t] == [
        t for t in plain["tools"] if t["name"] == "echo"
    ]
    assert _undeclared(negotiated) == plain
    assert negotiated != plain


async def test_modern_entries_without_requirements_are_listed_exactly_as_without_the_library() -> None:
    server = build(hide=True)
    envelope = {"_meta": {ENVELOPE: "2026-07-28", CAPABILITIES: {"sampling": {}, "elicitation": {}}}}
    async with direct_connection(server) as send:
        negotiated = await send("tools/list", envelope)
    uninstrument(server)
    async with direct_connection(server) as send:
        plain = await send("tools/list", envelope)
    assert _undeclared(negotiated) == plain
    assert negotiated != plain


async def test_a_server_built_under_instrument_declares_its_requirements() -> None:
    # `instrument()` reaches the lowlevel server inside the MCPServer, from its constructor.
    instrument(Policy(hide_unusable=True))
    try:
        server = MCPServer("instrumented")
    finally:
        uninstrument()

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text

    async with modern(server, sampling_callback=_sample) as client:
        assert _metas(await client.list_tools()) == {"summarize": SAMPLING}
    async with modern(server) as client:
        assert _metas(await client.list_tools()) == {}
        # The tools it registered after `instrument()` reached it are refused before validation too.
        assert await _refusal(client.call_tool("summarize", {})) == {"requiredCapabilities": SAMPLING[KEY]}


async def test_a_failure_of_ours_lists_what_the_server_made(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_negotiation.adapters.mcp2 import seams

    async def broken(server: Any, method: str) -> dict[str, Any]:
        raise RuntimeError("the SDK moved")

    monkeypatch.setattr(seams, "listed_functions", broken)
    async with modern(build(hide=True)) as client:
        listed = _metas(await client.list_tools())
    assert listed == {"summarize": None, "ask_user": None, "echo": None}
    assert "could not declare requirements in a listing" in caplog.text


# --- scoped on request ---------------------------------------------------------------------


async def test_each_client_lists_only_what_it_can_use(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(True)
    async with legacy(kind, target, {}) as session:
        assert list(_metas(await session.list_tools())) == ["echo"]
        assert (await session.list_prompts()).prompts == []
        # Hidden, not gone: calling it anyway is the same -32021.
        assert await _refusal(session.call_tool("summarize", {"text": "x"})) == {
            "requiredCapabilities": SAMPLING[KEY]
        }
    async with legacy(kind, target, {"sampling": {}}) as session:
        listed = _metas(await session.list_tools())
    # Legacy stateless HTTP: the handshake's capabilities are gone, so nothing is assumed.
    assert listed == ({"echo": None} if kind == "http-stateless" else {"summarize": SAMPLING, "echo": None})
    async with modern(target) as client:
        assert list(_metas(await client.list_tools())) == ["echo"]
        assert await _refusal(client.call_tool("summarize", {"text": "x"})) == {
            "requiredCapabilities": SAMPLING[KEY]
        }
    async with modern(target, sampling_callback=_sample, elicitation_callback=_elicit) as client:
        assert _metas(await client.list_tools()) == {"summarize": SAMPLING, "ask_user": FORM, "echo": None}
        assert [p.name for p in (await client.list_prompts()).prompts] == ["brief"]


def _exposed(error: types.ErrorData) -> str:
    """Everything a refusal told its client, as one text."""
    return json.dumps(error.model_dump(mode="json"))


async def _refused_error(call: Any) -> types.ErrorData:
    with pytest.raises(MCPError) as refused:
        await call
    return refused.value.error


@pytest.mark.parametrize("hide", [False, True])
async def test_a_withheld_tool_is_refused_before_its_arguments_are_read(endpoint: Any, hide: bool) -> None:
    # Called with arguments its schema rejects: the SDK's validation would name `text` and
    # the arguments model; the refusal comes first, and names what the client lacks only.
    kind, make = endpoint
    target = make(hide)
    async with legacy(kind, target, {}) as session:
        errors = [await _refused_error(session.call_tool("summarize", {}))]
        errors.append(await _refused_error(session.call_tool("ask_user", {"wrong": 1})))
    async with modern(target) as client:
        errors.append(await _refused_error(client.call_tool("summarize", {})))
    assert [(error.code, error.data) for error in errors] == [
        (-32021, {"requiredCapabilities": SAMPLING[KEY]}),
        (-32021, {"requiredCapabilities": FORM[KEY]}),
        (-32021, {"requiredCapabilities": SAMPLING[KEY]}),
    ]
    for error in errors:
        exposed = _exposed(error)
        for named in ("text", "question", "Arguments"):
            assert named not in exposed, exposed
    # A client the tool is for is answered by the SDK's validation, as without the library.
    async with modern(target, sampling_callback=_sample) as client:
        validated = await client.call_tool("summarize", {})
    assert validated.is_error
    assert "text" in str(validated.content)


@asynccontextmanager
async def _raw_stdio(hide: bool) -> AsyncIterator[Callable[..., Any]]:
    async with (
        open_streams("stdio", stdio_params("tool_catalogs.py", *(["--hide"] if hide else []))) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await _raw_listing(session, method, **params)

        yield send


@pytest.mark.parametrize("kind", ["direct", "stdio"])
async def test_modern_listing_is_scoped_per_request_on_one_connection(kind: str) -> None:
    opened = direct_connection(build(hide=True)) if kind == "direct" else _raw_stdio(True)
    async with opened as send:
        names = []
        for caps in (
            {},
            {"sampling": {}},
            {},
            {"sampling": {}, "elicitation": {"form": {}}},
            {"sampling": {}},
        ):
            envelope = {ENVELOPE: "2026-07-28", CAPABILITIES: caps}
            names.append([tool["name"] for tool in (await send("tools/list", {"_meta": envelope}))["tools"]])
    assert names == [
        ["echo"],
        ["summarize", "echo"],
        ["echo"],  # a repeat of the first envelope, answered from the engine's memo: still its own
        ["summarize", "ask_user", "echo"],
        ["summarize", "echo"],
    ]


@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_legacy_listing_is_scoped_per_session_in_raw_json_rpc(kind: str) -> None:
    target = build(hide=True) if kind == "memory" else stdio_params("tool_catalogs.py", "--hide")
    listings = []
    for caps in ({"sampling": {}}, {}):
        async with (
            open_streams(kind, target) as streams,
            legacy_session(streams, "2025-06-18", caps) as (s, _),
        ):
            listings.append([await _raw_listing(s), await _raw_listing(s)])
    (sampling, sampling_again), (bare, bare_again) = listings
    assert sampling == sampling_again
    assert bare == bare_again
    assert [t["name"] for t in sampling["tools"]] == ["summarize", "echo"]
    assert sampling["tools"][0]["_meta"] == SAMPLING
    assert [t["name"] for t in bare["tools"]] == ["echo"]


async def test_list_changed_capability_is_the_same_with_and_without_scoping() -> None:
    answers = []
    for hide in (False, True):
        async with (
            open_streams("memory", build(hide=hide)) as streams,
            legacy_session(streams, "2025-11-25", {}) as (_, init),
        ):
            answers.append(init.capabilities.model_dump())
    assert answers[0] == answers[1]


def test_the_switch_is_a_checked_bool() -> None:
    assert Policy(hide_unusable=True).hide_unusable is True
    with pytest.raises(TypeError, match="hide_unusable must be True or False"):
        Policy(hide_unusable="false")  # type: ignore[arg-type]


# --- a lowlevel server declares its own --------------------------------------------------


@requires("sampling")
async def _summarize(text: str) -> str:
    return text[:10]


def _lowlevel(hide: bool, *, page: int = 100, hints: dict[str, Any] | None = None) -> Server:
    tools = [types.Tool(name=f"plain{i}", input_schema={"type": "object"}) for i in range(3)]
    tools.insert(
        1,
        types.Tool(
            name="summarize", input_schema={"type": "object"}, _meta=required_capabilities_meta(_summarize)
        ),
    )
    tools.append(
        types.Tool(
            name="form", input_schema={"type": "object"}, _meta=required_capabilities_meta("elicitation.form")
        )
    )

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        more = start + page < len(tools)
        return types.ListToolsResult(
            tools=tools[start : start + page], next_cursor=str(start + page) if more else None
        )

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = await _summarize("hello") if params.name == "summarize" else params.name
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server("lowlevel-catalog", on_list_tools=list_tools, on_call_tool=call_tool, cache_hints=hints)
    return negotiate(server, Policy(hide_unusable=hide))


async def _all_pages(client: Client) -> tuple[list[str], int]:
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = await client.list_tools(cursor=cursor)
        pages += 1
        names += [tool.name for tool in result.tools]
        cursor = result.next_cursor
        if cursor is None:
            return names, pages


async def test_a_lowlevel_server_declares_with_required_capabilities_meta() -> None:
    assert required_capabilities_meta("sampling") == required_capabilities_meta(_summarize) == SAMPLING
    async with modern(_lowlevel(False)) as client:
        listed = _metas(await client.list_tools())
        refused = await _refusal(client.call_tool("summarize", {}))
    assert listed["summarize"] == SAMPLING
    assert refused == {"requiredCapabilities": listed["summarize"][KEY]}
    async with modern(_lowlevel(True)) as client:
        assert list(_metas(await client.list_tools())) == ["plain0", "plain1", "plain2"]
        assert await _refusal(client.call_tool("summarize", {})) == {"requiredCapabilities": SAMPLING[KEY]}
    async with modern(_lowlevel(True), sampling_callback=_sample) as client:
        assert list(_metas(await client.list_tools())) == ["plain0", "summarize", "plain1", "plain2"]


@pytest.mark.parametrize("stateless", [False, True])
async def test_a_hidden_lowlevel_tool_called_over_http_is_still_refused(stateless: bool) -> None:
    # Over modern HTTP the SDK lists the server's tools through the chain, as this client, to
    # check `Mcp-Param-*` headers; the hidden tool is not found there, and the call goes on.
    with serve_http(_lowlevel(True).streamable_http_app(stateless_http=stateless)) as url:
        async with modern(url) as client:
            assert "summarize" not in _metas(await client.list_tools())
            refused = await _refusal(client.call_tool("summarize", {"text": "x"}))
        async with open_streams("http", url) as streams, legacy_session(streams, "2025-11-25", {}) as (s, _):
            assert "summarize" not in _metas(await s.list_tools())
            legacy_refused = await _refusal(s.call_tool("summarize", {"text": "x"}))
    assert refused == legacy_refused == {"requiredCapabilities": SAMPLING[KEY]}


def test_required_capabilities_meta_takes_names_or_a_requires_function() -> None:
    with pytest.raises(ValueError, match="did you mean 'sampling'"):
        required_capabilities_meta("samplng")
    with pytest.raises(TypeError, match="capability names"):
        required_capabilities_meta(lambda: None)
    with pytest.raises(ValueError, match="one or more"):
        required_capabilities_meta()


@pytest.mark.parametrize("page", [1, 2, 4])
async def test_pages_follow_the_servers_cursors_over_the_scoped_list(page: int) -> None:
    async with modern(_lowlevel(True, page=page)) as client:
        names, pages = await _all_pages(client)
    assert names == ["plain0", "plain1", "plain2"]
    assert pages == -(-5 // page)  # every page of the server's, each cursor its own
    async with modern(
        _lowlevel(True, page=page), sampling_callback=_sample, elicitation_callback=_elicit
    ) as client:
        assert (await _all_pages(client))[0] == ["plain0", "summarize", "plain1", "plain2", "form"]


@pytest.mark.parametrize("hide", [False, True])
async def test_a_scoped_listing_is_never_offered_to_a_shared_cache(hide: bool) -> None:
    server = _lowlevel(hide, hints={"tools/list": CacheHint(ttl_ms=60_000, scope="public")})
    async with direct_connection_lowlevel(server) as send:
        listing = await send("tools/list", {"_meta": {ENVELOPE: "2026-07-28", CAPABILITIES: {}}})
    assert listing["cacheScope"] == ("private" if hide else "public")


@asynccontextmanager
async def direct_connection_lowlevel(server: Server) -> AsyncIterator[Callable[..., Any]]:
    class Holder:
        _lowlevel_server = server

    async with direct_connection(Holder()) as send:
        yield send


# --- FastMCP 4 -----------------------------------------------------------------------------


def _fastmcp(hide: bool) -> FastMCP:
    server = negotiate(FastMCP("fm-catalog", list_page_size=2), Policy(hide_unusable=hide))

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    @requires("elicitation")
    async def ask(text: str) -> str:
        return text

    @server.tool()
    async def plain(text: str) -> str:
        return text

    return server


async def test_fastmcp_tools_declare_and_hide_across_its_pages() -> None:
    async with modern(_fastmcp(False)._mcp_server) as client:
        names, pages = await _all_pages(client)
        listed = _metas(await client.list_tools())
        refused = await _refusal(client.call_tool("summarize", {"text": "x"}))
    assert (names, pages) == (["summarize", "echo", "ask", "plain"], 2)
    # FastMCP's own `_meta` is kept beside ours.
    assert listed["summarize"] == {**(listed["echo"] or {}), KEY: refused["requiredCapabilities"]}
    async with modern(_fastmcp(True)._mcp_server) as client:
        assert await _all_pages(client) == (["echo", "plain"], 2)
        await _refusal(client.call_tool("ask", {"text": "x"}))
        # Refused before FastMCP validates what it was given, as on an MCPServer.
        assert await _refusal(client.call_tool("summarize", {})) == {"requiredCapabilities": SAMPLING[KEY]}
    async with modern(_fastmcp(True)._mcp_server, sampling_callback=_sample) as client:
        assert (await _all_pages(client))[0] == ["summarize", "echo", "plain"]


# --- the object and its names ------------------------------------------------------------


@pytest.mark.parametrize(
    "names",
    [
        ("sampling",),
        ("elicitation.form", "roots.listChanged"),
        ("sampling.tools", "elicitation.url", "io.modelcontextprotocol/ui", "experimental.a.b"),
    ],
)
def test_requirement_names_read_back_the_refusals_object(names: tuple[str, ...]) -> None:
    assert requirement_names(required_capabilities_object(names)) == names


@pytest.mark.parametrize("garbage", [None, "sampling", {"sampling": 1}, {"sampling": []}, {1: {}}])
def test_what_is_no_requirements_object_names_nothing(garbage: Any) -> None:
    assert requirement_names(garbage) is None
