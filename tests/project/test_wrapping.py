"""docs/wrapping.md: servers we do not own, negotiated by its examples, against the real thing.

The reference servers `mcp-server-time` and `mcp-server-git` (the `test` extra) run as
they are installed: `examples/wrap_time_main.py` runs the time server's own `main()` after
`instrument(Policy())`; `examples/wrap_git_server.py` negotiates the git server's
`create_server(...)` and adds a tool asking `client_supports`; `examples/wrap_traced.py`
exports the spans to standard error, one line each. Each runs over stdio (a subprocess)
with the SDK's client in both eras, the git server over streamable HTTP (uvicorn on
127.0.0.1) too, and the `peers` tests drive them with the TypeScript client.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from support.harness import EXAMPLES, ROOT, serve_http, stdio_params, structured
from support.node import ensure_packages, run_ts_client
from support.stdio_capture import captured_session, environment

pytestmark = pytest.mark.anyio

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
TIME_MAIN = [sys.executable, str(EXAMPLES / "wrap_time_main.py"), "--local-timezone", "UTC"]
TRACED = [sys.executable, str(EXAMPLES / "wrap_traced.py"), "--local-timezone", "UTC"]
NOW = ("get_current_time", {"timezone": "UTC"})
ERAS = {"auto": "modern", "legacy": "legacy"}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with one commit, for the git server's tools."""
    path = tmp_path_factory.mktemp("repository")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *command], cwd=path, check=True)
    return path


async def _time(client: Client) -> dict[str, Any]:
    return structured(await client.call_tool(*NOW))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_four_lines_negotiate_the_time_servers_own_main(mode: str, tmp_path: Path) -> None:
    """The example's own `instrument()` does the negotiating: the launcher (there only to export
    the spans) has its instrumentor switched off."""
    launcher = [str(INSTRUMENT), "--traces_exporter", "console_stderr", "--metrics_exporter", "none"]
    command = [*launcher, "--logs_exporter", "none", *TIME_MAIN]
    env = environment(OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="mcp_negotiation")
    answer, captured = await captured_session(command, tmp_path, _time, mode=mode, env=env)
    assert answer["timezone"] == "UTC"
    assert captured.eras() == {ERAS[mode]}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_spans_of_a_wrapped_stdio_server_go_to_stderr_one_line_each(mode: str, tmp_path: Path) -> None:
    answer, captured = await captured_session(TRACED, tmp_path, _time, mode=mode)
    assert answer["timezone"] == "UTC"
    assert all(message["jsonrpc"] == "2.0" for message in captured.messages())  # stdout: JSON-RPC only
    assert captured.eras() == {ERAS[mode]}
    assert any(span["name"] == "tools/call get_current_time" for span in captured.spans())


async def _elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def _asks(client: Client, repository: Path) -> dict[str, Any]:
    status = await client.call_tool("git_status", {"repo_path": str(repository)})
    text = status.content[0]
    assert isinstance(text, types.TextContent)
    return {
        "status": text.text.splitlines()[0],
        **{
            feature: structured(await client.call_tool("client_can", {"feature": feature}))["result"]
            for feature in ("elicitation", "sampling", "elicitaton")
        },
    }


def _git_app(repository: Path) -> Any:
    """The example's app for uvicorn, imported here so that the SDK matrix rows (whose
    environments leave the reference servers out) can collect this module."""
    from wrap_git_server import build

    return build(repository).streamable_http_app()


@pytest.fixture(params=["stdio", "http"])
def git_server(request: pytest.FixtureRequest, repository: Path) -> Iterator[Any]:
    """Where a client reaches the example: a stdio subprocess, or its app on uvicorn."""
    if request.param == "stdio":
        yield stdio_client(stdio_params("wrap_git_server.py", str(repository)))
        return
    with serve_http(_git_app(repository)) as url:
        yield streamable_http_client(url)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_git_servers_factory_negotiated_with_a_tool_of_ours(
    git_server: Any, mode: str, repository: Path
) -> None:
    async with Client(git_server, mode=mode, elicitation_callback=_elicit) as client:
        seen = await _asks(client, repository)
    assert seen.pop("status") == "Repository status:"
    assert seen == {"elicitation": True, "sampling": False, "elicitaton": False}


@pytest.mark.peers
@pytest.mark.parametrize("mode", [None, "auto"], ids=["default", "auto"])
def test_the_typescript_client_uses_the_time_servers_own_main(mode: str | None) -> None:
    ensure_packages()
    spec: dict[str, Any] = {"sdk": "v2", "transport": "stdio", "command": TIME_MAIN[0], "cwd": str(ROOT)}
    if mode is not None:
        spec["mode"] = mode
    out = run_ts_client({**spec, "args": TIME_MAIN[1:], "calls": [{"name": NOW[0], "arguments": NOW[1]}]})
    (answer,) = out["results"]
    assert (answer["isError"], answer["structured"]["timezone"]) == (False, "UTC")


@pytest.mark.peers
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("declared", [{"elicitation": {}}, {}], ids=["elicits", "declares-none"])
def test_the_typescript_client_asks_the_git_servers_tool_of_ours(
    transport: str, declared: dict[str, Any], repository: Path
) -> None:
    ensure_packages()
    calls = [{"name": "client_can", "arguments": {"feature": "elicitation"}}]
    spec: dict[str, Any] = {"sdk": "v2", "capabilities": declared, "calls": calls}
    if transport == "stdio":
        args = [str(EXAMPLES / "wrap_git_server.py"), str(repository)]
        stdio = {"transport": "stdio", "command": sys.executable, "args": args, "cwd": str(ROOT)}
        out = run_ts_client({**spec, **stdio})
    else:
        with serve_http(_git_app(repository)) as url:
            out = run_ts_client({**spec, "transport": "http", "url": url})
    (answer,) = out["results"]
    assert answer["structured"] == {"result": bool(declared)}
