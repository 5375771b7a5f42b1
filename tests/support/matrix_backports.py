"""A pytest plugin for the SDK matrix: client-side conveniences older SDKs lack, backported.

noxfile.py loads it (`-p matrix_backports`) in every matrix session. It changes only
what the *test clients* can be handed, never a server, the transports or this library,
and only where the installed SDK lacks the feature (each backport is feature-detected):

- `mcp.Client(StdioServerParameters(...))` (added in mcp 2.1): on mcp 2.0.x the
  parameters are wrapped in `stdio_client(...)`, the `Transport` 2.0 accepts, which is
  exactly what 2.1 does with them.
"""

from __future__ import annotations

from typing import Any

BACKPORTED: list[str] = []


def _client_accepts_stdio_parameters() -> None:
    try:
        import mcp.client.client as client_module
    except ImportError:
        return  # mcp 1.x: no high-level Client, nothing to backport

    if hasattr(client_module, "StdioServerParameters"):
        return  # mcp >= 2.1 does it itself
    from mcp.client.stdio import StdioServerParameters, stdio_client

    original = client_module.Client.__post_init__

    def __post_init__(self: Any) -> None:
        if isinstance(self.server, StdioServerParameters):
            self.server = stdio_client(self.server)
        original(self)

    client_module.Client.__post_init__ = __post_init__  # type: ignore[method-assign]
    BACKPORTED.append("mcp.Client(StdioServerParameters) (mcp 2.1)")


def pytest_configure(config: Any) -> None:
    _client_accepts_stdio_parameters()


def pytest_report_header(config: Any) -> str:
    return "matrix backports: " + (", ".join(BACKPORTED) if BACKPORTED else "none needed")
