"""The examples added with the documentation run as documented: stdio subprocesses, the SDK's client.

`elicit_or_default.py`, `requires_sampling.py` and `bridge_proxy.py` are started exactly
as their docstrings say (`python examples/NAME.py [--everywhere]`) and driven by the
SDK's `Client` in both eras, and by a raw legacy handshake where a revision other than
the SDK's newest matters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from elicit_or_default import GiftNote
from support.harness import ROOT, legacy_session, open_streams, stdio_params, structured

pytestmark = pytest.mark.anyio

MODES = ("legacy", "2026-07-28")
PAGE = (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")


def _shown_json(after: str) -> Any:
    """The JSON block docs/examples.md shows right after the sentence ending with `after`."""
    found = re.search(re.escape(after) + r"\n\n```json\n(.*?)^```$", PAGE, re.DOTALL | re.MULTILINE)
    assert found is not None, after
    return json.loads(found.group(1))


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _leaves(failure: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(failure, BaseExceptionGroup):
        for inner in failure.exceptions:
            yield from _leaves(inner)
    else:
        yield failure


def _mcp_error(failure: BaseException) -> MCPError:
    [error] = [leaf for leaf in _leaves(failure) if isinstance(leaf, MCPError)]
    return error


# --- examples/elicit_or_default.py ---------------------------------------------------------


class User:
    """An elicitation callback that records the questions and answers each like a person."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.asked: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        if "ship" in params.message:
            return types.ElicitResult(action="accept", content={"speed": "express"})
        return types.ElicitResult(action="accept", content={"text": "Happy birthday"})


async def test_elicit_or_default_asks_a_legacy_client_that_can_answer() -> None:
    user = User()
    async with Client(
        stdio_params("elicit_or_default.py"), mode="legacy", elicitation_callback=user
    ) as client:
        assert client.protocol_version == "2025-11-25"
        assert _text(await client.call_tool("ship", {"order_id": "A1"})) == "order A1: express shipping"
        assert _text(await client.call_tool("gift_note", {"order_id": "A1"})) == (
            "order A1: note 'Happy birthday'"
        )
    assert user.asked == ["How fast should we ship? (standard or express)", "A note for the gift card?"]


async def test_elicit_or_default_asks_a_modern_client_through_an_input_required_result() -> None:
    user = User()
    async with Client(
        stdio_params("elicit_or_default.py"), mode="2026-07-28", elicitation_callback=user
    ) as client:
        assert _text(await client.call_tool("ship", {"order_id": "B2"})) == "order B2: express shipping"
        # `ctx.elicit` needs a back-channel the modern era does not have: the default, unasked.
        assert _text(await client.call_tool("gift_note", {"order_id": "B2"})) == "order B2: no note"
    assert user.asked == ["How fast should we ship? (standard or express)"]


@pytest.mark.parametrize("mode", MODES)
async def test_elicit_or_default_uses_the_default_for_clients_that_cannot_answer(mode: str) -> None:
    async with Client(stdio_params("elicit_or_default.py"), mode=mode) as client:
        assert _text(await client.call_tool("ship", {"order_id": "C3"})) == "order C3: standard shipping"
        assert _text(await client.call_tool("gift_note", {"order_id": "C3"})) == "order C3: no note"


@pytest.mark.parametrize("mode", MODES)
async def test_elicit_or_default_respects_a_declined_question(mode: str) -> None:
    user = User("decline")
    async with Client(stdio_params("elicit_or_default.py"), mode=mode, elicitation_callback=user) as client:
        assert _text(await client.call_tool("ship", {"order_id": "D4"})) == (
            "order D4: not shipped (the user chose to decline)"
        )
    assert len(user.asked) == 1


