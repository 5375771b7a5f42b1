"""The zero-code path as docs/telemetry.md gives it: `opentelemetry-instrument ... python server.py`.

The command is read from the page, so the page and the test cannot drift apart, and run
with no `OTEL_*` variable set, under the OpenTelemetry distro's own defaults, on a server
with no line of this library in it: the reference time server (`python -m
mcp_server_time`) over stdio, driven by the SDK's client, and over streamable HTTP
(`tests/support/servers/time_http.py`). Over stdio every byte the server writes on its
standard output, to its exit, is kept (`support.stdio_capture`) and must be JSON-RPC; the
spans must be on standard error, one line each. The page's two warnings are checked too:
`console` writes spans among a stdio server's messages, and a signal left to the distro's
default leaves everything unconfigured, negotiation included.
"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support.harness import ROOT
from support.services import stop_process
from support.stdio_capture import Captured, captured_session, environment

pytestmark = pytest.mark.anyio

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
TIME_HTTP = ROOT / "tests" / "support" / "servers" / "time_http.py"
TIME_STDIO = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
NOW = ("get_current_time", {"timezone": "UTC"})


def documented_launcher() -> list[str]:
    """The page's command up to `python server.py`, which each test replaces with its server."""
    page = (ROOT / "docs" / "telemetry.md").read_text(encoding="utf-8")
    (line,) = [line for line in page.splitlines() if line.startswith("opentelemetry-instrument ")]
    argv = shlex.split(line)
    assert argv[-2:] == ["python", "server.py"], line
    return [str(INSTRUMENT), *argv[1:-2]]


async def _now(client: Client) -> None:
    assert not (await client.call_tool(*NOW)).is_error


async def _time_over_stdio(launcher: list[str], mode: str, directory: Path) -> Captured:
    _, captured = await captured_session([*launcher, *TIME_STDIO], directory, _now, mode=mode)
    return captured


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_over_stdio_spans_go_to_stderr_and_stdout_has_only_json_rpc(mode: str, tmp_path: Path) -> None:
    captured = await _time_over_stdio(documented_launcher(), mode, tmp_path)
    messages = captured.messages()
    assert messages
    assert all(message.get("jsonrpc") == "2.0" for message in messages)
    spans = captured.spans()
    (first, *_) = captured.negotiated()
    assert first["attributes"]["mcp.negotiation.era"] == ("modern" if mode == "auto" else "legacy")
    servers = {span["context"]["span_id"] for span in spans if span["kind"] == "SpanKind.SERVER"}
    assert first["parent_id"] in servers


async def test_the_sdks_console_exporter_writes_spans_among_a_stdio_servers_messages(tmp_path: Path) -> None:
    """What the page warns of: this is what `console_stderr` is for."""
    launcher = [part if part != "console_stderr" else "console" for part in documented_launcher()]
    captured = await _time_over_stdio(launcher, "legacy", tmp_path)
    assert '"name": "capability_negotiated"' in captured.stdout
    with pytest.raises(json.JSONDecodeError):
        captured.messages()  # a span's many lines: none of them a message


def test_a_signal_left_to_the_distros_default_leaves_everything_unconfigured(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(
        "from mcp.server.mcpserver import MCPServer\nprint(type(MCPServer('x').middleware[1]).__name__)\n",
        encoding="utf-8",
    )
    argv = [str(INSTRUMENT), "--traces_exporter", "console_stderr", "--metrics_exporter", "none"]
    done = subprocess.run(
        [*argv, sys.executable, str(script)], env=environment(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "not found in entry point 'opentelemetry_logs_exporter'" in done.stderr
    assert done.stdout.strip() != "NegotiationMiddleware"  # the instrumentors were never loaded
    documented = [*documented_launcher(), sys.executable, str(script)]
    done = subprocess.run(documented, env=environment(), capture_output=True, text=True, timeout=120)
    assert (done.stdout.strip(), done.stderr) == ("NegotiationMiddleware", "")


async def _call_over_http(url: str, mode: str) -> None:
    async with Client(streamable_http_client(url), mode=mode) as client:
        await _now(client)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_over_http_the_documented_command_negotiates_and_traces(mode: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    command = [*documented_launcher(), sys.executable, str(TIME_HTTP), "--fd", str(sock.fileno())]
    server = subprocess.Popen(
        command, env=environment(), pass_fds=(sock.fileno(),), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        anyio.run(_call_over_http, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", mode)
        # Ctrl-C, as an operator stops it: uvicorn shuts down and re-raises it, and the process
        # exits through its handlers, the batch of spans flushed (a SIGTERM would end it before).
        server.send_signal(signal.SIGINT)
        stdout, stderr = server.communicate(timeout=60)
    finally:
        stop_process(server)
        sock.close()
    assert server.returncode == 0, stderr.decode()
    assert stdout == b""
    assert Captured(stdout.decode(), stderr.decode()).eras() == {"modern" if mode == "auto" else "legacy"}
