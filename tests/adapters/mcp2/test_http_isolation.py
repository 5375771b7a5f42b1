"""Streamable HTTP specifics: headers on the record, malformed envelopes, 50 concurrent clients."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy
from mcp_negotiation.tools.demo import build
from mcp_negotiation.ucp import INVALID_PROFILE_URL, UCP_JSONRPC_ERROR, StaticResolver
from support.decisions import decisions
from support.harness import legacy_session, open_streams, serve_http, structured
from ucp_shop import CHECKOUT
from ucp_shop import build as build_shop

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]
UCP_V = "2026-04-08"

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "negotiation",
}


def _call(meta: Any, request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}, "_meta": meta},
    }


async def _post(url: str, body: dict[str, Any], **extra: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers={**HEADERS, **extra})


@pytest.mark.parametrize(
    ("meta", "code"),
    [
        ({**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": "nope"}, -32602),
        (
            {
                **ENVELOPE,
                "io.modelcontextprotocol/clientCapabilities": {
                    "a": {
                        "b": {
                            "c": {
                                "d": {"e": {"f": {"g": {"h": {"i": {"j": {"k": {"l": {"m": {"n": {}}}}}}}}}}}
                            }
                        }
                    }
                },
            },
            -32602,
        ),
        (
            {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {f"k{i}": {} for i in range(3000)}},
            -32602,
        ),
    ],
    ids=["not-an-object", "too-deep", "too-wide"],
)
async def test_malformed_envelope_is_refused_and_the_next_request_served(meta: Any, code: int) -> None:
    with serve_http(build().streamable_http_app()) as url:
        refused = await _post(url, _call(meta))
        assert refused.json()["error"]["code"] == code
        served = await _post(url, _call(ENVELOPE, 2))
        assert served.status_code == 200
        assert served.json()["result"]["structuredContent"]["era"] == "modern"


async def test_policy_refusal_over_http_is_400_with_spec_data() -> None:
    with serve_http(build(Policy(max_revision="2025-11-25")).streamable_http_app()) as url:
        refused = await _post(url, _call(ENVELOPE))
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "requested": "2026-07-28",
    }


async def test_only_negotiation_headers_reach_the_record() -> None:
    with serve_http(build().streamable_http_app()) as url:
        response = await _post(
            url,
            _call(ENVELOPE),
            **{
                "ucp-agent": 'profile="https://agent.example/p.json"',
                "authorization": "Bearer s3cret",
                "cookie": "session=1",
            },
        )
    headers = response.json()["result"]["structuredContent"]["headers"]
    assert headers == {
        "mcp-protocol-version": "2026-07-28",
        "ucp-agent": 'profile="https://agent.example/p.json"',
    }


async def _sample(ctx: Any, params: Any) -> Any:
    raise AssertionError("not called")


async def test_fifty_concurrent_clients_each_see_their_own_negotiation() -> None:
    rng = random.Random(7)
    plans = [
        (
            rng.choice(["legacy", "modern"]),
            rng.choice(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]),
            {"experimental": {f"client-{i}": {}}, **({"sampling": {}} if rng.random() < 0.5 else {})},
        )
        for i in range(50)
    ]
    failures: list[str] = []
    with serve_http(build().streamable_http_app()) as url:

        async def one(index: int) -> None:
            era, revision, caps = plans[index]
            for _ in range(3):
                if era == "legacy":
                    async with (
                        open_streams("http", url) as streams,
                        legacy_session(streams, revision, caps) as (
                            session,
                            _,
                        ),
                    ):
                        seen = structured(await session.call_tool("negotiation", {}))
                    expected = (revision, caps)
                else:
                    kwargs = {"sampling_callback": _sample} if "sampling" in caps else {}
                    async with Client(url, mode="2026-07-28", **kwargs) as client:
                        seen = structured(await client.call_tool("negotiation", {}))
                    expected = ("2026-07-28", {"sampling": {}} if "sampling" in caps else {})
                got = (seen["protocol_version"], seen["client_capabilities"])
                if got != expected:
                    failures.append(f"client {index}: expected {expected}, saw {got}")

        async with anyio.create_task_group() as tg:
            for index in range(50):
                tg.start_soon(one, index)
    assert failures == []


@pytest.mark.parametrize(
    ("header", "served"),
    [
        ({"mcp-protocol-version": "2025-11-25"}, True),
        ({"mcp-protocol-version": "2025-03-26"}, False),
        ({}, False),
    ],
    ids=["accepted", "below-the-policy", "no-header-means-2025-03-26"],
)
async def test_legacy_stateless_requests_are_served_only_at_accepted_revisions(
    header: dict[str, str], served: bool
) -> None:
    """No session to counter-offer in: the SDK would serve the request at the revision the
    client named (or the specification's 2025-03-26 default), so that is what is judged."""
    app = build(Policy(min_revision="2025-06-18")).streamable_http_app(
        stateless_http=True, json_response=True
    )
    legacy = {"accept": "application/json, text/event-stream", "content-type": "application/json", **header}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}},
    }
    with serve_http(app) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = (await http.post(url, json=body, headers=legacy)).json()
            again = await http.post(url, json=body, headers={**legacy, "mcp-protocol-version": "2025-11-25"})
    if served:
        record = answer["result"]["structuredContent"]
        assert (record["protocol_version"], record["outcome"]) == ("2025-11-25", "accepted")
    else:
        assert answer["error"]["code"] == -32022
        assert answer["error"]["data"] == {
            "supported": ["2025-11-25", "2025-06-18"],  # a legacy client: the legacy ones it could use
            "requested": header.get("mcp-protocol-version", "2025-03-26"),
        }
    assert again.json()["result"]["structuredContent"]["protocol_version"] == "2025-11-25"


