"""Fuzzing everything a client controls, against real servers that stay up between cases.

Each test keeps one server (and, where the transport allows, one connection) for all its
examples: an in-memory JSON-RPC connection, the SDK's direct dispatcher, or one uvicorn
server on 127.0.0.1. Hypothesis drives it from the test thread through an anyio blocking
portal, so every example is a real request through the SDK and this library.

For every case: the answer is a served request whose record is exactly what was sent, or
a JSON-RPC error with an expected code (never an internal error); it arrives (a generous
`fail_after` is the hang detector, not a timing assertion); and the next well-formed
request on the same server is served. Where the pure core can say what should happen
(`Negotiator`, `platform_profile_url`, `Profile.from_bytes`, `negotiate_capabilities`),
the server's answer is checked against it.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
import trustme
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

from mcp_negotiation import Policy
from mcp_negotiation.core import revisions
from mcp_negotiation.core.errors import NegotiationRefused
from mcp_negotiation.core.negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    Negotiator,
)
from mcp_negotiation.tools.demo import build as build_demo
from mcp_negotiation.ucp import (
    ALL_PORTS,
    UCP_JSONRPC_ERROR,
    HttpsProfileResolver,
    Profile,
    StaticResolver,
    UcpError,
    negotiate_capabilities,
    platform_profile_url,
)
from support.harness import direct_connection, serve_http
from support.profile_server import ProfileServer, Route, make_tls
from ucp_shop import BUSINESS_PROFILE, OLDER_PROFILES
from ucp_shop import build as build_shop

pytestmark = pytest.mark.fuzz

HANG = 60.0
"""Seconds before a case counts as hung: a detector, far above any real answer."""
MODERN = "2026-07-28"
V = "2026-04-08"
GOOD_CAPS = {"sampling": {}, "experimental": {"good": {}}}
GOOD_META = {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: GOOD_CAPS}
GOOD_INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": GOOD_CAPS,
    "clientInfo": {"name": "good", "version": "1"},
}
BUSINESS = Profile.from_file(BUSINESS_PROFILE)
BUSINESS_AT = {version: Profile.from_file(path) for version, path in OLDER_PROFILES.items()}
"""The shop's pinned profiles for the older versions it lists: what a platform at one meets."""


def _agreement(platform: Profile) -> dict[str, Any]:
    """The agreement the shop makes with `platform`, as the core computes it."""
    return negotiate_capabilities(BUSINESS_AT.get(platform.version, BUSINESS), platform).as_dict()


PLATFORM_A = "https://platform-a.example/profile.json"
PLATFORM_B = "https://platform-b.example/profile.json"
PLATFORMS = {
    PLATFORM_A: {
        "ucp": {
            "version": V,
            "capabilities": {
                "dev.ucp.shopping.checkout": [{"version": V}],
                "dev.ucp.shopping.fulfillment": [{"version": V, "extends": "dev.ucp.shopping.checkout"}],
            },
        }
    },
    PLATFORM_B: {"ucp": {"version": V, "capabilities": {"dev.ucp.shopping.cart": [{"version": V}]}}},
}
PINNED = {url: Profile.from_json(doc) for url, doc in PLATFORMS.items()}

fuzz = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- strategies ---------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=6)


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"n": node}
    return node


