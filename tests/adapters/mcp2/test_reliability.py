"""Reliability: documented limits with clear errors, isolation under load, and faults.

- Limits: every size limit on what a client or a platform controls is checked at the
  limit (served) and one past it (refused with the documented message), through real
  servers; and the work done on an over-limit input is counted, not timed: it stops at
  the limit whatever the input's size.
- Load: 200 concurrent clients of both eras, with different capabilities and UCP
  platforms, against one uvicorn server; every answer is checked against what the pure
  core decides for that client, so cross-talk or an unintended error fails the test.
- Faults: profile hosts that hang, reset or send 10 MiB; clients that vanish in the
  middle of `initialize`; resolvers that raise. The server answers and keeps serving.

Timeouts here are hang detectors or the resolver's own configuration: nothing asserts
how long anything took.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import date, timedelta
from typing import Any

import anyio
import http_sf
import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of, requires, requires_ucp
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.core import frozen_json
from mcp_negotiation.core.engine import MEMO_SIZE, Engine
from mcp_negotiation.core.errors import NegotiationRefused
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    MAX_CAPABILITY_DEPTH,
    MAX_CAPABILITY_NODES,
    MAX_REVISION_LENGTH,
    MAX_STRING_LENGTH,
    PROTOCOL_VERSION_KEY,
    Negotiator,
)
from mcp_negotiation.tools.demo import build as build_demo
from mcp_negotiation.ucp import (
    ALL_PORTS,
    CAPABILITIES_INCOMPATIBLE,
    INVALID_PROFILE_URL,
    MAX_HEADER_LENGTH,
    MAX_URL_LENGTH,
    PROFILE_MALFORMED,
    PROFILE_UNREACHABLE,
    UCP_JSONRPC_ERROR,
    VERSION_UNSUPPORTED,
    HttpsProfileResolver,
    Profile,
    StaticResolver,
    UcpError,
    UcpPolicy,
    negotiate_capabilities,
    parse_ucp_agent,
)
from mcp_negotiation.ucp.profile import (
    MAX_CAPABILITIES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    MAX_ENTRIES_PER_CAPABILITY,
    MAX_NAME_LENGTH,
    MAX_PARENTS,
    MAX_SUPPORTED_VERSIONS,
)
from mcp_negotiation.ucp.resolver import DEFAULT_MAX_BODY_BYTES
from support.harness import RawRequest, legacy_session, open_streams, serve_http
from support.profile_server import ProfileServer, Route, Tls
from ucp_shop import BUSINESS_PROFILE, CHECKOUT
from ucp_shop import build as build_shop

pytestmark = pytest.mark.anyio

HANG = 60.0
"""Seconds before a step counts as hung: a detector, far above any real answer."""
MODERN = "2026-07-28"
V = "2026-04-08"
BUSINESS = Profile.from_file(BUSINESS_PROFILE)


class AnyResult(BaseModel):
    model_config = ConfigDict(extra="allow")


def _envelope(caps: Any, info: Any = None) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: caps}
    if info is not None:
        meta[CLIENT_INFO_KEY] = info
    return meta


def _init(caps: Any, revision: str = "2025-06-18", info: Any = None) -> dict[str, Any]:
    return {
        "protocolVersion": revision,
        "capabilities": caps,
        "clientInfo": info or {"name": "t", "version": "1"},
    }


async def _raw(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    result = await session.send_request(RawRequest(method=method, params=params), AnyResult)
    return result.model_dump(by_alias=True)


def _nested(depth: int) -> dict[str, Any]:
    """A map whose innermost object sits `depth` levels below the capability map itself."""
    node: dict[str, Any] = {}
    for _ in range(depth - 1):
        node = {"n": node}
    return {"experimental": node}


def _wide(values: int) -> dict[str, Any]:
    """A capability map of exactly `values` JSON values, counting the map itself."""
    return {"experimental": {f"k{i}": {} for i in range(values - 2)}}


def _long_list(values: int) -> dict[str, Any]:
    return {"experimental": {"x": {"l": [0] * (values - 4)}}}


# -- limits: capability maps and client info ---------------------------------------------------------

CAPABILITY_LIMITS = [
    pytest.param(
        _nested(MAX_CAPABILITY_DEPTH),
        _nested(MAX_CAPABILITY_DEPTH + 1),
        f"is nested deeper than {MAX_CAPABILITY_DEPTH} levels",
        id="depth",
    ),
    pytest.param(
        _wide(MAX_CAPABILITY_NODES),
        _wide(MAX_CAPABILITY_NODES + 1),
        f"holds more than {MAX_CAPABILITY_NODES} values",
        id="keys",
    ),
    pytest.param(
        _long_list(MAX_CAPABILITY_NODES),
        _long_list(MAX_CAPABILITY_NODES + 1),
        f"holds more than {MAX_CAPABILITY_NODES} values",
        id="list-length",
    ),
    pytest.param(
        {"experimental": {"s": {"v": "x" * MAX_STRING_LENGTH}}},
        {"experimental": {"s": {"v": "x" * (MAX_STRING_LENGTH + 1)}}},
        f"holds a string longer than {MAX_STRING_LENGTH} characters",
        id="string-length",
    ),
    pytest.param(
        {"experimental": {"k" * MAX_STRING_LENGTH: {}}},
        {"experimental": {"k" * (MAX_STRING_LENGTH + 1): {}}},
        "has a key that is not a short string",
        id="key-length",
    ),
]


@pytest.mark.parametrize(("at_limit", "over_limit", "reason"), CAPABILITY_LIMITS)
async def test_capability_map_limits_modern(at_limit: Any, over_limit: Any, reason: str) -> None:
    async with open_streams("memory", build_demo()) as streams, ClientSession(*streams[:2]) as session:
        with anyio.fail_after(HANG):
            call = {"name": "negotiation", "arguments": {}}
            served = await _raw(session, "tools/call", {**call, "_meta": _envelope(at_limit)})
            assert served["structuredContent"]["client_capabilities"] == at_limit
            with pytest.raises(MCPError) as refused:
                await _raw(session, "tools/call", {**call, "_meta": _envelope(over_limit)})
            assert refused.value.error.code == -32602
            assert refused.value.error.message == f"Invalid params: {CLIENT_CAPABILITIES_KEY} {reason}"
            # Client info has the same limits, and the connection still serves.
            with pytest.raises(MCPError) as refused:
                await _raw(session, "tools/call", {**call, "_meta": _envelope({}, {"name": "x" * 5000})})
            assert refused.value.error.message.endswith(
                f"{CLIENT_INFO_KEY} holds a string longer than 4096 characters"
            )
            served = await _raw(session, "tools/call", {**call, "_meta": _envelope({"sampling": {}})})
            assert served["structuredContent"]["client_capabilities"] == {"sampling": {}}


@pytest.mark.parametrize(("at_limit", "over_limit", "reason"), CAPABILITY_LIMITS)
async def test_capability_map_limits_legacy(at_limit: Any, over_limit: Any, reason: str) -> None:
    server = build_demo()
    with anyio.fail_after(HANG):
        async with open_streams("memory", server) as streams, ClientSession(*streams[:2]) as session:
            with pytest.raises(MCPError) as refused:
                await _raw(session, "initialize", _init(over_limit))
            assert refused.value.error.code == -32602
            assert refused.value.error.message == f"Invalid params: capabilities {reason}"
        async with (
            open_streams("memory", server) as streams,
            legacy_session(streams, "2025-06-18", at_limit) as (
                session,
                _,
            ),
        ):
            result = await session.call_tool("negotiation", {})
            assert result.structured_content is not None
            assert result.structured_content["client_capabilities"] == at_limit


async def test_revision_length_limit() -> None:
    server = build_demo()
    with anyio.fail_after(HANG):
        async with open_streams("memory", server) as streams, ClientSession(*streams[:2]) as session:
            with pytest.raises(MCPError) as refused:
                await _raw(session, "initialize", _init({}, "x" * (MAX_REVISION_LENGTH + 1)))
            assert refused.value.error.message == (
                f"Invalid params: protocolVersion is longer than {MAX_REVISION_LENGTH} characters"
            )
            # At the limit it is merely unknown: counter-offered, as the handshake requires.
            answer = await _raw(session, "initialize", _init({}, "x" * MAX_REVISION_LENGTH))
            assert answer["protocolVersion"] == "2025-11-25"


# -- limits: work stops at the limit, whatever the input's size -------------------------------------


@pytest.fixture
def spent(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the values the freezer copies (its unit of work on untrusted JSON)."""
    counts: Counter[str] = Counter()
    original = frozen_json.Budget.spend

    def spend(self: frozen_json.Budget) -> None:
        counts["values"] += 1
        original(self)

    monkeypatch.setattr(frozen_json.Budget, "spend", spend)
    return counts


