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
from mcp_negotiation.adapters.mcp1.seams import sdk_revisions

pytestmark = pytest.mark.anyio

NEWEST = sdk_revisions()[-1]
WITH_ELICITATION = [r for r in sdk_revisions() if r >= "2025-06-18"]
"""What `elicitation` narrows a policy to on this release: 2025-06-18 and after (both ends of
the 1.x range serve 2025-06-18, so these tests run on each)."""


@contextmanager
def _target(kind: str, require: str) -> Iterator[Any]:
    if kind == "memory":
        yield build(Policy(required_capabilities=(require,)))
    else:
        with serve_http(build(Policy(required_capabilities=(require,))).streamable_http_app()) as url:
            yield url


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_legacy_client_of_a_left_out_revision_is_counter_offered_and_served(kind: str) -> None:
    with _target(kind, "elicitation") as target:
        async with session(kind, target, "2025-03-26", {"elicitation": {}}) as (client, init):
            assert init.protocolVersion == NEWEST
            record = seen(await client.call_tool("negotiation", {}))
    assert (record["protocol_version"], record["outcome"]) == (NEWEST, "counter_offered")


async def test_a_stateless_legacy_request_of_a_left_out_revision_is_refused_32022() -> None:
    server = build(Policy(required_capabilities=("elicitation",)), stateless=True)
    error = (await stateless_call(server, "2025-03-26"))["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": WITH_ELICITATION[::-1],
        "requested": "2025-03-26",
        "requiredCapabilities": {"elicitation": {}},
    }


def test_a_modern_only_requirement_is_a_configuration_error_on_1x() -> None:
    """No 1.x release serves 2026-07-28: a policy whose requirements only it can meet would
    serve no client, so negotiating says so at once, naming the requirement's revisions."""
    with pytest.raises(
        ValueError, match=r"every revision its required_capabilities allow \(2026-07-28\) is newer"
    ):
        negotiate(FastMCP("x"), Policy(required_capabilities=("extensions",)))
