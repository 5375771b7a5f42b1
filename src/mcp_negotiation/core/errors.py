"""Refusals in the specification's own words: JSON-RPC codes and their `data` shapes.

The core produces `Refusal` values and never touches the SDK's exception types; the
adapters (`adapters/`) turns them into the SDK's `MCPError`. Only the codes the MCP
specification defines are used: inventing codes in -32020..-32099 would collide with
future revisions of the specification. (A2A's own refusals, -32009 and -32008, are
`Refusal` values too; `semver.a2a` makes them, with the array `data` A2A gives errors.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .frozen_json import thaw

__all__ = [
    "HEADER_MISMATCH",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "NegotiationError",
    "NegotiationRefused",
    "NegotiationUnavailable",
    "NoNegotiation",
    "PolicyError",
    "Refusal",
    "RefusalData",
    "UsageError",
]

INVALID_PARAMS: Final = -32602
METHOD_NOT_FOUND: Final = -32601
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

RefusalData = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""What a refusal's `data` may be: MCP puts an object there (`data.supported`), A2A an
array of typed objects (`[{"@type": "type.googleapis.com/google.rpc.ErrorInfo", ...}]`)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the server will not serve, as the JSON-RPC error the client receives."""

    code: int
    message: str
    data: RefusalData | None = field(default=None)

    def to_jsonrpc_error(self) -> dict[str, Any]:
        """The `error` member of a JSON-RPC response, a deep copy: whoever amends it (the
        SDK, a middleware) cannot reach the refusal, which telemetry and logs still read."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = thaw(self.data)
        return error


class NegotiationError(Exception):
    """The base of every exception this library raises, so one `except` catches them all.

    Each subclass keeps the built-in base it had (`RuntimeError`, `LookupError`,
    `ValueError`), so code catching those still catches what it caught before.
    """


class PolicyError(NegotiationError, ValueError):
    """A value the library was configured or called with that it cannot work with.

    A `Policy` or `UcpPolicy` setting (an unknown revision, a misspelt capability name), a
    name given to `@requires`, a version list or agent card given to `protocols`, `bridge`
    or `a2a`: the server author's mistake, raised where it is made rather than served as a
    refusal to every client. A `ValueError`, as these have always been.
    """


class UsageError(NegotiationError, TypeError):
    """A call made the wrong way: an argument of the wrong type, a decorator without its
    parentheses or in the wrong order, `negotiate()` given something that is no server.

    A `TypeError`, as these have always been, and as Python's own are for a wrong call.
    """


class NegotiationRefused(NegotiationError):
    """Raised by the pure core when a request must be refused; carries the `Refusal`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class NegotiationUnavailable(NegotiationError, RuntimeError):
    """Raised in strict mode when the SDK offers no way to negotiate through (a missing hook)."""


class NoNegotiation(NegotiationError, LookupError):
    """Raised by `negotiation_of` outside a request of a server wrapped by `negotiate()`.

    `NoNegotiation.explained` says why it most likely is, and the fix, in its message.
    """

    @classmethod
    def explained(cls, *, in_request: bool, instrumenting: bool) -> NoNegotiation:
        """The error for a handler's `ctx` (`in_request`) or for the current request (none given),
        while `instrument()` is in force or not: it reaches only the servers built after it."""
        if in_request and instrumenting:
            why = (
                "its server was most likely built before instrument() was called, and instrument()"
                " reaches only the servers built after it (it cannot know those built before);"
                " call instrument() before the code that builds the server runs, or pass the"
                " server: instrument(policy, server) or negotiate(server, policy)"
            )
        elif in_request:
            why = (
                "its server is not negotiated; wrap it with negotiate(server, policy), or call"
                " instrument(policy) before the code that builds it runs"
            )
        else:
            why = (
                "negotiation_of() answers inside a request handler of a negotiated server (pass the"
                " handler's ctx); a server is negotiated by negotiate(server, policy), or by"
                " instrument(policy) when it is built after that call"
            )
        return cls(f"no negotiation for this request: {why}")
