"""A negotiated server scraped by a real Prometheus, and the mixed-era traffic it is sent.

`scraped_server()` starts `servers/metrics_server.py` (a subprocess exposing its metrics
through `opentelemetry-exporter-prometheus`) and Debian's Prometheus scraping it through a
`ScrapeRelay`, which passes each scrape on and counts them: the test waits for a scrape
that began after its traffic ended to be stored (the next one beginning says so), with no
sleeping. `drive()` sends the traffic and answers what Prometheus should then say.
Shared by `tests/otel/test_prometheus.py` and `docs/render_dashboard.py`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from support.harness import legacy_session, open_streams
from support.services import Prometheus, prometheus, stop_process

SERVER = Path(__file__).resolve().parent / "servers" / "metrics_server.py"
SCRAPE_WAIT = 60.0
"""Seconds a test waits for Prometheus to have scraped what it sent (a failure, not a pace)."""


class ScrapeRelay:
    """The scrape target Prometheus is given: it fetches the server's `/metrics` for each
    scrape, and counts the scrapes that arrived, for `wait_for_scrapes`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.arrived = 0
        self._changed = threading.Condition()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with relay._changed:
                    relay.arrived += 1
                    relay._changed.notify_all()
                with urllib.request.urlopen(relay.upstream + self.path, timeout=10) as answer:
                    body, kind = answer.read(), answer.headers.get("content-type", "text/plain")
                with contextlib.suppress(ConnectionError):  # Prometheus stopped mid-scrape
                    self.send_response(200)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScrapeRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for_scrapes(self, count: int = 2) -> None:
        """Until `count` more scrapes arrived. With two, what the server holds now is stored in
        Prometheus: a scrape that began after this call, then the next one, which begins only
        once that one was stored."""
        with self._changed:
            wanted = self.arrived + count
            if not self._changed.wait_for(lambda: self.arrived >= wanted, timeout=SCRAPE_WAIT):
                raise TimeoutError(f"Prometheus scraped {self.arrived} times, not {wanted}")


@dataclass
class Scraped:
    mcp_url: str
    metrics_url: str
    prometheus: Prometheus
    relay: ScrapeRelay

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant PromQL query through Prometheus's HTTP API: its result vector."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        return _api(self.prometheus.url, "query", params)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}"}
        return _api(self.prometheus.url, "query_range", params)


def _api(base: str, endpoint: str, params: dict[str, str]) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@contextmanager
def scraped_server() -> Iterator[Scraped]:
    """The metrics server, and a Prometheus scraping it every second, both on loopback."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the metrics server did not start: {line!r}")
        mcp_port, metrics_port = line.split()[1:]
        metrics_url = f"http://127.0.0.1:{metrics_port}"
        with ScrapeRelay(metrics_url) as relay, prometheus(relay.address) as server:
            # Prometheus applies its targets some seconds after it is ready: traffic before its
            # first scrape would make the series begin with their values already grown.
            relay.wait_for_scrapes(1)
            yield Scraped(f"http://127.0.0.1:{mcp_port}/mcp", metrics_url, server, relay)
    finally:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()


# --- The traffic -----------------------------------------------------------------------

MODERN = "2026-07-28"
UNKNOWN = "2031-01-01"
DELAYS = {"2025-06-18": 0.12, "2025-11-25": 0.03, MODERN: 0.0}
"""What each revision's `tools/call` waits, seconds: its p99 is in that delay's bucket or above."""
CALLS = 6
"""`tools/call`s per client."""
SAMPLING = {"sampling": {}}


@dataclass
class Traffic:
    """What was sent, as Prometheus should count it."""

    calls: dict[str, int] = field(default_factory=dict)
    """Served `tools/call`s per revision."""
    refusals: dict[str, int] = field(default_factory=dict)
    """Refused requests per JSON-RPC code."""
    clients: dict[str, int] = field(default_factory=dict)
    """Clients served per era: a legacy session, or a modern client (its own envelope)."""
    started: float = 0.0
    ended: float = 0.0


async def _sample(ctx: Any, params: Any) -> types.CreateMessageResult:  # declares `sampling`
    text = types.TextContent(type="text", text="ok")
    return types.CreateMessageResult(role="assistant", content=text, model="m")


def _code_of(error: BaseException) -> int | None:
    """The JSON-RPC code a client was refused with, however deep its task groups wrapped it."""
    if isinstance(error, MCPError):
        return error.error.code
    if isinstance(error, BaseExceptionGroup):
        return next((code for inner in error.exceptions if (code := _code_of(inner)) is not None), None)
    return None


async def _refused(url: str, legacy: bool) -> int | None:
    """The code a client that cannot sample is refused with (None: it was served)."""
    try:
        if legacy:
            async with open_streams("http", url) as streams, legacy_session(streams, "2025-11-25", {}):
                pass
        else:
            async with Client(url, mode=MODERN) as client:
                await client.call_tool("wait", {"seconds": 0})
    except Exception as refused:  # from the handshake (legacy) or the call, in task groups
        return _code_of(refused)
    return None


async def _calls(call: Any, revision: str) -> None:
    for _ in range(CALLS):
        await call("wait", {"seconds": DELAYS[revision]})


async def drive(url: str) -> Traffic:
    """Mixed-era traffic with refusals: three legacy sessions at 2025-06-18, two at
    2025-11-25, three modern clients (each its own `clientInfo`), all sampling; two legacy
    and two modern clients that cannot sample (-32021: the policy requires it), and three
    requests at a revision no SDK knows (-32022, refused by the SDK before dispatch)."""
    traffic = Traffic(started=time.time())
    for revision, clients in (("2025-06-18", 3), ("2025-11-25", 2)):
        for _ in range(clients):
            async with open_streams("http", url) as streams, legacy_session(streams, revision, SAMPLING) as s:
                await _calls(s[0].call_tool, revision)
            traffic.calls[revision] = traffic.calls.get(revision, 0) + CALLS
            traffic.clients["legacy"] = traffic.clients.get("legacy", 0) + 1
    for number in range(3):
        info = types.Implementation(name=f"modern-client-{number}", version="1")
        async with Client(url, mode=MODERN, sampling_callback=_sample, client_info=info) as client:
            await _calls(client.call_tool, MODERN)
        traffic.calls[MODERN] = traffic.calls.get(MODERN, 0) + CALLS
        traffic.clients["modern"] = traffic.clients.get("modern", 0) + 1
    for legacy in (True, True, False, False):
        code = await _refused(url, legacy)
        traffic.refusals[str(code)] = traffic.refusals.get(str(code), 0) + 1
    async with httpx2.AsyncClient(timeout=30) as http:
        for _ in range(3):
            meta = {
                "io.modelcontextprotocol/protocolVersion": UNKNOWN,
                "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
            headers = {
                "accept": "application/json, text/event-stream",
                "mcp-method": "tools/list",
                "mcp-protocol-version": UNKNOWN,
            }
            answer = await http.post(url, json=body, headers=headers)
            assert answer.json()["error"]["code"] == -32022
            traffic.refusals["-32022"] = traffic.refusals.get("-32022", 0) + 1
    traffic.ended = time.time()
    return traffic