known_capabilities = st.fixed_dictionaries(
    {},
    optional={
        "sampling": st.sampled_from([{}, {"tools": {}}, {"context": {}}]),
        "elicitation": st.sampled_from([{}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}]),
        "roots": st.sampled_from([{}, {"listChanged": True}]),
        "tasks": st.just({}),
        "extensions": st.dictionaries(st.sampled_from(["io.modelcontextprotocol/ui", "a.b/c"]), st.just({})),
        "experimental": st.dictionaries(st.text(min_size=1, max_size=8), json_objects, max_size=3),
    },
)
capability_maps = st.one_of(
    known_capabilities,
    json_objects,
    st.integers(min_value=1, max_value=30).map(_nested),  # deep: the limit is 12 levels
    st.integers(min_value=1_990, max_value=2_010).map(lambda n: {f"k{i}": {} for i in range(n)}),  # wide
    st.integers(min_value=4_090, max_value=4_100).map(lambda n: {"experimental": {"x": {"s": "y" * n}}}),
    st.integers(min_value=4_090, max_value=4_100).map(lambda n: {"k" * n: {}}),
    st.lists(st.integers(), max_size=3000).map(lambda items: {"experimental": {"list": items}}),
    json_values,  # wrong types: lists, strings, numbers, null
)
protocol_versions = st.one_of(
    st.sampled_from([*revisions.KNOWN, "", "zzz", "2025-13-45", "2026-07-28 ", "x" * 64, "x" * 65]),
    st.text(max_size=80),
    json_values,
)
client_infos = st.one_of(
    st.fixed_dictionaries({"name": st.text(max_size=12), "version": st.text(max_size=12)}),
    json_values,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        PROTOCOL_VERSION_KEY: protocol_versions,
        CLIENT_CAPABILITIES_KEY: capability_maps,
        CLIENT_INFO_KEY: client_infos,
        "io.modelcontextprotocol/logLevel": json_values,
        "traceparent": json_values,
        "progressToken": json_values,
    },
)
metas = st.one_of(
    envelopes,
    # Mostly well-formed, one part fuzzed: most cases then get past the SDK's own checks.
    st.builds(lambda caps: {**GOOD_META, CLIENT_CAPABILITIES_KEY: caps}, capability_maps),
    st.builds(lambda info: {**GOOD_META, CLIENT_INFO_KEY: info}, client_infos),
    st.builds(lambda version: {**GOOD_META, PROTOCOL_VERSION_KEY: version}, protocol_versions),
    json_values,
)
initialize_params = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": protocol_versions,
            "capabilities": capability_maps,
            "clientInfo": client_infos,
            "_meta": json_values,
        },
    ),
    st.builds(lambda caps: {**GOOD_INIT, "capabilities": caps}, capability_maps),
    st.builds(lambda version: {**GOOD_INIT, "protocolVersion": version}, protocol_versions),
    st.builds(lambda info: {**GOOD_INIT, "clientInfo": info}, client_infos),
    json_objects,
)
url_hosts = st.sampled_from(
    ["platform-a.example", "PLATFORM-A.example", "127.0.0.1", "[::1]", "2130706433", "a@b.example", ""]
)
url_strings = st.one_of(
    st.sampled_from(
        [PLATFORM_A, PLATFORM_B, PLATFORM_A + "#x", "http://platform-a.example/profile.json", "https://", ""]
    ),
    st.builds(lambda host, path: f"https://{host}/{path}", url_hosts, st.text(max_size=30)),
    st.integers(min_value=2040, max_value=2060).map(lambda n: "https://platform-a.example/" + "p" * n),
    st.text(max_size=40),
)
profile_urls = url_strings | json_values
printable_ascii = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
header_values = st.one_of(
    st.builds(lambda url: f'profile="{url}"', url_strings),
    st.sampled_from(
        [
            f'profile="{PLATFORM_A}"',
            f'profile="{PLATFORM_A}";version="2026-01-11"',
            f'profile="{PLATFORM_A}", version=1',
            f"profile={PLATFORM_A}",
            f'profile="{PLATFORM_A}", profile="{PLATFORM_B}"',
            f"profile=:{PLATFORM_A}:",
            'profile=%"https://a.example/"',
            "profile=?1",
            "profile",
            "",
            ",",
            f'profile="{PLATFORM_A}" garbage',
        ]
    ),
    st.integers(min_value=4090, max_value=4100).map(lambda n: f'profile="{PLATFORM_A}", x="{"y" * n}"'),
    st.text(printable_ascii, max_size=120),
).filter(lambda v: not any(ord(c) < 0x20 or ord(c) == 0x7F for c in v))
"""`UCP-Agent` values. Control characters cannot be sent in an HTTP field at all."""
argument_metas = st.one_of(
    st.builds(lambda url: {"ucp-agent": {"profile": url}}, profile_urls),
    st.builds(lambda value: {"ucp-agent": value}, json_values),
    json_values,
)