async def test_a_stateless_ping_is_answered_at_any_revision() -> None:
    app = build(Policy(min_revision="2025-06-18")).streamable_http_app(
        stateless_http=True, json_response=True
    )
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with serve_http(app) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = (
                await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
            ).json()
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_sessions_requests_over_http_are_served_from_its_handshake_without_a_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After its handshake, a legacy session's requests over HTTP publish the record it holds,
    as off HTTP: nothing is decided again, and each session still sees its own record."""
    decided = decisions(monkeypatch)
    with serve_http(build().streamable_http_app()) as url:
        async with (
            open_streams("http", url) as sampling_streams,
            legacy_session(sampling_streams, "2025-11-25", {"sampling": {}}) as (sampling, _),
            open_streams("http", url) as plain_streams,
            legacy_session(plain_streams, "2025-06-18") as (plain, _),
        ):
            for _ in range(3):
                mine = structured(await sampling.call_tool("negotiation", {}))
                theirs = structured(await plain.call_tool("negotiation", {}))
                assert (mine["protocol_version"], mine["supports"]["sampling"]) == ("2025-11-25", True)
                assert (theirs["protocol_version"], theirs["supports"]["sampling"]) == ("2025-06-18", False)
                assert mine["session_id"]
                assert mine["session_id"] != theirs["session_id"]
            with pytest.raises(MCPError) as refused:  # the held record still refuses what it lacks
                await plain.call_tool("summarize", {"text": "needs sampling"})
            assert refused.value.error.code == -32021
    assert decided.count("initialize") == 2
    # The one `tools/call` there is the refusal of `summarize`, which the engine makes from the
    # held record before the SDK reads its arguments: no negotiation again.
    assert decided.count("tools/call") == 1, decided


PLATFORM = "https://platform.example/profile.json"
OTHER_PLATFORM = "https://other.example/profile.json"
SHOP_PLATFORMS = {
    url: {"ucp": {"version": UCP_V, "capabilities": {CHECKOUT: [{"version": UCP_V}]}}}
    for url in (PLATFORM, OTHER_PLATFORM)
}
CHECKOUT_ARGUMENTS = {"items": ["tea"], "meta": {"ucp-agent": {"profile": PLATFORM}}}
SHOP_HEADERS = {"mcp-name": "create_checkout"}


@asynccontextmanager
async def _shop_session(
    url: str, agent: str | None
) -> AsyncIterator[tuple[ClientSession, httpx2.AsyncClient]]:
    """A legacy session over HTTP whose requests carry `UCP-Agent: agent` (if any), and the
    HTTP client sending them (whose `headers` a test may change between calls)."""
    headers = {"UCP-Agent": agent} if agent is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as streams,
        legacy_session(streams, "2025-11-25") as (session, _),
    ):
        yield session, http


async def test_a_sessions_ucp_calls_over_http_are_served_without_a_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A legacy session's UCP calls over HTTP are served as off HTTP: from the record its
    handshake left, scoped to the agreement memoised per (record, profile URL, `UCP-Agent`
    header), with no decision, with or without a header naming the arguments' profile."""
    decided = decisions(monkeypatch)
    with serve_http(build_shop(StaticResolver(SHOP_PLATFORMS)).streamable_http_app()) as url:
        for agent in (None, f'profile="{PLATFORM}"'):
            async with _shop_session(url, agent) as (session, _):
                for _ in range(3):
                    served = await session.call_tool("create_checkout", CHECKOUT_ARGUMENTS)
                    assert served.structured_content is not None
                    assert served.structured_content["ucp"]["capabilities"] == {
                        CHECKOUT: [{"version": UCP_V}]
                    }
    assert decided == ["initialize", "initialize"]