@pytest.mark.parametrize(
    "capabilities",
    [
        pytest.param({"experimental": {f"k{i}": {} for i in range(200_000)}}, id="200k-keys"),
        pytest.param({"experimental": {"l": list(range(500_000))}}, id="500k-items"),
        pytest.param(_nested(900), id="900-levels"),
    ],
)
def test_capability_work_stops_at_the_limit(spent: Counter[str], capabilities: Any) -> None:
    negotiator = Negotiator(Policy())
    for attempt in (
        lambda: negotiator.request(_envelope(capabilities)),
        lambda: negotiator.initialize(_init(capabilities)),
    ):
        spent.clear()
        with pytest.raises(NegotiationRefused) as refused:
            attempt()
        assert refused.value.refusal.code == -32602
        assert spent["values"] <= MAX_CAPABILITY_NODES + 1


def test_the_memo_stays_bounded() -> None:
    engine = Engine(Policy())
    for i in range(3_000):
        meta = _envelope({"experimental": {f"client-{i}": {}}})
        engine.decide(PlainFacts("tools/call", {"_meta": meta}, "2026-07-28"))
    # The one structure that could grow with the number of clients.
    assert len(engine.memo) <= MEMO_SIZE
    big = _envelope({"experimental": {f"k{i}": {"v": "x" * 100} for i in range(700)}})
    engine.decide(PlainFacts("tools/call", {"_meta": big}, "2026-07-28"))  # over 64 KiB: never memoised
    assert all(len(key[2]) < 70_000 for key in engine.memo)