# -- a raw JSON-RPC client over the SDK's in-memory streams -----------------------------------------


class RawClient:
    """Sends exactly the JSON given (the SDK's ClientSession would normalise or refuse it)."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read, self._write = read, write
        self._ids = itertools.count(1)

    async def _send(self, body: dict[str, Any]) -> None:
        message = jsonrpc_message_adapter.validate_json(json.dumps(body))
        await self._write.send(SessionMessage(message))

    async def notify(self, method: str) -> None:
        await self._send({"jsonrpc": "2.0", "method": method})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            incoming = await self._read.receive()
            if isinstance(incoming, Exception):
                raise incoming
            message = incoming.message
            if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == request_id:
                answer: dict[str, Any] = message.model_dump(by_alias=True, exclude_none=True, mode="json")
                return answer


Send = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@asynccontextmanager
async def memory(server: MCPServer) -> AsyncIterator[RawClient]:
    async with InMemoryTransport(server) as (read, write):
        yield RawClient(read, write)


@asynccontextmanager
async def modern_memory(server: MCPServer) -> AsyncIterator[RawClient]:
    """A connection opened in the modern era: its first request decides the era for good."""
    async with memory(server) as client:
        opened = await client.request("tools/list", {"_meta": GOOD_META})
        assert "result" in opened, opened
        yield client


@asynccontextmanager
async def direct(server: MCPServer) -> AsyncIterator[Send]:
    """The SDK's in-process modern path: no JSON-RPC framing, no validation ladder."""
    async with direct_connection(server) as raw:

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            try:
                return {"result": await raw(method, json.loads(json.dumps(params)))}
            except MCPError as refused:
                return {"error": refused.error.model_dump(by_alias=True, exclude_none=True)}

        yield send


def _sse_or_json(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # SSE lines end in CR, LF or CRLF only (`splitlines` would also split inside the JSON).
        lines = re.split(r"\r\n|\n|\r", response.text)
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        decoded: dict[str, Any] = json.loads(data[-1])
        return decoded
    decoded = response.json()
    return decoded


@asynccontextmanager
async def _http_client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=HANG) as http:
        yield http


HTTP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _http_sender(http: httpx2.AsyncClient, url: str, **headers: str | bytes) -> Send:
    ids = itertools.count(1)

    async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        extra: dict[str, str | bytes] = {"mcp-protocol-version": MODERN, "mcp-method": method, **headers}
        if method == "tools/call":
            extra["mcp-name"] = str(params.get("name"))
        response = await http.post(url, json=body, headers={**HTTP_HEADERS, **extra})
        assert response.status_code < 500, response.text
        return _sse_or_json(response)

    return send


# -- fixtures: one portal and one server per module or test -------------------------------------


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as portal:
        yield portal


@pytest.fixture(scope="module")
def demo() -> MCPServer:
    return build_demo()


@asynccontextmanager
async def _modern_sender(kind: str, server: MCPServer) -> AsyncIterator[Send]:
    if kind == "memory":
        async with modern_memory(server) as client:
            yield client.request
    elif kind == "direct":
        async with direct(server) as send:
            yield send
    else:
        with serve_http(server.streamable_http_app()) as url:
            async with _http_client() as http:
                yield _http_sender(http, url)


@pytest.fixture(scope="module", params=["memory", "direct", "http"])
def modern_demo(
    request: pytest.FixtureRequest, portal: BlockingPortal, demo: MCPServer
) -> Iterator[tuple[str, Send]]:
    with portal.wrap_async_context_manager(_modern_sender(request.param, demo)) as send:
        yield request.param, send


