"""A server that answered as a JSON-RPC peer gets its full table (exit 1), never "could not
probe" (exit 2): a JSON-RPC error in any HTTP status is a refused row with its code, and a
revision whose connection fails is a failed row beside the rows that were read.

The servers are real: the SDK's own streamable HTTP app on uvicorn, behind the ASGI answers
a TypeScript SDK v1 server gives (HTTP 400 with a JSON-RPC error for a request outside a
session: what the probe's 2026-07-28 row is to such a server), or a proxy's HTML page;
and a stdio server that exits at `server/discover`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_negotiation.core import revisions
from support.harness import ROOT, run_probe, serve_http

RAW = str(ROOT / "tests/support/servers/raw_stdio.py")
LEGACY = list(revisions.LEGACY)
NOT_INITIALIZED = {"code": -32000, "message": "Bad Request: Server not initialized"}


def _time_server() -> MCPServer:
    """A plain SDK server (no negotiation library), with one tool a time server would have."""
    server = MCPServer("legacy-only")

    @server.tool()
    def get_time() -> str:
        """The time now."""
        return "12:00"

    return server


class _Guard:
    """Answers some requests itself, before the MCP app: `refusal(request, body)` says how."""

    def __init__(self, app: ASGIApp, refusal: Any) -> None:
        self.app, self.refusal = app, refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await request.body()
        answer = self.refusal(request, body)
        if answer is not None:
            await answer(scope, receive, send)
            return

        replayed = False

        async def replay() -> Any:  # the body once, then what the client does (a disconnect)
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _like_typescript_v1(request: Request, body: bytes) -> Response | None:
    """What StreamableHTTPServerTransport (TypeScript SDK 1.x) answers outside a session."""
    if "mcp-session-id" in request.headers:
        return None
    try:
        method = json.loads(body).get("method") if body else None
    except ValueError:
        method = None
    if request.method == "POST" and method == "initialize":
        return None
    return JSONResponse({"jsonrpc": "2.0", "error": NOT_INITIALIZED, "id": None}, status_code=400)


def _probe_json(*args: str) -> tuple[int, dict[str, Any], str]:
    done = run_probe("--json", *args)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_legacy_only_server_refusing_in_http_400_keeps_its_table() -> None:
    with serve_http(_Guard(_time_server().streamable_http_app(), _like_typescript_v1)) as url:
        status, out, stderr = _probe_json(url)
        text = run_probe(url).stdout
    assert status == 1, stderr
    assert out["exit"] == 1
    rows = {row["revision"]: row for row in out["revisions"]}
    assert [rows[r]["outcome"] for r in LEGACY] == ["agreed"] * 4
    assert all(rows[r]["tools"] == ["get_time"] for r in LEGACY)
    modern = rows["2026-07-28"]
    assert (modern["outcome"], modern["error_code"], modern["http_status"]) == ("refused", -32000, 400)
    assert modern["error"] == "Bad Request: Server not initialized"
    assert out["best"] == "2025-11-25"
    assert "2026-07-28  modern  refused (-32000)" in text
    assert "  2026-07-28  not served: Bad Request: Server not initialized (HTTP 400)" in text
    assert "did not answer as an MCP server" not in stderr


def test_a_json_rpc_error_in_an_http_401_is_a_refusal_with_its_code() -> None:
    def unauthorized(request: Request, body: bytes) -> Response:
        error = {"code": -32001, "message": "Unauthorized"}
        return JSONResponse({"jsonrpc": "2.0", "error": error, "id": None}, status_code=401)

    with serve_http(_Guard(_time_server().streamable_http_app(), unauthorized)) as url:
        status, out, stderr = _probe_json(url)
    assert status == 1, stderr
    assert {(r["outcome"], r["error_code"], r["http_status"]) for r in out["revisions"]} == {
        ("refused", -32001, 401)
    }


def test_a_revision_answered_with_a_web_page_fails_beside_the_rows_read() -> None:
    def proxy_page_for_modern(request: Request, body: bytes) -> Response | None:
        if request.headers.get("mcp-protocol-version") == "2026-07-28":
            return HTMLResponse("<html>no such route</html>", status_code=404)
        return None

    with serve_http(_Guard(_time_server().streamable_http_app(), proxy_page_for_modern)) as url:
        status, out, stderr = _probe_json(url)
    assert status == 1, stderr
    rows = out["revisions"]
    assert [row["outcome"] for row in rows] == ["agreed"] * 4 + ["failed"]
    assert rows[-1]["error"] == "HTTP 404 with text/html, not a JSON-RPC error"
    assert rows[-1]["error_code"] is None


def test_a_stdio_server_crashing_at_one_revision_keeps_the_others() -> None:
    status, out, stderr = _probe_json("--", sys.executable, RAW, "--crash-modern")
    assert status == 1, stderr
    rows = out["revisions"]
    assert [row["outcome"] for row in rows] == ["agreed"] * 4 + ["failed"]
    assert rows[-1]["error"] == "crashed: the raw server knows no modern era"
    assert "Traceback" not in stderr