def test_profile_and_header_work_stops_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    counts: Counter[str] = Counter()
    parse = http_sf.parse

    class Capabilities(dict[str, Any]):
        """A capability map that counts being read entry by entry (its size is not counted)."""

        def items(self) -> Any:
            counts["entries"] += 1
            return super().items()

        def __iter__(self) -> Any:
            counts["entries"] += 1
            return super().__iter__()

    def counting_parse(*args: Any, **kwargs: Any) -> Any:
        counts["parse"] += 1
        return parse(*args, **kwargs)

    monkeypatch.setattr(http_sf, "parse", counting_parse)
    many = Capabilities({f"c{i}": [{"version": V}] for i in range(1_000_000)})
    with pytest.raises(UcpError, match=f"at most {MAX_CAPABILITIES} capabilities"):
        Profile.from_json({"ucp": {"version": V, "capabilities": many}})
    with pytest.raises(UcpError, match=f"longer than {MAX_HEADER_LENGTH} characters"):
        parse_ucp_agent('profile="https://a.example/p", x="' + "y" * 1_000_000 + '"')
    assert counts == Counter()  # refused before any per-capability or parsing work
    Profile.from_json({"ucp": {"version": V, "capabilities": Capabilities(c=[{"version": V}])}})
    parse_ucp_agent('profile="https://a.example/p"')
    assert counts == Counter(entries=1, parse=1)  # the counters do count


# -- limits: UCP profiles, URLs and headers, end to end ----------------------------------------------


def _dates(count: int) -> list[str]:
    start = date(2020, 1, 1)
    return [(start + timedelta(days=i)).isoformat() for i in range(count)]


def _doc(capabilities: Any = None, **ucp: Any) -> dict[str, Any]:
    caps = {CHECKOUT: [{"version": V}]} if capabilities is None else capabilities
    return {"ucp": {"version": V, "capabilities": caps, **ucp}}


def _caps(count: int) -> dict[str, Any]:
    return {CHECKOUT: [{"version": V}], **{f"x.c{i}": [{"version": V}] for i in range(count - 1)}}


def _config(**config: Any) -> dict[str, Any]:
    return {CHECKOUT: [{"version": V, "config": config}]}


def _deep_config(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth - 1):
        node = {"n": node}
    return _config(n=node) if depth > 1 else _config()


PROFILE_LIMITS = [
    pytest.param(
        _doc(_caps(MAX_CAPABILITIES)),
        _doc(_caps(MAX_CAPABILITIES + 1)),
        "at most 1000 capabilities",
        id="caps",
    ),
    pytest.param(
        _doc({CHECKOUT: [{"version": v} for v in [V, *_dates(MAX_ENTRIES_PER_CAPABILITY - 1)]]}),
        _doc({CHECKOUT: [{"version": v} for v in [V, *_dates(MAX_ENTRIES_PER_CAPABILITY)]]}),
        f"must list 1 to {MAX_ENTRIES_PER_CAPABILITY} entries",
        id="entries",
    ),
    pytest.param(
        _doc(
            {
                CHECKOUT: [{"version": V}],
                "x.e": [{"version": V, "extends": [f"p{i}" for i in range(MAX_PARENTS)]}],
            }
        ),
        _doc(
            {
                CHECKOUT: [{"version": V}],
                "x.e": [{"version": V, "extends": [f"p{i}" for i in range(MAX_PARENTS + 1)]}],
            }
        ),
        f"a list of 1 to {MAX_PARENTS} names",
        id="parents",
    ),
    pytest.param(
        _doc({CHECKOUT: [{"version": V}], "n" * MAX_NAME_LENGTH: [{"version": V}]}),
        _doc({CHECKOUT: [{"version": V}], "n" * (MAX_NAME_LENGTH + 1): [{"version": V}]}),
        f"at most {MAX_NAME_LENGTH} characters",
        id="name-length",
    ),
    pytest.param(
        _doc(supported_versions=dict.fromkeys(_dates(MAX_SUPPORTED_VERSIONS), "https://p.example/")),
        _doc(supported_versions=dict.fromkeys(_dates(MAX_SUPPORTED_VERSIONS + 1), "https://p.example/")),
        f"at most {MAX_SUPPORTED_VERSIONS} entries",
        id="supported-versions",
    ),
    pytest.param(
        _doc(_deep_config(MAX_CONFIG_DEPTH)),
        _doc(_deep_config(MAX_CONFIG_DEPTH + 1)),
        f"nested deeper than {MAX_CONFIG_DEPTH} levels",
        id="config-depth",
    ),
    pytest.param(
        _doc(_config(l=[0] * (MAX_CONFIG_NODES - 2))),
        _doc(_config(l=[0] * (MAX_CONFIG_NODES - 1))),
        f"holds more than {MAX_CONFIG_NODES} values",
        id="config-values",
    ),
]


@pytest.fixture
async def platform(tls: Tls) -> AsyncIterator[ProfileServer]:
    async with ProfileServer(tls.server) as server:
        yield server


def _https_shop(tls: Tls, **options: Any) -> MCPServer:
    return build_shop(
        HttpsProfileResolver(
            ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS, **options
        )
    )


def _meta_args(url: str) -> dict[str, Any]:
    return {"items": ["tea"], "meta": {"ucp-agent": {"profile": url}}}