async def test_ctx_elicit_has_no_back_channel_on_the_modern_revision() -> None:
    """Why `gift_note` asks legacy clients only: the SDK cannot send `elicitation/create` on 2026-07-28.

    If this starts failing, the SDK grew a back-channel: update the example and docs/examples.md.
    """
    server = MCPServer("direct-elicit")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("A note?", GiftNote)
        return answer.action

    user = User()
    async with Client(InMemoryTransport(server), mode="legacy", elicitation_callback=user) as client:
        assert _text(await client.call_tool("ask", {})) == "accept"
    async with Client(InMemoryTransport(server), mode="2026-07-28", elicitation_callback=user) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("ask", {})
    assert "back-channel" in refused.value.error.message
    assert user.asked == ["A note?"]


async def test_elicit_or_default_does_not_ask_at_a_revision_without_elicitation() -> None:
    # The client declares elicitation, but 2025-03-26 has none: it is never asked.
    async with (
        open_streams("stdio", stdio_params("elicit_or_default.py")) as streams,
        legacy_session(streams, "2025-03-26", {"elicitation": {}}) as (session, init),
    ):
        assert init.protocol_version == "2025-03-26"
        assert _text(await session.call_tool("ship", {"order_id": "E5"})) == "order E5: standard shipping"


# --- examples/requires_sampling.py ---------------------------------------------------------


