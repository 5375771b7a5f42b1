"""Clients as they really are: per-client rules, and MCP Apps negotiated by its settings.

    python examples/client_overrides.py           # a tour: four clients, each era, in memory
    python examples/client_overrides.py --stdio   # the same server over stdio

The policy says three things the clients do not:

- `acme-desk` before 2.0 declares form elicitation but never shows the form: revoked;
- `acme-desk` from 2.0 on renders MCP Apps without declaring them: the extension granted,
  with the settings it would have declared;
- every client renders resource links, except `acme-cli`, which drops the whole result
  (the first rule naming a capability decides it, so the exception comes first).

It also declares the MCP Apps extension once, which both advertises it and agrees it with
each client: `dashboard` needs the client to render `text/html;profile=mcp-app`.
"""

import sys

import anyio
from mcp import Client
from mcp.client import advertise
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from mcp_negotiation import (
    ClientOverride,
    Policy,
    client_supports,
    negotiate,
    negotiation_of,
    requires_extension,
)

APPS = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"

POLICY = Policy(
    client_overrides=[
        ClientOverride("acme-desk", versions="<2", revoke=["elicitation.form"], id="acme-desk-no-forms"),
        ClientOverride("acme-desk", versions=">=2", grant={APPS: {"mimeTypes": [APP_MIME]}}, id="acme-apps"),
        ClientOverride("acme-cli", revoke=["client.renders_resource_links"], id="acme-cli-no-links"),
        ClientOverride("*", grant=["client.renders_resource_links"], id="links-everywhere"),
        *ClientOverride.known(),
    ],
    extensions={APPS: {}},
)


def build() -> MCPServer:
    """The server: two tools, and the policy above."""
    server = negotiate(MCPServer("client-overrides"), POLICY)

    @server.tool()
    async def report(ctx: Context) -> str:
        """What this client is told, and why: each answer a rule decided names the rule."""
        record = negotiation_of(ctx)
        asks = "asks" if client_supports(ctx, "elicitation.form") else "uses the default"
        links = "links" if client_supports(ctx, "client.renders_resource_links") else "inline text"
        apps = "apps" if client_supports(ctx, APPS, mimeTypes=[APP_MIME]) else "no apps"
        rules = ", ".join(f"{name}: {rule}" for name, rule in sorted(record.overrides.items())) or "none"
        return f"{record.client_name} {record.client_version}: {asks}, {links}, {apps}; rules: {rules}"

    @server.tool()
    @requires_extension(APPS, mimeTypes=[APP_MIME])
    async def dashboard(ctx: Context) -> str:
        """Only for clients that render MCP Apps (-32021 for the others)."""
        agreed = negotiation_of(ctx).extensions[APPS]
        return f"dashboard at ui://dashboard (agreed {agreed.identifier})"

    return server


CLIENTS = (
    ("acme-desk", "1.4.0", {"elicitation": {}}),
    ("acme-desk", "2.1.0", {"elicitation": {}}),
    ("acme-cli", "1.0.0", {}),
    ("Visual Studio Code", "1.138.0", {"elicitation": {}, APPS: {"mimeTypes": [APP_MIME]}}),
)


async def tour(target: object, mode: str) -> list[str]:
    """Each client of `CLIENTS` connected to `target` (a server, stdio parameters or a URL) in
    `mode` ("legacy" or "2026-07-28"): what `report` said, and what `dashboard` answered."""
    lines = []
    for name, version, declared in CLIENTS:
        apps = [advertise(APPS, declared[APPS])] if APPS in declared else None
        client = Client(
            target,  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            client_info=Implementation(name=name, version=version),
            extensions=apps,
            elicitation_callback=_never_called if "elicitation" in declared else None,
        )
        async with client:
            said = await client.call_tool("report", {})
            lines.append(said.content[0].text)  # type: ignore[union-attr]
            try:
                shown = await client.call_tool("dashboard", {})
                lines.append(f"  dashboard: {shown.content[0].text}")  # type: ignore[union-attr]
            except MCPError as refused:
                lines.append(f"  dashboard: {refused.error.code} {refused.error.data}")
    return lines


async def _never_called(context: object, params: object) -> object:
    raise AssertionError("the tour asks nothing")


async def main() -> None:
    server = build()
    for mode in ("legacy", "2026-07-28"):
        print(f"-- {mode}")
        print("\n".join(await tour(server, mode)))


if __name__ == "__main__":
    if "--stdio" in sys.argv:
        build().run("stdio")
    else:
        anyio.run(main)
