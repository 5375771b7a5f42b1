"""UCP capability negotiation with the pure core, no server and no network.

A business serves checkout, cart, order and three extensions. A platform's request names
its profile in the `UCP-Agent` header; the business resolves it (here from a pinned
copy), negotiates, answers a checkout operation with the capabilities relevant to it,
and refuses a cart operation the way UCP asks: as a tool result, not an error.
"""

from __future__ import annotations

import asyncio
import json

from mcp_negotiation.ucp import (
    Profile,
    StaticResolver,
    UcpError,
    negotiate_capabilities,
    parse_ucp_agent,
)

CHECKOUT = "dev.ucp.shopping.checkout"
CART = "dev.ucp.shopping.cart"

BUSINESS = Profile.from_json(
    {
        "ucp": {
            "version": "2026-04-08",
            "supported_versions": {"2026-01-23": "https://shop.example/.well-known/ucp/2026-01-23"},
            "capabilities": {
                CHECKOUT: [{"version": "2026-04-08"}, {"version": "2026-01-23"}],
                CART: [{"version": "2026-04-08"}],
                "dev.ucp.shopping.order": [{"version": "2026-04-08"}],
                "dev.ucp.shopping.fulfillment": [{"version": "2026-04-08", "extends": CHECKOUT}],
                "com.example.gift_wrap": [
                    {"version": "2026-04-08", "extends": "dev.ucp.shopping.fulfillment"}
                ],
                "dev.ucp.shopping.discount": [{"version": "2026-04-08", "extends": [CHECKOUT, CART]}],
            },
        }
    }
)

# A minimal real-world platform profile: no services, no spec or schema URLs.
PLATFORM = {
    "ucp": {
        "version": "2026-04-08",
        "capabilities": {
            CHECKOUT: [{"version": "2026-01-23"}, {"version": "2026-04-08"}, {"version": "2026-08-25"}],
            "dev.ucp.shopping.order": [{"version": "2026-08-25"}],
            "dev.ucp.shopping.fulfillment": [{"version": "2026-01-11"}],
            "com.example.gift_wrap": [{"version": "2026-04-08"}],
            "dev.ucp.shopping.discount": [{"version": "2026-04-08"}],
        },
    }
}

resolver = StaticResolver({"https://agent.example/profile.json": PLATFORM})


async def main() -> None:
    url = parse_ucp_agent('profile="https://agent.example/profile.json"')
    agreement = negotiate_capabilities(BUSINESS, await resolver.resolve(url))

    print("protocol version:", agreement.version)
    for name, version in agreement.capabilities.items():
        print(f"active   {name} {version}")
    for name, reason in agreement.dropped.items():
        print(f"dropped  {name}: {reason}")

    print("checkout response carries:")
    print(json.dumps({"ucp": agreement.to_ucp_block(CHECKOUT)}, indent=2))

    try:
        agreement.for_operation(CART)
    except UcpError as error:
        print("cart operation answers with the tool result:")
        print(json.dumps(error.to_tool_result(), indent=2))

    old_platform = Profile.from_json({"ucp": {"version": "2026-01-11"}})
    try:
        negotiate_capabilities(BUSINESS, old_platform)
    except UcpError as error:
        print("an unsupported protocol version is a JSON-RPC error:")
        print(json.dumps(error.with_continue_url("https://shop.example/cart").to_jsonrpc_error(), indent=2))


if __name__ == "__main__":
    asyncio.run(main())