async def _discovery_failure(call: Awaitable[Any]) -> dict[str, Any]:
    with pytest.raises(MCPError) as refused:
        await call
    assert refused.value.error.code == UCP_JSONRPC_ERROR
    data: dict[str, Any] = refused.value.error.data
    return data


@pytest.mark.parametrize(("at_limit", "over_limit", "reason"), PROFILE_LIMITS)
async def test_profile_limits_end_to_end(
    tls: Tls, platform: ProfileServer, at_limit: dict[str, Any], over_limit: dict[str, Any], reason: str
) -> None:
    platform.routes["/at.json"] = Route(body=json.dumps(at_limit).encode())
    platform.routes["/over.json"] = Route(body=json.dumps(over_limit).encode())
    assert len(platform.routes["/over.json"].body) <= DEFAULT_MAX_BODY_BYTES  # the count is the limit hit
    with anyio.fail_after(HANG):
        async with Client(_https_shop(tls), mode=MODERN) as client:
            data = await _discovery_failure(
                client.call_tool("negotiated", _meta_args(platform.url("/over.json")))
            )
            assert data["code"] == PROFILE_MALFORMED
            assert reason in data["content"]
            served = await client.call_tool("negotiated", _meta_args(platform.url("/at.json")))
            assert served.structured_content is not None
            assert served.structured_content["ucp"]["capabilities"][CHECKOUT] == V


@pytest.mark.parametrize("declare_length", [True, False])
async def test_profile_body_cap_end_to_end(tls: Tls, platform: ProfileServer, declare_length: bool) -> None:
    document = json.dumps(_doc()).encode()
    exactly = document + b" " * (DEFAULT_MAX_BODY_BYTES - len(document))
    platform.routes["/at.json"] = Route(body=exactly, declare_length=declare_length)
    platform.routes["/over.json"] = Route(body=exactly + b" ", declare_length=declare_length)
    with anyio.fail_after(HANG):
        async with Client(_https_shop(tls), mode=MODERN) as client:
            data = await _discovery_failure(
                client.call_tool("negotiated", _meta_args(platform.url("/over.json")))
            )
            assert data == {
                "code": PROFILE_MALFORMED,
                "content": f"the profile is larger than {DEFAULT_MAX_BODY_BYTES} bytes",
            }
            served = await client.call_tool("negotiated", _meta_args(platform.url("/at.json")))
            assert served.structured_content is not None
            assert served.structured_content["ucp"]["capabilities"][CHECKOUT] == V


LONG_URL = "https://platform-a.example/" + "p" * (MAX_URL_LENGTH - len("https://platform-a.example/"))
PINNED_DOC = _doc({CHECKOUT: [{"version": V}]})


async def test_url_and_header_length_limits_over_http() -> None:
    assert len(LONG_URL) == MAX_URL_LENGTH
    shop = build_shop(StaticResolver({LONG_URL: PINNED_DOC}))
    header = f'profile="{LONG_URL}", pad="'
    header += "y" * (MAX_HEADER_LENGTH - len(header) - 1) + '"'
    assert len(header) == MAX_HEADER_LENGTH
    with anyio.fail_after(HANG), serve_http(shop.streamable_http_app()) as url:
        async with Client(url, mode=MODERN) as client:
            served = await client.call_tool("negotiated", _meta_args(LONG_URL))
            assert served.structured_content is not None
            assert served.structured_content["ucp"]["capabilities"] == {CHECKOUT: V}
            data = await _discovery_failure(client.call_tool("negotiated", _meta_args(LONG_URL + "p")))
            assert data == {
                "code": INVALID_PROFILE_URL,
                "content": f"the profile URL is longer than {MAX_URL_LENGTH} characters",
            }
        for value, expected in ((header, None), (header[:-1] + 'y"', MAX_HEADER_LENGTH)):
            async with (
                httpx2.AsyncClient(headers={"UCP-Agent": value}, timeout=HANG) as http,
                Client(streamable_http_client(url, http_client=http), mode=MODERN) as client,
            ):
                if expected is None:
                    served = await client.call_tool("negotiated", {})
                    assert served.structured_content is not None
                    assert served.structured_content["ucp"]["capabilities"] == {CHECKOUT: V}
                else:
                    data = await _discovery_failure(client.call_tool("negotiated", {}))
                    assert data["content"] == f"the UCP-Agent header is longer than {expected} characters"


# -- isolation under load -------------------------------------------------------------------------------

PLATFORM_A = "https://platform-a.example/profile.json"
PLATFORM_B = "https://platform-b.example/profile.json"
PLATFORM_C = "https://platform-c.example/profile.json"
PLATFORM_D = "https://platform-d.example/profile.json"
UNPINNED = "https://platform-x.example/profile.json"
LOAD_PLATFORMS: dict[str, dict[str, Any]] = {
    PLATFORM_A: _doc(
        {
            CHECKOUT: [{"version": V}],
            "dev.ucp.shopping.fulfillment": [{"version": V, "extends": CHECKOUT}],
            "dev.ucp.shopping.gift_wrap": [
                {"version": "2026-01-23", "extends": "dev.ucp.shopping.fulfillment"}
            ],
        }
    ),
    PLATFORM_B: _doc({"dev.ucp.shopping.cart": [{"version": V}]}),  # no checkout: incompatible
    PLATFORM_C: {"ucp": {"version": "2025-01-01", "capabilities": {}}},  # version_unsupported
    PLATFORM_D: _doc(
        {
            CHECKOUT: [{"version": "2026-01-23"}],
            "dev.ucp.shopping.cart": [{"version": V}],
            "dev.ucp.shopping.discount": [{"version": V, "extends": [CHECKOUT, "dev.ucp.shopping.cart"]}],
        }
    ),
}
LOAD_CHOICES = [PLATFORM_A, PLATFORM_B, PLATFORM_C, PLATFORM_D, UNPINNED, None]
LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
CLIENTS = 200
CALLS = 10
TOOLS = ["whoami", "summarize", "create_checkout"]


