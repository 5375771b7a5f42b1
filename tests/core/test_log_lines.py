"""Every log line of the library names it once: the logger's name, `mcp_negotiation`, does.

A message that starts with `mcp_negotiation: ` as well prints the name twice under the
usual `%(name)s: %(message)s` format. Checked on lines real requests and installs cause,
and on every message the package's source holds.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_negotiation import client_supports, negotiate

pytestmark = pytest.mark.anyio

SOURCE = Path(__file__).resolve().parents[2] / "src" / "mcp_negotiation"
PREFIX = "mcp_negotiation: "


@pytest.fixture
def lines() -> Iterator[list[str]]:
    """The library's log lines, formatted as `%(name)s: %(message)s`."""
    formatted: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            formatted.append(self.format(record))

    handler = Collect(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger("mcp_negotiation")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.DEBUG
    try:
        yield formatted
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_lines_from_a_request_and_an_install_name_the_library_once(lines: list[str]) -> None:
    server = MCPServer("typo")
    server.streamable_http_app()  # negotiate() after the app was built: a warning
    negotiate(server)

    @server.tool()
    async def asks(ctx: Context) -> bool:
        return client_supports(ctx, "elicitaton")  # misspelt: a warning, once

    async with Client(server, mode="legacy") as client:
        await client.call_tool("asks", {})
    assert any("did you mean 'elicitation'?" in line for line in lines)
    assert any("negotiate() came after streamable_http_app()" in line for line in lines)
    twice = [line for line in lines if not line.startswith(PREFIX) or line.count("mcp_negotiation:") != 1]
    assert twice == []


def _messages(path: Path) -> Iterator[tuple[int, str]]:
    """The string literals of a module (an f-string by its first part), but for the messages of
    refusals, which a client reads and which no logger names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    refusals = {
        id(argument)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Refusal"
        for argument in node.args
    }
    for node in ast.walk(tree):
        if id(node) in refusals:
            continue
        if isinstance(node, ast.JoinedStr) and node.values:
            node = node.values[0]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_message_in_the_source_starts_with_the_library_name() -> None:
    found = [
        f"{path.relative_to(SOURCE)}:{line}: {text[:60]!r}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line, text in _messages(path)
        if text.startswith(PREFIX)
    ]
    assert found == []
