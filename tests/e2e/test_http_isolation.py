"""Streamable HTTP specifics: headers on the record, malformed envelopes, 50 concurrent clients."""

from __future__ import annotations

import random
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from mcp_negotiation import Policy
from mcp_negotiation.demo import build
from support.harness import legacy_session, open_streams, serve_http, structured

pytestmark = pytest.mark.anyio

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
