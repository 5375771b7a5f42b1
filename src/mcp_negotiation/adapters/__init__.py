"""Adapters for the MCP Python SDK: the only package here that imports `mcp`.

mcp 2.x is reached through its middleware seam (`install`, `middleware`); mcp 1.x, which
has none, through wrapt (`v1`). Both offer the same functions, chosen here once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from ..core.errors import UsageError
from ..core.negotiation import Policy, policy_given
from .compat import MCP_MAJOR
from .context import client_supports, negotiation_of, requires, requires_extension, requires_ucp
from .mcp2.asgi import record_refusals_asgi
from .variants import variant_of

if MCP_MAJOR >= 2:
    from .mcp2.install import instrument, negotiate, uninstrument
else:
    from .mcp1.shell import instrument, negotiate, uninstrument

__all__ = [
    "MCP_MAJOR",
    "client_supports",
    "instrument",
    "negotiate",
    "negotiated",
    "negotiation_of",
    "record_refusals_asgi",
    "requires",
    "requires_extension",
    "requires_ucp",
    "uninstrument",
    "variant_of",
]

_S = TypeVar("_S")
_P = ParamSpec("_P")


def negotiated(policy: Policy | None = None) -> Callable[[Callable[_P, _S]], Callable[_P, _S]]:
    """Decorate a function that builds and returns a server, so the server is negotiated.

    Written `@negotiated()` or `@negotiated(Policy(...))`, on a plain or an `async def`
    builder (then the decorated builder is async too, and its server negotiated).
    """
    if callable(policy):
        raise UsageError("write @negotiated() or @negotiated(Policy(...)), with the parentheses")
    checked = policy_given(policy, "negotiated(policy)")

    def decorate(build: Callable[_P, _S]) -> Callable[_P, _S]:
        if inspect.iscoroutinefunction(build):
            # An async builder: its call is a coroutine, so the server is negotiated once awaited.
            @functools.wraps(build)
            async def async_wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Any:
                return negotiate(await build(*args, **kwargs), checked)

            return cast("Callable[_P, _S]", async_wrapper)

        @functools.wraps(build)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _S:
            return negotiate(build(*args, **kwargs), checked)

        return wrapper

    return decorate
