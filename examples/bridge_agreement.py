"""A proxy exposing an A2A agent to MCP clients: what may it advertise downstream?"""

import json

from mcp_negotiation.semver.bridge import Leg, advertised_capabilities, agree

# What the MCP client and the proxy agreed at `initialize` (revision 2025-11-25).
client = Leg(
    "desktop-client",
    "mcp",
    "2025-11-25",
    {
        "tools",
        "tools.listChanged",
        "resources",
        "resources.subscribe",
        "prompts",
        "logging",
        "completions",
        "tasks",
        "tasks.list",
        "tasks.cancel",
        "elicitation",
        "progress.message",
    },
)
# What the A2A agent's card offers at the version the proxy negotiated with it.
agent = Leg(
    "travel-agent",
    "a2a",
    "1.0.0",
    {"skills", "streaming", "tasks", "tasks.cancel", "pushNotifications", "extendedAgentCard"},
)

agreement = agree(downstream=client, upstream=agent)  # A2A names are translated by A2A_MCP

for leg in (agreement.downstream, agreement.upstream):
    print(f"{leg.peer}: {leg.protocol} {leg.version}")
print("served:", ", ".join(sorted(agreement.served)))
for withheld in agreement.withheld:
    print(f"withheld: {withheld.feature} (refused by {withheld.refused_by})")
print("advertise:", json.dumps(advertised_capabilities(agreement), sort_keys=True))
