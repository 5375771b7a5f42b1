"""Era-aware requirements (issue #25) end to end: the SDK's own clients and raw JSON-RPC,
both eras, in memory, over stdio and over HTTP; the probe; examples/era_requirements.py.
The policy itself, with plain values: tests/core/test_era_requirements.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from mcp_negotiation import Policy
from mcp_negotiation.core.revisions import LEGACY
from mcp_negotiation.tools.demo import build
from support.harness import (
    ROOT,
    RawRequest,
    demo_params,
    envelope,
    initialize_params,
    legacy_session,
    open_streams,
    run_probe,
    serve_http,
    stdio_params,
    structured,
)

MODERN = "2026-07-28"
TASKS_ONLY_AT = "2025-11-25"


# --- End to end ---------------------------------------------------------------------------------

KINDS = ["memory", "stdio", "http"]


@contextmanager
def _target(kind: str, require: str) -> Iterator[Any]:
    """The example server requiring `require`, reachable over `kind`."""
    if kind == "memory":
        yield build(Policy(required_capabilities=(require,)))
    elif kind == "stdio":
        yield demo_params("--require", require)
    else:
        with serve_http(build(Policy(required_capabilities=(require,))).streamable_http_app()) as url:
            yield url


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_sdk_legacy_client_of_a_left_out_revision_is_counter_offered_and_served(kind: str) -> None:
    with _target(kind, "tasks") as target:
        async with (
            open_streams(kind, target) as streams,
            legacy_session(streams, "2025-06-18", {"tasks": {}}) as (session, init),
        ):
            assert init.protocol_version == TASKS_ONLY_AT
            seen = structured(await session.call_tool("negotiation", {}))
    assert (seen["protocol_version"], seen["outcome"]) == (TASKS_ONLY_AT, "counter_offered")
    assert seen["supports"]["tasks"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_sdk_modern_client_under_a_legacy_only_requirement_is_told_where_it_is_served(
    kind: str,
) -> None:
    with _target(kind, "tasks") as target:
        async with Client(target, mode=MODERN) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("negotiation", {})
    assert refused.value.error.code == -32022
    assert refused.value.error.data == {
        "supported": [TASKS_ONLY_AT],
        "requested": MODERN,
        "requiredCapabilities": {"tasks": {}},
    }


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_raw_legacy_initialize_under_a_modern_only_requirement_is_refused_32022(kind: str) -> None:
    with _target(kind, "extensions") as target:
        async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:
            initialize = RawRequest(method="initialize", params=initialize_params("2025-11-25", {}))
            with pytest.raises(MCPError) as refused:
                await session.send_request(initialize, types.InitializeResult)
    assert refused.value.error.code == -32022
    assert refused.value.error.data == {
        "supported": [MODERN],
        "requested": "2025-11-25",
        "requiredCapabilities": {"extensions": {}},
    }


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_raw_modern_request_under_a_legacy_only_requirement_is_refused_32022(kind: str) -> None:
    call = RawRequest(
        method="tools/call",
        params={"name": "negotiation", "arguments": {}, "_meta": envelope(caps={"tasks": {}})},
    )
    with _target(kind, "tasks") as target:
        async with open_streams(kind, target) as streams, ClientSession(streams[0], streams[1]) as session:
            with pytest.raises(MCPError) as refused:
                await session.send_request(call, types.CallToolResult)
    assert refused.value.error.code == -32022
    assert refused.value.error.data["supported"] == [TASKS_ONLY_AT]
    assert refused.value.error.data["requiredCapabilities"] == {"tasks": {}}


_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.anyio
async def test_raw_http_modern_post_under_a_legacy_only_requirement_is_400_32022() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}, "_meta": envelope(caps={"tasks": {}})},
    }
    headers = {
        **_HEADERS,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "negotiation",
    }
    with _target("http", "tasks") as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            refused = await http.post(url, json=body, headers=headers)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": [TASKS_ONLY_AT],
        "requested": MODERN,
        "requiredCapabilities": {"tasks": {}},
    }


@pytest.mark.anyio
async def test_raw_stateless_http_legacy_post_of_a_left_out_revision_is_refused_32022() -> None:
    """No handshake to counter-offer in: the request names its revision in a header."""
    app = build(Policy(required_capabilities=("elicitation.url",))).streamable_http_app(
        stateless_http=True, json_response=True
    )
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "negotiation", "arguments": {}},
    }
    with serve_http(app) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            refused = await http.post(
                url, json=body, headers={**_HEADERS, "mcp-protocol-version": "2025-06-18"}
            )
            served = await http.post(
                url, json=body, headers={**_HEADERS, "mcp-protocol-version": "2025-11-25"}
            )
    error = refused.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2025-11-25"],
        "requested": "2025-06-18",
        "requiredCapabilities": {"elicitation": {"url": {}}},
    }
    assert served.json()["result"]["structuredContent"]["protocol_version"] == "2025-11-25"


# --- The probe ----------------------------------------------------------------------------------


def test_the_probe_states_the_narrowing() -> None:
    done = run_probe("--", sys.executable, "-m", "mcp_negotiation.tools.demo", "--require", "tasks")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    said = lines.index(next(line for line in lines if line.startswith("narrowed ")))
    assert lines[said - 1].startswith("offered ")
    assert lines[said] == (
        "narrowed the server's required capabilities narrow it to 2025-11-25 (2026-07-28 cannot have tasks)"
    )
    assert "narrowed" not in run_probe().stdout


def test_the_probe_json_carries_the_narrowing() -> None:
    declared = json.dumps({"extensions": {"io.x/y": {}}})
    command = ("--", sys.executable, "-m", "mcp_negotiation.tools.demo", "--require", "extensions")
    done = run_probe("--json", "--capabilities", declared, *command)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["narrowed"] == {"left_out": {r: ["extensions"] for r in LEGACY}, "supported": [MODERN]}
    first = out["revisions"][0]
    assert (first["outcome"], first["error_code"]) == ("refused", -32022)
    assert first["error_data"]["requiredCapabilities"] == {"extensions": {}}
    assert out["revisions"][-1]["outcome"] == "agreed"


# --- examples/era_requirements.py ---------------------------------------------------------------


def test_the_example_prints_its_narrowed_policy() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/era_requirements.py"), "--policy"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].endswith(
        "; revisions narrowed to 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 by required_capabilities)"
    )
    assert lines[1:] == [
        "accepts 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25",
        "left out {'2026-07-28': ('roots.listChanged',)}",
    ]


@pytest.mark.anyio
async def test_the_example_serves_legacy_and_tells_modern_clients_where_to_go() -> None:
    example = stdio_params("era_requirements.py")
    async with Client(example, mode=MODERN) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("revision", {})
    assert refused.value.error.code == -32022
    assert refused.value.error.data == {
        "supported": list(reversed(LEGACY)),
        "requested": MODERN,
        "requiredCapabilities": {"roots": {"listChanged": True}},
    }
    async with (
        open_streams("stdio", example) as streams,
        legacy_session(streams, "2025-06-18", {"roots": {"listChanged": True}}) as (session, init),
    ):
        assert init.protocol_version == "2025-06-18"
        answer = await session.call_tool("revision", {})
    assert answer.content == [types.TextContent(type="text", text="2025-06-18")]
