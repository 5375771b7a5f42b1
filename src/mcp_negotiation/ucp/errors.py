"""UCP negotiation errors and the two wire forms the specification gives them.

UCP splits failures in two. Discovery failures (the platform's profile URL is bad, its
profile cannot be fetched or parsed, its protocol version is not served) are transport
errors: over MCP a JSON-RPC error -32001 whose `data.code` names the failure. A
capability failure (the operation's own capability did not survive negotiation) is a
business outcome: a normal tool *result* with `ucp.status: "error"` and a message of
severity `unrecoverable`, the severity the specification's own example uses, because no
buyer input can make two profiles share a version.

One exception type carries both, so the negotiator can raise and the adapter decides
the form once, from `code`.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from ..core.errors import NegotiationError, PolicyError, Refusal

__all__ = [
    "CAPABILITIES_INCOMPATIBLE",
    "INVALID_PROFILE_URL",
    "PROFILE_MALFORMED",
    "PROFILE_UNREACHABLE",
    "UCP_JSONRPC_ERROR",
    "VERSION_UNSUPPORTED",
    "UcpError",
    "UcpErrorCode",
    "invalid_profile_url",
]

UcpErrorCode = Literal[
    "invalid_profile_url",
    "profile_unreachable",
    "profile_malformed",
    "version_unsupported",
    "capabilities_incompatible",
]

INVALID_PROFILE_URL: Final = "invalid_profile_url"
PROFILE_UNREACHABLE: Final = "profile_unreachable"
PROFILE_MALFORMED: Final = "profile_malformed"
VERSION_UNSUPPORTED: Final = "version_unsupported"
CAPABILITIES_INCOMPATIBLE: Final = "capabilities_incompatible"

UCP_JSONRPC_ERROR: Final = -32001
"""The JSON-RPC error code UCP's MCP binding uses for every discovery failure."""

_SUMMARY: Final[dict[str, str]] = {
    INVALID_PROFILE_URL: "UCP discovery failed",
    PROFILE_UNREACHABLE: "UCP discovery failed",
    PROFILE_MALFORMED: "UCP discovery failed",
    VERSION_UNSUPPORTED: "Protocol version not supported",
    CAPABILITIES_INCOMPATIBLE: "No compatible capabilities",
}


class UcpError(NegotiationError):
    """A UCP negotiation failure, with the code the specification names for it.

    `version` is the protocol version the failed response speaks; only the
    `capabilities_incompatible` result needs it, because that result still carries a
    `ucp` block.
    """

    def __init__(
        self,
        code: UcpErrorCode,
        message: str,
        *,
        continue_url: str | None = None,
        version: str | None = None,
    ) -> None:
        if code not in get_args(UcpErrorCode):
            raise PolicyError(f"unknown UCP error code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code: UcpErrorCode = code
        self.message = message
        self.continue_url = continue_url
        self.version = version

    def with_continue_url(self, continue_url: str) -> UcpError:
        """The same failure with the business's web fallback, which only the server knows."""
        return UcpError(self.code, self.message, continue_url=continue_url, version=self.version)

    def to_jsonrpc_error(self) -> dict[str, Any]:
        """The JSON-RPC `error` object of a discovery failure."""
        data: dict[str, Any] = {"code": self.code, "content": self.message}
        if self.continue_url is not None:
            data["continue_url"] = self.continue_url
        return {"code": UCP_JSONRPC_ERROR, "message": _SUMMARY[self.code], "data": data}

    def to_refusal(self) -> Refusal:
        """The discovery failure as the `Refusal` every adapter answers and traces."""
        error = self.to_jsonrpc_error()
        return Refusal(error["code"], error["message"], error["data"])

    def to_tool_result(self) -> dict[str, Any]:
        """The `structuredContent` of a `capabilities_incompatible` tool result.

        Refuses the other codes: UCP makes them transport errors, and answering them
        as a successful result would hide a discovery failure from the platform.
        """
        if self.code != CAPABILITIES_INCOMPATIBLE:
            raise PolicyError(f"{self.code} is a transport error; use to_jsonrpc_error()")
        if self.version is None:
            raise PolicyError("a capabilities_incompatible result needs the negotiated version")
        result: dict[str, Any] = {
            "ucp": {"version": self.version, "status": "error"},
            "messages": [
                {"type": "error", "code": self.code, "content": self.message, "severity": "unrecoverable"}
            ],
        }
        if self.continue_url is not None:
            result["continue_url"] = self.continue_url
        return result


def invalid_profile_url(reason: str) -> UcpError:
    """The failure of a profile URL (or a `UCP-Agent` header naming one) that cannot be used."""
    return UcpError(INVALID_PROFILE_URL, reason)
