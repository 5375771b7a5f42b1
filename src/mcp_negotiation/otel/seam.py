"""The one place this library reads OpenTelemetry beyond its public API.

A repeat of a traced negotiation links the request's span to the span that negotiated
it, on every request, and the public way of each half does more than that needs; the
issue #36 guard (modern with an OTel SDK, `benchmarks/RESULTS.md`) is what keeps them:

- The current span, read where the API's default runtime context keeps it rather than
  through `trace.get_current_span()`'s chain of calls. Those names are private
  (`opentelemetry.context._RUNTIME_CONTEXT`, its `_current_context`, and
  `opentelemetry.trace.propagation._SPAN_KEY`).
- The SDK's `Span.add_link(context)` builds a new empty immutable `BoundedAttributes`
  and a new `Link` on every call, then appends the link under the span's lock with its
  private `_add_link`. A link that carries no attributes is built once per negotiation
  here and appended as it is.

- Whether a `MeterProvider` was configured, asked on every request so that a server
  without one records nothing: the public `metrics.get_meter_provider()` reads the
  process's environment (`OTEL_PYTHON_METER_PROVIDER`) on every call until a provider is
  set; the global it answers from is one attribute
  (`opentelemetry.metrics._internal._METER_PROVIDER`).

So those names are looked up here, once, and `tests/otel/test_telemetry.py` and
`tests/otel/test_metrics.py` fail if they move; with another runtime context
(`OTEL_PYTHON_CONTEXT`), another span class, or an API or SDK whose internals moved, the
public calls are used.
"""

from __future__ import annotations

import functools
import importlib
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry.trace import Link
from opentelemetry.trace import propagation as trace_propagation

__all__ = ["LinkAppender", "current_span_source", "link_appender", "meter_provider_reader", "metrics_clock"]

LinkAppender = Callable[[Any, Link], None]
"""Adds a link built beforehand (`telemetry.Traced.link`) to a recording span."""


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


def _add_link_publicly(span: Any, link: Link) -> None:
    span.add_link(link.context)


def link_appender(kind: type) -> LinkAppender:
    """How to add a link built beforehand to a recording span of type `kind`.

    For the OpenTelemetry SDK's spans whose `add_link` is the SDK's own, its private
    `_add_link`, which appends a `Link` under the span's lock (and not once the span has
    ended), exactly as `add_link` does after building the same link; for any other span,
    the public `add_link`. Looked up by the span's type, since a subclass may add links
    its own way; `kind` is searched only once the SDK is loaded (a span of its type means
    it is).
    """
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    base = getattr(sdk, "Span", None)
    append = getattr(kind, "_add_link", None)
    if (
        isinstance(base, type)
        and issubclass(kind, base)
        and callable(append)
        and getattr(kind, "add_link", None) is getattr(base, "add_link", None)
    ):
        return append  # type: ignore[no-any-return]
    return _add_link_publicly


def meter_provider_reader() -> Callable[[], Any]:
    """What answers the configured global `MeterProvider`, or None while none is.

    The API's own global, read as an attribute of its module. With an API that keeps it
    elsewhere, `metrics.get_meter_provider()`, whose proxy then stands for "none
    configured" no more: its instruments are the API's no-ops until a provider is set,
    so the answer is still correct. A provider named only in the environment
    (`OTEL_PYTHON_METER_PROVIDER`) is configured by the first `get_meter_provider()` call,
    whoever makes it; the instrumentation's launcher sets its provider itself.
    """
    internal = _metrics_internal()
    if internal is None:  # pragma: no cover - an API laid out otherwise
        return metrics.get_meter_provider
    return functools.partial(getattr, internal, "_METER_PROVIDER")


def metrics_clock() -> Callable[[], float | None]:
    """`time.perf_counter()` while a `MeterProvider` is configured, else None: the start of a
    message's `mcp.server.operation.duration`, and, being None, the word that there is
    nothing to record."""
    internal = _metrics_internal()
    perf_counter = time.perf_counter
    if internal is None:  # pragma: no cover - an API laid out otherwise
        return perf_counter

    def clock() -> float | None:
        return None if internal._METER_PROVIDER is None else perf_counter()

    return clock


def _metrics_internal() -> Any:
    """The API module holding the global `MeterProvider` as `_METER_PROVIDER`, or None."""
    try:
        internal = importlib.import_module("opentelemetry.metrics._internal")
    except ImportError:  # pragma: no cover - an API laid out otherwise
        return None
    return internal if "_METER_PROVIDER" in vars(internal) else None