# -- checks -----------------------------------------------------------------------------------------


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _outcome(answer: dict[str, Any]) -> str:
    """A label for hypothesis' statistics: which outcomes the examples reached."""
    if "result" in answer:
        return "served"
    data = answer["error"].get("data")
    detail = f" {data['code']}" if isinstance(data, dict) and "code" in data else ""
    return f"error {answer['error']['code']}{detail}"


def _core_refusal(meta: Any) -> int | None:
    """The code the pure core refuses this envelope with, or None when it accepts it."""
    try:
        Negotiator(Policy()).request(meta, transport="memory")
    except NegotiationRefused as refused:
        return refused.refusal.code
    return None


def _check_modern_answer(kind: str, meta: Any, answer: dict[str, Any]) -> None:
    core = _core_refusal(meta)
    if "error" in answer:
        code = answer["error"]["code"]
        assert isinstance(answer["error"]["message"], str)
        if kind == "direct" and not isinstance(meta, dict):
            # The SDK's in-process modern entry (`modern_on_request`) calls `_meta.get` before
            # any middleware runs and answers -32603; a plain MCPServer does the same. Only
            # in-process callers can send this (the JSON-RPC and HTTP paths refuse it first).
            assert code in {-32603, -32602}, answer
            return
        # The SDK checks the envelope too (its ladder before us, its schema after), so a
        # refusal may be the SDK's -32602 or -32022 rather than the core's own code; but an
        # envelope the core accepts can only fail the SDK's schema.
        allowed = {-32602, -32022} if core is not None else {-32602}
        if kind == "http" and (not isinstance(meta, dict) or meta.get(PROTOCOL_VERSION_KEY) != MODERN):
            allowed.add(-32020)  # the MCP-Protocol-Version header names 2026-07-28
        assert code in allowed, answer
        return
    record = answer["result"]["structuredContent"]
    assert core is None, f"served an envelope the core refuses with {core}"
    assert record["era"] == "modern"
    assert record["protocol_version"] == meta[PROTOCOL_VERSION_KEY]
    assert record["client_capabilities"] == _as_json(meta[CLIENT_CAPABILITIES_KEY])


async def _served(send: Send) -> None:
    """The well-formed request that must be served after every case."""
    answer = await send("tools/call", {"name": "negotiation", "arguments": {}, "_meta": GOOD_META})
    assert answer["result"]["structuredContent"]["client_capabilities"] == GOOD_CAPS, answer


# -- the modern envelope and capability maps -------------------------------------------------------


@fuzz
@given(meta=metas)
def test_fuzzed_envelope_is_served_or_refused_and_the_next_is_served(
    portal: BlockingPortal, modern_demo: tuple[str, Send], meta: Any
) -> None:
    kind, send = modern_demo

    async def case() -> str:
        with anyio.fail_after(HANG):
            answer = await send("tools/call", {"name": "negotiation", "arguments": {}, "_meta": meta})
            _check_modern_answer(kind, meta, answer)
            await _served(send)
        return _outcome(answer)

    event(portal.call(case))


# -- legacy initialize ------------------------------------------------------------------------------


def _core_initialize(params: Any) -> tuple[str, Any] | int:
    """(agreed revision, capabilities) as the core decides, or its refusal code."""
    try:
        record = Negotiator(Policy()).initialize(params, transport="memory")
    except NegotiationRefused as refused:
        return refused.refusal.code
    return record.protocol_version, _as_json(params["capabilities"])