def load_server() -> MCPServer:
    ucp = UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=StaticResolver(LOAD_PLATFORMS))
    server = negotiate(MCPServer("load"), Policy(ucp=ucp))

    @server.tool()
    async def whoami(tag: str, ctx: Context) -> dict[str, Any]:
        """What this call was negotiated as, with the caller's own tag."""
        record = negotiation_of(ctx)
        await anyio.lowlevel.checkpoint()  # let other requests interleave with this one
        return {
            "tag": tag,
            "era": record.era,
            "protocol_version": record.protocol_version,
            "client_capabilities": record.as_dict()["client_capabilities"],
            "sampling": client_supports(ctx, "sampling"),
            "ucp": record.ucp.as_dict() if record.ucp is not None else None,
        }

    @server.tool()
    @requires("sampling")
    async def summarize(tag: str, ctx: Context) -> str:
        """Only for clients that can sample."""
        return tag

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(tag: str, ctx: Context) -> dict[str, Any]:
        """A UCP operation: refused as a result when checkout did not survive negotiation."""
        return {"tag": tag, "extensions": sorted(negotiation_of(ctx).ucp.capabilities)}

    return server


class Plan:
    """One client: its era, revision, capabilities, platform, and how it names the platform."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.era = "legacy" if index % 2 else "modern"
        self.revision = LEGACY[(index // 2) % 4] if self.era == "legacy" else MODERN
        self.caps: dict[str, Any] = {"experimental": {f"client-{index}": {"n": index}}}
        if index % 3 == 0:
            self.caps["sampling"] = {}
        if index % 5 == 0:
            self.caps["elicitation"] = {}
        self.platform = LOAD_CHOICES[index % len(LOAD_CHOICES)]
        self.by_header = self.platform is not None and index % 4 < 2
        negotiator = Negotiator(Policy())
        record = (
            negotiator.initialize(_init(self.caps, self.revision))
            if self.era == "legacy"
            else negotiator.request(_envelope(self.caps))
        )
        self.agreed = record.protocol_version
        self.sampling = record.supports("sampling")

    def ucp(self) -> dict[str, Any] | str | None:
        """The agreement the core makes with this client's platform, or its discovery error."""
        if self.platform is None:
            return None
        document = LOAD_PLATFORMS.get(self.platform)
        if document is None:
            return PROFILE_UNREACHABLE
        try:
            return negotiate_capabilities(BUSINESS, Profile.from_json(document)).as_dict()
        except UcpError as failure:
            return failure.code

    def arguments(self, tag: str) -> dict[str, Any]:
        if self.platform is None or self.by_header:
            return {"tag": tag}
        return {"tag": tag, "meta": {"ucp-agent": {"profile": self.platform}}}

    def expected(self, tool: str, tag: str) -> tuple[str, Any]:
        """("served", result) or ("refused", reason): what this call must get."""
        ucp = self.ucp()
        if isinstance(ucp, str):
            return "refused", ucp  # discovery fails for every call naming the platform
        if tool == "whoami":
            return "served", {
                "tag": tag,
                "era": self.era,
                "protocol_version": self.agreed,
                "client_capabilities": self.caps,
                "sampling": self.sampling,
                "ucp": ucp,
            }
        if tool == "summarize":
            return ("served", tag) if self.sampling else ("refused", -32021)
        if ucp is None:
            return "refused", INVALID_PROFILE_URL  # a UCP operation with no platform profile
        if CHECKOUT not in ucp["capabilities"]:
            return "refused", CAPABILITIES_INCOMPATIBLE
        agreement = negotiate_capabilities(BUSINESS, Profile.from_json(LOAD_PLATFORMS[str(self.platform)]))
        return "served", {"tag": tag, "extensions": sorted(agreement.for_operation(CHECKOUT).capabilities)}


def _observed(result: dict[str, Any] | None, error: dict[str, Any] | None) -> tuple[str, Any]:
    if error is not None:
        data = error.get("data")
        return "refused", data["code"] if error["code"] == UCP_JSONRPC_ERROR else error["code"]
    assert result is not None
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and structured.get("ucp", {}) and structured.get("messages"):
        return "refused", structured["messages"][0]["code"]  # capabilities_incompatible: a result
    if isinstance(structured, dict) and set(structured) == {"result"}:
        return "served", structured["result"]  # a str return value, wrapped
    return "served", structured


