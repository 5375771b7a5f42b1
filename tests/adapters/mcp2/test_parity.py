"""The parity suite (tests/support/parity_steps.py) against the mcp 2.x middleware, over stdio;
tests/adapters/mcp1/test_parity.py runs it against the mcp 1.x shell, to the same expectations."""

from pathlib import Path

import pytest

from mcp_negotiation.core import revisions
from support.parity_runner import Side, cases, converse
from support.parity_steps import Conversation

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

SIDE = Side("mcp2", revisions.KNOWN)


@pytest.mark.parametrize("conversation", cases(SIDE))
async def test_parity(conversation: Conversation, tmp_path: Path) -> None:
    seen, expected = await converse(SIDE, conversation, tmp_path)
    assert seen == expected
