"""The mcp 2.x adapter: an SDK middleware that hands every message to the kernel.

Each message becomes a `_Message`: the engine's facts, read lazily from the SDK's request
context and its connection, and the SDK's ways of applying an outcome (the record
published on the request context and in a ContextVar, a refusal raised as the SDK's
`MCPError`, connection state for what a session keeps). It decides nothing itself.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from pydantic import ValidationError

from ...core.engine import Engine
from ...core.errors import Refusal
from ...core.facts import Origin
from ...core.negotiation import NO_HEADERS, Policy
from ...core.outcome import Known, Outcome
from ...otel.semconv import TOOL_ERROR
from .. import listings
from ..compat import as_exception
from ..kernel import Answered, advertised, apply
from ..origin import http_scope, origin
from ..variants import RegisteredTools
from . import seams
from .asgi import JUDGED_MARK

logger = logging.getLogger("mcp_negotiation")


class NegotiationMiddleware:
    """`ServerMiddleware` placing a `Negotiation` on every request of a wrapped server."""

    def __init__(self, policy: Policy, *, owner: Any = None) -> None:
        # The server whose chain holds us. A FastMCP server built under `instrument()` gets
        # us from the SDK's constructor, before FastMCP swaps in its own span opener; the
        # first request then moves us behind it (`_settle`).
        self._owner = weakref.ref(owner) if owner is not None else None
        self._settled = owner is None
        self.configure(policy)

    def configure(self, policy: Policy) -> None:
        """Switch to another policy (used when `negotiate` is applied again)."""
        self.policy = policy
        owner = self._owner
        tools = RegisteredTools(lambda: seams.catalog_server(owner())) if owner is not None else None
        self.engine = Engine(policy, tools=tools)

    def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Awaitable[HandlerResult]:
        """The kernel's handling of the message (the SDK awaits what a middleware returns)."""
        if not self._settled:
            self._settle()
        return apply(self.engine, _Message(ctx, call_next, self._owner))

    def _settle(self) -> None:
        """Once: make sure we sit right after the server's span opener (see `__init__`)."""
        self._settled = True
        owner = self._owner() if self._owner is not None else None
        chain = seams.middleware_list(owner) if owner is not None else None
        if chain is not None and any(item is self for item in chain) and seams.place(chain, self):
            logger.info("moved behind the server's span opener from the next request on")


DIRECT: Final = Origin("memory", NO_HEADERS, direct=True)


class _Message:
    """One message of mcp 2.x, as the kernel reads and answers it (`kernel.Message`): the
    request context's own fields as they are, where it came from only when asked."""

    __slots__ = (
        "_call_next",
        "_ctx",
        "_origin",
        "_owner",
        "method",
        "notification",
        "params",
        "revision",
    )

    def __init__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, owner: Any) -> None:
        self._ctx = ctx
        self._call_next = call_next
        self._owner = owner
        self._origin: Origin | None = None
        self.method: str = ctx.method
        self.params: Any = ctx.params
        self.revision: str | None = ctx.protocol_version
        self.notification = ctx.request_id is None

    @property
    def held(self) -> object:
        return seams.held(self._ctx)

    @property
    def session_id(self) -> str | None:
        return seams.session_id(self._ctx)

    @property
    def origin(self) -> Origin:
        """The SDK's in-process dispatcher (even when a stdio server's tool dispatches), or its
        transport, with the negotiation headers of an HTTP request and whether the SDK sent it
        itself while serving another. Read once."""
        if self._origin is None:
            ctx = self._ctx
            kind = seams.transport_kind(ctx)
            if kind == seams.DIRECT_KIND:
                self._origin = DIRECT
            else:
                transport, headers, sent = origin(http_scope(ctx.request), http=kind == seams.HTTP_KIND)
                self._origin = Origin(transport, headers, False, seams.served_for_another(ctx.method, sent))
        return self._origin

    # --- the SDK's ways -----------------------------------------------------------------------

    def hold(self, value: Known | Refusal) -> None:
        state = seams.connection_state(self._ctx)
        if state is not None:
            state[seams.STATE_KEY] = value

    def _judged(self, outcome: Outcome) -> None:
        request = self._ctx.request
        if outcome.judged and request is not None and (scope := http_scope(request)) is not None:
            scope[JUDGED_MARK] = True

    def steer(self, revision: str) -> bool:
        return seams.steer_initialize(self._ctx, revision)

    def forward(self, known: Known | None, outcome: Outcome) -> Awaitable[Any]:
        ctx = self._ctx
        self._judged(outcome)
        if outcome.dispatch is not None and isinstance(ctx.params, Mapping):
            # The variant chosen for this client serves the call: the SDK validates and runs it.
            ctx = replace(ctx, params={**ctx.params, "name": outcome.dispatch})
        if known is not None:
            try:  # noqa: SIM105 - left on the SDK's context too (`seams.entry_bound_to`)
                setattr(ctx, seams.BOUND_ATTRIBUTE, known)
            except (AttributeError, TypeError):  # a slotted or frozen context: the ContextVar answers
                pass
        if outcome.listing or outcome.advertise is not None:
            return self._answered(known, outcome)
        return self._call_next(ctx)

    async def _answered(self, known: Known | None, outcome: Outcome) -> Any:
        """The SDK's answer, as the outcome says it is read (a listing) or added to."""
        result = await self._call_next(self._ctx)
        if outcome.listing:
            owner = self._owner() if self._owner is not None else None
            result = await listings.listed(self._ctx.method, result, owner, known)
        if outcome.advertise is not None and isinstance(result, dict):
            advertised(result.get("capabilities"), outcome.advertise)
        return result

    async def refuse(self, refusal: Refusal, outcome: Outcome) -> Any:
        self._judged(outcome)
        raise as_exception(refusal)

    async def empty(self, outcome: Outcome) -> Any:
        self._judged(outcome)
        return {}

    def answered_as(self, result: Any, error: BaseException | None) -> Answered | None:
        if self.origin.on_behalf:
            return None
        request = self._ctx.request
        scope = http_scope(request) if request is not None else None
        http_version = scope.get("http_version") if scope is not None else None
        if isinstance(error, MCPError):
            return Answered(error.error.code, None, http_version)
        if isinstance(error, ValidationError):  # the SDK answers it as invalid params
            return Answered(INVALID_PARAMS, None, http_version)
        if error is not None:
            return Answered(None, type(error).__qualname__, http_version)
        if self.method == "tools/call" and _is_tool_error(result):
            return Answered(None, TOOL_ERROR, http_version)
        return Answered(None, None, http_version)

    def on_close(self, callback: Callable[[bool], object]) -> bool:
        over_http = self.origin.transport == "http"
        if over_http and self.session_id is None:  # stateless HTTP: a connection per POST
            return False
        return seams.on_connection_close(self._ctx, lambda: callback(over_http))

    def answered(self, result: Any) -> object:
        """Whether a dict or a model (FastMCP), the revision the answer announces."""
        if isinstance(result, Mapping):
            return result.get("protocolVersion")
        return getattr(result, "protocol_version", None)


def _is_tool_error(result: object) -> bool:
    """Whether a `tools/call` result reaches the wire as an error result, as the SDK's own
    span tells it: the model, or its camelCase dict."""
    if isinstance(result, CallToolResult):
        return result.is_error is True
    return isinstance(result, Mapping) and result.get("isError") is True
