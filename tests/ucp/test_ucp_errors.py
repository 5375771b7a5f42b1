"""The two wire forms of UCP errors: JSON-RPC error -32001, or a tool result."""

from __future__ import annotations

import pytest

from mcp_negotiation.ucp import (
    CAPABILITIES_INCOMPATIBLE,
    PROFILE_UNREACHABLE,
    UCP_JSONRPC_ERROR,
    UcpError,
)


def test_jsonrpc_error_form() -> None:
    error = UcpError(PROFILE_UNREACHABLE, "Unable to fetch agent profile: connection timeout")
    assert error.to_jsonrpc_error() == {
        "code": UCP_JSONRPC_ERROR,
        "message": "UCP discovery failed",
        "data": {"code": PROFILE_UNREACHABLE, "content": "Unable to fetch agent profile: connection timeout"},
    }
    fallback = error.with_continue_url("https://merchant.example/cart")
    assert fallback.to_jsonrpc_error()["data"]["continue_url"] == "https://merchant.example/cart"
    assert error.continue_url is None


def test_tool_result_form_carries_continue_url() -> None:
    error = UcpError(CAPABILITIES_INCOMPATIBLE, "nothing shared", version="2026-04-08")
    result = error.with_continue_url("https://merchant.example").to_tool_result()
    assert result["continue_url"] == "https://merchant.example"
    assert result["ucp"] == {"version": "2026-04-08", "status": "error"}


def test_tool_result_is_only_for_capabilities_incompatible() -> None:
    with pytest.raises(ValueError, match="transport error"):
        UcpError(PROFILE_UNREACHABLE, "x", version="2026-04-08").to_tool_result()
    with pytest.raises(ValueError, match="version"):
        UcpError(CAPABILITIES_INCOMPATIBLE, "x").to_tool_result()


def test_unknown_codes_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        UcpError("not_a_code", "x")  # type: ignore[arg-type]
