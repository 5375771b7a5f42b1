"""What the engine negotiates afresh, seen from a test whose server runs in its process: both
SDK majors' suites use it (it imports no SDK), to show which messages are served from what
was negotiated before (a memoised envelope, a session's handshake)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.outcome import Known


def decisions(monkeypatch: pytest.MonkeyPatch, *, refusals: bool = False) -> list[str]:
    """The methods of the messages every `Engine` negotiates afresh from now on, in order: a
    message for which it makes a new negotiation from what the client sent (a `Known` not
    derived by a stage from another), or a refusal (with `refusals`, the refusals alone). A
    repeat served from the memo, or from what its connection holds, is none.

    mcp 2.0-2.2 put a `tools/list` of their own through the middleware before a modern
    `tools/call` over HTTP (to validate its `Mcp-Param` headers), and that listing is then
    the message a served call's negotiation is made for."""
    decided: list[str] = []
    made: list[Known] = []
    decide, made_known = Engine.decide, Known.__init__

    def counted_known(self: Known, *args: Any, **kwargs: Any) -> None:
        made_known(self, *args, **kwargs)
        if self.source is None:
            made.append(self)

    def counted(self: Engine, facts: Any, fetched: Any = None) -> Any:
        before = len(made)
        outcome = decide(self, facts) if fetched is None else decide(self, facts, fetched)
        if outcome.refusal is not None or (len(made) > before and not refusals):
            decided.append(facts.method)
        return outcome

    monkeypatch.setattr(Known, "__init__", counted_known)
    monkeypatch.setattr(Engine, "decide", counted)
    return decided
