"""A shop serving UCP over MCP: the business profile is written once, every call negotiated.

    python examples/ucp_shop.py                      # stdio
    python examples/ucp_shop.py --http 8000          # streamable HTTP on 127.0.0.1:8000

Platforms name their profile in `arguments.meta["ucp-agent"].profile` or the
`UCP-Agent` header (on stdio, also once for the session, see docs/ucp-in-servers.md).
Profiles are fetched over HTTPS, from port 443; `--trust-ca`, `--allow-address` and
`--allow-port` let a local test platform on 127.0.0.1 be used, which the default resolver
refuses. A platform at 2026-01-23, the older version the shop still lists, is served what
the shop served then: its profile for that version is pinned, so it is never fetched.

As one replica of a fleet (docs/deployment.md): `--shared-cache redis://…` shares fetched
profiles through Redis, `--replica NAME` adds a `whoami` tool saying which replica answered
and what it negotiated, and over HTTP the shop tells a service manager it is ready
(`READY=1` on `$NOTIFY_SOCKET`, as systemd's `Type=notify` asks) once it listens.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import ssl
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, UcpPolicy, negotiate, negotiation_of, requires_ucp
from mcp_negotiation.ucp import HttpsProfileResolver, ProfileResolver

BUSINESS_PROFILE = Path(__file__).with_name("ucp") / "business_profile.json"
OLDER_PROFILES = {"2026-01-23": Path(__file__).with_name("ucp") / "business_profile_2026-01-23.json"}
"""What the shop served at the older version its profile still lists in `supported_versions`."""
CHECKOUT = "dev.ucp.shopping.checkout"
WHOAMI = ("era", "protocol_version", "client_capabilities", "client_info", "session_id", "ucp")
"""What `whoami` tells of the call's negotiation, besides the replica's name."""


def build(
    resolver: ProfileResolver | None = None,
    *,
    legacy_meta: bool = False,
    stamp_results: bool = True,
    replica: str | None = None,
) -> MCPServer:
    ucp = UcpPolicy(
        business_profile=BUSINESS_PROFILE,
        supported_profiles=OLDER_PROFILES,
        resolver=resolver,
        stamp_results=stamp_results,
        legacy_meta=legacy_meta,
    )
    server = negotiate(MCPServer("ucp-shop"), Policy(ucp=ucp))

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
        """Open a checkout; extensions the platform shares (discounts, gift wrap) are offered."""
        agreement = negotiation_of(ctx).ucp
        return {"items": items, "status": "incomplete", "extensions": sorted(agreement.capabilities)}

    @server.tool()
    async def negotiated(ctx: Context) -> dict[str, Any]:
        """The full UCP agreement of this call (None when the call named no platform)."""
        record = negotiation_of(ctx)
        return {"ucp": record.ucp.as_dict() if record.ucp else None}

    if replica is not None:

        @server.tool()
        async def whoami(ctx: Context) -> dict[str, Any]:
            """Which replica answered, and the negotiation this call was served under."""
            record = negotiation_of(ctx).as_dict()
            return {"replica": replica, **{name: record[name] for name in WHOAMI}}

    return server


def _tell_service_manager(state: str) -> None:
    """`state` to the service manager's notify socket (`sd_notify`), when there is one."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.connect("\0" + address[1:] if address.startswith("@") else address)
        notify.sendall(state.encode())


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port` whose connections send each answer at once.

    Nagle is off for every connection accepted from it (they inherit the option): asyncio
    turns it off only on sockets made with IPPROTO_TCP, which `create_server` does not ask
    for, and with it on, an answer on a kept-alive connection waits for the client's delayed
    ACK of the request, 40 ms, before it is sent."""
    listening = socket.create_server((host, port), backlog=1024)
    listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return listening


def serve_http(server: MCPServer, args: argparse.Namespace) -> None:
    """Serve over streamable HTTP on a socket bound here: connections that arrive before
    uvicorn has started wait in the kernel's queue, so the shop is ready once it listens."""
    import uvicorn

    listening = listening_socket(args.host, args.http)
    host, port = listening.getsockname()[:2]
    config = uvicorn.Config(
        server.streamable_http_app(),
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=args.timeout_keep_alive,
        timeout_graceful_shutdown=args.timeout_graceful_shutdown,
    )
    logging.info("ucp-shop serving http://%s:%s/mcp", host, port)
    _tell_service_manager(f"READY=1\nSTATUS=serving http://{host}:{port}/mcp\nMAINPID={os.getpid()}")
    uvicorn.Server(config).run(sockets=[listening])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on over HTTP")
    parser.add_argument("--replica", metavar="NAME", help="this replica's name (a `whoami` tool, the log)")
    parser.add_argument("--shared-cache", metavar="REDIS_URL", help="share fetched profiles through Redis")
    parser.add_argument("--store-timeout", type=float, default=1.0, help="seconds a call may wait on Redis")
    parser.add_argument("--lock-seconds", type=float, default=15.0, help="the fleet's fetch lock (> fetch)")
    parser.add_argument("--fetch-timeout", type=float, default=10.0, help="seconds a profile fetch may take")
    parser.add_argument("--trust-ca", metavar="PEM", help="trust this CA for platform profiles")
    parser.add_argument("--allow-address", action="append", default=[], help="a special-use address to allow")
    parser.add_argument(
        "--allow-port", action="append", default=[], type=int, help="a port besides 443 to allow"
    )
    parser.add_argument("--timeout-keep-alive", type=float, default=75.0, help="uvicorn's, in seconds")
    parser.add_argument("--timeout-graceful-shutdown", type=float, default=10.0, help="uvicorn's, in seconds")
    args = parser.parse_args()
    shared_cache = None
    if args.shared_cache:
        from mcp_negotiation.ucp.shared_cache import RedisProfileCache

        shared_cache = RedisProfileCache(
            args.shared_cache, timeout=args.store_timeout, lock_seconds=args.lock_seconds
        )
    resolver = HttpsProfileResolver(
        ssl_context=ssl.create_default_context(cafile=args.trust_ca) if args.trust_ca else None,
        allow_addresses=args.allow_address,
        allow_ports=args.allow_port,
        connect_timeout=args.fetch_timeout / 2,
        read_timeout=args.fetch_timeout / 2,
        total_timeout=args.fetch_timeout,
        shared_cache=shared_cache,
    )
    server = build(resolver, replica=args.replica)
    if args.http is None:
        server.run("stdio")
        return
    # One line per record, naming the replica (the SDK may install Rich's handler, which wraps).
    name = f" {args.replica}" if args.replica else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s{name} %(levelname)s %(message)s", force=True)
    serve_http(server, args)


if __name__ == "__main__":
    main()
