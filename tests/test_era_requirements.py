"""Era-aware requirements (issue #25): a policy accepts only the revisions where its
required capabilities can be had, so a client of another revision is counter-offered or
refused with -32022 naming where it would be served, never accepted and then refused
-32021 on every request.

First with plain values (the core), then end to end: the SDK's own clients and raw
JSON-RPC, both eras, in memory, over stdio and over HTTP.
"""

from __future__ import annotations

import json
import re
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
from mcp_types import _v2026_07_28 as v2026

from harness import (
    ROOT,
    RawRequest,
    demo_params,
    initialize_params,
    legacy_session,
    open_streams,
    run_probe,
    serve_http,
    stdio_params,
    structured,
)
from mcp_negotiation import Policy
from mcp_negotiation.demo import build
from mcp_negotiation.errors import NegotiationRefused, Refusal
from mcp_negotiation.negotiation import Negotiator, required_at
from mcp_negotiation.revisions import KNOWN, LEGACY

MODERN = "2026-07-28"
TASKS_ONLY_AT = "2025-11-25"


def _refusal(call: Any) -> Refusal:
    with pytest.raises(NegotiationRefused) as raised:
        call()
    return raised.value.refusal


def _envelope(revision: str = MODERN, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": revision,
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }


# --- The policy, with plain values -------------------------------------------------------------


@pytest.mark.parametrize(
    ("required", "bounds", "accepted"),
    [
        (("tasks",), {}, (TASKS_ONLY_AT,)),
        (("extensions",), {}, (MODERN,)),
        (("roots.listChanged",), {}, LEGACY),
        (("elicitation.url",), {}, ("2025-11-25", MODERN)),
        (("sampling.tools", "roots.listChanged"), {}, ("2025-11-25",)),
        (("roots.listChanged",), {"min_revision": "2025-06-18"}, ("2025-06-18", "2025-11-25")),
        # What negotiates itself, or exists at every revision, narrows nothing.
        (("sampling", "io.x/y", "experimental.foo"), {}, KNOWN),
        ((), {}, KNOWN),
    ],
)
def test_a_policy_accepts_only_the_revisions_where_its_requirements_can_be_had(
    required: tuple[str, ...], bounds: dict[str, str], accepted: tuple[str, ...]
) -> None:
    policy = Policy(required_capabilities=required, **bounds)  # type: ignore[arg-type]
    assert policy.accepted() == accepted
    assert Negotiator(policy).accepted == accepted
    assert all(required_at(name, r) for name in required for r in accepted)


def test_narrowed_names_each_left_out_revision_and_what_it_cannot_have() -> None:
    policy = Policy(required_capabilities=("sampling", "roots.listChanged", "elicitation.url"))
    assert policy.narrowed() == {
        "2024-11-05": ("elicitation.url",),
        "2025-03-26": ("elicitation.url",),
        "2025-06-18": ("elicitation.url",),
        MODERN: ("roots.listChanged",),
    }
    # Revisions the bounds leave out were never in question: they are not "narrowed".
    assert Policy(max_revision="2025-11-25", required_capabilities=("roots",)).narrowed() == {}


