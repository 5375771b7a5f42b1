"""An MCP proxy in front of an A2A agent that advertises only what both legs agreed.

    python examples/bridge_proxy.py        # stdio

A proxy negotiates twice, and neither negotiation sees the other: with each MCP client
(this library does that, per connection or per request) and with the A2A agent behind
it. Here the upstream leg is fixed values, standing in for the agent card a real proxy
reads once at start-up; nothing goes over a network, and relaying calls to the agent is
left out.

For every client, `initialize` (legacy) and `server/discover` (modern) are answered
with `advertised_capabilities(agree(client_leg, AGENT))` in place of what the SDK would
advertise on its own, by a five-line SDK middleware. The client leg is what this proxy
serves at the client's revision, plus what the client can do for the agent
(`elicitation`, which answers A2A's input-required state). What the agent cannot back
(resources, prompts, list-changed notifications) is withheld and never advertised; what
the agent offers but this proxy or its client cannot carry (push notifications, tasks)
is withheld too. The `agreement` tool shows the caller its own agreement.
"""

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Negotiation, Policy, negotiate, negotiation_of
from mcp_negotiation.core.revisions import FEATURES
from mcp_negotiation.semver.bridge import Agreement, Leg, advertised_capabilities, agree

# The upstream leg: what the A2A agent's card offers at the version the proxy agreed with it.
AGENT = Leg(
    "travel-agent",
    "a2a",
    "1.0.0",
    {"skills", "streaming", "tasks", "tasks.cancel", "inputRequired", "pushNotifications"},
)

# What this proxy's MCP side implements, in MCP's names (revision-dependent ones are
# kept only at revisions that have them; see mcp_negotiation.core.revisions.FEATURES).
PROXY_FEATURES = frozenset({"tools", "tools.listChanged", "resources", "prompts", "progress.message"})

# What a client may do for the agent, kept when the client supports it.
CLIENT_FEATURES = ("elicitation",)


def client_leg(record: Negotiation) -> Leg:
    """The downstream leg, as this library negotiated it with one client."""
    revision = record.protocol_version
    features = {f for f in PROXY_FEATURES if f not in FEATURES or FEATURES[f].at(revision)}
    features |= {f for f in CLIENT_FEATURES if record.supports(f)}
    return Leg(record.client_name or "mcp-client", "mcp", revision, features)


def agreement_for(record: Negotiation) -> Agreement:
    return agree(downstream=client_leg(record), upstream=AGENT)


async def advertise_the_agreement(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """SDK middleware: answer the handshake and discovery with what both legs agreed."""
    result = await call_next(ctx)
    if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
        result["capabilities"] = advertised_capabilities(agreement_for(negotiation_of(ctx)))
    return result


server = negotiate(MCPServer("a2a-proxy", middleware=[advertise_the_agreement]), Policy())


@server.tool()
async def agreement(ctx: Context) -> dict[str, Any]:
    """What this proxy agreed for the calling client, and what it withheld from whom."""
    made = agreement_for(negotiation_of(ctx))
    return {
        "downstream": f"{made.downstream.protocol} {made.downstream.version}",
        "upstream": f"{made.upstream.protocol} {made.upstream.version}",
        "served": sorted(made.served),
        "withheld": {w.feature: str(w.refused_by) for w in made.withheld},
        "advertised": advertised_capabilities(made),
    }


if __name__ == "__main__":
    server.run("stdio")
