"""An A2A agent answering `A2A-Version` and `A2A-Extensions`, and a bridge relaying its refusal.

No server and no network: the agent's card is read from examples/a2a/agent-card.json,
each request is its headers (or query string), and each answer is printed as it would
be sent. Run it from anywhere: python examples/a2a_negotiation.py
"""

import json
from pathlib import Path

from mcp_negotiation.semver import (
    Leg,
    a2a_leg,
    agree,
    choose_a2a_interface,
    negotiate_a2a,
    read_agent_card,
    relay_refusal,
)

CARD = read_agent_card(json.loads((Path(__file__).parent / "a2a" / "agent-card.json").read_text()))
CITATIONS = "https://standards.org/extensions/citations/v1"  # required by this card
GEOLOCATION = "https://example.com/extensions/geolocation/v1"

# The agent's side: one call per request, with the request's headers and query string.
requests = {
    "both extensions": ({"A2A-Version": "1.0", "A2A-Extensions": f"{GEOLOCATION},{CITATIONS}"}, ""),
    "a patch, and v2 of geolocation": (
        {
            "A2A-Version": "1.0.1",
            "A2A-Extensions": f"{CITATIONS}, https://example.com/extensions/geolocation/v2",
        },
        "",
    ),
    "the version as a query parameter": ({"A2A-Extensions": CITATIONS}, "?A2A-Version=1.0"),
    "no A2A-Version, so 0.3": ({"A2A-Extensions": CITATIONS}, ""),
    "citations not declared": ({"A2A-Version": "1.0", "A2A-Extensions": GEOLOCATION}, ""),
}
for label, (headers, query) in requests.items():
    answer = negotiate_a2a(CARD, headers, query)
    if answer.refusal is not None:
        print(f"{label}: refused {answer.refusal.code}\n  {answer.refusal.message}")
        continue
    assert answer.interface is not None
    echo = "".join(f", answering {name}: {value}" for name, value in answer.response_headers)
    print(f"{label}: A2A {answer.version} on {answer.interface.binding}{echo}")
    if answer.ignored:
        print(f"  ignored, with no fallback to another version: {', '.join(answer.ignored)}")

# The client's side: a bridge that speaks 1.0 or 0.3 over JSON-RPC picks what to send.
choice = choose_a2a_interface(CARD, ["1.0", "0.3"], bindings=["JSONRPC"], extensions=[CITATIONS])
assert choice.interface is not None
assert choice.version is not None
print(f"the bridge sends to {choice.interface.url}:")
for name, value in choice.headers:
    print(f"  {name}: {value}")

# Inside the bridge: an MCP client downstream, the agent upstream.
client = Leg("desktop-client", "mcp", "2025-11-25", {"tools", "tasks", "progress.message", "elicitation"})
agreement = agree(client, a2a_leg("route-planner", CARD, choice.version, choice.extensions))
print("served:", ", ".join(sorted(agreement.served)))
print("withheld:", ", ".join(f"{w.feature} ({w.refused_by})" for w in agreement.withheld))

# The agent is redeployed speaking 0.3 only; the bridge's next request, sent as before, is refused.
redeployed = {"url": "https://georoute-agent.example.com/a2a/v1", "protocolVersion": "0.3"}
refusal = negotiate_a2a(redeployed, dict(choice.headers)).refusal
assert refusal is not None
relayed = relay_refusal(agreement, refusal, refused_by="upstream")
print("the agent answers:", json.dumps(relayed.upstream.to_jsonrpc_error(), indent=2))
print("the client is told:", json.dumps(relayed.downstream.to_jsonrpc_error(), indent=2))
