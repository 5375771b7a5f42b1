"""The examples under examples/ run as documented: as stdio subprocesses, driven by the SDK."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from support.harness import legacy_session, open_streams, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _elicit(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def test_minimal_server_asks_only_clients_that_can_elicit() -> None:
    params = stdio_params("minimal_server.py")
    async with Client(params, mode="2026-07-28", elicitation_callback=_elicit) as client:
        assert (
            _text(await client.call_tool("greet", {"name": "Ada"}))
            == "Hello Ada (I could have asked you for more)"
        )
    async with Client(params, mode="2026-07-28") as client:
        assert _text(await client.call_tool("greet", {"name": "Ada"})) == "Hello Ada"
    # The policy's minimum is 2025-06-18: an older client is counter-offered 2025-11-25.
    async with (
        open_streams("stdio", params) as streams,
        legacy_session(streams, "2025-03-26", {"elicitation": {}}) as (
            session,
            init,
        ),
    ):
        assert init.protocol_version == "2025-11-25"
        assert _text(await session.call_tool("greet", {"name": "Ada"})).endswith(
            "(I could have asked you for more)"
        )
