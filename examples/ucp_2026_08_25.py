"""UCP 2026-08-25 beside an older version, with the pure core: no server, no network.

The business speaks 2026-08-25 and still serves 2026-04-08 from that version's own
profile, the one its `supported_versions` points to: each platform is negotiated against
the business profile of the platform's version, never a mix of the two. Its loyalty
extension's schema requires checkout 2026-06-01 or later, which only the 2026-08-25
checkout meets. One platform names a schema that its namespace's owner does not serve.
"""

from __future__ import annotations

from mcp_negotiation.ucp import Profile, Requirements, UcpAgreement, negotiate_capabilities

CHECKOUT = "dev.ucp.shopping.checkout"
FULFILLMENT = "dev.ucp.shopping.fulfillment"
LOYALTY = "com.acme.shopping.loyalty"
SCHEMAS = "https://ucp.dev/2026-08-25/schemas/shopping"
LOYALTY_SCHEMA = "https://acme.com/ucp/schemas/loyalty.json"

CURRENT = Profile.from_json(
    {
        "ucp": {
            "version": "2026-08-25",
            "supported_versions": {"2026-04-08": "https://shop.example/.well-known/ucp/2026-04-08"},
            "capabilities": {
                CHECKOUT: [{"version": "2026-08-25", "schema": f"{SCHEMAS}/checkout.json"}],
                FULFILLMENT: [
                    {"version": "2026-08-25", "schema": f"{SCHEMAS}/fulfillment.json", "extends": CHECKOUT}
                ],
                LOYALTY: [{"version": "2026-06-15", "schema": LOYALTY_SCHEMA, "extends": CHECKOUT}],
            },
            "services": {},
            "payment_handlers": {},
        }
    }
)

# What the shop served at 2026-04-08: a profile of that one version, with no supported_versions.
AT_2026_04_08 = Profile.from_json(
    {
        "ucp": {
            "version": "2026-04-08",
            "capabilities": {
                CHECKOUT: [{"version": "2026-04-08"}],
                FULFILLMENT: [{"version": "2026-04-08", "extends": CHECKOUT}],
                LOYALTY: [{"version": "2026-06-15", "extends": CHECKOUT}],
            },
        }
    }
)
BY_VERSION = {profile.version: profile for profile in (CURRENT, AT_2026_04_08)}

# The loyalty extension's own schema, as the specification's example writes its `requires`.
REQUIREMENTS = Requirements(
    schemas=[
        {
            "name": LOYALTY,
            "version": "2026-06-15",
            "requires": {
                "protocol": {"min": "2026-01-23"},
                "capabilities": {CHECKOUT: {"min": "2026-06-01"}},
            },
        }
    ]
)


def agree(platform: Profile) -> UcpAgreement:
    """The business's profile for the platform's version (an unknown one meets the gate)."""
    business = BY_VERSION.get(platform.version, CURRENT)
    return negotiate_capabilities(business, platform, requires=REQUIREMENTS)


def platform(version: str, fulfillment_schema: str | None = None) -> Profile:
    fulfillment = {"version": version, **({"schema": fulfillment_schema} if fulfillment_schema else {})}
    return Profile.from_json(
        {
            "ucp": {
                "version": version,
                "capabilities": {
                    CHECKOUT: [{"version": version}],
                    FULFILLMENT: [fulfillment],
                    LOYALTY: [{"version": "2026-06-15"}],
                },
            }
        }
    )


PLATFORMS = {
    "a 2026-08-25 platform": platform("2026-08-25", f"{SCHEMAS}/fulfillment.json"),
    "a 2026-04-08 platform": platform("2026-04-08"),
    "a platform with a borrowed schema": platform("2026-08-25", "https://cdn.example.net/fulfillment.json"),
}


def main() -> None:
    for who, profile in PLATFORMS.items():
        agreement = agree(profile)
        print(f"{who}: UCP {agreement.version}")
        for name, version in agreement.capabilities.items():
            print(f"  active   {name} {version}")
        for name, reason in agreement.dropped.items():
            print(f"  dropped  {name}: {reason}")
    try:
        negotiate_capabilities(CURRENT, PLATFORMS["a 2026-04-08 platform"])
    except ValueError as refused:  # a mistake of the caller's: never a profile combined across versions
        print("the current profile at 2026-04-08:", str(refused).split(" (")[0])


if __name__ == "__main__":
    main()
