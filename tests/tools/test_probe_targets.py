"""The probe against targets that are not what they should be, run as a subprocess.

HTTP answers that are not MCP's (a login wall, an HTML page, a redirect, broken JSON)
are "could not probe" (exit 2) naming the HTTP status, not five refusals; a server that
answers a revision this library does not know, or writes a banner, still gets its
matrix; the operator's environment and the server's own `--` reach the server; and a
SIGTERM stops the probe and the server it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import ROOT, serve_http

RAW = str(ROOT / "tests/support/servers/raw_stdio.py")
PROBE = [sys.executable, "-m", "mcp_negotiation.tools.cli", "probe"]


def _probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)


async def _unauthorized(request: Request) -> Response:
    return PlainTextResponse("log in first", status_code=401, headers={"WWW-Authenticate": "Bearer"})


async def _html(request: Request) -> Response:
    return HTMLResponse("<html><body>a web page</body></html>")


async def _redirect(request: Request) -> Response:
    return RedirectResponse("https://elsewhere.example/mcp?token=SECRET", status_code=302)


async def _broken_json(request: Request) -> Response:
    return Response("{not json", media_type="application/json")


async def _framework_404(request: Request) -> Response:
    return Response('{"detail": "Not Found"}', status_code=404, media_type="application/json")


@pytest.fixture(scope="module")
def not_mcp() -> Iterator[str]:
    """A web server with one route per kind of wrong answer; yields its base URL."""
    routes = [
        Route("/login", _unauthorized, methods=["GET", "POST", "DELETE"]),
        Route("/page", _html, methods=["GET", "POST", "DELETE"]),
        Route("/moved", _redirect, methods=["GET", "POST", "DELETE"]),
        Route("/broken", _broken_json, methods=["GET", "POST", "DELETE"]),
        Route("/api", _framework_404, methods=["GET", "POST", "DELETE"]),
    ]
    with serve_http(Starlette(routes=routes)) as url:
        yield url.removesuffix("/mcp")


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/login", "HTTP 401: the server wants credentials (give them with --header NAME:VALUE)"),
        ("/page", "HTTP 200 with text/html, not JSON-RPC"),
        (
            "/moved",
            "HTTP 302: redirected to https://elsewhere.example/mcp, which the SDK's client does not follow",
        ),
        ("/broken", "HTTP 200: the body is not JSON-RPC"),
        ("/api", "HTTP 404 with application/json, not a JSON-RPC error"),
    ],
)
def test_an_http_answer_that_is_not_mcp_is_could_not_probe(not_mcp: str, path: str, says: str) -> None:
    base = not_mcp.replace("http://", "http://admin:hunter2@")
    done = _probe("--json", f"{base}{path}?api_key=SECRET")
    assert done.returncode == 2, done.stdout
    assert f"did not answer as an MCP server: {says}" in done.stderr
    assert json.loads(done.stdout)["exit"] == 2  # --json still prints one object
    assert done.stderr.count("did not answer as an MCP server") == 1  # said once, not per revision
    for secret in ("hunter2", "SECRET"):
        assert secret not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_options_may_follow_a_url() -> None:
    with serve_http(build().streamable_http_app()) as url:
        done = _probe(url.replace("http://", "HTTP://"), "--json", "--timeout", "30")
    assert done.returncode == 0, done.stderr
    assert [row["outcome"] for row in json.loads(done.stdout)["revisions"]] == ["agreed"] * len(
        revisions.KNOWN
    )


def test_a_revision_this_library_does_not_know_is_shown_not_a_crash() -> None:
    done = _probe("--json", "--", sys.executable, RAW, "--answer", "2025-10-07-draft")
    assert "Traceback" not in done.stderr
    rows = json.loads(done.stdout)["revisions"]
    legacy = [row for row in rows if row["era"] == "legacy"]
    assert {row["answered"] for row in legacy} == {"2025-10-07-draft"}
    assert {row["outcome"] for row in legacy} == {"counter-offer"}
    assert rows[-1]["outcome"] == "refused"  # the raw server knows no server/discover
    assert done.returncode == 1


def test_a_banner_and_one_silent_revision_keep_the_matrix() -> None:
    done = _probe("--json", "--timeout", "3", "--", sys.executable, RAW, "--banner", "--silent-modern")
    assert done.returncode == 1, done.stderr
    rows = json.loads(done.stdout)["revisions"]
    assert [row["outcome"] for row in rows[:-1]] == ["agreed"] * (len(rows) - 1)
    assert rows[-1]["outcome"] == "timeout"


def test_the_server_gets_the_operators_environment_and_its_own_double_dash() -> None:
    check = "import os, sys; sys.exit(f\"env={os.environ.get('PROBE_TEST_TOKEN')} argv={sys.argv[1:]}\")"
    env = {**os.environ, "PROBE_TEST_TOKEN": "from-the-shell"}
    done = _probe("--", sys.executable, "-c", check, "--", "--x", env=env)
    assert done.returncode == 2
    assert "env=from-the-shell argv=['--', '--x']" in done.stderr


def test_a_capability_map_the_modern_client_cannot_declare_is_a_bad_option() -> None:
    done = _probe("--capabilities", '{"extensions": {"io.example/x": true}}')
    assert done.returncode == 2
    assert "bad --capabilities for the modern row" in done.stderr
    assert "probing" not in done.stderr  # refused before any server starts


def test_sigterm_stops_the_probe_and_every_server_it_started(tmp_path: Path) -> None:
    """One server per revision, all at once (the reference listing rides on the modern one's
    connection): each reaped."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    probe = subprocess.Popen(
        [*PROBE, "--", sys.executable, RAW, "--deaf", "--fifo", str(fifo)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    servers: list[int] = []
    try:
        while len(servers) < len(revisions.KNOWN):
            with open(fifo) as started:  # blocks until a server is running; EOF when none writes
                servers += [int(pid) for pid in started.read().split()]
        probe.send_signal(signal.SIGTERM)
        _, stderr = probe.communicate(timeout=120)
    finally:
        probe.kill()
    assert probe.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped by signal" in stderr
    assert "Traceback" not in stderr
    assert len(set(servers)) == len(revisions.KNOWN)
    for server in servers:
        with pytest.raises(ProcessLookupError):
            os.kill(server, 0)
