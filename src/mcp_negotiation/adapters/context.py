"""What tool handlers call: the current request's negotiation, published in a ContextVar.

The SDK rebuilds its context objects (`dataclasses.replace` drops anything we attach),
but it carries ContextVars into handler tasks on every path. So the middleware
publishes the record here, and every helper reads it from here, whatever context
object the handler holds: an MCPServer `Context`, a lowlevel `ServerRequestContext`,
or a FastMCP `Context`. Concurrent requests run in separate contexts and never see each
other's record.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from ..core.client_log import report
from ..core.errors import NoNegotiation, PolicyError, Refusal, UsageError
from ..core.extensions import identifier_problem, settings_given
from ..core.listings import REQUIRES_ATTRIBUTE
from ..core.negotiation import Negotiation, capability_names
from ..core.outcome import Known
from ..core.revisions import ClientFeature, FeatureName
from ..core.variants import GATES
from ..ucp.errors import CAPABILITIES_INCOMPATIBLE, UcpError
from ..ucp.stage import for_operation
from . import instrumenting
from .compat import raise_refusal, tool_result
from .mcp2 import seams

__all__ = [
    "client_supports",
    "negotiation_of",
    "requires",
    "requires_extension",
    "requires_ucp",
]


current: ContextVar[Known | None] = ContextVar("mcp_negotiation.current", default=None)
"""The request being served: its negotiation (`Known.record`) and what made it. The adapter
(`kernel.published`) sets it around the handler; the functions here read it. Set it only as
it does (a token, reset after), e.g. to call `client_supports` outside a server."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _entry_of(ctx: object) -> Known | None:
    """The negotiation of the request `ctx` belongs to: the one left on its request context.

    The ContextVar's may be another request's: a worker task started by an earlier request
    and handed this `ctx`, or a tool that calls a negotiated server (itself, or another) in
    process and handles its requests back (an elicitation or progress callback of a proxy)
    runs inside that server's request. Only when nothing was left on the context (a
    middleware after ours rebuilt it) does the ContextVar answer, and when the ContextVar
    holds one derived from this very one (narrowed by `@requires_ucp`), the narrower answer.
    """
    entry = current.get()
    bound = seams.entry_bound_to(ctx)
    if type(bound) is not Known or bound is entry:
        return entry
    if entry is not None and entry.source is bound:
        return entry
    return bound


def negotiation_of(ctx: object = None) -> Negotiation:
    """The negotiation of the request `ctx` belongs to (without `ctx`: the current one).

    The one way to read the record. Outside a negotiated request it raises
    `NoNegotiation` (a `LookupError`): code that may also run outside one catches it.
    """
    entry = _entry_of(ctx) if ctx is not None else current.get()
    record = entry.record if entry is not None else None
    if record is None:
        raise NoNegotiation.explained(in_request=ctx is not None, instrumenting=bool(instrumenting.ACTIVE))
    return record


def client_supports(ctx: object, feature: FeatureName | str, **settings: Any) -> bool:
    """Whether the client of this request can be asked for `feature` right now.

    True only when the client declared it, the negotiated revision has it, and the
    policy has not withdrawn it; the policy's `client_overrides` rules revoke and grant
    for the clients they name, and only they assert `client.NAME` names. For an
    extension identifier, `settings` must be satisfied by the client's settings for it
    (`mimeTypes=["text/html;profile=mcp-app"]`: a list asked for is contained in the
    client's, anything else equal). Outside a negotiated request it is False. A misspelt
    name is False too, and logged once, naming the nearest known name.
    """
    if isinstance(ctx, str) and not isinstance(feature, str):
        # Would answer False for every client, silently: the author's slip, raised at once.
        raise UsageError(f"write client_supports(ctx, {ctx!r:.100}): the context first, then the name")
    entry = _entry_of(ctx)
    return entry is not None and entry.negotiator.answers(entry.record, feature, settings)


def _refuse_unless(missing: Callable[[Known], Refusal | None]) -> None:
    """Raise what `missing` finds this request's negotiation lacks (-32603 without one)."""
    entry = current.get()
    if entry is None:
        raise_refusal(Refusal(-32603, "no negotiation for this request"))
    refusal = missing(entry)
    if refusal is not None:
        raise_refusal(refusal)


class _Incompatible:
    """UCP's `capabilities_incompatible` answer, returned instead of running the tool."""

    def __init__(self, result: Any) -> None:
        self.result = result


def _scoped_ucp(entry: Known | None, root: str) -> Known | _Incompatible:
    """`entry` narrowed to one UCP operation (`ucp.stage.for_operation`), or the result refusing it."""
    ucp_policy = entry.negotiator.policy.ucp if entry is not None else None
    if entry is not None and ucp_policy is None:
        # The server's mistake, not the platform's: it must not be told it sent no profile.
        report(
            logging.ERROR,
            "@requires_ucp(%r) on a server whose Policy has no ucp=UcpPolicy()",
            root,
        )
        raise_refusal(Refusal(-32603, "this server is not configured for UCP"))
    try:
        return for_operation(entry, root)
    except UcpError as failure:
        # Offered like every other UCP error, so each form carries the business's web fallback.
        offered = ucp_policy.offered(failure) if ucp_policy is not None else failure
        if offered.code == CAPABILITIES_INCOMPATIBLE:
            structured = offered.to_tool_result()
            return _Incompatible(tool_result(structured, json.dumps(structured)))
        raise_refusal(offered.to_refusal())


