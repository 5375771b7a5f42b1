"""The one place this library reads OpenTelemetry beyond its public API.

A repeat of a traced negotiation links the request's span to the span that negotiated
it, on every request. Read through `trace.get_current_span()`, the current span costs
five Python calls; read where the API's default runtime context keeps it, two C calls,
an eighth of what a repeat costs the middleware. Those names are private
(`opentelemetry.context._RUNTIME_CONTEXT`, its `_current_context`, and
`opentelemetry.trace.propagation._SPAN_KEY`), so they are looked up once, here, and
`tests/sdk/test_telemetry.py` fails if they move; with another runtime context
(`OTEL_PYTHON_CONTEXT`) or an API whose internals moved, the public call is used.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import propagation as trace_propagation

__all__ = ["current_span_source"]


def current_span_source() -> tuple[ContextVar[Any], str] | None:
    """(the ContextVar holding OpenTelemetry's current context, the current span's key in it),
    or None when the default runtime context is not the one in use."""
    try:
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
    except ImportError:  # pragma: no cover - an API without its default runtime context
        return None
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    variable = getattr(runtime, "_current_context", None)
    key = getattr(trace_propagation, "_SPAN_KEY", None)
    default = type(runtime) is ContextVarsRuntimeContext
    if default and isinstance(variable, ContextVar) and isinstance(key, str):
        return variable, key
    return None
