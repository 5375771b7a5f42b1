"""Era-aware requirements (issue #25) on mcp 1.x: a policy accepts only the revisions where
its required capabilities can be had, capped at what the release serves, as on 2.x."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from harness_v1 import seen, serve_http, session, stateless_call
from mcp.server.fastmcp import FastMCP
from v1_server import build

from mcp_negotiation import Policy, negotiate
from mcp_negotiation.sdk.v1 import sdk_revisions

pytestmark = pytest.mark.anyio

NEWEST = sdk_revisions()[-1]
needs_2025_11_25 = pytest.mark.skipif(
    NEWEST != "2025-11-25", reason="tasks exist at 2025-11-25 only, which this release does not serve"
)


@contextmanager
def _target(kind: str, require: str) -> Iterator[Any]:
    if kind == "memory":
        yield build(Policy(required_capabilities=(require,)))
    else:
        with serve_http(build(Policy(required_capabilities=(require,))).streamable_http_app()) as url:
            yield url


@needs_2025_11_25
@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_legacy_client_of_a_left_out_revision_is_counter_offered_and_served(kind: str) -> None:
    with _target(kind, "tasks") as target:
        async with session(kind, target, "2025-06-18", {"tasks": {}}) as (client, init):
            assert init.protocolVersion == "2025-11-25"
            record = seen(await client.call_tool("negotiation", {}))
    assert (record["protocol_version"], record["outcome"]) == ("2025-11-25", "counter_offered")


@needs_2025_11_25
async def test_a_stateless_legacy_request_of_a_left_out_revision_is_refused_32022() -> None:
    server = build(Policy(required_capabilities=("elicitation.url",)), stateless=True)
    error = (await stateless_call(server, "2025-06-18"))["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2025-11-25"],
        "requested": "2025-06-18",
        "requiredCapabilities": {"elicitation": {"url": {}}},
    }


def test_a_modern_only_requirement_is_a_configuration_error_on_1x() -> None:
    """No 1.x release serves 2026-07-28: a policy whose requirements only it can meet would
    serve no client, so negotiating says so at once, naming the requirement's revisions."""
    with pytest.raises(
        ValueError, match=r"every revision its required_capabilities allow \(2026-07-28\) is newer"
    ):
        negotiate(FastMCP("x"), Policy(required_capabilities=("extensions",)))
