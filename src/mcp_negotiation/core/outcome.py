"""What the engine hands back for one message: an `Outcome`, and the `Known` it publishes.

An adapter applies an outcome and decides nothing itself (`adapters/kernel.py`): every
effect of a decision is a field here. `Known` is one negotiation together with what is
derived from it (its trace, the records its stages scope it to, what its connection keeps),
so that all of it is kept, and let go, as one: a legacy session's `Known` leaves with its
connection, a modern envelope's with the engine's memo.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from .errors import Refusal

if TYPE_CHECKING:
    from .negotiation import Negotiation, Negotiator

__all__ = ["DERIVED_LIMIT", "EMPTY", "PASS", "Action", "Known", "Need", "Outcome", "TraceKind"]

DERIVED_LIMIT: Final = 16
"""What one `Known` derives at most (UCP scopes, narrowed copies): each is a copy of its
record sharing the record's maps, a few hundred bytes, so a `Known` weighs at most this many
times that more than its record."""


class Known:
    """A negotiation and what is derived from it, owned together.

    `record` is what a handler reads; `negotiator` answers `@requires` under the policy that
    made it. `traced` is telemetry's handle for the span that recorded it (a repeat links to
    it), None until traced. `session` is what a stage keeps for the connection from its
    handshake (UCP's session default profile). `derived` holds what stages derive from this
    record, by a key of theirs (at most `DERIVED_LIMIT`); a `Known` derived from another is
    that one's `child`, with its `source` and the `tag` it was derived for.
    """

    __slots__ = ("derived", "negotiator", "record", "session", "source", "tag", "traced")

    def __init__(
        self,
        record: Negotiation,
        negotiator: Negotiator,
        *,
        session: Mapping[str, Any] | None = None,
        source: Known | None = None,
        tag: Hashable = None,
    ) -> None:
        self.record = record
        self.negotiator = negotiator
        self.session: Mapping[str, Any] = session or {}
        self.source = source
        self.tag = tag
        self.traced: Any = None
        self.derived: dict[Hashable, Any] = {}

    def derive(self, key: Hashable, value: Any) -> Any:
        """Keep `value` under `key` (while fewer than `DERIVED_LIMIT` are kept), and answer it."""
        if len(self.derived) < DERIVED_LIMIT:
            self.derived[key] = value
        return value

    def child(self, record: Negotiation, tag: Hashable) -> Known:
        """A `Known` for `record`, derived from this one for `tag` (the same connection data)."""
        return Known(record, self.negotiator, session=self.session, source=self, tag=tag)

    def __repr__(self) -> str:
        return f"Known({self.record.era}, {self.record.protocol_version}, traced={self.traced is not None})"


@dataclass(frozen=True, slots=True)
class Need:
    """I/O the engine cannot do: a profile to fetch, by `resolver` (the policy's), at `url`.

    The adapter's driver awaits `resolver.resolve(url)` and hands the result (a profile, or
    the exception) back to `Engine.decide`, which goes on from there (`adapters/kernel.py`).
    """

    url: str
    resolver: Any


Action = Literal["pass", "serve", "refuse", "empty"]
TraceKind = Literal["negotiated", "refused"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """Every effect of one decision, for the adapter to apply (immutable).

    - `action`: `pass` (hand the message to the SDK untouched), `serve` (publish `known`,
      then hand it on), `refuse` (answer `refusal` instead), `empty` (answer an empty
      result: the SDK's own listing for a call it then refuses);
    - `hold`: what the connection holds from now on (None: unchanged);
    - `steer`: the revision a legacy `initialize` is answered at (the SDK must agree);
    - `advertise`: what to add to the answer's `capabilities`, by section;
    - `trace`: `negotiated` (`known` is traced, in full or as a repeat of its span) or
      `refused`; None for nothing to trace;
    - `listing`: the answer is a listing, to be read as this client should read it;
    - `judged`: the message reached negotiation, so an HTTP error after it is no refusal
      made before dispatch;
    - `need`: I/O to do before deciding again (the rest is then empty);
    - `dispatch`: the registered tool a `tools/call` is served by instead of the one it names
      (a variant chosen for this client, `core.variants`).
    """

    action: Action
    known: Known | None = None
    refusal: Refusal | None = None
    hold: Known | Refusal | None = None
    steer: str | None = None
    advertise: Mapping[str, Mapping[str, Any]] | None = None
    trace: TraceKind | None = None
    listing: bool = False
    judged: bool = False
    need: Need | None = None
    dispatch: str | None = None


PASS: Final = Outcome("pass")
EMPTY: Final = Outcome("empty")
