"""`opentelemetry-instrument` support: switch negotiation on without changing code.

Installed with the `instrumentation` extra, this module is found through the
`opentelemetry_instrumentor` entry point, so

    opentelemetry-instrument --traces_exporter console python server.py

negotiates every MCP SDK server the program builds (with the default `Policy`) and
records a `capability_negotiated` span for each negotiation. In code:

    McpNegotiationInstrumentor().instrument(policy=Policy(min_revision="2025-06-18"))

Nothing else in the package imports this module, so `mcp_negotiation` works without
`opentelemetry-instrumentation` installed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:

    class BaseInstrumentor:
        """The typed surface of `opentelemetry.instrumentation.instrumentor.BaseInstrumentor`.

        That module opts out of type checking (`# type: ignore` at its top), so mypy
        sees none of its names; this stand-in declares what users of ours call.
        """

        def instrument(self, **kwargs: Any) -> None: ...
        def uninstrument(self, **kwargs: Any) -> None: ...
        @property
        def is_instrumented_by_opentelemetry(self) -> bool: ...

else:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from ..adapters import instrument, uninstrument
from ..core.negotiation import Policy

__all__ = ["McpNegotiationInstrumentor"]

_INSTRUMENTS: tuple[str, ...] = ("mcp >= 1.22",)


class McpNegotiationInstrumentor(BaseInstrumentor):
    """Negotiates every SDK server built after `instrument()`; `uninstrument()` undoes it.

    `instrument(policy=Policy(...))` chooses the policy; the default is `Policy()`.
    Servers built before `instrument()` are not touched: pass them to
    `mcp_negotiation.negotiate` instead.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        policy = kwargs.get("policy")
        instrument(policy if isinstance(policy, Policy) else Policy())

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
