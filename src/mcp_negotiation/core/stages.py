"""How a capability plugs into the decision: the `Stage` protocol.

A stage adds to what the engine decides for every message without the engine, or an
adapter, knowing it: what it advertises in a handshake's (or discovery's) answer, what a
connection keeps from its handshake, and what it makes of a call's negotiation (a record
scoped further, a refusal, the implementation to dispatch to, or I/O it needs first).
UCP is one (`mcp_negotiation.ucp`), the tool rule another (`core.variants.ToolStage`,
built by the engine from what the adapter says serves each tool). A stage is pure: where
it needs I/O it asks for it with a `Need`, and is asked again with the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from .errors import Refusal
from .facts import Facts
from .outcome import Known, Need

__all__ = ["Dispatch", "Fetched", "Stage", "StageSource"]

Fetched = Mapping[str, Any]
"""What the adapter fetched for the `Need`s of one message so far, by URL: a profile, or
the exception its resolver raised."""


class Dispatch(NamedTuple):
    """A stage's word on the `tools/call` it was given, beyond its negotiation: served by the
    registered tool `name` instead of the one it names (a variant chosen for this client), or
    refused with `refusal` as the tool's own answer (a tool withheld from this client). The
    negotiation stands either way, and is traced as what it is: a tool refused is not a
    negotiation refused."""

    name: str | None = None
    refusal: Refusal | None = None


class Stage(Protocol):
    """One capability's part of every decision (see the module's docstring)."""

    def advertisement(self, era: str) -> Mapping[str, Mapping[str, Any]] | None:
        """What to add to the `capabilities` of a handshake's (legacy) or a discovery's
        (modern) answer, by section (`experimental`, `extensions`); None for nothing."""
        ...

    def session(self, params: Any) -> tuple[str, Any] | None:
        """What a connection keeps from the `initialize` params it was accepted with, as
        (key, value) in `Known.session`; None for nothing."""
        ...

    def on_request(
        self, known: Known, facts: Facts, fetched: Fetched
    ) -> Known | Refusal | Need | Dispatch | None:
        """What this request's negotiation becomes: a `Known` to publish instead (derived
        from `known`), a refusal, a `Need` to be met first, a `Dispatch`, or None (`known`
        stands)."""
        ...


class StageSource(Protocol):
    """What `Policy(ucp=...)` takes: settings that make the stage they configure."""

    def stage(self) -> Stage: ...
