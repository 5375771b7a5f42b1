"""What the engine decides, seen from a test whose server runs in its process: both SDK
majors' suites use it (it imports no SDK), to show which messages are served without a
decision."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation.core.engine import Engine


def decisions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods of the messages every `Engine` decides from now on, in order."""
    decided: list[str] = []
    decide = Engine.decide

    def counted(self: Engine, message: Any, base: Any = None) -> Any:
        decided.append(message.method)
        return decide(self, message, base)

    monkeypatch.setattr(Engine, "decide", counted)
    return decided
