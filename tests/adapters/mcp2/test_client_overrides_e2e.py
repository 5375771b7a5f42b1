"""Per-client overrides and extensions negotiated by their settings, through the SDK: the
example's four clients over memory, a stdio subprocess and a real uvicorn, in both eras;
the server's advertisement from the same declaration (a FastMCP server's too); families of
identifiers; a listing scoped by what a rule revoked; and what a client sends as settings
that is no settings object, answered cleanly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from client_overrides import APP_MIME, APPS, build, tour
from mcp_negotiation import (
    ClientOverride,
    Extension,
    Policy,
    client_supports,
    negotiate,
    negotiation_of,
    requires,
    requires_extension,
)
from support.harness import direct_connection, envelope, serve_http, stdio_params

pytestmark = pytest.mark.anyio

REFUSED = (
    "  dashboard: -32021 {'requiredCapabilities': {'extensions': {'io.modelcontextprotocol/ui':"
    " {'mimeTypes': ['text/html;profile=mcp-app']}}}}"
)
SHOWN = "  dashboard: dashboard at ui://dashboard (agreed io.modelcontextprotocol/ui)"
TOLD = [
    "acme-desk 1.4.0: uses the default, links, no apps; rules: client.renders_resource_links:"
    " links-everywhere, elicitation.form: acme-desk-no-forms",
    REFUSED,
    "acme-desk 2.1.0: asks, links, apps; rules: client.renders_resource_links: links-everywhere,"
    " io.modelcontextprotocol/ui: acme-apps",
    SHOWN,
    "acme-cli 1.0.0: uses the default, inline text, no apps; rules: client.renders_resource_links:"
    " acme-cli-no-links",
    REFUSED,
    "Visual Studio Code 1.138.0: asks, links, apps; rules: client.renders_resource_links: links-everywhere",
    SHOWN,
]
"""What the example's tour prints for each era, whatever the transport: every answer a rule
decided names the rule, and what was declared is answered as declared."""


@pytest.fixture(params=["memory", "stdio", "http"])
def target(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield build()
    elif request.param == "stdio":
        yield stdio_params("client_overrides.py", "--stdio")
    else:
        with serve_http(build().streamable_http_app()) as url:
            yield url


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_client_is_answered_by_its_declaration_and_the_rules_naming_it(
    target: Any, mode: str
) -> None:
    assert await tour(target, mode) == TOLD


async def test_the_advertisement_is_written_from_the_declaration() -> None:
    """Modern clients read `capabilities.extensions` in `server/discover`; handshake clients
    `capabilities.experimental` (the 2025 wire schema has no `extensions`)."""
    server = build()
    async with direct_connection(server) as send:
        discovered = await send("server/discover", {"_meta": envelope()})
    assert discovered["capabilities"]["extensions"] == {APPS: {}}
    async with Client(server, mode="legacy") as legacy:
        assert (legacy.server_capabilities.experimental or {}).get(APPS) == {}


SEARCH, SEARCH_V2 = "com.example/search", "com.example/search-v2"


def family_server() -> MCPServer:
    """A server speaking the search extension in two identifiers, the newer preferred."""
    policy = Policy(extensions={SEARCH: Extension({SEARCH_V2: {"pages": True}, SEARCH: {}})})
    server = negotiate(MCPServer("family"), policy)

    @server.tool()
    async def which(ctx: Context) -> str:
        agreed = negotiation_of(ctx).extensions.get(SEARCH)
        paged = client_supports(ctx, SEARCH, pages=True)
        return f"{agreed.identifier if agreed else None} pages={paged}"

    @server.tool()
    @requires_extension(SEARCH, pages=True)
    async def paged(ctx: Context) -> str:
        return "paged"

    return server


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize(
    ("offered", "told"),
    [
        ({SEARCH: {}, SEARCH_V2: {"pages": True}}, "com.example/search-v2 pages=True"),
        ({SEARCH: {"pages": True}}, "com.example/search pages=True"),
        ({SEARCH_V2: {}}, "com.example/search-v2 pages=False"),
        ({}, "None pages=False"),
    ],
)
async def test_a_family_agrees_the_identifier_the_server_prefers(
    mode: str, offered: dict[str, Any], told: str
) -> None:
    server = family_server()
    extensions = [advertise(identifier, settings) for identifier, settings in offered.items()] or None
    async with Client(server, mode=mode, extensions=extensions) as client:  # type: ignore[arg-type]
        said = await client.call_tool("which", {})
        assert said.content[0].text == told  # type: ignore[union-attr]
        if told.endswith("pages=True"):
            return
        with pytest.raises(MCPError) as refused:
            await client.call_tool("paged", {})
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {SEARCH_V2: {"pages": True}}}}
    assert "com.example/search-v2 with pages=True" in refused.value.error.message


SDK_REFUSES = -32602
"""What the SDK answers, before any handler, to an envelope its schema rejects (settings
that are no JSON object): the library never sees those."""


@pytest.mark.parametrize(
    ("extensions", "code"),
    [
        ({APPS: "text/html;profile=mcp-app"}, SDK_REFUSES),
        ({APPS: [APP_MIME]}, SDK_REFUSES),
        ({APPS: None}, SDK_REFUSES),
        ("io.modelcontextprotocol/ui", SDK_REFUSES),
        ({APPS: {"mimeTypes": APP_MIME}}, -32021),
        ({APPS: {"mimeTypes": [[APP_MIME]]}}, -32021),
        ({APPS: {"mimeTypes": [{"nested": [APP_MIME] * 30}] * 30}}, -32021),
        ({APPS: {"mimeTypes": [{"nested": [APP_MIME] * 50}] * 50}}, -32602),  # the library's bound
        ({APPS: {"mimeTypes": None}}, -32021),
    ],
    ids=[
        "string",
        "list",
        "null",
        "extensions-a-string",
        "scalar-mimeTypes",
        "nested-list",
        "wide",
        "too-many",
        "null-mimeTypes",
    ],
)
async def test_settings_that_are_no_settings_object_are_not_the_extension(extensions: Any, code: int) -> None:
    """Whatever a client puts there, `dashboard` is refused (by the SDK's schema, or with
    the spec's -32021), and the next request is served."""
    async with direct_connection(build()) as send:
        meta = {**envelope(caps={"extensions": extensions}), "io.modelcontextprotocol/clientInfo": _ACME}
        with pytest.raises(MCPError) as refused:
            await send("tools/call", {"name": "dashboard", "arguments": {}, "_meta": meta})
        assert refused.value.error.code == code
        said = await send("tools/call", {"name": "report", "arguments": {}, "_meta": envelope()})
    assert said["content"][0]["text"].startswith("None None: uses the default, inline text, no apps")


_ACME = {"name": "acme-cli", "version": "1.0.0"}


async def test_a_megabyte_of_settings_is_judged_as_any_and_the_server_serves_on() -> None:
    """Under the entry bound, a megabyte of settings is settings: containment still decides."""
    huge = {"extensions": {APPS: {"mimeTypes": ["x" * 1000] * 1000}}}
    async with direct_connection(build()) as send:
        with pytest.raises(MCPError) as refused:
            await send("tools/call", {"name": "dashboard", "arguments": {}, "_meta": envelope(caps=huge)})
        assert refused.value.error.code == -32021
        huge["extensions"][APPS]["mimeTypes"].append(APP_MIME)
        shown = await send("tools/call", {"name": "dashboard", "arguments": {}, "_meta": envelope(caps=huge)})
        said = await send("tools/call", {"name": "report", "arguments": {}, "_meta": envelope()})
    assert shown["content"][0]["text"] == SHOWN.strip().removeprefix("dashboard: ")
    assert "no apps" in said["content"][0]["text"]


async def test_rules_reach_a_stateless_http_client_by_its_per_request_client_info() -> None:
    """2026-07-28 carries `clientInfo` in each request: the rule follows each request."""
    policy = Policy(client_overrides=[ClientOverride("acme-*", grant=["client.reads_instructions"])])
    server = negotiate(MCPServer("stateless"), policy)

    @server.tool()
    async def reads(ctx: Context) -> str:
        name = "client.reads_instructions"
        return f"{client_supports(ctx, name)} {negotiation_of(ctx).source_of(name)}"

    with serve_http(server.streamable_http_app(stateless_http=True)) as url:
        for name, told in (("acme-desk", "True acme-*"), ("other", "False None")):
            info = Implementation(name=name, version="1.0.0")
            async with Client(url, mode="2026-07-28", client_info=info) as client:
                said = await client.call_tool("reads", {})
                assert said.content[0].text == told  # type: ignore[union-attr]


def listing_server() -> MCPServer:
    """`summarize` needs sampling; one client declares it and cannot, by a rule."""
    rules = [ClientOverride("acme-cli", revoke=["sampling"], id="acme-cli-no-sampling")]
    server = negotiate(MCPServer("listing"), Policy(client_overrides=rules, hide_unusable=True))

    @server.tool()
    @requires("sampling")
    async def summarize(text: str, ctx: Context) -> str:
        return text

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


async def _sample(context: Any, params: Any) -> Any:
    raise AssertionError("nothing samples here")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_listing_hides_what_a_rule_revoked_for_that_client_only(mode: str) -> None:
    server = listing_server()
    listed: dict[str, list[str]] = {}
    for name in ("acme-cli", "someone"):
        info = Implementation(name=name, version="1.0.0")
        async with Client(server, mode=mode, client_info=info, sampling_callback=_sample) as client:  # type: ignore[arg-type]
            listed[name] = sorted(tool.name for tool in (await client.list_tools()).tools)
            if name == "acme-cli":
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("summarize", {"text": "x"})
    assert listed == {"acme-cli": ["echo"], "someone": ["echo", "summarize"]}
    assert refused.value.error.code == -32021
    assert "revoked for this client by rule 'acme-cli-no-sampling'" in refused.value.error.message


async def test_a_fastmcp_server_advertises_the_declaration_over_http_in_both_eras() -> None:
    """FastMCP advertises MCP Apps by itself; the policy's declaration is what goes out."""
    from fastmcp import FastMCP

    server = FastMCP("fastmcp-apps")
    negotiate(server, Policy(extensions={APPS: {"mine": True}, "com.example/x": {}}))
    declared = {APPS: {"mine": True}, "com.example/x": {}}
    with serve_http(server.http_app()) as url:
        async with Client(url) as modern:  # "auto": server/discover
            assert modern.protocol_version == "2026-07-28"
            assert modern.server_capabilities.extensions == declared
        async with Client(url, mode="legacy") as legacy:
            assert legacy.server_capabilities.experimental == declared