async def _legacy_client(
    plan: Plan, url: str, check: Callable[[Plan, str, str, tuple[str, Any]], None]
) -> None:
    headers = {"UCP-Agent": f'profile="{plan.platform}"'} if plan.by_header else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=HANG) as http,
        streamable_http_client(url, http_client=http) as streams,
        legacy_session(streams, plan.revision, plan.caps) as (session, init),
    ):
        assert init.protocol_version == plan.agreed
        for call in range(CALLS):
            tool, tag = TOOLS[call % 3], f"{plan.index}.{call}"
            try:
                answer = await _raw(session, "tools/call", {"name": tool, "arguments": plan.arguments(tag)})
                observed = _observed(answer, None)
            except MCPError as refused:
                observed = _observed(None, refused.error.model_dump())
            check(plan, tool, tag, observed)


async def _modern_client(
    plan: Plan, url: str, check: Callable[[Plan, str, str, tuple[str, Any]], None]
) -> None:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
    }
    if plan.by_header:
        headers["ucp-agent"] = f'profile="{plan.platform}"'
    async with httpx2.AsyncClient(headers=headers, timeout=HANG) as http:
        for call in range(CALLS):
            tool, tag = TOOLS[call % 3], f"{plan.index}.{call}"
            params = {"name": tool, "arguments": plan.arguments(tag), "_meta": _envelope(plan.caps)}
            body = {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": params}
            response = await http.post(url, json=body, headers={"mcp-name": tool})
            assert response.status_code < 500, response.text
            answer = response.json()
            check(plan, tool, tag, _observed(answer.get("result"), answer.get("error")))


async def test_200_concurrent_clients_see_only_their_own_negotiation() -> None:
    plans = [Plan(i) for i in range(CLIENTS)]
    outcomes: Counter[str] = Counter()
    mismatches: list[str] = []

    def check(plan: Plan, tool: str, tag: str, observed: tuple[str, Any]) -> None:
        expected = plan.expected(tool, tag)
        outcomes[f"{observed[0]} {observed[1] if observed[0] == 'refused' else tool}"] += 1
        if observed != expected:
            mismatches.append(f"client {plan.index} ({plan.era}) {tool}: expected {expected}, got {observed}")

    with serve_http(load_server().streamable_http_app()) as url:
        with anyio.fail_after(HANG * 3):
            async with anyio.create_task_group() as tg:
                for plan in plans:
                    tg.start_soon(
                        _legacy_client if plan.era == "legacy" else _modern_client, plan, url, check
                    )
    assert mismatches == []
    assert sum(outcomes.values()) == CLIENTS * CALLS
    # Every kind of intended refusal happened, and so did every kind of success.
    refusals = {key for key in outcomes if key.startswith("refused")}
    assert refusals == {
        "refused -32021",
        f"refused {INVALID_PROFILE_URL}",
        f"refused {PROFILE_UNREACHABLE}",
        f"refused {VERSION_UNSUPPORTED}",
        f"refused {CAPABILITIES_INCOMPATIBLE}",
    }
    assert {"served whoami", "served summarize", "served create_checkout"} <= set(outcomes)


# -- faults: profile hosts ------------------------------------------------------------------------------


async def test_a_hanging_profile_host_times_out_and_others_are_served(
    tls: Tls, platform: ProfileServer
) -> None:
    gate = platform.gate()  # released only when the profile server closes, after the test
    platform.routes["/hangs.json"] = Route(gate=gate)
    platform.routes["/good.json"] = Route(body=json.dumps(PINNED_DOC).encode())
    shop = _https_shop(tls, connect_timeout=1.0, read_timeout=1.0, total_timeout=1.0)
    hung: list[dict[str, Any]] = []
    with anyio.fail_after(HANG), serve_http(shop.streamable_http_app()) as url:

        async def hanging_client() -> None:
            async with Client(url, mode=MODERN) as client:
                hung.append(
                    await _discovery_failure(
                        client.call_tool("negotiated", _meta_args(platform.url("/hangs.json")))
                    )
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(hanging_client)
            await platform.arrived.wait()  # the fetch reached the host, which will never answer
            async with Client(url, mode=MODERN) as other:
                for _ in range(3):
                    served = await other.call_tool("negotiated", _meta_args(platform.url("/good.json")))
                    assert served.structured_content is not None
                    assert served.structured_content["ucp"]["capabilities"] == {CHECKOUT: V}
        assert not gate.is_set()  # the resolver's timeout ended the hung call, not the host
        assert hung[0]["code"] == PROFILE_UNREACHABLE
        assert "took longer than" in hung[0]["content"]
        async with Client(url, mode=MODERN) as client:
            assert (
                await client.call_tool("negotiated", _meta_args(platform.url("/good.json")))
            ).structured_content


@contextmanager
def rich_tracebacks_on_the_root_logger() -> Iterator[None]:
    """The handler `MCPServer` installs when Rich is importable: formatting one traceback
    with it takes the server's event loop a second or two."""
    from rich.console import Console
    from rich.logging import RichHandler

    root = logging.getLogger()
    handler = RichHandler(console=Console(file=io.StringIO(), width=120), rich_tracebacks=True)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


STALL_RATIO = 200
"""How much slower than its own worst before the burst a plain call may get during it: a
burst of 20 failing fetches (and their 20 log lines) costs the server some work, 4 to 21
times a plain call's worst in five runs here; a traceback formatted per failure, 2,400."""


async def test_failing_profile_urls_do_not_stall_other_clients_through_the_log(tls: Tls) -> None:
    """20 calls naming distinct failing profile URLs, while another client makes plain
    calls: each failure is logged (with Rich's traceback handler installed), and the other
    client's worst latency stays within a small multiple of its own worst just before."""
    shop = _https_shop(tls)
    heartbeat: list[float] = []
    with (
        anyio.fail_after(HANG * 3),
        rich_tracebacks_on_the_root_logger(),
        socket.socket() as closed,  # bound, never listening: every connection is refused
        serve_http(shop.streamable_http_app()) as url,
    ):
        closed.bind(("127.0.0.1", 0))
        failing = [f"https://127.0.0.1:{closed.getsockname()[1]}/p.json?i={i}" for i in range(20)]
        async with Client(url, mode=MODERN) as plain, Client(url, mode=MODERN) as attacker:

            async def beat() -> None:
                started = time.perf_counter()
                served = await plain.call_tool("negotiated", {})
                heartbeat.append(time.perf_counter() - started)
                assert served.structured_content == {"ucp": None}

            for _ in range(30):
                await beat()
            baseline = max(heartbeat[10:])  # (the first calls warm the server up)
            heartbeat.clear()
            refused: list[str] = []

            async def fail(profile: str) -> None:
                data = await _discovery_failure(attacker.call_tool("negotiated", _meta_args(profile)))
                refused.append(data["code"])

            async with anyio.create_task_group() as tg:
                for profile in failing:
                    tg.start_soon(fail, profile)
                while len(refused) < len(failing) or len(heartbeat) < 3:
                    await beat()
    assert refused == [PROFILE_UNREACHABLE] * len(failing)
    # Measured: a worst of 8 to 12 ms before, 50 to 250 ms during; with tracebacks logged, 28 s.
    assert max(heartbeat) <= STALL_RATIO * baseline, (baseline, heartbeat)


@asynccontextmanager
async def resetting_host(tls: Tls, when: str) -> AsyncIterator[int]:
    """A host on 127.0.0.1 that resets every connection: at accept (before TLS), after
    reading the request, or in the middle of the body."""

    async def reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if when != "accept":
                await reader.readuntil(b"\r\n\r\n")
                if when == "body":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b'{"ucp": {')
                    await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        await reset(writer)

    context = None if when == "accept" else tls.server
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("when", ["accept", "request", "body"])
async def test_a_resetting_profile_host_is_unreachable_and_others_are_served(
    tls: Tls, platform: ProfileServer, when: str
) -> None:
    platform.routes["/good.json"] = Route(body=json.dumps(PINNED_DOC).encode())
    with anyio.fail_after(HANG):
        async with resetting_host(tls, when) as port, Client(_https_shop(tls), mode=MODERN) as client:
            data = await _discovery_failure(
                client.call_tool("negotiated", _meta_args(f"https://127.0.0.1:{port}/p.json"))
            )
            assert data["code"] == PROFILE_UNREACHABLE
            served = await client.call_tool("negotiated", _meta_args(platform.url("/good.json")))
            assert served.structured_content is not None
            assert served.structured_content["ucp"]["capabilities"] == {CHECKOUT: V}


@pytest.mark.parametrize("declare_length", [True, False])
async def test_a_10_mib_profile_is_malformed_and_others_are_served(
    tls: Tls, platform: ProfileServer, declare_length: bool
) -> None:
    platform.routes["/huge.json"] = Route(body=b" " * (10 * 1024 * 1024), declare_length=declare_length)
    platform.routes["/good.json"] = Route(body=json.dumps(PINNED_DOC).encode())
    with anyio.fail_after(HANG):
        async with Client(_https_shop(tls), mode=MODERN) as client:
            data = await _discovery_failure(
                client.call_tool("negotiated", _meta_args(platform.url("/huge.json")))
            )
            assert data == {
                "code": PROFILE_MALFORMED,
                "content": f"the profile is larger than {DEFAULT_MAX_BODY_BYTES} bytes",
            }
            served = await client.call_tool("negotiated", _meta_args(platform.url("/good.json")))
            assert served.structured_content is not None


# -- faults: resolvers that raise -------------------------------------------------------------------------


class Faulty:
    """A resolver with a bug: raises (or returns nonsense) for one URL, serves another."""

    def __init__(self, failure: BaseException | object) -> None:
        self.failure = failure
        self.good = StaticResolver({PLATFORM_A: PINNED_DOC})

    async def resolve(self, url: str) -> Profile:
        if url == PLATFORM_A:
            return await self.good.resolve(url)
        if isinstance(self.failure, BaseException):
            raise self.failure
        return self.failure  # type: ignore[return-value]


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("secret internal detail"),
        KeyError("secret"),
        OSError(104, "Connection reset by peer"),
        TimeoutError(),
        ValueError("secret"),
        {"ucp": "not a Profile"},
        None,
    ],
    ids=["runtime", "key", "os", "timeout", "value", "returns-dict", "returns-none"],
)
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_resolver_that_raises_becomes_profile_unreachable(
    caplog: pytest.LogCaptureFixture, failure: BaseException | object, mode: str
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_negotiation")
    with anyio.fail_after(HANG):
        async with Client(build_shop(Faulty(failure)), mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("negotiated", _meta_args("https://platform-z.example/p.json"))
            assert refused.value.error.code == UCP_JSONRPC_ERROR
            assert refused.value.error.data == {
                "code": PROFILE_UNREACHABLE,
                "content": "the platform profile could not be resolved",
            }
            assert "secret" not in json.dumps(refused.value.error.model_dump())
            served = await client.call_tool("negotiated", _meta_args(PLATFORM_A))
            assert served.structured_content is not None
            assert served.structured_content["ucp"]["capabilities"] == {CHECKOUT: V}
    assert any("resolver failed unexpectedly" in record.getMessage() for record in caplog.records)


# -- faults: clients that vanish in the middle of initialize -----------------------------------------------


class Gate:
    """A middleware placed right after ours: holds `initialize` until the test releases it.

    Thread events, because uvicorn serves from its own thread and event loop; every wait
    is abandoned on cancellation, so the hang detector can always fire.
    """

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.outcomes: list[str] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method != "initialize" or self.release.is_set():
            return await call_next(ctx)
        try:
            self.arrived.set()
            await anyio.to_thread.run_sync(self.release.wait, abandon_on_cancel=True)
            result = await call_next(ctx)
            self.outcomes.append("answered")
            return result
        except BaseException as exc:
            self.outcomes.append(type(exc).__name__)
            raise
        finally:
            self.finished.set()


async def _wait(event: threading.Event) -> None:
    await anyio.to_thread.run_sync(event.wait, abandon_on_cancel=True)


def _gated(server: MCPServer) -> Gate:
    gate = Gate()
    chain = server._lowlevel_server.middleware
    position = next(i for i, m in enumerate(chain) if isinstance(m, NegotiationMiddleware))
    chain.insert(position + 1, gate)
    return gate


INITIALIZE = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _init({"sampling": {}})}
).encode()


