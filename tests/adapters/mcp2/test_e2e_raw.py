"""Raw modern requests a real client would never send, over every non-HTTP path.

(HTTP is covered in test_http_isolation.py.) Each malformed or wrong-era request gets a
JSON-RPC error, and the next well-formed request on the same connection is served.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_negotiation import Policy
from mcp_negotiation.tools.demo import build
from support.harness import RawRequest, Send, demo_params, direct_connection, open_streams

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

GOOD = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
}


class AnyResult(BaseModel):
    """Whatever the server answered, kept whole."""

    model_config = ConfigDict(extra="allow")


@asynccontextmanager
async def connection(kind: str) -> AsyncIterator[Send]:
    """A way to send raw requests to the demo server over `kind`."""
    if kind == "direct":
        async with direct_connection(build()) as send_direct:
            yield send_direct
        return
    target = build() if kind == "memory" else demo_params()
    async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            result = await session.send_request(RawRequest(method=method, params=params), AnyResult)
            return result.model_dump(by_alias=True)

        yield send


def _call(meta: Any) -> dict[str, Any]:
    return {"name": "negotiation", "arguments": {}, "_meta": meta}


@pytest.mark.parametrize("kind", ["direct", "memory", "stdio"])
@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("tools/call", _call({**GOOD, "io.modelcontextprotocol/clientCapabilities": "nope"}), -32602),
        ("tools/call", _call({**GOOD, "io.modelcontextprotocol/protocolVersion": "zzz"}), -32022),
        ("tools/call", _call({**GOOD, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}), -32022),
        (
            "tools/call",
            _call({**GOOD, "io.modelcontextprotocol/clientInfo": ["not", "an", "object"]}),
            -32602,
        ),
        ("resources/subscribe", {"uri": "file:///x", "_meta": GOOD}, -32601),
        (
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
            # The SDK's own answers: its in-process dispatcher knows no such method; its stream
            # runner refuses a handshake on a connection already serving the modern era.
            {"direct": -32601, "memory": -32022, "stdio": -32022},
        ),
    ],
    ids=[
        "capabilities-not-object",
        "unknown-revision",
        "handshake-revision-in-an-envelope",
        "client-info-not-object",
        "legacy-only-method",
        "initialize-without-an-envelope",
    ],
)
async def test_bad_modern_request_is_refused_then_the_next_served(
    kind: str, method: str, params: dict[str, Any], code: int | dict[str, int]
) -> None:
    async with connection(kind) as send:
        # Open the connection in the modern era with a good request first.
        assert (await send("tools/call", _call(GOOD)))["structuredContent"]["era"] == "modern"
        with pytest.raises(MCPError) as refused:
            await send(method, params)
        assert refused.value.error.code == (code[kind] if isinstance(code, dict) else code)
        served = await send("tools/call", _call(GOOD))
        assert served["structuredContent"]["client_capabilities"] == {"sampling": {}}


@pytest.mark.filterwarnings("ignore:ping is removed as of 2026-07-28")  # the SDK's, for any mode
@pytest.mark.parametrize("kind", ["memory", "stdio"])
@pytest.mark.parametrize(
    ("options", "revision", "code"),
    [
        ({}, "9" * 65, -32602),  # malformed: nothing can be agreed
        ({"require": "elicitation"}, "2025-11-25", -32021),  # the policy's required capability
        ({"min-revision": "2026-07-28"}, "2025-11-25", -32022),  # no handshake revision accepted
    ],
    ids=["malformed", "missing-required", "modern-only"],
)
async def test_a_client_that_goes_on_after_a_refused_initialize_is_refused_again(
    kind: str, options: dict[str, str], revision: str, code: int
) -> None:
    """The SDK lets a client send `initialized` and its requests after a refused `initialize`:
    each is refused as the handshake was (served, it would escape the policy); a `ping` is
    answered, and a handshake the policy accepts opens the connection as usual."""
    import mcp_types as types

    from support.harness import initialize_params

    policy = Policy(
        required_capabilities=tuple(v for k, v in options.items() if k == "require"),
        min_revision=options.get("min-revision"),
    )
    arguments = [part for name, value in options.items() for part in (f"--{name}", value)]
    target = build(policy) if kind == "memory" else demo_params(*arguments)
    call = RawRequest(method="tools/call", params={"name": "negotiation", "arguments": {}})
    async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:
        with pytest.raises(MCPError) as refused:
            await session.send_request(
                RawRequest(method="initialize", params=initialize_params(revision, {"sampling": {}})),
                AnyResult,
            )
        assert refused.value.error.code == code
        await session.send_notification(types.InitializedNotification())
        for _ in range(2):
            with pytest.raises(MCPError) as again:
                await session.send_request(call, AnyResult)
            assert again.value.error.code == code
        await session.send_ping()
        if code == -32022:
            return  # no handshake can succeed under this policy
        accepted = initialize_params("2025-11-25", {"sampling": {}, "elicitation": {}})
        await session.send_request(RawRequest(method="initialize", params=accepted), AnyResult)
        served = await session.send_request(call, AnyResult)
    record = served.model_dump(by_alias=True)["structuredContent"]
    assert record["capabilities_known"] is True
    assert record["supports"]["sampling"] is True


@pytest.mark.parametrize("kind", ["memory", "stdio", "http"])
@pytest.mark.parametrize(
    ("revision", "capabilities", "code"),
    [("9" * 65, {"sampling": {}}, -32602), ("2025-06-18", {}, -32021)],
    ids=["malformed", "missing-required"],
)
async def test_a_refused_initialize_after_an_accepted_one_answers_only_itself(
    kind: str, revision: str, capabilities: dict[str, Any], code: int
) -> None:
    """The handshake agreed stays in force: the SDK keeps serving a connection whose client
    sends `initialize` again, and a refusal of that one must not turn every later request
    of the connection into a refusal."""
    from support.harness import initialize_params, serve_http

    call = RawRequest(method="tools/call", params={"name": "negotiation", "arguments": {}})
    policy = Policy(required_capabilities=("sampling",))
    with contextlib.ExitStack() as stack:
        if kind == "http":
            target: Any = stack.enter_context(serve_http(build(policy).streamable_http_app()))
        else:
            target = build(policy) if kind == "memory" else demo_params("--require", "sampling")
        async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:
            accepted = initialize_params("2025-11-25", {"sampling": {}, "elicitation": {}})
            await session.send_request(RawRequest(method="initialize", params=accepted), AnyResult)
            with pytest.raises(MCPError) as refused:
                await session.send_request(
                    RawRequest(method="initialize", params=initialize_params(revision, capabilities)),
                    AnyResult,
                )
            assert refused.value.error.code == code
            served = [await session.send_request(call, AnyResult) for _ in range(2)]
    for answer in served:
        record = answer.model_dump(by_alias=True)["structuredContent"]
        assert (record["protocol_version"], record["capabilities_known"]) == ("2025-11-25", True)
        assert record["supports"]["elicitation"] is True


@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_a_ping_before_initialize_is_answered_whatever_the_policy(kind: str) -> None:
    """The specification and the SDK's own gate let `ping` through before the handshake."""
    import mcp_types as types

    policy = Policy(max_revision="2025-06-18")
    target = build(policy) if kind == "memory" else demo_params("--max-revision", "2025-06-18")
    async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:
        answer = await session.send_request(RawRequest(method="ping", params={}), types.EmptyResult)
    assert isinstance(answer, types.EmptyResult)