async def _memory_initialize_case(server: MCPServer, params: dict[str, Any]) -> str:
    expected = _core_initialize(params)
    async with memory(server) as client:
        answer = await client.request("initialize", params)
        outcome = _outcome(answer)
        if "error" in answer:
            code = answer["error"]["code"]
            assert code in ({-32602, expected} if isinstance(expected, int) else {-32602}), answer
            # The same connection still takes a good handshake.
            answer = await client.request("initialize", GOOD_INIT)
            expected = ("2025-06-18", GOOD_CAPS)
        else:
            assert not isinstance(expected, int), f"served an initialize the core refuses with {expected}"
            assert answer["result"]["protocolVersion"] == expected[0]
        await client.notify("notifications/initialized")
        called = await client.request("tools/call", {"name": "negotiation", "arguments": {}})
        record = called["result"]["structuredContent"]
        assert (record["protocol_version"], record["client_capabilities"]) == expected
        assert record["sdk_protocol_version"] == expected[0]
    return outcome


async def _http_initialize_case(http: httpx2.AsyncClient, url: str, params: dict[str, Any]) -> str:
    expected = _core_initialize(params)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    response = await http.post(url, json=body, headers=HTTP_HEADERS)
    assert response.status_code < 500, response.text
    answer = _sse_or_json(response)
    outcome = _outcome(answer)
    if "error" in answer:
        assert answer["error"]["code"] in ({-32602, expected} if isinstance(expected, int) else {-32602})
        body["params"] = GOOD_INIT
        response = await http.post(url, json=body, headers=HTTP_HEADERS)
        answer = _sse_or_json(response)
        expected = ("2025-06-18", GOOD_CAPS)
    else:
        assert not isinstance(expected, int), f"served an initialize the core refuses with {expected}"
    agreed = answer["result"]["protocolVersion"]
    assert agreed == expected[0]
    session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": agreed}
    headers = {**HTTP_HEADERS, **session}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}},
    }
    record = _sse_or_json(await http.post(url, json=call, headers=headers))["result"]["structuredContent"]
    assert (record["protocol_version"], record["client_capabilities"]) == expected
    await http.delete(url, headers=session)
    return outcome


@pytest.fixture(scope="module")
def http_demo(portal: BlockingPortal, demo: MCPServer) -> Iterator[tuple[httpx2.AsyncClient, str]]:
    with (
        serve_http(demo.streamable_http_app()) as url,
        portal.wrap_async_context_manager(_http_client()) as http,
    ):
        yield http, url


@fuzz
@given(params=initialize_params)
def test_fuzzed_initialize_in_memory(portal: BlockingPortal, demo: MCPServer, params: dict[str, Any]) -> None:
    async def case() -> str:
        with anyio.fail_after(HANG):
            return await _memory_initialize_case(demo, params)

    event(portal.call(case))


@fuzz
@given(params=initialize_params)
def test_fuzzed_initialize_over_http(
    portal: BlockingPortal, http_demo: tuple[httpx2.AsyncClient, str], params: dict[str, Any]
) -> None:
    async def case() -> str:
        with anyio.fail_after(HANG):
            return await _http_initialize_case(*http_demo, params)

    event(portal.call(case))


# -- UCP: the UCP-Agent header and arguments.meta ------------------------------------------------------


def _expected_ucp(arguments: Any, headers: dict[str, str]) -> dict[str, Any] | str | None:
    """The agreement the core makes for this call, its UCP error code, or None (no platform)."""
    try:
        url = platform_profile_url({"name": "negotiated", "arguments": arguments}, headers)
    except UcpError as failure:
        return failure.code
    if url is None:
        return None
    platform = PINNED.get(url)
    if platform is None:
        return "profile_unreachable"
    try:
        return _agreement(platform)
    except UcpError as failure:
        return failure.code


def _check_ucp_answer(expected: dict[str, Any] | str | None, answer: dict[str, Any]) -> None:
    if "error" in answer:
        assert answer["error"]["code"] == UCP_JSONRPC_ERROR, answer
        assert answer["error"]["data"]["code"] == expected, answer
    else:
        assert not isinstance(expected, str), f"expected {expected}, served {answer}"
        assert answer["result"]["structuredContent"]["ucp"] == expected


@pytest.fixture(scope="module")
def shop() -> MCPServer:
    return build_shop(StaticResolver(PLATFORMS))


