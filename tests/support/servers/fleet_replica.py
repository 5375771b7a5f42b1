"""One replica of the fleet tests/ucp/test_fleet.py runs behind HAProxy: the example shop
(examples/ucp_shop.py's policy) whose resolver shares its profile cache through Redis.

    python tests/support/servers/fleet_replica.py --fd FD --name NAME --redis URL --trust-ca PEM

`--fd` is a socket the test bound and listens on, so HAProxy may connect before uvicorn
has started (the kernel queues the connections). The `whoami` tool answers which replica
served the call and what was negotiated for it, so the test can tell cross-talk apart.
SIGTERM stops the replica as uvicorn does: no new connections, the requests in flight
finish (within 10 s), then the streams still open (legacy GET streams) are cut.
"""

from __future__ import annotations

import argparse
import logging
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from mcp_negotiation import negotiation_of
from mcp_negotiation.ucp import ALL_PORTS, HttpsProfileResolver
from mcp_negotiation.ucp.shared_cache import RedisProfileCache
from ucp_shop import build


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--trust-ca", required=True)
    args = parser.parse_args()
    resolver = HttpsProfileResolver(
        ssl_context=ssl.create_default_context(cafile=args.trust_ca),
        allow_addresses=["127.0.0.1"],
        allow_ports=ALL_PORTS,
        # Generous: on the test's two loaded cores a replica's event loop lags by seconds, and
        # the platforms' host runs in the test's own process, which its 200 clients (and, in
        # a whole-suite run, all the process carries) stall for seconds at a time. A fetch
        # timed out is remembered by the whole fleet for its backoff, and every call naming
        # that platform refused meanwhile. The fleet's lock outlasts the longest fetch.
        connect_timeout=30.0,
        read_timeout=30.0,
        total_timeout=60.0,
        shared_cache=RedisProfileCache(args.redis, timeout=5.0, lock_seconds=90.0),
    )
    server = build(resolver)
    # One line per record (the SDK installs Rich's handler, which wraps at 80 columns): the
    # test quotes the replicas' warnings when it fails.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)

    @server.tool()
    async def whoami(ctx: Context) -> dict[str, Any]:
        """Which replica answered, and the negotiation this call was served under."""
        record = negotiation_of(ctx).as_dict()
        keep = ("era", "protocol_version", "client_capabilities", "client_info", "session_id", "ucp")
        return {"replica": args.name, **{name: record[name] for name in keep}}

    sock = socket.socket(fileno=args.fd)
    config = uvicorn.Config(
        server.streamable_http_app(),
        log_level="warning",
        timeout_graceful_shutdown=10,
        lifespan="on",
        # Longer than HAProxy keeps an idle connection to a replica (5 s): a replica that
        # closed one first could receive a request on it as it closes, which fails.
        timeout_keep_alive=60,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
