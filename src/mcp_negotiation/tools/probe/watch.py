"""What the probe notices beneath the SDK's client, which turns everything into JSON-RPC errors.

One `Watch` per connection. As a `message_handler`: output of the server's that was not
JSON-RPC (the client skips such lines and waits on, so a server that writes nothing else
would only time out). As an httpx response hook: the last HTTP answer to a POST, whose
status, content type and body tell an MCP server's refusal (a JSON-RPC error, in whatever
HTTP status) from a URL that is not one (the SDK reports a 401, an HTML page or a
redirect as JSON-RPC errors it makes up).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx2
from mcp.shared.exceptions import MCPError

from .rows import shown

PARSE_ERROR: Final = -32700


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    content_type: str
    location: str | None
    jsonrpc_error: bool
    """Whether the body was a JSON-RPC error: the server's own, whatever the status."""


class Watch:
    def __init__(self, credentials: bool = False) -> None:
        self.credentials = credentials
        """Whether the probe sent credentials (`--header`): a 401 then means they were refused."""
        self.unparsed = False
        self.http: HttpAnswer | None = None

    async def __call__(self, message: Any) -> None:
        self.unparsed = self.unparsed or isinstance(message, Exception)
        await anyio.lowlevel.checkpoint()

    async def response(self, response: httpx2.Response) -> None:
        if response.request.method != "POST":
            return
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        jsonrpc_error = False
        if response.status_code >= 400 and content_type == "application/json":
            # Read here (httpx keeps the body for the SDK): a web framework's JSON 404 is not
            # an MCP server's refusal, which the SDK would report the same way.
            try:
                body = json.loads(await response.aread())
            except ValueError:
                body = None
            jsonrpc_error = isinstance(body, dict) and body.get("jsonrpc") == "2.0" and "error" in body
        location = response.headers.get("location")
        self.http = HttpAnswer(response.status_code, content_type, location, jsonrpc_error)

    @property
    def refused_in_http_error(self) -> bool:
        """Whether the last answer was a JSON-RPC error in an HTTP error status (a 400, a 401)."""
        return self.http is not None and self.http.jsonrpc_error

    def not_mcp(self, refused: MCPError) -> str | None:
        """Why the HTTP answer behind `refused` did not come from an MCP server, if it did not."""
        answer = self.http
        if answer is None or answer.jsonrpc_error:
            return None
        status, content_type = answer.status, answer.content_type or "no content type"
        if status in (401, 403) and self.credentials:
            return f"HTTP {status}: the server refused the credentials given with --header"
        if status in (401, 403):
            return f"HTTP {status}: the server wants credentials (give them with --header NAME:VALUE)"
        if 300 <= status < 400:
            where = shown(answer.location) if answer.location else "(no location)"
            return f"HTTP {status}: redirected to {where}, which the SDK's client does not follow"
        if status >= 400:
            return f"HTTP {status} with {content_type}, not a JSON-RPC error"
        if content_type not in ("application/json", "text/event-stream"):
            return f"HTTP {status} with {content_type}, not JSON-RPC"
        if refused.error.code == PARSE_ERROR:
            return f"HTTP {status}: the body is not JSON-RPC"
        return None
