"""The mcp 2.x adapter: an SDK middleware that hands every message to the kernel.

Each message becomes a `_Message`: the engine's facts, read lazily from the SDK's request
context and its connection, and the SDK's ways of applying an outcome (the record
published on the request context and in a ContextVar, a refusal raised as the SDK's
`MCPError`, connection state for what a session keeps). It decides nothing itself.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from ...core.engine import Engine
from ...core.errors import Refusal
from ...core.negotiation import NO_HEADERS, Policy, Transport
from ...core.outcome import Known, Outcome
from .. import listings
from ..compat import as_exception
from ..kernel import advertised, apply, published
from ..origin import http_scope, origin
from . import seams
from .asgi import JUDGED_MARK

logger = logging.getLogger("mcp_negotiation")


class NegotiationMiddleware:
    """`ServerMiddleware` placing a `Negotiation` on every request of a wrapped server."""

    def __init__(self, policy: Policy, *, owner: Any = None) -> None:
        self.configure(policy)
        # The server whose chain holds us. A FastMCP server built under `instrument()` gets
        # us from the SDK's constructor, before FastMCP swaps in its own span opener; the
        # first request then moves us behind it (`_settle`).
        self._owner = weakref.ref(owner) if owner is not None else None
        self._settled = owner is None

    def configure(self, policy: Policy) -> None:
        """Switch to another policy (used when `negotiate` is applied again)."""
        self.policy = policy
        self.engine = Engine(policy)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if not self._settled:
            self._settle()
        result: HandlerResult = await apply(self.engine, _Message(ctx, call_next, self._owner))
        return result

    def _settle(self) -> None:
        """Once: make sure we sit right after the server's span opener (see `__init__`)."""
        self._settled = True
        owner = self._owner() if self._owner is not None else None
        chain = seams.middleware_list(owner) if owner is not None else None
        if chain is not None and any(item is self for item in chain) and seams.place(chain, self):
            logger.info("mcp_negotiation: moved behind the server's span opener from the next request on")


_Where = tuple[Transport, Mapping[str, str], bool, bool]


class _Message:
    """One message of mcp 2.x, as the kernel reads and answers it (`kernel.Message`)."""

    __slots__ = ("_call_next", "_ctx", "_origin", "_owner")

    def __init__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, owner: Any) -> None:
        self._ctx = ctx
        self._call_next = call_next
        self._owner = owner
        self._origin: _Where | None = None

    # --- the facts ------------------------------------------------------------------------

    @property
    def method(self) -> str:
        return self._ctx.method

    @property
    def params(self) -> Any:
        return self._ctx.params

    @property
    def revision(self) -> str | None:
        return self._ctx.protocol_version

    @property
    def notification(self) -> bool:
        return self._ctx.request_id is None

    @property
    def held(self) -> object:
        return seams.held(self._ctx)

    @property
    def session_id(self) -> str | None:
        return seams.session_id(self._ctx)

    @property
    def transport(self) -> Transport:
        return self._where()[0]

    @property
    def headers(self) -> Mapping[str, str]:
        return self._where()[1]

    @property
    def direct(self) -> bool:
        return self._where()[2]

    @property
    def on_behalf(self) -> bool:
        return self._where()[3]

    def _where(self) -> _Where:
        """Where the message came from, read once: (transport, negotiation headers, whether
        the SDK's in-process dispatcher sent it, whether the SDK sent it itself while
        serving another request: `seams.served_for_another`)."""
        where = self._origin
        if where is not None:
            return where
        kind = seams.transport_kind(self._ctx)
        if kind == seams.DIRECT_KIND:  # in-process, even when a stdio server's tool dispatches
            made: _Where = ("memory", NO_HEADERS, True, False)
        else:
            transport, headers, sent = origin(http_scope(self._ctx.request), http=kind == seams.HTTP_KIND)
            made = (transport, headers, False, seams.served_for_another(self._ctx.method, sent))
        self._origin = made
        return made

    # --- the SDK's ways -----------------------------------------------------------------------

    def hold(self, value: Known | Refusal) -> None:
        state = seams.connection_state(self._ctx)
        if state is not None:
            state[seams.STATE_KEY] = value

    def mark_judged(self) -> None:
        scope = http_scope(self._ctx.request)
        if scope is not None:
            scope[JUDGED_MARK] = True

    def steer(self, revision: str) -> bool:
        return seams.steer_initialize(self._ctx, revision)

    async def forward(self) -> Any:
        return await self._call_next(self._ctx)

    async def serve(self, known: Known, outcome: Outcome) -> Any:
        ctx = self._ctx
        seams.bind(ctx, known)
        with published(known):
            result = await self._call_next(ctx)
            if outcome.listing:
                owner = self._owner() if self._owner is not None else None
                result = await listings.listed(ctx.method, result, owner, known)
        if outcome.advertise is not None and isinstance(result, dict):
            advertised(result.get("capabilities"), outcome.advertise)
        return result

    async def refuse(self, refusal: Refusal) -> Any:
        raise as_exception(refusal)

    async def empty(self) -> Any:
        return {}

    def answered(self, result: Any) -> object:
        """Whether a dict or a model (FastMCP), the revision the answer announces."""
        if isinstance(result, Mapping):
            return result.get("protocolVersion")
        return getattr(result, "protocol_version", None)
