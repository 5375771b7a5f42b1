"""A server that must hear when the client's roots change: legacy revisions only.

    python examples/era_requirements.py            # stdio
    python examples/era_requirements.py --policy   # print the policy and what it accepts

`notifications/roots/list_changed` exists up to 2025-11-25 only, so
`Policy(required_capabilities=("roots.listChanged",))` narrows itself to the legacy
revisions, and its repr says so. A 2026-07-28 client is refused at once with -32022:
`data.supported` lists the revisions that could serve it, and `data.requiredCapabilities`
what its own revision cannot have. A legacy client that declares `roots.listChanged` is
served at the revision it asked for; one that does not is refused at `initialize` (-32021).
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import Policy, negotiate, negotiation_of

POLICY = Policy(required_capabilities=("roots.listChanged",))


def build() -> MCPServer:
    server = negotiate(MCPServer("roots-watcher"), POLICY)

    @server.tool()
    async def revision(ctx: Context) -> str:
        """The revision this client is served at."""
        return negotiation_of(ctx).protocol_version

    return server


if __name__ == "__main__":
    if "--policy" in sys.argv[1:]:
        print(repr(POLICY))
        print("accepts", ", ".join(POLICY.accepted()))
        print("left out", POLICY.narrowed())
    else:
        build().run("stdio")
