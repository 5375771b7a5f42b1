"""End to end against the real SDK: every transport, every revision, both eras.

A tool of the example server returns what `negotiation_of` and `client_supports` saw;
each test compares it with what the client declared and the revision it negotiated.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy
from mcp_negotiation.adapters.mcp2 import seams
from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import RawRequest, demo_params, legacy_session, open_streams, serve_http, structured

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

LEGACY = revisions.LEGACY
KINDS = ("memory", "stdio", "http", "http-stateless")
CAPS = {
    "sampling": {},
    "roots": {"listChanged": True},
    "elicitation": {},
    "x-vendor": {"deep": {"k": [1, 2]}},
}


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[Policy | None], Any]]]:
    """(transport kind, a factory giving the connection target for a server policy)."""
    kind: str = request.param
    stack: list[Any] = []

    def target(policy: Policy | None = None) -> Any:
        if kind == "memory":
            return build(policy)
        if kind == "stdio":
            args = []
            if policy and policy.min_revision:
                args += ["--min-revision", policy.min_revision]
            if policy and policy.max_revision:
                args += ["--max-revision", policy.max_revision]
            return demo_params(*args)
        app = build(policy).streamable_http_app(stateless_http=kind == "http-stateless")
        cm = serve_http(app)
        stack.append(cm)
        return cm.__enter__()

    yield kind, target
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def _stream_kind(kind: str) -> str:
    return "http" if kind.startswith("http") else kind


def _label(kind: str) -> str:
    return "http" if kind.startswith("http") else kind


@asynccontextmanager
async def legacy(kind: str, target: Any, revision: str, caps: dict[str, Any]) -> AsyncIterator[Any]:
    async with (
        open_streams(_stream_kind(kind), target) as streams,
        legacy_session(streams, revision, caps) as (session, result),
    ):
        yield session, result


def modern(kind: str, target: Any, **kwargs: Any) -> AbstractAsyncContextManager[Client]:
    if kind == "memory-jsonrpc":
        from mcp.client._memory import InMemoryTransport

        target = InMemoryTransport(target)
    return Client(target, mode="2026-07-28", **kwargs)


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
    )


@pytest.mark.parametrize("revision", LEGACY)
async def test_legacy_record_matches_what_the_client_declared(endpoint: Any, revision: str) -> None:
    kind, make = endpoint
    async with legacy(kind, make(None), revision, CAPS) as (session, init):
        assert init.protocol_version == revision
        seen = structured(await session.call_tool("negotiation", {}))
    assert seen["era"] == "legacy"
    assert seen["protocol_version"] == revision
    assert seen["transport"] == _label(kind)
    if kind == "http-stateless":
        # Nothing survives between POSTs: unknown, not absent, so nothing is claimed.
        assert seen["capabilities_known"] is False
        assert not any(seen["supports"].values())
        return
    assert seen["requested_version"] == revision
    assert seen["client_capabilities"] == CAPS
    supports = seen["supports"]
    assert supports["sampling"] is True
    assert supports["roots.listChanged"] is True
    assert supports["elicitation"] is revisions.is_at_least(revision, "2025-06-18")
    assert supports["elicitation.form"] is revisions.is_at_least(revision, "2025-06-18")
    assert supports["elicitation.url"] is False
    assert supports["structured_output"] is revisions.is_at_least(revision, "2025-06-18")


@pytest.mark.parametrize("declare_sampling", [True, False])
async def test_modern_record_matches_what_the_client_declared(endpoint: Any, declare_sampling: bool) -> None:
    kind, make = endpoint
    kwargs = {"sampling_callback": _sample} if declare_sampling else {}
    async with modern(kind, make(None), **kwargs) as client:
        seen = structured(await client.call_tool("negotiation", {}))
    assert seen["era"] == "modern"
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["transport"] == _label(kind)
    assert seen["capabilities_known"] is True
    assert ("sampling" in seen["client_capabilities"]) is declare_sampling
    assert seen["supports"]["sampling"] is declare_sampling
    assert seen["supports"]["roots.listChanged"] is False


async def test_counter_offer_is_what_the_sdk_answers_and_records(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(Policy(min_revision="2025-06-18"))
    async with legacy(kind, target, "2025-03-26", CAPS) as (session, init):
        assert init.protocol_version == "2025-11-25"
        seen = structured(await session.call_tool("negotiation", {}))
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["sdk_protocol_version"] == "2025-11-25"
    if kind != "http-stateless":
        assert seen["requested_version"] == "2025-03-26"
        assert seen["outcome"] == "counter_offered"


async def test_unknown_revision_is_counter_offered(endpoint: Any) -> None:
    kind, make = endpoint
    async with legacy(kind, make(None), "zzz", {}) as (session, init):
        assert init.protocol_version == "2025-11-25"
        seen = structured(await session.call_tool("negotiation", {}))
    assert seen["protocol_version"] == "2025-11-25"


async def test_missing_capability_is_refused_then_served(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(None)
    async with legacy(kind, target, "2025-11-25", {}) as (session, _):
        if kind == "http-stateless":
            # The handshake's capabilities are gone, so sampling is never assumed.
            with pytest.raises(MCPError) as refused:
                await session.call_tool("summarize", {"text": "hello"})
        else:
            with pytest.raises(MCPError) as refused:
                await session.call_tool("summarize", {"text": "hello"})
        assert refused.value.error.code == -32021
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        assert structured(await session.call_tool("negotiation", {}))["era"] == "legacy"
    async with modern(kind, target) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("summarize", {"text": "hello"})
        assert refused.value.error.code == -32021
        assert structured(await client.call_tool("negotiation", {}))["era"] == "modern"
    async with modern(kind, target, sampling_callback=_sample) as client:
        result = await client.call_tool("summarize", {"text": "hello"})
        assert not result.is_error


async def test_policy_refuses_modern_revision_with_32022(endpoint: Any) -> None:
    kind, make = endpoint
    target = make(Policy(max_revision="2025-11-25"))
    async with modern(kind, target) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32022
    assert refused.value.error.data == {"supported": list(reversed(LEGACY)), "requested": "2026-07-28"}
    async with legacy(kind, target, "2025-11-25", {}) as (session, _):
        assert structured(await session.call_tool("negotiation", {}))["protocol_version"] == "2025-11-25"


async def test_wrong_era_method_is_method_not_found(endpoint: Any) -> None:
    kind, make = endpoint
    async with legacy(kind, make(None), "2025-11-25", {}) as (session, _):
        with pytest.raises(MCPError) as refused:
            await session.send_request(RawRequest(method="server/discover", params={}), types.DiscoverResult)
        assert refused.value.error.code == -32601
        assert structured(await session.call_tool("negotiation", {}))["era"] == "legacy"


async def _counter_offer_steered(
    steered: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> tuple[str, dict[str, Any]]:
    """A 2025-03-26 client of a server whose policy counter-offers 2025-11-25, the steering
    seam answering `steered` without rewriting anything: the revision the SDK answered, and
    what the tool then saw."""
    monkeypatch.setattr(seams, "steer_initialize", lambda ctx, agreed: steered)
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        target = build(Policy(min_revision="2025-06-18"))
        async with legacy("memory", target, "2025-03-26", CAPS) as (session, init):
            seen = structured(await session.call_tool("negotiation", {}))
    return init.protocol_version, seen


async def test_an_initialize_the_sdk_cannot_be_steered_on_is_the_sdks_and_claims_no_handshake(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the SDK's params cannot be rewritten (the seam answers False), the SDK answers the
    revision it chooses and the operator is told; the connection holds no handshake of ours,
    so its requests are negotiated as a session's whose capabilities are unknown."""
    answered, seen = await _counter_offer_steered(False, monkeypatch, caplog)
    assert answered == "2025-03-26"
    assert "cannot steer the initialize answer; the SDK chooses" in caplog.text
    assert seen["sdk_protocol_version"] == "2025-03-26"
    assert seen["capabilities_known"] is False
    assert seen["client_capabilities"] == {}


async def test_an_initialize_the_sdk_answered_otherwise_is_reported_and_kept_as_chosen(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A steer the SDK said it took but did not (it answered its own revision): the operator is
    told both revisions, and the connection holds the policy's handshake."""
    answered, seen = await _counter_offer_steered(True, monkeypatch, caplog)
    assert answered == "2025-03-26"
    assert "the SDK answered initialize with '2025-03-26', the policy chose '2025-11-25'" in caplog.text
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["outcome"] == "counter_offered"
    assert seen["client_capabilities"] == CAPS
