"""A tool only clients that can sample may call; or, with `--everywhere`, a whole server.

    python examples/requires_sampling.py                # stdio: `summarize` needs sampling
    python examples/requires_sampling.py --everywhere   # stdio: every request needs it

`@requires("sampling")` refuses a call from a client that cannot sample with the
specification's -32021 and `data.requiredCapabilities` (`{"sampling": {}}`), so the
client learns what it would have to declare; `echo` stays open to everyone.

With `--everywhere` the policy itself requires sampling
(`Policy(required_capabilities=("sampling",))`): a legacy client without it is refused
at `initialize`, and a modern one on every request except `server/discover`, which
lets a client find out what it lacks.

The model is the client's: a resolver asks for it with `Sample(...)`, and the SDK carries
the request the way the negotiated revision wants (a `sampling/createMessage` request
up to 2025-11-25, an input-required result on 2026-07-28). Resolvers run before the
tool body, so this one asks only when `client_supports` says yes and leaves the refusal
to `@requires`.
"""

import sys
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample

from mcp_negotiation import Policy, client_supports, negotiate, requires


def build(*, everywhere: bool = False) -> MCPServer:
    policy = Policy(required_capabilities=("sampling",)) if everywhere else Policy()
    server = negotiate(MCPServer("requires-sampling"), policy)

    async def ask_the_model(text: str, ctx: Context) -> Sample | None:
        if not client_supports(ctx, "sampling"):
            return None  # `@requires` refuses the call before the tool body runs
        prompt = types.TextContent(type="text", text=f"Summarize in one line: {text}")
        return Sample([types.SamplingMessage(role="user", content=prompt)], max_tokens=100)

    @server.tool()
    @requires("sampling")
    async def summarize(
        text: str, reply: Annotated[types.CreateMessageResult | None, Resolve(ask_the_model)]
    ) -> str:
        """Summarize `text` with the client's model."""
        assert reply is not None
        content = reply.content
        return content.text if isinstance(content, types.TextContent) else "(no text)"

    @server.tool()
    async def echo(text: str) -> str:
        """Open to every client (unless the policy requires sampling everywhere)."""
        return text

    return server


if __name__ == "__main__":
    build(everywhere="--everywhere" in sys.argv[1:]).run("stdio")
