"""The Prometheus test's server: `examples/prometheus_metrics.py`, with a tool whose latency
the client asks for, and a policy that refuses clients that cannot sample.

    python tests/support/servers/metrics_server.py      prints READY <mcp port> <metrics port>

The latency is the traffic's: a test sends each era's calls with a delay of its own, so
that the p99 Prometheus answers per revision has a bucket to be found in.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from mcp_negotiation import Policy
from prometheus_metrics import build, serve

POLICY = Policy(min_revision="2025-06-18", required_capabilities=("sampling",))


def main() -> None:
    server = build(POLICY)

    @server.tool()
    async def wait(seconds: float) -> float:
        """Answer after `seconds` (at most one): the latency the test's traffic asks for."""
        await anyio.sleep(min(max(seconds, 0.0), 1.0))
        return seconds

    serve(server, 0, 0)


if __name__ == "__main__":
    main()
