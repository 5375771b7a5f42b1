"""Ask the user when the client can be asked; otherwise go on with a default.

    python examples/elicit_or_default.py        # stdio

`client_supports(ctx, "elicitation.form")` is true only when the client declared form
elicitation *and* the negotiated revision has it (2025-06-18 or newer) *and* the policy
has not withdrawn it. A client that cannot answer is never asked: it gets the default.

How the question travels depends on the era, and the two tools show both ways:

- `ship` lets a resolver ask. The resolver returns `Elicit(...)` or the default, and the
  SDK sends the question the way the negotiated revision wants it: an
  `elicitation/create` request in the middle of the call up to 2025-11-25; on 2026-07-28
  an input-required result, which the SDK's `Client` answers with its
  `elicitation_callback` and retries. One code path, both eras.
- `gift_note` calls `await ctx.elicit(...)` itself. That sends `elicitation/create` over
  the connection, which only the legacy era has: on 2026-07-28 the SDK raises
  `NoBackChannelError`. So the tool asks only legacy clients, and gives modern ones the
  default.
"""

from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel

from mcp_negotiation import Policy, client_supports, negotiate, negotiation_of


class Shipping(BaseModel):
    speed: str = "standard"


class GiftNote(BaseModel):
    text: str


DEFAULT_SHIPPING = Shipping()

server = negotiate(MCPServer("elicit-or-default"), Policy())


async def shipping_speed(ctx: Context) -> Elicit[Shipping] | Shipping:
    """Ask the user how fast to ship, or settle for the default."""
    if client_supports(ctx, "elicitation.form"):
        return Elicit("How fast should we ship? (standard or express)", Shipping)
    return DEFAULT_SHIPPING


@server.tool()
async def ship(order_id: str, choice: Annotated[ElicitationResult[Shipping], Resolve(shipping_speed)]) -> str:
    """Ship an order at the speed the user chose, or at the default one."""
    if isinstance(choice, AcceptedElicitation):
        return f"order {order_id}: {choice.data.speed} shipping"
    return f"order {order_id}: not shipped (the user chose to {choice.action})"


@server.tool()
async def gift_note(order_id: str, ctx: Context) -> str:
    """Add a gift note, asking for it with `ctx.elicit` where the connection allows it."""
    if client_supports(ctx, "elicitation.form") and negotiation_of(ctx).era == "legacy":
        answer = await ctx.elicit("A note for the gift card?", GiftNote)
        if isinstance(answer, AcceptedElicitation):
            return f"order {order_id}: note {answer.data.text!r}"
    return f"order {order_id}: no note"


if __name__ == "__main__":
    server.run("stdio")