def requires_ucp(root: str) -> Callable[[_F], _F]:
    """Decorate a tool serving the UCP operation whose capability is `root`.

    Without a platform profile the call is refused (-32001, `invalid_profile_url`);
    when `root` did not survive negotiation the tool answers UCP's
    `capabilities_incompatible` result instead of running. Inside the tool,
    `negotiation_of(ctx).ucp` is the agreement restricted to `root` and its extensions.
    With `UcpPolicy(stamp_results=True)`, a dict result gets the `ucp` block added.
    """
    if not isinstance(root, str) or not root:
        raise PolicyError("requires_ucp() needs a capability name")

    def decorate(fn: _F) -> _F:
        if not inspect.iscoroutinefunction(fn):
            raise UsageError("requires_ucp() decorates async tool functions")

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            entry = current.get()
            scoped = _scoped_ucp(entry, root)
            if isinstance(scoped, _Incompatible):
                return scoped.result
            token = current.set(scoped)
            try:
                result = await fn(*args, **kwargs)
            finally:
                current.reset(token)
            ucp_policy = scoped.negotiator.policy.ucp
            if ucp_policy is not None and ucp_policy.stamp_results and isinstance(result, dict):
                agreement = scoped.record.ucp  # (a narrowed record's agreement: never None)
                if "ucp" not in result and agreement is not None:
                    result = {**result, "ucp": agreement.to_ucp_block(root)}
            return result

        return cast(_F, wrapper)

    return decorate


def requires_extension(identifier: str, **settings: Any) -> Callable[[_F], _F]:
    """Decorate a tool, prompt or resource function that needs the client's extension
    `identifier`, with `settings` it must satisfy (as `client_supports` judges them).

    The call is refused with -32021 whose `data.requiredCapabilities` names the extension
    and the settings (`{"extensions": {identifier: settings}}`); for an extension the
    policy declares as a family (`Extension`), any identifier it accepts will do, and the
    refusal names the one it prefers. A malformed identifier, or settings that are not
    JSON, raise here. Place it below `@server.tool()`, as `requires`.
    """
    problem = identifier_problem(identifier)
    if problem is not None:
        raise PolicyError(f"requires_extension(): {problem}")
    wanted = settings_given(settings, "requires_extension() settings")
    return _gate(
        lambda known: known.negotiator.missing_extension(known.record, identifier, wanted),
        "requires_extension()",
        (),
    )


def requires(*features: ClientFeature | str) -> Callable[[_F], _F]:
    """Decorate a tool, prompt or resource function that needs client capabilities.

    The call is refused with -32021 and `data.requiredCapabilities` when the client
    lacks any of them; the wrapped function keeps its signature, so the SDK still
    derives the tool's input schema from it. Place it below `@server.tool()`: the SDK
    registers the function it is given, so above it the check would never run; on a
    negotiated MCPServer that order raises `TypeError`, here or in `negotiate()`,
    whichever comes last. An unknown name raises `ValueError` here, when the module is
    imported, naming the nearest known name.
    """
    if not features:
        raise PolicyError("requires() needs one or more capability names")
    if callable(features[0]):
        raise UsageError("write @requires('name', ...) with the names it needs, in parentheses")
    names = capability_names(features, "requires()")
    return _gate(lambda known: known.negotiator.missing_required(known.record, names), "requires()", names)


def _gate(
    missing: Callable[[Known], Refusal | None], what: str, names: tuple[str, ...]
) -> Callable[[_F], _F]:
    """A decorator refusing a call before the function it decorates runs, with what `missing`
    finds the call's negotiation lacks (`_refuse_unless`); `names`: what a listing declares
    the entry requires (`catalog`)."""

    def decorate(fn: _F) -> _F:
        if not callable(fn) or isinstance(fn, type):
            raise UsageError(
                f"{what} decorates a function, not {type(fn).__name__}: write @{what[:-2]}(...)"
                " below @server.tool(), right above the `def`"
            )
        with contextlib.suppress(TypeError):  # a callable that takes no weak reference: not tracked
            _gated.add(fn)
        GATES.any = True  # from now on the engine looks at what each tools/call names
        for server in list(_watched):
            _refuse_misplaced(server, fn)
        gated: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                _refuse_unless(missing)
                return await fn(*args, **kwargs)

            gated = async_wrapper
        else:

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                _refuse_unless(missing)
                return fn(*args, **kwargs)

            gated = wrapper
        # What a listing declares for the entry this function serves (`catalog`): the names a
        # -32021 of this check carries, and those of a `@requires` below it, checked next.
        inner = getattr(fn, REQUIRES_ATTRIBUTE, ())
        if names or inner:
            setattr(gated, REQUIRES_ATTRIBUTE, names + tuple(name for name in inner if name not in names))
        return cast(_F, gated)

    return decorate


_gated: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()
"""The functions `requires` wrapped: a server that registered one of these, rather than its
wrapper, serves it ungated."""
_watched: weakref.WeakSet[Any] = weakref.WeakSet()
"""Negotiated servers, whose registrations `requires` checks as it wraps."""


def _refuse_misplaced(server: Any, only: object = None) -> None:
    for fn in seams.registered_functions(server):
        if fn is not None and (fn is only if only is not None else fn in _gated):
            name = getattr(fn, "__name__", repr(fn))
            raise UsageError(
                f"@requires(...) is above the decorator that registered {name} (@server.tool(),"
                f" @server.prompt()): {name} was registered without the check, so every client would"
                " be served; write @requires(...) below that decorator, right above the `def`"
            )


def check_requires_order(server: Any) -> None:
    """Raise if `server` registered a function `requires` wrapped (the decorators in the wrong
    order), and watch it, so that `requires` can tell when it is applied to one it did."""
    _refuse_misplaced(server)
    with contextlib.suppress(TypeError):  # a server that takes no weak reference: not watched
        _watched.add(server)