def test_the_repr_states_the_narrowing() -> None:
    narrowed = repr(Policy(required_capabilities=("tasks",)))
    assert narrowed.startswith(
        "Policy(min_revision=None, max_revision=None, required_capabilities=('tasks',),"
    )
    assert narrowed.endswith("ucp=None; revisions narrowed to 2025-11-25 by required_capabilities)")
    assert "narrowed" not in repr(Policy(min_revision="2025-11-25", max_revision="2025-11-25"))
    assert "narrowed" not in repr(Policy(required_capabilities=("sampling",)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"required_capabilities": ("tasks", "extensions")},
            "required_capabilities names 'tasks', 'extensions', which no accepted revision"
            " (2024-11-05 to 2026-07-28) has together: 'tasks' only at 2025-11-25;"
            " 'extensions' only at 2026-07-28",
        ),
        (
            {"required_capabilities": ("elicitation.url", "roots.listChanged"), "max_revision": "2025-06-18"},
            "required_capabilities names 'elicitation.url', which no accepted revision"
            " (2024-11-05 to 2025-06-18) has",
        ),
        (
            {"required_capabilities": ("tasks",), "min_revision": MODERN},
            "required_capabilities names 'tasks', which no accepted revision (2026-07-28 to 2026-07-28) has",
        ),
    ],
)
def test_requirements_no_accepted_revision_can_meet_are_a_value_error(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Policy(**options)


def test_a_modern_request_under_a_legacy_only_requirement_is_refused_32022() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("tasks",)))
    refusal = _refusal(lambda: negotiator.request(_envelope(caps={"tasks": {}})))
    assert refusal.code == -32022
    assert refusal.message == (
        "Unsupported protocol version: 2026-07-28 (the server requires tasks, which 2026-07-28 does not have)"
    )
    assert refusal.data == {
        "supported": [TASKS_ONLY_AT],
        "requested": MODERN,
        "requiredCapabilities": {"tasks": {}},
    }
    v2026.UnsupportedProtocolVersionError.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": refusal.to_jsonrpc_error()}
    )


def test_a_legacy_client_of_a_left_out_revision_is_counter_offered_one_that_serves_it() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("tasks",)))
    params = {"protocolVersion": "2025-06-18", "capabilities": {"tasks": {}}}
    record = negotiator.initialize(params)
    assert (record.outcome, record.protocol_version) == ("counter_offered", TASKS_ONLY_AT)
    assert record.supports("tasks")


def test_a_legacy_client_under_a_modern_only_requirement_is_refused_32022() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("extensions",)))
    refusal = _refusal(lambda: negotiator.initialize({"protocolVersion": "2025-11-25", "capabilities": {}}))
    assert refusal.code == -32022
    assert refusal.data == {
        "supported": [MODERN],
        "requested": "2025-11-25",
        "requiredCapabilities": {"extensions": {}},
    }


def test_a_stateless_legacy_request_of_a_left_out_revision_lists_the_legacy_revisions_that_serve() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("elicitation.url",)))
    refusal = _refusal(lambda: negotiator.without_session("2025-06-18", transport="http"))
    assert refusal.code == -32022
    assert refusal.data == {
        "supported": ["2025-11-25"],
        "requested": "2025-06-18",
        "requiredCapabilities": {"elicitation": {"url": {}}},
    }


def test_advertising_all_lists_only_the_revisions_left() -> None:
    negotiator = Negotiator(Policy(required_capabilities=("roots.listChanged",), advertise="all"))
    refusal = _refusal(lambda: negotiator.request(_envelope()))
    assert refusal.data is not None
    assert refusal.data["supported"] == list(reversed(LEGACY))


def test_an_unknown_or_bounded_out_revision_is_refused_as_before() -> None:
    negotiator = Negotiator(Policy(min_revision="2025-06-18", required_capabilities=("tasks",)))
    for requested in ("zzz", "2026-07-27"):
        refusal = _refusal(lambda requested=requested: negotiator.request(_envelope(requested)))
        assert refusal.message == f"Unsupported protocol version: {requested}"
        assert refusal.data == {"supported": [TASKS_ONLY_AT], "requested": requested}


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
        params={"name": "negotiation", "arguments": {}, "_meta": _envelope(caps={"tasks": {}})},
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
        "params": {"name": "negotiation", "arguments": {}, "_meta": _envelope(caps={"tasks": {}})},
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
    done = run_probe("--", sys.executable, "-m", "mcp_negotiation.demo", "--require", "tasks")
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
    command = ("--", sys.executable, "-m", "mcp_negotiation.demo", "--require", "extensions")
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
async def test_the_example_serves_legacy_clients_and_tells_modern_ones_where_to_go() -> None:
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