async def _shop_served(send: Send) -> None:
    arguments = {"meta": {"ucp-agent": {"profile": PLATFORM_A}}}
    answer = await send("tools/call", {"name": "negotiated", "arguments": arguments, "_meta": GOOD_META})
    assert answer["result"]["structuredContent"]["ucp"] == _expected_ucp(arguments, {})


@pytest.fixture(scope="module")
def shop_http(portal: BlockingPortal, shop: MCPServer) -> Iterator[tuple[httpx2.AsyncClient, str]]:
    with (
        serve_http(shop.streamable_http_app()) as url,
        portal.wrap_async_context_manager(_http_client()) as http,
    ):
        yield http, url


@fuzz
@given(value=header_values)
def test_fuzzed_ucp_agent_header(
    portal: BlockingPortal, shop_http: tuple[httpx2.AsyncClient, str], value: str
) -> None:
    http, url = shop_http
    # A field value cannot start or end with whitespace on the wire; the server reads bytes as Latin-1.
    raw = value.encode().strip(b" \t")
    expected = _expected_ucp({}, {"ucp-agent": raw.decode("latin-1")})

    async def case() -> str:
        with anyio.fail_after(HANG):
            send = _http_sender(http, url, **{"ucp-agent": raw})
            answer = await send("tools/call", {"name": "negotiated", "arguments": {}, "_meta": GOOD_META})
            _check_ucp_answer(expected, answer)
            await _shop_served(_http_sender(http, url))
        return _outcome(answer)

    event(portal.call(case))


@pytest.fixture(scope="module")
def shop_memory(portal: BlockingPortal, shop: MCPServer) -> Iterator[Send]:
    with portal.wrap_async_context_manager(modern_memory(shop)) as client:
        yield client.request


@fuzz
@given(meta=argument_metas, extra=st.dictionaries(st.text(max_size=5), json_values, max_size=2))
def test_fuzzed_arguments_meta(
    portal: BlockingPortal, shop_memory: Send, meta: Any, extra: dict[str, Any]
) -> None:
    arguments = {**extra, "meta": meta}

    async def case() -> str:
        with anyio.fail_after(HANG):
            params = {"name": "negotiated", "arguments": arguments, "_meta": GOOD_META}
            answer = await shop_memory("tools/call", params)
            _check_ucp_answer(_expected_ucp(arguments, {}), answer)
            await _shop_served(shop_memory)
        return _outcome(answer)

    event(portal.call(case))


# -- UCP: platform profile documents, fetched over HTTPS from a local server --------------------------

