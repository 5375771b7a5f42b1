"""mcp 1.x: `instrument()`, the OpenTelemetry instrumentor, and policies the SDK cannot serve.

Installation state is process-wide, so what depends on a fresh process (nothing
negotiated before `instrument()`) runs in a subprocess, as users run it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mcp_negotiation import Policy, instrument, negotiate
from mcp_negotiation.adapters.mcp1.seams import sdk_revisions

NEWEST = sdk_revisions()[-1]

_SERVE_ONE_CALL = """
import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.memory import create_connected_server_and_client_session as connect
from mcp_negotiation import NoNegotiation, negotiation_of

server = FastMCP("shop")

@server.tool()
async def who(ctx: Context) -> str:
    try:
        record = negotiation_of()
    except NoNegotiation:
        return "not negotiated"
    return f"{record.protocol_version} {record.outcome}"

async def main() -> None:
    async with connect(server) as client:
        print((await client.call_tool("who", {})).content[0].text)

anyio.run(main)
"""


def _run(setup: str) -> str:
    script = textwrap.dedent(setup) + _SERVE_ONE_CALL
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_instrument_first_thing_in_a_process_negotiates_servers_built_afterwards() -> None:
    answer = _run(
        """
        from mcp_negotiation import Policy, instrument
        instrument(Policy(max_revision="2025-03-26"))
        """
    )
    assert answer == "2025-03-26 counter_offered"  # the SDK client asks for its newest


def test_the_opentelemetry_instrumentor_negotiates_on_1x() -> None:
    answer = _run(
        """
        from mcp_negotiation import Policy
        from mcp_negotiation.tools.instrumentor import McpNegotiationInstrumentor
        McpNegotiationInstrumentor().instrument(policy=Policy(max_revision="2025-03-26"))
        """
    )
    assert answer == "2025-03-26 counter_offered"


def test_a_policy_above_every_revision_of_this_sdk_says_so() -> None:
    from mcp.server.fastmcp import FastMCP

    policy = Policy(min_revision="2026-07-28")
    expected = f"newer than every revision mcp .* serves \\(the newest is {NEWEST}\\)"
    with pytest.raises(ValueError, match=expected):
        negotiate(FastMCP("x"), policy)
    with pytest.raises(ValueError, match=expected):
        instrument(policy)  # at once, not in every server's constructor later
    FastMCP("still-built")  # nothing was left instrumented
