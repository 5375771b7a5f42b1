"""The parity suite (tests/support/parity_steps.py) against the mcp 1.x shell, over stdio;
tests/adapters/mcp2/test_parity.py runs it against the mcp 2.x middleware, to the same expectations."""

from pathlib import Path

import pytest

from mcp_negotiation.adapters.mcp1.seams import sdk_revisions
from support.parity_runner import Side, cases, converse
from support.parity_steps import Conversation

pytestmark = pytest.mark.anyio

SIDE = Side("mcp1", sdk_revisions())


@pytest.mark.parametrize("conversation", cases(SIDE))
async def test_parity(conversation: Conversation, tmp_path: Path) -> None:
    seen, expected = await converse(SIDE, conversation, tmp_path)
    assert seen == expected
