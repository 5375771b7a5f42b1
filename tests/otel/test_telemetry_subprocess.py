"""Telemetry in fresh interpreters: no SDK at all, `opentelemetry-instrument`, the example, the docs.

Each case needs a process whose OpenTelemetry globals nobody has set yet (or set by the
`opentelemetry-instrument` launcher), so each runs as a subprocess of the venv's Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from support.harness import ROOT

pytestmark = pytest.mark.matrix

PYTHON = sys.executable
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
TIMEOUT = 120


def _env(**extra: str) -> dict[str, str]:
    """The current environment without any OpenTelemetry configuration, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(extra)
    return env


def _run(argv: list[str], **extra_env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, cwd=ROOT, env=_env(**extra_env), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def _result(stdout: str) -> Any:
    (line,) = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


# ---------------------------------------------------------------------------------------
# No SDK configured: everything works and nothing is built

NO_SDK = r"""
import json, sys
import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from opentelemetry import trace

from mcp_negotiation import Policy
from mcp_negotiation.otel import metrics as otel_metrics
from mcp_negotiation.otel import spans as telemetry
from mcp_negotiation.tools.demo import build

if sys.argv[1:] == ["--sdk"]:  # the control run: with providers, attributes are built, requests timed
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider())

calls = []
operations = []
real = telemetry.span_attributes
real_operation = otel_metrics.operation


def counting(*args, **kwargs):
    calls.append(args[0])
    return real(*args, **kwargs)


def counting_operations(*args, **kwargs):
    operations.append(args[1])
    return real_operation(*args, **kwargs)


telemetry.span_attributes = counting
otel_metrics.operation = counting_operations


async def main():
    seen = {}
    server = build()
    async with Client(server, mode="legacy") as client:
        seen["legacy"] = (await client.call_tool("negotiation", {})).structured_content["protocol_version"]
    async with Client(server, mode="2026-07-28") as client:
        seen["modern"] = (await client.call_tool("negotiation", {})).structured_content["protocol_version"]
    async with Client(build(Policy(max_revision="2025-11-25")), mode="2026-07-28") as client:
        try:
            await client.call_tool("negotiation", {})
        except MCPError as error:
            seen["refused"] = error.error.code
    span = telemetry.tracer.start_span("probe")
    seen["recording"] = span.is_recording()
    span.end()
    seen["span_attributes_calls"] = len(calls)
    seen["operations_measured"] = len(operations)
    seen["clock"] = otel_metrics.clock()
    seen["instruments"] = otel_metrics.instruments() is not None
    seen["provider"] = type(trace.get_tracer_provider()).__name__
    print("RESULT " + json.dumps(seen))


anyio.run(main)
"""


@pytest.mark.parametrize("sdk", [False, True], ids=["no-sdk", "control-with-sdk"])
def test_without_an_sdk_requests_are_served_and_nothing_is_built_or_timed(tmp_path: Path, sdk: bool) -> None:
    script = tmp_path / "no_sdk.py"
    script.write_text(NO_SDK, encoding="utf-8")
    seen = _result(_run([PYTHON, str(script), *(["--sdk"] if sdk else [])]).stdout)
    assert seen["legacy"] == "2025-11-25"
    assert seen["modern"] == "2026-07-28"
    assert seen["refused"] == -32022
    assert seen["recording"] is sdk
    if sdk:
        assert seen["span_attributes_calls"] >= 2  # the same flow builds them when recorded
        assert seen["operations_measured"] >= 3  # and times every request
        assert seen["instruments"] is True
    else:
        assert seen["provider"] == "ProxyTracerProvider"
        assert seen["span_attributes_calls"] == 0
        # No MeterProvider: no request timed, no instrument made, the clock says so.
        assert seen["operations_measured"] == 0
        assert seen["instruments"] is False
        assert seen["clock"] is None


def test_the_package_does_not_need_opentelemetry_instrumentation() -> None:
    code = (
        "import sys; sys.modules['opentelemetry.instrumentation'] = None\n"
        "import mcp_negotiation, mcp_negotiation.tools.demo\n"
        "loaded = sorted(m for m, v in sys.modules.items() if 'instrumentation' in m and v)\n"
        "print('RESULT', __import__('json').dumps(loaded))\n"
    )
    assert _result(_run([PYTHON, "-c", code]).stdout) == []
    failing = subprocess.run(
        [PYTHON, "-c", "import sys; sys.modules['opentelemetry.instrumentation'] = None\n"
         "import mcp_negotiation.tools.instrumentor"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert failing.returncode != 0
    assert "ModuleNotFoundError" in failing.stderr


# ---------------------------------------------------------------------------------------
# The instrumentor, through `opentelemetry-instrument`


UNINSTRUMENTED_SERVER = r"""
import json
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import negotiation_of

server = MCPServer("never-negotiated-by-this-code")  # no negotiate(): the launcher does it


@server.tool()
async def seen(ctx: Context) -> dict[str, Any]:
    return negotiation_of(ctx).as_dict()


async def main() -> None:
    out = {}
    for mode in ("legacy", "2026-07-28"):
        async with Client(server, mode=mode) as client:
            out[mode] = (await client.call_tool("seen", {})).structured_content
    print("RESULT " + json.dumps(out))


anyio.run(main)
"""


def _console_spans(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects `ConsoleSpanExporter` printed (other lines skipped)."""
    decoder = json.JSONDecoder()
    text = "\n".join(line for line in stdout.splitlines() if not line.startswith("RESULT "))
    found: list[dict[str, Any]] = []
    index = 0
    while (start := text.find("{", index)) != -1:
        value, index = decoder.raw_decode(text, start)
        found.append(value)
    return found


def test_opentelemetry_instrument_switches_negotiation_on(tmp_path: Path) -> None:
    assert INSTRUMENT.exists(), "opentelemetry-instrumentation is part of the test extra"
    script = tmp_path / "server.py"
    script.write_text(UNINSTRUMENTED_SERVER, encoding="utf-8")
    argv = [str(INSTRUMENT), "--traces_exporter", "console", "--metrics_exporter", "none"]
    done = _run([*argv, "--logs_exporter", "none", PYTHON, str(script)], OTEL_SERVICE_NAME="mcp-test")
    seen = _result(done.stdout)
    assert seen["legacy"]["era"] == "legacy"
    assert seen["legacy"]["protocol_version"] == "2025-11-25"
    assert seen["2026-07-28"]["era"] == "modern"
    spans = _console_spans(done.stdout)
    ours = [span for span in spans if span["name"] == "capability_negotiated"]
    eras = sorted({span["attributes"]["mcp.negotiation.era"] for span in ours})
    assert eras == ["legacy", "modern"]
    assert all(span["kind"] == "SpanKind.INTERNAL" for span in ours)
    server_ids = {span["context"]["span_id"] for span in spans if span["kind"] == "SpanKind.SERVER"}
    assert all(span["parent_id"] in server_ids for span in ours)
    assert {span["resource"]["attributes"]["service.name"] for span in ours} == {"mcp-test"}


def test_opentelemetry_instrument_can_disable_us(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(UNINSTRUMENTED_SERVER.replace("negotiation_of(ctx).as_dict()", "{}"), encoding="utf-8")
    argv = [str(INSTRUMENT), "--traces_exporter", "console", "--metrics_exporter", "none"]
    done = _run(
        [*argv, "--logs_exporter", "none", PYTHON, str(script)],
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="mcp_negotiation",
    )
    names = {span["name"] for span in _console_spans(done.stdout)}
    assert "tools/call seen" in names  # the SDK's spans are there ...
    assert "capability_negotiated" not in names  # ... ours are not


OPERATIONS = "mcp_server_operation_duration_seconds_count{"
"""Prometheus's name for the count of `mcp.server.operation.duration`."""
ZERO_CODE_METRICS = r"""
import os, urllib.request

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

server = MCPServer("never-negotiated-by-this-code")


@server.tool()
async def ping() -> str:
    return "pong"


async def main() -> None:
    for mode in ("legacy", "2026-07-28"):
        async with Client(server, mode=mode) as client:
            await client.call_tool("ping", {})
    url = f"http://127.0.0.1:{os.environ['OTEL_EXPORTER_PROMETHEUS_PORT']}/metrics"
    print(urllib.request.urlopen(url, timeout=30).read().decode())  # what Prometheus would scrape


anyio.run(main)
"""


def test_opentelemetry_instrument_switches_the_metrics_on(tmp_path: Path) -> None:
    """Zero code: the launcher configures a MeterProvider with the Prometheus exporter (every
    signal named, as a stdio server needs: docs/telemetry.md), and the metrics are there."""
    from support.services import free_port

    script = tmp_path / "server.py"
    script.write_text(ZERO_CODE_METRICS, encoding="utf-8")
    argv = [str(INSTRUMENT), "--traces_exporter", "none", "--metrics_exporter", "prometheus"]
    done = _run(
        [*argv, "--logs_exporter", "none", PYTHON, str(script)],
        OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
        OTEL_EXPORTER_PROMETHEUS_PORT=str(free_port()),
    )
    lines = done.stdout.splitlines()
    calls = [line for line in lines if line.startswith(OPERATIONS) and 'mcp_method_name="tools/call"' in line]
    revisions = {line.split('mcp_protocol_version="')[1].split('"')[0] for line in calls}
    assert revisions == {"2025-11-25", "2026-07-28"}
    assert 'gen_ai_tool_name="ping"' in calls[0]
    assert any(line.startswith("mcp_negotiation_negotiations_total{") for line in lines)
    assert any(line.startswith("mcp_server_session_duration_seconds_count{") for line in lines)


STDIO_SERVER = r"""
from mcp.server.mcpserver import MCPServer

server = MCPServer("stdio-under-the-launcher")


@server.tool()
async def ping() -> str:
    return "pong"


server.run("stdio")
"""


def test_a_stdio_server_under_the_launcher_times_its_requests_over_the_pipe(tmp_path: Path) -> None:
    """Zero code over stdio: the JSON-RPC channel stays clean, the metrics say `pipe`."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from support.services import free_port

    script = tmp_path / "server.py"
    script.write_text(STDIO_SERVER, encoding="utf-8")
    port = free_port()
    signals = ["--traces_exporter", "none", "--metrics_exporter", "prometheus", "--logs_exporter", "none"]
    params = StdioServerParameters(
        command=str(INSTRUMENT),
        args=[*signals, PYTHON, str(script)],
        cwd=str(ROOT),
        env=_env(OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1", OTEL_EXPORTER_PROMETHEUS_PORT=str(port)),
    )

    async def call() -> str:
        async with Client(params, mode="2026-07-28") as client:
            result = await client.call_tool("ping", {})
            assert getattr(result.content[0], "text", None) == "pong"
            async with httpx2.AsyncClient(timeout=30) as http:
                return (await http.get(f"http://127.0.0.1:{port}/metrics")).text

    text = anyio.run(call)
    (line,) = [line for line in text.splitlines() if line.startswith(OPERATIONS) and '"tools/call"' in line]
    assert 'network_transport="pipe"' in line
    assert 'mcp_protocol_version="2026-07-28"' in line


def test_the_prometheus_example_serves_its_metrics() -> None:
    """`examples/prometheus_metrics.py`, as a subprocess: MCP over HTTP, metrics beside it."""
    import anyio
    import httpx2
    from mcp import Client

    from support.services import stop_process

    example = [PYTHON, str(ROOT / "examples" / "prometheus_metrics.py"), "--port", "0", "--metrics-port", "0"]
    process = subprocess.Popen(example, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().split()
        assert ready[0] == "READY", ready
        mcp_url, metrics_url = f"http://127.0.0.1:{ready[1]}/mcp", f"http://127.0.0.1:{ready[2]}/metrics"

        async def call() -> str:
            async with Client(mcp_url, mode="2026-07-28") as client:
                result = await client.call_tool("revision", {})
            async with httpx2.AsyncClient(timeout=30) as http:
                scraped = await http.get(metrics_url)
            return str(getattr(result.content[0], "text", "")) + "\n" + scraped.text

        text = anyio.run(call)
    finally:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()
    assert text.startswith("2026-07-28\n")
    (line,) = [line for line in text.splitlines() if line.startswith(OPERATIONS) and '"tools/call"' in line]
    labels = ('mcp_protocol_version="2026-07-28"', 'network_transport="tcp"', 'network_protocol_name="http"')
    assert all(label in line for label in labels)
    assert 'service_name="shop"' in text  # the resource, as target_info


# ---------------------------------------------------------------------------------------
# The example and the docs picture


def test_tracing_example_prints_the_spans() -> None:
    done = _run([PYTHON, str(ROOT / "examples" / "tracing.py")])
    lines = done.stdout.splitlines()
    ours = [line for line in lines if line.startswith("capability_negotiated ")]
    assert len(ours) >= 2
    assert any("mcp.negotiation.era=legacy" in line for line in ours)
    assert any("mcp.negotiation.era=modern" in line for line in ours)
    # The request's own attributes are the SDK's server span's; ours never repeats them.
    assert not any("mcp.method.name=" in line or "mcp.protocol.version=" in line for line in ours)
    assert any(
        line.startswith("initialize ") and "mcp.protocol.version=2025-11-25" in line and "+event:" in line
        for line in lines
    )
    assert any(line.startswith("tools/call whoami ") and "=2026-07-28" in line for line in lines)
    assert any(line.startswith("MCP send initialize ") and " CLIENT " in line for line in lines)
    # The modern client's later request repeats its envelope: a link to the modern span.
    modern = next(line for line in ours if "mcp.negotiation.era=modern" in line)
    modern_span = modern.split(" span=")[1].split()[0]
    assert any(f"+link:{modern_span}" in line for line in lines if " SERVER " in line)
    assert "whoami -> legacy 2025-11-25" in lines
    assert "whoami -> modern 2026-07-28" in lines


def test_tracing_example_json_mode() -> None:
    spans = _console_spans(_run([PYTHON, str(ROOT / "examples" / "tracing.py"), "--json"]).stdout)
    ours = [span for span in spans if span["name"] == "capability_negotiated"]
    assert {span["attributes"]["mcp.negotiation.era"] for span in ours} == {"legacy", "modern"}


def test_docs_trace_picture_is_rendered_from_exported_spans(tmp_path: Path) -> None:
    out = tmp_path / "trace.svg"
    _run([PYTHON, str(ROOT / "docs" / "render_trace.py"), "--output", str(out)])
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {"".join(node.itertext()) for node in root.iter("{http://www.w3.org/2000/svg}text")}
    for name in (
        "capability_negotiated [internal]",
        "initialize [server]",
        "MCP send initialize [client]",
        "tools/call whoami [server]",
        "MCP send tools/call whoami [client]",
    ):
        assert name in {text.strip() for text in texts}, name
    assert any(text.startswith("legacy · 2025-11-25 · accepted") for text in texts)
    assert any(text.startswith("modern · 2026-07-28 · accepted") for text in texts)
    assert any(text.startswith("link → capability_negotiated ") for text in texts)
    committed = ROOT / "docs" / "trace.svg"
    assert committed.exists(), "docs/trace.svg is generated by docs/render_trace.py and committed"
    assert "capability_negotiated [internal]" in committed.read_text(encoding="utf-8")
