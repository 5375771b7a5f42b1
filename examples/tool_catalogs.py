"""Tool catalogs that say what each tool needs, and, on request, list only what a client can use.

    python examples/tool_catalogs.py                    # stdio: every tool listed, requirements declared
    python examples/tool_catalogs.py --hide             # stdio: each client sees only what it can use
    python examples/tool_catalogs.py --http 8000 [--stateless] [--hide]

`summarize` needs sampling and `ask_user` form elicitation; `echo` needs nothing. Every
client finds their needs in `tools/list`, under each tool's
`_meta["io.modelcontextprotocol/requiredCapabilities"]`: the very object a -32021 for that
tool would carry. With `Policy(hide_unusable=True)` a client that cannot sample does not
see `summarize` at all (calling it anyway is still -32021). The `brief` prompt and the
`notes://{topic}` resource template are gated the same way.
"""

import argparse

from mcp.server.mcpserver import MCPServer

from mcp_negotiation import Policy, negotiate, requires


def build(*, hide: bool = False) -> MCPServer:
    server = negotiate(MCPServer("tool-catalogs"), Policy(hide_unusable=hide))

    @server.tool()
    @requires("sampling")
    async def summarize(text: str) -> str:
        """Summarize `text` with the client's model."""
        return text[:40]

    @server.tool()
    @requires("elicitation.form")
    async def ask_user(question: str) -> str:
        """Ask the user a question through a form."""
        return question

    @server.tool()
    async def echo(text: str) -> str:
        """Open to every client."""
        return text

    @server.prompt()
    @requires("sampling")
    def brief(topic: str) -> str:
        """A prompt whose answer the server would sample."""
        return f"Brief me on {topic}."

    @server.resource("notes://{topic}")
    @requires("elicitation")
    def notes(topic: str) -> str:
        """Notes the server would complete by asking the user."""
        return f"notes on {topic}"

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--hide", action="store_true")
    args = parser.parse_args()
    server = build(hide=args.hide)
    if args.http:
        import uvicorn

        app = server.streamable_http_app(stateless_http=args.stateless)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    else:
        server.run("stdio")
