"""ASGI layer: see the negotiations the SDK refuses before any middleware runs.

The SDK's streamable HTTP transport answers some requests itself, before dispatch: a
modern request whose `MCP-Protocol-Version` it does not serve (-32022), or headers that
contradict the body (-32020). Those never reach the
SDK middleware, so without this layer an operator would not see them in traces.

`record_refusals_asgi(app)` wraps any ASGI app serving MCP (also one mounted inside a
user's Starlette or FastAPI application); `negotiate()` applies it to the app returned
by the server's `streamable_http_app()`. It reads only small 400 responses' bodies,
never requests' bodies, and never changes what is sent.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from ...core import revisions
from ...core.client_log import report
from ...core.errors import INVALID_PARAMS, Refusal
from ...core.negotiation import Policy
from ...otel import metrics as operations
from ...otel import spans as telemetry

__all__ = ["JUDGED_MARK", "RefusalRecorder", "record_refusals_asgi"]


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JUDGED_MARK: Final = "mcp_negotiation.judged"
"""Set in the ASGI scope once the request reached the middleware, or its refusal was traced
here: a 400 after that is a handler's error, or traced already (however many wrappers a
mounted app has), never a refusal the SDK made before dispatch."""
_TRACED_CODES: Final = frozenset({-32020, -32022, -32602})
"""What the SDK's ladder refuses before dispatch for negotiation reasons: headers that
contradict the body, a revision, and (at a modern revision) a malformed envelope."""
_MAX_BODY: Final = 65_536


def _text(raw: bytes) -> str:
    return bytes(raw).decode("latin-1")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return _text(value)
    return None


_CUT_ERROR: Final = re.compile(rb'"error"\s*:\s*\{\s*"code"\s*:\s*(-?\d{1,9})\s*[,}]')
"""The code of a JSON-RPC error body cut at `_MAX_BODY`. The SDK writes `code` first, and
outside strings an unescaped `"` is structural, so this matches only the error's own key."""


def _refusal_in(body: bytes) -> Refusal | None:
    """The refusal a 400 body carries; from a body cut short (the SDK repeats a client's
    revision in `data.requested`, as long as the client made it), just its code."""
    try:
        error = json.loads(body).get("error")
    except ValueError:
        cut = _CUT_ERROR.search(body) if len(body) >= _MAX_BODY else None
        return Refusal(int(cut.group(1)), "", None) if cut else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return None
    data = error.get("data")
    return Refusal(error["code"], str(error.get("message", "")), data if isinstance(data, dict) else None)


PolicySource = Policy | Callable[[], Policy | None]
"""A policy, or what answers the current one when a refusal is recorded (None: record nothing)."""


class RefusalRecorder:
    """ASGI middleware recording the refusals the SDK makes before dispatch.

    A class, so that `negotiate()` can add it to the Starlette app the SDK builds with
    `add_middleware`, and the app the user gets back is still that Starlette app. The app
    outlives any one policy: `negotiate()` hands it a source that answers the server's
    policy of the moment, and none once `uninstrument()` took the server's negotiation away.

    Calling it returns the wrapped app's own awaitable, with `send` watched: no coroutine of
    ours stays in the request's chain of awaits, which every resumption of the request's
    task walks through, a dozen times per request. Where it must be an app of its own, to
    be served as the outermost one, `record_refusals_asgi` makes it a coroutine function.
    """

    def __init__(self, app: ASGIApp, policy: PolicySource | None = None) -> None:
        self.app = app
        self.policy = policy if policy is not None else Policy()

    def _policy_now(self) -> Policy | None:
        return self.policy if isinstance(self.policy, Policy) else self.policy()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return self.app(scope, receive, send)
        started = time.perf_counter()
        refused: bytearray | None = None  # the body of a 400 response, once one starts

        def watching_send(message: Message) -> Awaitable[None]:
            # A function handing back `send`'s awaitable, not a coroutine of its own: this
            # runs for every message of every POST, nearly all of them no refusal.
            nonlocal refused
            kind = message["type"]
            if kind == "http.response.start":
                if message.get("status") == 400:
                    refused = bytearray()
            elif refused is not None and kind == "http.response.body":
                refused.extend(message.get("body", b"")[: _MAX_BODY - len(refused)])
                if not message.get("more_body", False):
                    _trace(scope, bytes(refused), self._policy_now, started)
            return send(message)

        return self.app(scope, receive, watching_send)


def record_refusals_asgi(app: ASGIApp, policy: PolicySource | None = None) -> ASGIApp:
    """Wrap `app` so refusals made before dispatch are recorded as `capability_negotiated`.

    `policy` shapes what is recorded (client identity, say): a `Policy`, or a function
    answering the one in force when a refusal happens, None to record nothing then.
    """
    recorder = RefusalRecorder(app, policy)

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        # A coroutine function, so that an ASGI server tells it for an ASGI 3 app.
        await recorder(scope, receive, send)

    return recording


def _trace(scope: Scope, body: bytes, policy_now: Callable[[], Policy | None], started: float) -> None:
    """Record a pre-dispatch refusal found in a 400 response (`started`: when the request came).
    Never raises."""
    try:
        policy = policy_now()
        if policy is None or scope.get(JUDGED_MARK):
            return
        refusal = _refusal_in(body)
        version = _header(scope, b"mcp-protocol-version") or ""
        if refusal is None or refusal.code not in _TRACED_CODES:
            return
        if refusal.code == INVALID_PARAMS and revisions.era(version) != "modern":
            return  # a legacy request's params, not an envelope
        scope[JUDGED_MARK] = True  # an outer wrapper of the same request stays silent
        method = _header(scope, b"mcp-method") or "unknown"
        telemetry.record_refusal(
            method,
            refusal,
            policy,
            time.perf_counter() - started,
            params={"protocolVersion": version} if version else None,
            protocol_version=version,
            transport="http",
            carrier={_text(key): _text(value) for key, value in scope.get("headers") or ()},
            # Only the modern entry refuses before dispatch, and modern requests have no
            # session: an `Mcp-Session-Id` header here is the client's word, not the SDK's.
            session_id=None,
        )
        # [metrics] the request the SDK answered before dispatch, as the middleware times the rest
        operations.operation(
            started, method, version, "http", code=refusal.code, http_version=scope.get("http_version")
        )
    except Exception as problem:
        report(logging.DEBUG, "could not read a refused response", exc=problem)