version_strings = st.sampled_from(
    [V, "2026-01-23", "2026-01-11", "2025-01-01", "2026-02-30", "2026-4-8", "latest", ""]
)
versions = version_strings | json_values
entries = st.one_of(
    st.fixed_dictionaries(
        {"version": versions},
        optional={
            "extends": st.one_of(
                st.sampled_from(["dev.ucp.shopping.checkout", "dev.ucp.shopping.fulfillment"]),
                st.lists(
                    st.sampled_from(["dev.ucp.shopping.checkout", "dev.ucp.shopping.cart", "x"]), max_size=60
                ),
                json_values,
            ),
            "config": json_values | st.integers(min_value=1, max_value=40).map(_nested),
        },
    ),
    json_values,
)
capability_names = st.one_of(
    st.sampled_from(sorted(BUSINESS.capabilities)),
    st.text(max_size=12),
    st.integers(min_value=250, max_value=260).map(lambda n: "c" * n),
)
profile_capabilities = st.one_of(
    st.dictionaries(capability_names, st.lists(entries, max_size=4) | entries, max_size=6),
    st.lists(
        st.builds(
            lambda name, entry: {"name": name, **entry} if isinstance(entry, dict) else entry,
            capability_names,
            entries,
        ),
        max_size=6,
    ),
    st.integers(min_value=995, max_value=1005).map(lambda n: {f"c{i}": [{"version": V}] for i in range(n)}),
    json_values,
)
business_names = st.sampled_from(sorted(BUSINESS.capabilities))
plausible_profiles = st.builds(
    lambda version, caps: json.dumps({"ucp": {"version": version, "capabilities": caps}}).encode(),
    st.sampled_from([V, V, "2026-01-23", "2025-01-01"]),
    st.dictionaries(
        business_names,
        st.lists(
            st.fixed_dictionaries(
                {"version": st.sampled_from([V, "2026-01-23", "2025-06-01"])},
                optional={"extends": business_names | st.lists(business_names, min_size=1, max_size=3)},
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda entry: entry["version"],
        ),
        max_size=5,
    ),
)
"""Profiles that are well-formed: the agreement itself varies (dropped, pruned, kept)."""
profile_documents = st.one_of(
    plausible_profiles,
    st.builds(
        lambda version, caps, supported: json.dumps(
            {"ucp": {"version": version, "capabilities": caps, "supported_versions": supported}}
        ).encode(),
        versions,
        profile_capabilities,
        st.none() | st.dictionaries(version_strings, st.text(max_size=20)) | json_values,
    ),
    st.builds(lambda doc: json.dumps(doc).encode(), json_values),
    st.sampled_from(
        [
            b"",
            b"{not json",
            b'{"ucp": {"version": NaN}}',
            b"\xff\xfe{}",
            b"[" * 100_000 + b"]" * 100_000,
            b'{"ucp": {"version": "2026-04-08", "capabilities": {}}}' + b" " * (300 * 1024),
            b'{"ucp": {"version": "2026-04-08", "capabilities": {}, "n": ' + b"9" * 5000 + b"}}",
        ]
    ),
    st.binary(max_size=200),
)


def _expected_profile(body: bytes, cap: int) -> dict[str, Any] | str:
    if len(body) > cap:
        return "profile_malformed"
    try:
        return _agreement(Profile.from_bytes(body))
    except UcpError as failure:
        return failure.code


@pytest.fixture(scope="module")
def profile_host(
    portal: BlockingPortal, ca: trustme.CA
) -> Iterator[tuple[ProfileServer, Send, HttpsProfileResolver]]:
    tls = make_tls(ca)
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS
    )

    @asynccontextmanager
    async def running() -> AsyncIterator[tuple[ProfileServer, Send, HttpsProfileResolver]]:
        async with ProfileServer(tls.server) as host, modern_memory(build_shop(resolver)) as client:
            yield host, client.request, resolver

    with portal.wrap_async_context_manager(running()) as started:
        yield started


_paths = itertools.count()


@settings(fuzz, max_examples=40)
@given(body=profile_documents)
def test_fuzzed_profile_documents(
    portal: BlockingPortal, profile_host: tuple[ProfileServer, Send, HttpsProfileResolver], body: bytes
) -> None:
    host, send, _ = profile_host
    path = f"/profile-{next(_paths)}.json"  # a fresh URL: nothing cached, no failure backoff
    host.routes[path] = Route(body=body)
    host.routes["/good.json"] = Route(body=json.dumps(PLATFORMS[PLATFORM_A]).encode())
    arguments = {"meta": {"ucp-agent": {"profile": host.url(path)}}}

    async def case() -> str:
        with anyio.fail_after(HANG):
            answer = await send(
                "tools/call", {"name": "negotiated", "arguments": arguments, "_meta": GOOD_META}
            )
            _check_ucp_answer(_expected_profile(body, 256 * 1024), answer)
            good = {"meta": {"ucp-agent": {"profile": host.url("/good.json")}}}
            served = await send("tools/call", {"name": "negotiated", "arguments": good, "_meta": GOOD_META})
            assert served["result"]["structuredContent"]["ucp"] == _expected_ucp(
                {"meta": {"ucp-agent": {"profile": PLATFORM_A}}}, {}
            )
        return _outcome(answer)

    event(portal.call(case))
