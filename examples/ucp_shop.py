"""A shop serving UCP over MCP: the business profile is written once, every call negotiated.

    python examples/ucp_shop.py                      # stdio
    python examples/ucp_shop.py --http 8000          # streamable HTTP on 127.0.0.1:8000

Platforms name their profile in `arguments.meta["ucp-agent"].profile` or the
`UCP-Agent` header (on stdio, also once for the session, see docs/ucp-in-servers.md).
Profiles are fetched over HTTPS, from port 443; `--trust-ca`, `--allow-address` and
`--allow-port` let a local test platform on 127.0.0.1 be used, which the default resolver
refuses. A platform at
2026-01-23, the older version the shop still lists, is served what the shop served then:
its profile for that version is pinned, so it is never fetched.
"""

from __future__ import annotations

import argparse
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


def build(
    resolver: ProfileResolver | None = None, *, legacy_meta: bool = False, stamp_results: bool = True
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

    return server


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--trust-ca", metavar="PEM", help="trust this CA for platform profiles")
    parser.add_argument("--allow-address", action="append", default=[], help="a special-use address to allow")
    parser.add_argument(
        "--allow-port", action="append", default=[], type=int, help="a port besides 443 to allow"
    )
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.trust_ca) if args.trust_ca else None
    server = build(
        HttpsProfileResolver(
            ssl_context=context, allow_addresses=args.allow_address, allow_ports=args.allow_port
        )
    )
    if args.http:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
