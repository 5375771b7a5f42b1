"""The few SDK names that differ between mcp 1.x and 2.x, behind one interface.

Everything else in `adapters/` is written for one major version (`mcp2/`, `mcp1/`); the helpers that tool
handlers call (`@requires`, `@requires_ucp`) work on both through this.
"""

from __future__ import annotations

from contextvars import ContextVar
from importlib.metadata import version
from typing import Any, Final, NoReturn

from ..core.errors import Refusal
from ..core.frozen_json import thaw

__all__ = ["MCP_MAJOR", "PENDING_REFUSALS", "as_exception", "error_data", "raise_refusal", "tool_result"]

MCP_MAJOR: Final = int(version("mcp").split(".", 1)[0])
"""The installed SDK's major version: 2 has a middleware seam, 1 is reached through wrapt."""

PENDING_REFUSALS: ContextVar[list[Refusal] | None] = ContextVar("mcp_negotiation.pending", default=None)
"""mcp 1.x turns any exception a tool raises into an error *result*; the 1.x adapter
collects refusals here and answers them as the JSON-RPC error they are."""


def error_data(refusal: Refusal) -> Any:
    """`refusal` as the SDK's `ErrorData`, what a JSON-RPC error response carries (both majors)."""
    from mcp.types import ErrorData

    data = thaw(refusal.data)
    return ErrorData(code=refusal.code, message=refusal.message, data=data)


def as_exception(refusal: Refusal) -> Exception:
    """`refusal` as the exception the installed SDK answers with that JSON-RPC error."""
    data = thaw(refusal.data)
    if MCP_MAJOR >= 2:
        from mcp.shared.exceptions import MCPError

        return MCPError(refusal.code, refusal.message, data)
    import mcp.shared.exceptions as v1_exceptions

    # McpError is the 1.x name, absent from the 2.x package mypy reads.
    v1_error: Any = v1_exceptions.__dict__["McpError"]
    error: Exception = v1_error(error_data(refusal))
    return error


def raise_refusal(refusal: Refusal) -> NoReturn:
    """Refuse the current request with `refusal`, as a JSON-RPC error on either major."""
    pending = PENDING_REFUSALS.get()
    if pending is not None:
        pending.append(refusal)
    raise as_exception(refusal)


def tool_result(structured: dict[str, Any], text: str) -> Any:
    """A successful `CallToolResult` with structured content and its text copy."""
    from mcp.types import CallToolResult  # both majors; validated by wire names, which both accept

    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": structured}
    )
