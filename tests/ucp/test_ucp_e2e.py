"""UCP inside real MCP servers: the example shop, a platform profile on a local HTTPS server.

Every path a platform can name its profile by (arguments.meta, the UCP-Agent header,
the legacy `_meta.ucp` behind its flag, the stdio session extension), every outcome
(agreement with a dropped capability and a pruned extension, capabilities_incompatible,
version_unsupported, unreachable, malformed, header/arguments mismatch), each refusal
followed by a served request.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trustme
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy, negotiate, negotiation_of, requires_ucp
from mcp_negotiation.ucp import (
    ALL_PORTS,
    UCP_EXTENSION_ID,
    UCP_SESSION_KEY,
    HttpsProfileResolver,
    StaticResolver,
    UcpPolicy,
)
from support.harness import EXAMPLES, legacy_session, open_streams, serve_http, structured
from support.profile_server import ProfileServer, Route, Tls
from ucp_shop import BUSINESS_PROFILE, CHECKOUT, build, listening_socket

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

V = "2026-04-08"


def _profile(version: str = V, **capabilities: list[dict[str, Any]]) -> bytes:
    caps = {f"dev.ucp.shopping.{name}": entries for name, entries in capabilities.items()}
    return json.dumps({"ucp": {"version": version, "capabilities": caps}}).encode()


ROUTES = {
    # Shares checkout, fulfillment and discount; gift_wrap only at an older date; no cart.
    "/platform.json": _profile(
        checkout=[{"version": V}],
        fulfillment=[{"version": V, "extends": CHECKOUT}],
        gift_wrap=[{"version": "2026-01-23", "extends": "dev.ucp.shopping.fulfillment"}],
        discount=[{"version": V, "extends": [CHECKOUT, "dev.ucp.shopping.cart"]}],
    ),
    # No checkout: its extensions are orphaned, and checkout itself is gone.
    "/no-checkout.json": _profile(
        fulfillment=[{"version": V, "extends": CHECKOUT}],
        gift_wrap=[{"version": V, "extends": "dev.ucp.shopping.fulfillment"}],
    ),
    "/old.json": _profile(version="2025-01-01", checkout=[{"version": V}]),
    "/broken.json": b"{not json",
}
AGREED = {
    "dev.ucp.shopping.checkout": V,
    "dev.ucp.shopping.discount": V,
    "dev.ucp.shopping.fulfillment": V,
}


@pytest.fixture
async def platform(tls: Tls) -> AsyncIterator[ProfileServer]:
    async with ProfileServer(tls.server) as server:
        server.routes = {path: Route(body=body) for path, body in ROUTES.items()}
        yield server


def _shop(tls: Tls, **options: Any) -> Any:
    return build(
        HttpsProfileResolver(ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS),
        **options,
    )


def _meta_args(url: str) -> dict[str, Any]:
    return {"items": ["tea"], "meta": {"ucp-agent": {"profile": url}}}


async def _refused_with(call: Any, code: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as refused:
        await call
    assert refused.value.error.code == -32001
    data: dict[str, Any] = refused.value.error.data
    assert data["code"] == code
    return data


async def test_arguments_meta_agreement_drops_and_prunes_over_http(tls: Tls, platform: ProfileServer) -> None:
    with serve_http(_shop(tls).streamable_http_app()) as url:
        async with Client(url, mode="2026-07-28") as client:
            result = structured(
                await client.call_tool("create_checkout", _meta_args(platform.url("/platform.json")))
            )
            full = structured(
                await client.call_tool("negotiated", _meta_args(platform.url("/platform.json")))
            )
    assert result["ucp"] == {
        "version": V,
        "capabilities": {name: [{"version": V}] for name in sorted(AGREED)},
    }
    assert result["extensions"] == sorted(AGREED)
    assert full["ucp"] == {
        "version": V,
        "capabilities": AGREED,
        "dropped": {
            "dev.ucp.shopping.cart": "not_offered",
            "dev.ucp.shopping.gift_wrap": "no_common_version",
        },
    }
    # Two calls, one fetch: the profile is cached.
    assert [r.path for r in platform.requests] == ["/platform.json"]


async def test_header_path_and_mismatch_over_http(tls: Tls, platform: ProfileServer) -> None:
    header = f'profile="{platform.url("/platform.json")}"'
    with serve_http(_shop(tls).streamable_http_app()) as url:
        async with (
            httpx2.AsyncClient(headers={"UCP-Agent": header}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
        ):
            assert structured(await client.call_tool("negotiated", {}))["ucp"]["capabilities"] == AGREED
            data = await _refused_with(
                client.call_tool("negotiated", _meta_args(platform.url("/no-checkout.json"))),
                "invalid_profile_url",
            )
            assert "different profiles" in data["content"]
            assert (
                structured(await client.call_tool("create_checkout", {"items": []}))["status"] == "incomplete"
            )


async def test_a_second_ucp_agent_line_is_not_dropped(tls: Tls, platform: ProfileServer) -> None:
    """Two lines are one list (RFC 9110): their two `profile` members are refused, as in one line."""
    lines = [("UCP-Agent", f'profile="{platform.url(p)}"') for p in ("/no-checkout.json", "/platform.json")]

    async def negotiated(url: str, headers: list[tuple[str, str]]) -> Any:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
        ):
            try:
                return structured(await client.call_tool("negotiated", {}))
            except MCPError as refused:
                return refused.error

    with serve_http(_shop(tls).streamable_http_app()) as url:
        error = await negotiated(url, lines)
        served = await negotiated(url, lines[1:])
    assert (error.code, error.data["code"]) == (-32001, "invalid_profile_url")
    assert "duplicate profile member" in error.data["content"]
    assert served["ucp"]["capabilities"] == AGREED


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/old.json", "version_unsupported"),
        ("/broken.json", "profile_malformed"),
        ("/nowhere.json", "profile_unreachable"),
    ],
)
async def test_discovery_failures_are_32001_then_served(
    tls: Tls, platform: ProfileServer, path: str, code: str
) -> None:
    with serve_http(_shop(tls).streamable_http_app()) as url:
        async with (
            open_streams("http", url) as streams,
            legacy_session(streams, "2025-11-25") as (session, init),
        ):
            assert UCP_EXTENSION_ID in (init.capabilities.experimental or {})
            await _refused_with(session.call_tool("create_checkout", _meta_args(platform.url(path))), code)
            served = structured(
                await session.call_tool("create_checkout", _meta_args(platform.url("/platform.json")))
            )
            assert served["status"] == "incomplete"


async def test_capabilities_incompatible_is_a_tool_result(tls: Tls, platform: ProfileServer) -> None:
    async with Client(_shop(tls), mode="2026-07-28") as client:
        result = await client.call_tool("create_checkout", _meta_args(platform.url("/no-checkout.json")))
        assert result.is_error is False
        body = result.structured_content
        assert body is not None
        assert body["ucp"] == {"version": V, "status": "error"}
        assert body["messages"][0]["code"] == "capabilities_incompatible"
        assert json.loads(result.content[0].text) == body  # type: ignore[union-attr]
        served = structured(
            await client.call_tool("create_checkout", _meta_args(platform.url("/platform.json")))
        )
        assert served["status"] == "incomplete"


async def test_no_profile_at_all_is_invalid_profile_url_for_ucp_tools_only(tls: Tls) -> None:
    async with Client(_shop(tls), mode="2026-07-28") as client:
        assert structured(await client.call_tool("negotiated", {})) == {"ucp": None}
        await _refused_with(client.call_tool("create_checkout", {"items": []}), "invalid_profile_url")


async def test_legacy_meta_path_only_behind_its_flag(tls: Tls, platform: ProfileServer) -> None:
    meta = {"ucp": {"profile": platform.url("/platform.json")}}
    async with Client(_shop(tls), mode="2026-07-28") as client:
        assert structured(await client.call_tool("negotiated", {}, meta=meta)) == {"ucp": None}
    async with Client(_shop(tls, legacy_meta=True), mode="2026-07-28") as client:
        assert (
            structured(await client.call_tool("negotiated", {}, meta=meta))["ucp"]["capabilities"] == AGREED
        )


async def test_modern_clients_see_the_business_in_extensions(tls: Tls) -> None:
    with serve_http(_shop(tls).streamable_http_app()) as url:
        async with Client(url) as client:  # "auto" sends server/discover
            extensions = client.server_capabilities.extensions or {}
    advertised = extensions[UCP_EXTENSION_ID]
    assert advertised["version"] == V
    assert advertised["capabilities"][CHECKOUT] == [{"version": "2026-01-23"}, {"version": V}]


@asynccontextmanager
async def _stdio_shop(ca: trustme.CA, tmp_path: Path, port: int) -> AsyncIterator[StdioServerParameters]:
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    yield StdioServerParameters(
        command=sys.executable,
        args=[
            *(str(EXAMPLES / "ucp_shop.py"), "--trust-ca", str(pem)),
            *("--allow-address", "127.0.0.1", "--allow-port", str(port)),
        ],
    )


async def test_stdio_session_extension_and_arguments_path(
    ca: trustme.CA, tmp_path: Path, platform: ProfileServer
) -> None:
    async with _stdio_shop(ca, tmp_path, platform.port) as params:
        session_default = {"_meta": {UCP_SESSION_KEY: platform.url("/platform.json")}}
        async with (
            open_streams("stdio", params) as streams,
            legacy_session(streams, "2025-06-18", {}, **session_default) as (session, _),
        ):
            assert structured(await session.call_tool("negotiated", {}))["ucp"]["capabilities"] == AGREED
            # An explicit profile in the call wins over the session default.
            checkout = await session.call_tool(
                "create_checkout", _meta_args(platform.url("/no-checkout.json"))
            )
            assert checkout.structured_content is not None
            assert checkout.structured_content["messages"][0]["code"] == "capabilities_incompatible"
        async with Client(params, mode="2026-07-28") as client:
            meta = {UCP_SESSION_KEY: platform.url("/platform.json")}
            assert (
                structured(await client.call_tool("negotiated", {}, meta=meta))["ucp"]["capabilities"]
                == AGREED
            )
            await _refused_with(
                client.call_tool("create_checkout", _meta_args(platform.url("/old.json"))),
                "version_unsupported",
            )
            assert structured(
                await client.call_tool("create_checkout", _meta_args(platform.url("/platform.json")))
            )


async def test_orphaned_extensions_are_pruned_and_reported(tls: Tls, platform: ProfileServer) -> None:
    async with Client(_shop(tls), mode="2026-07-28") as client:
        full = structured(await client.call_tool("negotiated", _meta_args(platform.url("/no-checkout.json"))))
    assert full["ucp"]["capabilities"] == {}
    assert full["ucp"]["dropped"] == {
        "dev.ucp.shopping.cart": "not_offered",
        "dev.ucp.shopping.checkout": "not_offered",
        "dev.ucp.shopping.discount": "not_offered",
        "dev.ucp.shopping.fulfillment": "orphaned_extension",
        "dev.ucp.shopping.gift_wrap": "orphaned_extension",
    }


async def test_a_slow_profile_host_does_not_stall_other_clients(tls: Tls, platform: ProfileServer) -> None:
    import anyio

    gate = platform.gate()
    platform.routes["/slow.json"] = Route(body=ROUTES["/platform.json"], gate=gate)
    slow_result: list[dict[str, Any]] = []
    with serve_http(_shop(tls).streamable_http_app()) as url:

        async def slow_client() -> None:
            async with Client(url, mode="2026-07-28") as client:
                slow_result.append(
                    structured(await client.call_tool("negotiated", _meta_args(platform.url("/slow.json"))))
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_client)
            await platform.arrived.wait()  # the slow fetch has reached the profile host
            async with Client(url, mode="2026-07-28") as other:
                fast = structured(
                    await other.call_tool("negotiated", _meta_args(platform.url("/platform.json")))
                )
            assert fast["ucp"]["capabilities"] == AGREED
            assert slow_result == []  # still waiting on its host, while the other was served
            gate.set()
    assert slow_result[0]["ucp"]["capabilities"] == AGREED


KNOWN = "https://platform.example/profile.json"
WITHOUT_CHECKOUT = "https://platform.example/no-checkout.json"
WEB = "https://shop.example/checkout"


def _shop_with_fallback() -> MCPServer:
    """A shop offering `WEB` as its web fallback, knowing two platforms: one shares checkout."""
    platforms = {
        KNOWN: json.loads((EXAMPLES / "ucp/platform_profile.json").read_text()),
        WITHOUT_CHECKOUT: json.loads(ROUTES["/no-checkout.json"]),
    }
    ucp = UcpPolicy(
        business_profile=BUSINESS_PROFILE,
        resolver=StaticResolver(platforms),
        continue_url=WEB,
        stamp_results=True,
    )
    server = negotiate(MCPServer("shop"), Policy(ucp=ucp))

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
        return {"items": items}

    @server.tool()
    async def negotiated(ctx: Context) -> dict[str, Any]:
        record = negotiation_of(ctx)
        return {"ucp": record.ucp.as_dict() if record.ucp else None}

    return server


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_ucp_error_offers_the_continue_url(mode: str) -> None:
    """From reading the URL to resolving it, and in `@requires_ucp`, the web fallback goes along:
    with the discovery errors, and in the `capabilities_incompatible` result too."""
    cases = {
        "http://platform.example/profile.json": ("invalid_profile_url", "https"),
        "https://platform.example/unknown.json": ("profile_unreachable", ""),
        None: ("invalid_profile_url", "none was given"),
    }
    async with Client(_shop_with_fallback(), mode=mode) as client:
        for url, (code, says) in cases.items():
            arguments: dict[str, Any] = {"items": ["tea"]}
            if url is not None:
                arguments["meta"] = {"ucp-agent": {"profile": url}}
            data = await _refused_with(client.call_tool("create_checkout", arguments), code)
            assert says in data["content"]
            assert data["continue_url"] == WEB
        incompatible = await client.call_tool("create_checkout", _meta_args(WITHOUT_CHECKOUT))
        served = structured(await client.call_tool("create_checkout", _meta_args(KNOWN)))
    body = incompatible.structured_content
    assert body is not None
    assert body["messages"][0]["code"] == "capabilities_incompatible"
    assert body["continue_url"] == WEB
    assert json.loads(incompatible.content[0].text) == body  # type: ignore[union-attr]
    assert served["items"] == ["tea"]


@pytest.mark.parametrize(
    "agent",
    [KNOWN, [KNOWN], {"url": KNOWN}, {"profile": None}, {}, 42, True, {"profile": 42}],
    ids=["string", "list", "other key", "null profile", "empty", "number", "boolean", "number profile"],
)
@pytest.mark.parametrize("tool", ["create_checkout", "negotiated"])
async def test_a_malformed_ucp_agent_argument_is_refused_not_ignored(agent: Any, tool: str) -> None:
    """A platform that says `ucp-agent` names one: without a profile URL in it, whatever
    the tool, the call is refused as a bad URL, not run as if no platform had been named."""
    async with Client(_shop_with_fallback(), mode="2026-07-28") as client:
        data = await _refused_with(
            client.call_tool(tool, {"items": ["tea"], "meta": {"ucp-agent": agent}}), "invalid_profile_url"
        )
        assert data["continue_url"] == WEB
        served = structured(await client.call_tool(tool, _meta_args(KNOWN)))
    assert served["ucp"]["version"] == V


@pytest.mark.parametrize(
    "arguments",
    [{}, {"meta": "ucp-agent"}, {"meta": [KNOWN]}, {"meta": {"ucp": KNOWN}}, {"meta": {"ucp-agent": None}}],
    ids=["no meta", "meta string", "meta list", "no ucp-agent", "null ucp-agent"],
)
async def test_a_meta_argument_without_ucp_agent_names_no_platform(arguments: dict[str, Any]) -> None:
    """A tool may take an argument of its own called `meta`: unless it holds `ucp-agent`,
    the call names no platform through its arguments."""
    async with Client(_shop_with_fallback(), mode="2026-07-28") as client:
        assert structured(await client.call_tool("negotiated", arguments)) == {"ucp": None}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_inside_requires_ucp_every_reader_sees_the_agreement_narrowed_to_the_operation(
    mode: str,
) -> None:
    """A platform sharing cart as well: the checkout tool sees checkout and its extensions only,
    asked with its `ctx` or without, and the request's full agreement stays outside the tool."""
    from mcp_negotiation import negotiation_of

    known = "https://platform.example/profile.json"
    platform = json.loads(
        _profile(
            checkout=[{"version": V}],
            cart=[{"version": V}],
            fulfillment=[{"version": V, "extends": CHECKOUT}],
        )
    )
    ucp = UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=StaticResolver({known: platform}))
    server = negotiate(MCPServer("shop"), Policy(ucp=ucp))

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
        record = negotiation_of()
        assert record.ucp is not None
        return {
            "with_ctx": sorted(negotiation_of(ctx).ucp.capabilities),
            "without": sorted(record.ucp.capabilities),
        }

    @server.tool()
    async def everything(items: list[str], ctx: Context) -> list[str]:
        return sorted(negotiation_of(ctx).ucp.capabilities)

    narrowed = [CHECKOUT, "dev.ucp.shopping.fulfillment"]
    async with Client(server, mode=mode) as client:
        assert structured(await client.call_tool("create_checkout", _meta_args(known))) == {
            "with_ctx": narrowed,
            "without": narrowed,
        }
        full = structured(await client.call_tool("everything", _meta_args(known)))
    assert full == {"result": ["dev.ucp.shopping.cart", *narrowed]}


def test_the_shops_http_connections_send_each_answer_at_once() -> None:
    """Every connection the shop accepts over HTTP has Nagle off: without it, an answer on a
    kept-alive connection (every modern request after a client's first) waits for the
    client's delayed ACK, 40 ms, and uvicorn, given the socket, does not switch it off."""
    with listening_socket("127.0.0.1", 0) as listening, socket.create_connection(listening.getsockname()[:2]):
        accepted, _ = listening.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