async def _served_legacy(target: Any, kind: str) -> None:
    async with (
        open_streams(kind, target) as streams,
        legacy_session(streams, "2025-06-18", {"roots": {}}) as (
            session,
            _,
        ),
    ):
        result = await session.call_tool("negotiation", {})
        assert result.structured_content is not None
        assert result.structured_content["client_capabilities"] == {"roots": {}}


async def test_http_client_vanishing_mid_initialize(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_negotiation")
    server = build_demo()
    gate = _gated(server)
    with anyio.fail_after(HANG), serve_http(server.streamable_http_app()) as url:
        port = int(url.split(":")[2].split("/")[0])
        stream = await anyio.connect_tcp("127.0.0.1", port)
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n".encode()
            + b"accept: application/json, text/event-stream\r\n"
            + f"content-length: {len(INITIALIZE)}\r\n\r\n".encode()
            + INITIALIZE
        )
        await stream.send(request)
        await _wait(gate.arrived)  # our middleware has negotiated it
        await stream.aclose()  # ... and the client is gone
        gate.release.set()
        await _wait(gate.finished)
        assert len(gate.outcomes) == 1  # the held initialize ended, one way or the other
        await _served_legacy(url, "http")
        # A client that sends half a request and hangs up is no different.
        stream = await anyio.connect_tcp("127.0.0.1", port)
        await stream.send(request[: len(request) - len(INITIALIZE) // 2])
        await stream.aclose()
        await _served_legacy(url, "http")
    assert [
        r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("mcp_negotiation")
    ] == []


async def test_memory_client_vanishing_mid_initialize() -> None:
    server = build_demo()
    gate = _gated(server)
    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:

            async def vanishing_client() -> None:
                async with open_streams("memory", server) as streams, ClientSession(*streams[:2]) as session:
                    await _raw(session, "initialize", _init({"sampling": {}}))

            tg.start_soon(vanishing_client)
            await _wait(gate.arrived)
            tg.cancel_scope.cancel()  # the client task and its connection are torn down
        await _wait(gate.finished)
        assert gate.outcomes == ["CancelledError"]  # the held initialize was abandoned with it
        gate.release.set()
        await _served_legacy(server, "memory")


STDIO_SERVERS = {
    "wrapped": ["-m", "mcp_negotiation.tools.demo"],
    "unwrapped": ["-c", "from mcp.server.mcpserver import MCPServer; MCPServer('plain').run('stdio')"],
}


async def _stdio_vanish(args: list[str], how: str) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    line = INITIALIZE + b"\n"
    process.stdin.write(line if how == "after-request" else line[: len(line) // 2])
    await process.stdin.drain()
    process.stdin.close()
    if how == "after-request":
        process._transport.get_pipe_transport(1).close()  # type: ignore[attr-defined]  # stop reading
    try:
        return await process.wait()
    finally:
        if process.returncode is None:
            process.kill()


@pytest.mark.parametrize("how", ["mid-request", "after-request"])
async def test_stdio_client_vanishing_mid_initialize(how: str) -> None:
    # The server process ends on its own (no hang), exactly as the same server without the
    # library does: a half-written request is EOF (exit 0); an answer written into a closed
    # pipe is the SDK's BrokenPipeError (exit 1) either way.
    with anyio.fail_after(HANG):
        codes = {name: await _stdio_vanish(args, how) for name, args in STDIO_SERVERS.items()}
    assert codes["wrapped"] == codes["unwrapped"]
    assert codes["wrapped"] == (0 if how == "mid-request" else 1)