@pytest.mark.parametrize(
    ("agent", "reason"),
    [
        (f'profile="{OTHER_PLATFORM}"', "the UCP-Agent header and arguments.meta name different profiles"),
        (f"profile={PLATFORM}", "the UCP-Agent profile must be a quoted string"),
        (f'profile="{PLATFORM}', "the UCP-Agent header is not an RFC 8941 dictionary"),
        (
            f'profile="{PLATFORM}", profile="{PLATFORM}"',
            "the UCP-Agent header has a duplicate profile member",
        ),
    ],
)
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_ucp_agent_header_at_odds_with_the_arguments_is_refused_every_time(
    monkeypatch: pytest.MonkeyPatch, era: str, agent: str, reason: str
) -> None:
    """Whatever was memoised for the same record and profile (a legacy session's record is
    one for all its calls): a call whose header names another profile, or does not parse, is
    decided in full and refused, on every call."""
    decided = decisions(monkeypatch, refusals=True)
    with serve_http(build_shop(StaticResolver(SHOP_PLATFORMS)).streamable_http_app()) as url:
        if era == "legacy":  # one session, its header changed between calls
            async with _shop_session(url, None) as (session, http):
                for sent in (None, f'profile="{PLATFORM}"', agent) * 2:
                    http.headers.pop("UCP-Agent", None)
                    if sent is not None:
                        http.headers["UCP-Agent"] = sent
                    call = session.call_tool("create_checkout", CHECKOUT_ARGUMENTS)
                    if sent == agent:
                        assert await _invalid_profile_url(call) == reason
                    else:
                        assert (await call).structured_content is not None
        else:
            for i in range(4):
                sent = {"ucp-agent": agent} if i % 2 else {}
                response = await _post(url, _shop_call(i), **SHOP_HEADERS, **sent)
                if sent:
                    assert response.json()["error"]["code"] == UCP_JSONRPC_ERROR, response.json()
                    data = response.json()["error"]["data"]
                    assert (data["code"], data["content"]) == (INVALID_PROFILE_URL, reason)
                else:
                    assert response.json()["result"]["structuredContent"]["ucp"]["capabilities"]
    assert decided == ["tools/call", "tools/call"]


async def test_a_modern_ucp_call_over_http_with_its_header_is_decided_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """UCP's MCP transport sends the `UCP-Agent` header beside the arguments naming the
    profile: the same call, repeated, is decided once and then served from the memos."""
    decided = decisions(monkeypatch)
    agent = {"ucp-agent": f'profile="{PLATFORM}"'}
    with serve_http(build_shop(StaticResolver(SHOP_PLATFORMS)).streamable_http_app()) as url:
        answers = [(await _post(url, _shop_call(i), **SHOP_HEADERS, **agent)).json() for i in range(4)]
    for answer in answers:
        assert answer["result"]["structuredContent"]["ucp"]["capabilities"] == {
            CHECKOUT: [{"version": UCP_V}]
        }
    assert len(decided) == 1, decided  # (on mcp 2.0-2.2 the SDK's own listing before the call)


def _shop_call(request_id: int) -> dict[str, Any]:
    params = {"name": "create_checkout", "arguments": CHECKOUT_ARGUMENTS, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _invalid_profile_url(call: Awaitable[Any]) -> str:
    """The reason UCP's `invalid_profile_url` refusal of `call` gives."""
    with pytest.raises(MCPError) as refused:
        await call
    assert refused.value.error.code == UCP_JSONRPC_ERROR
    assert refused.value.error.data["code"] == INVALID_PROFILE_URL
    reason: str = refused.value.error.data["content"]
    return reason


async def test_a_modern_envelope_repeated_over_http_is_decided_once_per_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over HTTP the memo of request shapes holds the negotiation headers a record keeps: the
    same envelope is decided once per headers (a record keeps a `UCP-Agent` header), and the
    next plain request finds the plain record again."""
    decided = decisions(monkeypatch)
    agent = {"ucp-agent": 'profile="https://agent.example/p.json"'}
    plain_headers = {"mcp-protocol-version": "2026-07-28"}
    with serve_http(build().streamable_http_app()) as url:
        seen = [await _post(url, _call(ENVELOPE, i)) for i in range(3)]
        with_agent = [await _post(url, _call(ENVELOPE, 3 + i), **agent) for i in range(2)]
        again = await _post(url, _call(ENVELOPE, 5))
    for response in [*seen, again]:
        assert response.json()["result"]["structuredContent"]["headers"] == plain_headers
        assert response.json()["result"]["structuredContent"]["supports"]["sampling"] is True
    for response in with_agent:
        assert response.json()["result"]["structuredContent"]["headers"] == {**plain_headers, **agent}
    assert decided.count("tools/call") == 2, decided  # the plain shape once, the UCP-Agent one once


async def test_a_refused_envelope_over_http_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what was served is memoised: a refusal over HTTP is decided, and answered, again."""
    decided = decisions(monkeypatch)
    with serve_http(build(Policy(max_revision="2025-11-25")).streamable_http_app()) as url:
        refused = [await _post(url, _call(ENVELOPE, i)) for i in range(3)]
    assert [response.status_code for response in refused] == [400, 400, 400]
    assert [response.json()["error"]["code"] for response in refused] == [-32022] * 3
    assert decided.count("tools/call") == 3
