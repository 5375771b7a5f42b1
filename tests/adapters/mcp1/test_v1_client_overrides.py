"""mcp 1.x: per-client rules and extensions negotiated by their settings, over memory, a
stdio subprocess and a real uvicorn, decided by the same core as on mcp 2.x: the 1.x shell
knows nothing of either."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness_v1 import HERE, seen, serve_http, session
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.exceptions import McpError
from v1_overrides_server import APP_MIME, APPS, build

from mcp_negotiation.adapters.mcp1.seams import sdk_revisions

pytestmark = pytest.mark.anyio

KINDS = ("memory", "stdio", "http")
REVISION = sdk_revisions()[-1]
APPS_DECLARED = {"sampling": {}, "extensions": {APPS: {"mimeTypes": [APP_MIME]}}}


@pytest.fixture(params=KINDS)
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[], Any]]]:
    kind: str = request.param
    opened: list[Any] = []

    def target() -> Any:
        if kind == "memory":
            return build()
        if kind == "stdio":
            env = {**get_default_environment(), "PYTHONPATH": str(HERE.parents[2] / "src")}
            return StdioServerParameters(
                command=sys.executable, args=[str(HERE / "v1_overrides_server.py")], env=env
            )
        served = serve_http(build().streamable_http_app())
        opened.append(served)
        return served.__enter__()

    yield kind, target
    for served in reversed(opened):
        served.__exit__(None, None, None)


async def test_the_rules_naming_the_client_decide_and_say_so(endpoint: Any) -> None:
    kind, make = endpoint
    async with session(kind, make(), REVISION, APPS_DECLARED) as (client, _):
        answered = seen(await client.call_tool("answers", {}))
        with pytest.raises(McpError) as refused:
            await client.call_tool("summarize", {"text": "x"})
        shown = await client.call_tool("dashboard", {})
    assert answered == {
        "sampling": False,  # declared, and revoked for this client
        "links": True,  # asserted by a rule alone
        "apps": True,
        "overrides": {"sampling": "harness-no-sampling", "client.renders_resource_links": "v1-links"},
        "extensions": {APPS: APPS},
    }
    assert refused.value.error.code == -32021
    assert "revoked for this client by rule 'harness-no-sampling'" in refused.value.error.message
    assert not shown.isError


async def test_an_extension_without_the_settings_asked_is_refused_naming_them(endpoint: Any) -> None:
    kind, make = endpoint
    caps = {"extensions": {APPS: {"mimeTypes": ["text/plain"]}}}
    async with session(kind, make(), REVISION, caps) as (client, initialized):
        with pytest.raises(McpError) as refused:
            await client.call_tool("dashboard", {})
        answered = seen(await client.call_tool("answers", {}))
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {
        "requiredCapabilities": {"extensions": {APPS: {"mimeTypes": [APP_MIME]}}}
    }
    assert "declared without these settings" in refused.value.error.message
    assert answered["apps"] is False
    assert answered["extensions"] == {APPS: APPS}
    assert (initialized.capabilities.experimental or {}).get(APPS) == {}  # advertised from the declaration
