"""One tool name, served to each client by the implementation it can use (tool variants).

    python examples/tool_variants.py                    # stdio
    python examples/tool_variants.py --http 8000 [--stateless]

`research` refines its topic with the user through a form; a client that cannot be asked
(no `elicitation`) is listed, and served, `research` as `lookup` instead: a fixed query and
a result count, its own input schema. `summarize` needs the client's model (`sampling`); a
client without one gets `summarize` as `summarize_locally`, a fallback, which truncates.
Each client's `tools/list` carries the fingerprint of the capability view it was listed
for, under `_meta["dev.mcp-negotiation/capabilityScope"]`.
"""

import argparse
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import AcceptedElicitation, Elicit, ElicitationResult, MCPServer, Resolve, Sample
from pydantic import BaseModel

from mcp_negotiation import Policy, negotiate, requires, variant_of


class Refinement(BaseModel):
    """What the user narrows the research to."""

    focus: str


async def ask_the_user(topic: str) -> Elicit[Refinement]:
    # Only clients that can be asked are served `research` (the others get `lookup`).
    return Elicit(f"What about {topic} should I look into?", Refinement)


async def ask_the_model(text: str) -> Sample:
    # Only clients that can sample are served `summarize` (the others `summarize_locally`).
    prompt = types.TextContent(type="text", text=f"Summarize in one line: {text}")
    return Sample([types.SamplingMessage(role="user", content=prompt)], max_tokens=100)


def build(*, policy: Policy | None = None) -> MCPServer:
    server = negotiate(MCPServer("tool-variants"), policy or Policy())

    @server.tool()
    async def research(
        topic: str, refined: Annotated[ElicitationResult[Refinement], Resolve(ask_the_user)]
    ) -> str:
        """Research `topic`, narrowed with the user through a form."""
        focus = refined.data.focus if isinstance(refined, AcceptedElicitation) else "everything"
        return f"research on {topic}, focused on {focus}"

    @server.tool()
    @variant_of("research", unless="elicitation")
    async def lookup(query: str, limit: int = 3) -> str:
        """Look up `query` as given: the top `limit` results."""
        return f"top {limit} results for {query}"

    @server.tool()
    @requires("sampling")
    async def summarize(
        text: str, reply: Annotated[types.CreateMessageResult, Resolve(ask_the_model)]
    ) -> str:
        """Summarize `text` with the client's model."""
        return reply.content.text if isinstance(reply.content, types.TextContent) else "(no text)"

    @server.tool()
    @variant_of("summarize")  # no condition: for the clients `summarize` itself cannot serve
    async def summarize_locally(text: str, words: int = 5) -> str:
        """Summarize `text` as its first `words` words."""
        return " ".join(text.split()[:words])

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--stateless", action="store_true")
    args = parser.parse_args()
    server = build()
    if args.http:
        import uvicorn

        app = server.streamable_http_app(stateless_http=args.stateless)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    else:
        server.run("stdio")