class Model:
    """A sampling callback standing in for the client's LLM."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        self.prompts.append(content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a short summary"), model="stub"
        )


@pytest.mark.parametrize("mode", MODES)
async def test_requires_sampling_refuses_the_tool_for_clients_that_cannot_sample(mode: str) -> None:
    async with Client(stdio_params("requires_sampling.py"), mode=mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("summarize", {"text": "a long text"})
        assert refused.value.error.code == -32021
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        assert _text(await client.call_tool("echo", {"text": "still here"})) == "still here"
    error = refused.value.error
    shown = _shown_json("The refusal carries the ClientCapabilities-shaped object of what is missing:")
    assert shown == {"code": error.code, "message": error.message, "data": error.data}


@pytest.mark.parametrize("mode", MODES)
async def test_requires_sampling_serves_clients_with_a_model(mode: str) -> None:
    model = Model()
    async with Client(stdio_params("requires_sampling.py"), mode=mode, sampling_callback=model) as client:
        assert _text(await client.call_tool("summarize", {"text": "a long text"})) == "a short summary"
    assert model.prompts == ["Summarize in one line: a long text"]


async def test_requires_sampling_everywhere_refuses_a_legacy_handshake_without_sampling() -> None:
    with pytest.raises(BaseException) as refused:  # noqa: PT011 - the SDK groups it; checked below
        async with Client(stdio_params("requires_sampling.py", "--everywhere"), mode="legacy"):
            pass
    error = _mcp_error(refused.value)
    assert error.error.code == -32021
    assert error.error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_requires_sampling_everywhere_refuses_modern_requests_but_not_discovery() -> None:
    async with Client(stdio_params("requires_sampling.py", "--everywhere"), mode="2026-07-28") as client:
        found = await client.session.discover()  # exempt: a client may still find out what it lacks
        assert found.supported_versions == ["2026-07-28"]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hello"})
        assert refused.value.error.code == -32021
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize("mode", MODES)
async def test_requires_sampling_everywhere_serves_clients_that_sample(mode: str) -> None:
    params = stdio_params("requires_sampling.py", "--everywhere")
    async with Client(params, mode=mode, sampling_callback=Model()) as client:
        assert _text(await client.call_tool("echo", {"text": "hello"})) == "hello"
        assert _text(await client.call_tool("summarize", {"text": "x"})) == "a short summary"


# --- examples/bridge_proxy.py --------------------------------------------------------------

ALWAYS_WITHHELD = {
    "prompts": "upstream",
    "resources": "upstream",
    "tools.listChanged": "upstream",
    "pushNotifications": "downstream",
    "tasks": "downstream",
    "tasks.cancel": "downstream",
}


async def test_the_sdk_alone_would_advertise_what_the_proxy_withholds() -> None:
    async with Client(InMemoryTransport(MCPServer("plain")), mode="legacy") as client:
        alone = client.server_capabilities
    assert alone.tools is not None
    assert alone.resources is not None
    assert alone.prompts is not None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_bridge_proxy_advertises_only_what_both_legs_agreed(mode: str) -> None:
    user = User()
    async with Client(stdio_params("bridge_proxy.py"), mode=mode, elicitation_callback=user) as client:
        revision = client.protocol_version
        advertised = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
        made = structured(await client.call_tool("agreement", {}))
    assert revision == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert advertised == {"tools": {}}
    assert made["advertised"] == {"tools": {}}
    assert made["downstream"] == f"mcp {revision}"
    assert made["upstream"] == "a2a 1.0.0"
    assert made["served"] == ["elicitation", "progress.message", "tools"]
    assert made["withheld"] == ALWAYS_WITHHELD
    assert made == _shown_json("and the `agreement` tool answers:") | {"downstream": f"mcp {revision}"}


async def test_bridge_proxy_withholds_the_agents_questions_from_a_client_that_cannot_answer() -> None:
    async with Client(stdio_params("bridge_proxy.py"), mode="2026-07-28") as client:
        made = structured(await client.call_tool("agreement", {}))
    assert made["served"] == ["progress.message", "tools"]
    assert made["withheld"] == {**ALWAYS_WITHHELD, "elicitation": "downstream"}


async def test_bridge_proxy_at_the_oldest_revision_cannot_relay_streaming() -> None:
    async with (
        open_streams("stdio", stdio_params("bridge_proxy.py")) as streams,
        legacy_session(streams, "2024-11-05", {}) as (session, init),
    ):
        made = structured(await session.call_tool("agreement", {}))
    assert init.protocol_version == "2024-11-05"
    assert init.capabilities.model_dump(by_alias=True, exclude_none=True) == {"tools": {}}
    # 2024-11-05 progress notifications carry no message: A2A streaming has nowhere to go.
    assert made["served"] == ["tools"]
    assert made["withheld"]["progress.message"] == "downstream"
    assert made["withheld"]["elicitation"] == "downstream"


# --- examples/lowlevel_server.py -----------------------------------------------------------


async def _never_called(ctx: Any, params: Any) -> Any:
    raise AssertionError("the lowlevel example only asks whether it could ask")


DECLARED: dict[str, dict[str, Any]] = {
    "nothing": {},
    "sampling": {"sampling_callback": _never_called},
    "elicitation": {"elicitation_callback": _never_called},
    "both": {"sampling_callback": _never_called, "elicitation_callback": _never_called},
}


@pytest.mark.parametrize("declared", DECLARED)
@pytest.mark.parametrize("mode", MODES)
async def test_lowlevel_server_answers_client_supports_for_this_client(mode: str, declared: str) -> None:
    async with Client(stdio_params("lowlevel_server.py"), mode=mode, **DECLARED[declared]) as client:
        revision = client.protocol_version
        listed = await client.list_tools()
        answer = structured(await client.call_tool("what_can_i_ask", {}))
        unknown = await client.call_tool("no_such_tool", {})
    assert revision == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert [tool.name for tool in listed.tools] == ["what_can_i_ask"]
    assert answer == {
        "revision": revision,
        "transport": "stdio",
        "sampling": declared in ("sampling", "both"),
        "elicitation": declared in ("elicitation", "both"),
    }
    assert unknown.is_error


async def test_lowlevel_server_answers_for_the_negotiated_revision() -> None:
    # Both declared, but 2025-03-26 has no elicitation: only sampling is there to ask for.
    async with (
        open_streams("stdio", stdio_params("lowlevel_server.py")) as streams,
        legacy_session(streams, "2025-03-26", {"sampling": {}, "elicitation": {}}) as (session, init),
    ):
        answer = structured(await session.call_tool("what_can_i_ask", {}))
    assert init.protocol_version == "2025-03-26"
    assert answer == {"revision": "2025-03-26", "transport": "stdio", "sampling": True, "elicitation": False}
