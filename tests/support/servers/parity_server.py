"""The parity suite's server, one for both SDK majors: the same policy, tools, prompt and
resource template registered on the installed SDK's server (mcp 2.x `MCPServer`, mcp 1.x
`FastMCP`), so that what tests/adapters/mcp{1,2}/test_parity.py compare is the library's
doing, not the servers'.

    python tests/support/servers/parity_server.py --spans PATH [--min-revision R] [--require CAP] [--clients]

Every span is recorded in memory and written to PATH as JSON when standard input closes
and the server returns. Nothing but JSON-RPC goes to standard output.
"""

import argparse
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_negotiation import (
    ClientOverride,
    Policy,
    client_supports,
    negotiate,
    negotiation_of,
    requires,
    requires_extension,
    requires_ucp,
    variant_of,
)
from mcp_negotiation.ucp import StaticResolver, UcpPolicy

UCP = Path(__file__).resolve().parents[3] / "examples" / "ucp"
PLATFORM = "https://platform.example/profile.json"
"""The one platform the shop knows (a `StaticResolver`: no I/O): examples/ucp/platform_profile.json."""
CHECKOUT = "dev.ucp.shopping.checkout"
FEATURES = ("roots", "roots.listChanged", "sampling", "elicitation", "tasks")
"""What the `negotiation` tool asks `client_supports` about."""
APPS, APP_MIME = "io.modelcontextprotocol/ui", "text/html;profile=mcp-app"
"""With `--clients`: the MCP Apps extension, declared by the server with no settings."""
RULE = ClientOverride("acme-desk", versions="<2", revoke=["sampling"], id="acme-desk-never-samples")
"""With `--clients`: a client that declares `sampling` and never answers it."""


def install(server: Any, context: type, *, variant: bool) -> None:
    """Register the suite's tools, prompt and resource template on `server`, whose SDK hands
    a handler its `context` type (the one it knows the parameter by; the annotations are
    evaluated here, so each SDK sees its own class); with `variant`, `summarize_locally` for
    the clients `summarize` cannot serve, and `dashboard` for those rendering MCP Apps."""

    @server.tool()
    async def negotiation(ctx: context) -> dict[str, Any]:  # type: ignore[valid-type]
        """The caller's negotiation, and what `client_supports` answers of it."""
        supports = {name: client_supports(ctx, name) for name in FEATURES}
        return {**negotiation_of(ctx).as_dict(), "supports": supports}

    @server.resource("notes://{topic}")
    @requires("elicitation")
    def notes(topic: str) -> str:
        return f"notes on {topic}"

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        return text[:20]

    if variant:

        @server.tool()
        @variant_of("summarize")
        async def summarize_locally(text: str, words: int = 1) -> str:
            return " ".join(text.split()[:words])

        @server.tool()
        @requires_extension(APPS, mimeTypes=[APP_MIME])
        async def dashboard(ctx: context) -> str:  # type: ignore[valid-type]
            return f"ui://dashboard ({negotiation_of(ctx).extensions[APPS].identifier})"

    @server.prompt()
    @requires("sampling")
    def brief(topic: str) -> str:
        return f"Brief me on {topic}."

    @server.tool()
    @requires_ucp(CHECKOUT)
    async def create_checkout(
        items: list[str],
        ctx: context,  # type: ignore[valid-type]
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A UCP checkout: the agreement this call was served under."""
        agreement = negotiation_of(ctx).ucp
        assert agreement is not None  # (`@requires_ucp` refuses a call naming no platform)
        return {"items": items, "agreed": agreement.as_dict()}


def serve() -> None:
    """Parse the command line, record spans, build the negotiated server and serve it on stdio:
    a UCP shop (results stamped with the agreement) whose listings are scoped to each client."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=Path, required=True)
    parser.add_argument("--min-revision")
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--clients", action="store_true", help="RULE, a variant, MCP Apps")
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    resolver = StaticResolver({PLATFORM: UCP / "platform_profile.json"})
    ucp = UcpPolicy(business_profile=UCP / "business_profile.json", resolver=resolver, stamp_results=True)
    policy = Policy(
        min_revision=args.min_revision,
        required_capabilities=tuple(args.require),
        hide_unusable=True,
        ucp=ucp,
        client_overrides=[RULE] if args.clients else (),
        extensions={APPS: {}} if args.clients else None,
    )
    if version("mcp").startswith("1."):
        from mcp.server.fastmcp import Context, FastMCP

        server, context = negotiate(FastMCP("parity"), policy), Context
    else:
        from mcp.server.mcpserver import Context, MCPServer

        server, context = negotiate(MCPServer("parity"), policy), Context
    install(server, context, variant=args.clients)
    try:
        server.run("stdio")
    finally:
        args.spans.write_text(json.dumps([_dumped(span) for span in exporter.get_finished_spans()]))


def _dumped(span: ReadableSpan) -> dict[str, Any]:
    context, parent = span.get_span_context(), span.parent
    attributes = {key: list(v) if isinstance(v, tuple) else v for key, v in (span.attributes or {}).items()}
    ids = {"span_id": context.span_id if context else None, "parent_id": parent.span_id if parent else None}
    return {"name": span.name, "kind": span.kind.name, **ids, "attributes": attributes}


if __name__ == "__main__":
    serve()
