"""What an adapter tells the engine about one inbound message: the `Facts` protocol.

An adapter implements it over its SDK's request context, lazily: the engine reads only
what the message's decision needs (a legacy session's repeat reads its method and what its
connection holds, never its params), so nothing else is gathered. `PlainFacts` is the same
thing as plain values, for tests, proxies and anything without an SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from .negotiation import NO_HEADERS, Transport

__all__ = ["BEFORE_HANDSHAKE", "Facts", "Origin", "PlainFacts"]


class _BeforeHandshake:
    __slots__ = ()

    def __repr__(self) -> str:
        return "BEFORE_HANDSHAKE"


BEFORE_HANDSHAKE: Final = _BeforeHandshake()
"""What a connection holds before its SDK accepted a handshake: its requests are the SDK's
to refuse (or, a `ping`, to answer), never served, so there is nothing to negotiate."""


class Origin(NamedTuple):
    """Where a message came from, read at once (the SDK tells these together).

    `headers`: the negotiation headers it came with (`MCP-Protocol-Version`, `UCP-Agent`),
    never any other; `direct`: the SDK's in-process dispatcher, which adopts whatever revision
    an envelope names; `on_behalf`: a request the SDK makes itself while serving the
    client's own.
    """

    transport: Transport
    headers: Mapping[str, str] = NO_HEADERS
    direct: bool = False
    on_behalf: bool = False


class Facts(Protocol):
    """The facts of one inbound message.

    - `revision`: what the SDK serves the message at (its connection's revision, or a modern
      request's own), None where the SDK said nothing (the engine then applies the
      specification's default for a request without `MCP-Protocol-Version`);
    - `held`: what the connection holds from earlier messages (a `Known`, the `Refusal` of a
      refused handshake, `BEFORE_HANDSHAKE` while its SDK awaits one, or None);
    - `session_id`: the connection's session, where the SDK has one;
    - `origin`: where it came from (`Origin`).
    """

    @property
    def method(self) -> str: ...
    @property
    def params(self) -> Any: ...
    @property
    def revision(self) -> str | None: ...
    @property
    def notification(self) -> bool: ...
    @property
    def held(self) -> object: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def origin(self) -> Origin: ...


@dataclass(frozen=True, slots=True)
class PlainFacts:
    """`Facts` as plain values."""

    method: str
    params: Any = None
    revision: str | None = None
    notification: bool = False
    transport: Transport = "unknown"
    headers: Mapping[str, str] = field(default_factory=lambda: NO_HEADERS)
    held: object = None
    session_id: str | None = None
    direct: bool = False
    on_behalf: bool = False

    @property
    def origin(self) -> Origin:
        return Origin(self.transport, self.headers, self.direct, self.on_behalf)
